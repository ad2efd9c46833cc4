// Tests of the compiled path's graph IR (src/compile/graph.h) from C++:
// recording ops through the C++ API under a RecordGuard, running the graph on
// real tensors against eager results, SSA rebinding of in-place writes,
// multi-output ops, constants and the graph's device.
#include <gtest/gtest.h>

#include <cstring>

#include "compile/graph.h"
#include "ops/ops.h"

using namespace strata;
using compile::Arg;
using compile::Graph;
using compile::RecordGuard;

namespace {

Tensor meta(std::vector<int64_t> sizes, ScalarType dt = ScalarType::Float32) {
  return empty_tensor(sizes, dt, Device(DeviceType::Meta));
}

Tensor real(std::vector<int64_t> sizes, double start) {
  Tensor t = empty_tensor(sizes, ScalarType::Float32, Device());
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(start + 0.37 * i - 0.5 * (i % 3));
  return t;
}

void expect_bit_equal(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(std::vector<int64_t>(a.sizes().begin(), a.sizes().end()),
            std::vector<int64_t>(b.sizes().begin(), b.sizes().end()));
  ASSERT_EQ(a.device(), b.device());
  Tensor ca = contiguous(a), cb = contiguous(b);
  EXPECT_EQ(0, std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()));
}

TEST(CompileGraph, RecordRunMatchesEager) {
  auto g = std::make_shared<Graph>();
  Tensor x = meta({4, 3}), w = meta({3, 5});
  int vx = g->add_input("x", x, Device());
  int vw = g->add_input("w", w, Device());
  Tensor y;
  {
    RecordGuard rec(g);
    EXPECT_TRUE(compile::is_recording());
    compile::set_source("fn: y = relu(x @ w) + x.sum()");
    Tensor h = relu(matmul(x, w));  // sequenced: argument order is unspecified in C++
    y = add(h, sum(x));
  }
  EXPECT_FALSE(compile::is_recording());
  EXPECT_TRUE(y.device().is_meta());
  ASSERT_EQ(g->num_ops(), 4);
  EXPECT_EQ(g->nodes()[0]->op->schema().full_name(), "matmul");
  EXPECT_EQ(g->nodes()[0]->args[0].kind, Arg::Kind::Value);
  EXPECT_EQ(g->nodes()[0]->args[0].value, vx);
  EXPECT_EQ(g->nodes()[0]->args[1].value, vw);
  EXPECT_EQ(g->nodes()[3]->source, "fn: y = relu(x @ w) + x.sum()");
  std::optional<int> vy = g->value_of(y);
  ASSERT_TRUE(vy);
  const compile::Value& v = g->value(*vy);
  EXPECT_EQ(v.dtype, ScalarType::Float32);
  EXPECT_EQ(v.sizes, (DimVector{4, 5}));
  EXPECT_TRUE(v.device.is_cpu());
  g->set_outputs({*vy});

  Tensor xr = real({4, 3}, -1.0), wr = real({3, 5}, 0.25);
  std::vector<IValue> out = g->run({IValue(xr), IValue(wr)});
  ASSERT_EQ(out.size(), 1u);
  expect_bit_equal(out[0].to_tensor(), add(relu(matmul(xr, wr)), sum(xr)));
}

TEST(CompileGraph, InplaceMovesBindingToNewValue) {
  auto g = std::make_shared<Graph>();
  Tensor x = meta({3});
  g->add_input("x", x, Device());
  Tensor y, z;
  int before = -1, after = -1;
  {
    RecordGuard rec(g);
    y = exp(x);
    before = *g->value_of(y);
    Tensor r = add(y, x, 1, y);  // y += x, in place (out=self)
    EXPECT_TRUE(r.is_same(y));
    after = *g->value_of(y);
    z = mul(y, x);
  }
  EXPECT_NE(before, after);
  ASSERT_EQ(g->num_ops(), 3);
  EXPECT_EQ(g->nodes()[1]->outputs, std::vector<int>{after});
  EXPECT_TRUE(g->nodes()[1]->has_side_effects());
  EXPECT_EQ(g->nodes()[2]->args[0].value, after);  // the later use reads the written value
  g->set_outputs({*g->value_of(z), before});
  // Dead-code elimination keeps the in-place node even though its own result
  // is unused as a value.
  EXPECT_EQ(g->eliminate_dead_code(), 0);

  Tensor xr = real({3}, 0.5);
  std::vector<IValue> out = g->run({IValue(xr)});
  Tensor ye = exp(xr);
  add(ye, xr, 1, ye);
  expect_bit_equal(out[0].to_tensor(), mul(ye, xr));
  // The value before the write aliases the written tensor at run time, as in
  // eager code.
  expect_bit_equal(out[1].to_tensor(), ye);
}

TEST(CompileGraph, MultiOutputOp) {
  auto g = std::make_shared<Graph>();
  Tensor x = meta({4, 5});
  g->add_input("x", x, Device());
  Tensor2 r;
  {
    RecordGuard rec(g);
    r = max(x, 1, false);
  }
  ASSERT_EQ(g->num_ops(), 1);
  const auto& n = *g->nodes()[0];
  EXPECT_EQ(n.op->schema().full_name(), "max.dim");
  ASSERT_EQ(n.outputs.size(), 2u);
  EXPECT_EQ(g->value(n.outputs[1]).dtype, ScalarType::Int64);
  EXPECT_EQ(*g->value_of(std::get<1>(r)), n.outputs[1]);
  g->set_outputs({n.outputs[1], n.outputs[0]});
  Tensor xr = real({4, 5}, -2.0);
  auto out = g->run({IValue(xr)});
  auto [ev, ei] = max(xr, 1, false);
  expect_bit_equal(out[0].to_tensor(), ei);
  expect_bit_equal(out[1].to_tensor(), ev);
  EXPECT_NE(g->print_readable().find("max, max_1 = strata.ops.max.dim(x, 1)"), std::string::npos);
}

TEST(CompileGraph, GraphDeviceAndFactories) {
  auto g = std::make_shared<Graph>();
  Tensor x = meta({3});
  g->add_input("x", x, Device());
  Tensor a, b;
  {
    RecordGuard rec(g);
    // x.device is Meta while capturing: recorded as "the graph's device".
    a = add(x, ones(std::vector<int64_t>{3}, std::nullopt, x.device()));
    // No device: CPU at run time, Meta now.
    b = zeros(std::vector<int64_t>{2});
    EXPECT_TRUE(b.device().is_meta());
  }
  ASSERT_EQ(g->num_ops(), 3);
  const auto& ones_node = *g->nodes()[0];
  EXPECT_EQ(ones_node.args[2].kind, Arg::Kind::GraphDevice);
  const auto& zeros_node = *g->nodes()[2];
  EXPECT_EQ(zeros_node.args[2].kind, Arg::Kind::Constant);
  EXPECT_TRUE(zeros_node.args[2].constant.is_none());
  EXPECT_TRUE(g->value(zeros_node.outputs[0]).device.is_cpu());
  g->set_outputs({*g->value_of(a), *g->value_of(b)});
  Tensor xr = real({3}, 1.0);
  auto out = g->run({IValue(xr)});
  EXPECT_TRUE(out[0].to_tensor().device().is_cpu());
  EXPECT_TRUE(out[1].to_tensor().device().is_cpu());
  expect_bit_equal(out[0].to_tensor(), add(xr, ones(std::vector<int64_t>{3})));
  expect_bit_equal(out[1].to_tensor(), zeros(std::vector<int64_t>{2}));
}

TEST(CompileGraph, UnboundTensorIsAnErrorAndLeavesNoNode) {
  auto g = std::make_shared<Graph>();
  Tensor x = meta({3});
  g->add_input("x", x, Device());
  Tensor c = real({3}, 2.0);
  RecordGuard rec(g);
  try {
    (void)add(x, c);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("op 'add' received a tensor that is not part of the graph"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(g->num_ops(), 0);
  g->add_constant(c, "c");
  Tensor y = add(x, c);
  EXPECT_EQ(g->num_ops(), 1);
  EXPECT_TRUE(y.device().is_meta());
}

TEST(CompileGraph, SymbolicIntListElements) {
  // An int[] argument whose elements are values (symbolic sizes): built by
  // hand, as a later pass will.
  auto g = std::make_shared<Graph>();
  int vx = g->add_input("x", meta({2, 6}), Device());
  int vn = g->add_input("n", IValue(int64_t(3)));
  auto node = std::make_shared<compile::Node>();
  node->op = Dispatcher::get().find("view");
  ASSERT_TRUE(node->op);
  node->args.push_back(Arg::make_value(vx, ArgType::Tensor));
  Arg shape;
  shape.kind = Arg::Kind::List;
  shape.type = ArgType::IntList;
  shape.elems.push_back(compile::ArgElem{vn, IValue()});
  shape.elems.push_back(compile::ArgElem{-1, IValue(int64_t(-1))});
  node->args.push_back(shape);
  int out = g->new_value(compile::ValueKind::Tensor, "view");
  node->outputs.push_back(out);
  g->append_node(node);
  g->set_outputs({out});
  EXPECT_NE(g->print_readable().find("strata.ops.view(x, [n, -1])"), std::string::npos) << g->print_readable();
  Tensor xr = real({2, 6}, 0.0);
  auto r = g->run({IValue(xr), IValue(int64_t(4))});
  EXPECT_EQ(r[0].to_tensor().size(0), 4);
  EXPECT_EQ(r[0].to_tensor().size(1), 3);
}

}  // namespace
