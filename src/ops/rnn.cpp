// The recurrent layer ops (decl/rnn.def): _rnn_tanh_layer, _rnn_relu_layer,
// _lstm_layer, _gru_layer and their fused backwards. This file checks the
// arguments, lays out the step geometry (padded or packed) and allocates the
// results; the time loop is the kernel's (ops/rnn_kernels.h).
//
// 16-bit floats run in float32 (inputs converted, results converted back);
// the workspace stays in float32 for the backward.
#include <algorithm>
#include <numeric>

#include "ops/nn_util.h"
#include "ops/op_list.h"
#include "ops/rnn_kernels.h"

namespace strata {

STRATA_DEFINE_STUB(rnn_forward_stub, nn::RnnForwardFn);
STRATA_DEFINE_STUB(rnn_backward_stub, nn::RnnBackwardFn);

namespace nn {
namespace {

const Tensor kNone;

const Tensor& opt_ref(const std::optional<Tensor>& t) { return has(t) ? *t : kNone; }

// The geometry of one layer call, with the step sizes it points into.
struct RnnSetup {
  RnnGeom g;
  std::vector<int64_t> sizes, offsets;
  Device dev;
  bool packed = false;
};

void check_shape(const char* op, const Tensor& t, const char* what, IntArrayRef expected) {
  STRATA_CHECK(std::ranges::equal(t.sizes(), expected), op, ": expected ", what, " of shape ", shape_str(expected), ", but got ",
               t.shape_str());
}
void check_shape(const char* op, const Tensor& t, const char* what, std::initializer_list<int64_t> expected) {
  check_shape(op, t, what, IntArrayRef(expected.begin(), expected.size()));
}

// Checks the arguments of a layer call (forward or backward) and derives its geometry. Optional tensors are
// undefined when absent.
RnnSetup setup_rnn(const char* op, RnnCell cell, const Tensor& input, const Tensor& hx, const Tensor& cx,
                   const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& w_hr,
                   const Tensor& batch_sizes, bool reverse) {
  RnnSetup st;
  RnnGeom& g = st.g;
  g.cell = cell;
  g.reverse = reverse;
  check_floating(op, input, "input");
  for (auto [t, name] : {std::pair{&hx, "hx"}, {&cx, "cx"}, {&w_ih, "w_ih"}, {&w_hh, "w_hh"}, {&b_ih, "b_ih"},
                         {&b_hh, "b_hh"}, {&w_hr, "w_hr"}})
    if (t->defined()) check_same_dtype(op, input, "input", *t, name);
  st.dev = check_devices(op, {input, hx, cx, w_ih, w_hh, b_ih, b_hh, w_hr});
  const int64_t gates = rnn_gates(cell);
  STRATA_CHECK(w_ih.dim() == 2 && w_ih.size(0) % gates == 0 && w_ih.size(0) > 0, op, ": expected w_ih of shape (",
               gates, " * hidden_size, input_size) with hidden_size > 0, but got ", w_ih.shape_str());
  g.hidden = w_ih.size(0) / gates;
  g.in = w_ih.size(1);
  const int64_t H = g.hidden, G = gates * H;
  g.proj = w_hr.defined();
  if (g.proj) {
    STRATA_CHECK(w_hr.dim() == 2 && w_hr.size(1) == H && w_hr.size(0) > 0, op, ": expected w_hr of shape (proj_size, ",
                 H, "), but got ", w_hr.shape_str());
    g.out = w_hr.size(0);
  } else {
    g.out = H;
  }
  const int64_t P = g.out;
  check_shape(op, w_hh, "w_hh", {G, P});
  if (b_ih.defined()) check_shape(op, b_ih, "b_ih", {G});
  if (b_hh.defined()) check_shape(op, b_hh, "b_hh", {G});
  st.packed = batch_sizes.defined();
  if (st.packed) {
    STRATA_CHECK(input.dim() == 2, op, ": expected the packed input data to be 2-D (rows, input_size), but got ",
                 input.shape_str());
    STRATA_CHECK(batch_sizes.dim() == 1 && batch_sizes.dtype() == ScalarType::Int64, op,
                 ": expected batch_sizes to be a 1-D int64 tensor, but got a ", batch_sizes.describe());
    g.steps = batch_sizes.size(0);
    g.rows = input.size(0);
    g.batch = hx.dim() >= 1 ? hx.size(0) : 0;
    if (!batch_sizes.device().is_meta() && !st.dev.is_meta()) {
      STRATA_CHECK(batch_sizes.device().is_cpu(), op, ": batch_sizes must be a CPU tensor, but got a ",
                   batch_sizes.describe());
      const Tensor bs = contiguous(batch_sizes);
      const int64_t* p = bs.data_ptr<int64_t>();
      st.sizes.assign(p, p + g.steps);
      int64_t total = 0;
      for (int64_t t = 0; t < g.steps; ++t) {
        STRATA_CHECK(st.sizes[t] > 0 && (t == 0 || st.sizes[t] <= st.sizes[t - 1]), op,
                     ": batch_sizes must be positive and non-increasing, but got ", shape_str(st.sizes));
        total += st.sizes[t];
      }
      STRATA_CHECK(total == g.rows, op, ": batch_sizes sum to ", total, " but the packed input has ", g.rows,
                   " rows");
      g.batch = g.steps > 0 ? st.sizes[0] : 0;
    }
  } else {
    STRATA_CHECK(input.dim() == 3, op, ": expected input of shape (seq_len, batch, input_size), but got ",
                 input.shape_str());
    g.steps = input.size(0);
    g.batch = input.size(1);
    g.rows = g.steps * g.batch;
    st.sizes.assign(static_cast<size_t>(g.steps), g.batch);
  }
  STRATA_CHECK(input.size(-1) == g.in, op, ": input.size(-1) must be equal to input_size. Expected ", g.in, ", got ",
               input.size(-1));
  check_shape(op, hx, "hx", {g.batch, P});
  if (cell == RnnCell::Lstm) check_shape(op, cx, "cx", {g.batch, H});
  st.offsets.resize(st.sizes.size());
  std::exclusive_scan(st.sizes.begin(), st.sizes.end(), st.offsets.begin(), int64_t{0});
  g.batch_sizes = st.sizes.data();
  g.offsets = st.offsets.data();
  return st;
}

DimVector output_shape(const RnnSetup& st, const Tensor& input) {
  DimVector s(input.sizes().begin(), input.sizes().end());
  s.back() = st.g.out;
  return s;
}

int64_t workspace_cols(const RnnGeom& g) { return rnn_workspace_cols(g.cell, g.hidden, g.proj); }

Tensor prep_defined(const Tensor& t, ScalarType ct) { return t.defined() ? prep(t, ct) : Tensor(); }

// The forward of every cell: [output, hy, cy (LSTM), workspace (LSTM, GRU)].
TensorVec layer_forward(const char* op, RnnCell cell, const Tensor& input, const Tensor& hx, const Tensor& cx,
                        const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh,
                        const Tensor& w_hr, const Tensor& batch_sizes, bool reverse) {
  RnnSetup st = setup_rnn(op, cell, input, hx, cx, w_ih, w_hh, b_ih, b_hh, w_hr, batch_sizes, reverse);
  const RnnGeom& g = st.g;
  const bool lstm = cell == RnnCell::Lstm, with_ws = cell == RnnCell::Lstm || cell == RnnCell::Gru;
  const DimVector out_shape = output_shape(st, input);
  const ScalarType dt = input.dtype(), ct = compute_type(dt);
  const std::vector<int64_t> ws_shape{g.rows, workspace_cols(g)};
  if (st.dev.is_meta()) {
    TensorVec r{empty_tensor(out_shape, dt, st.dev), empty_tensor(hx.sizes(), dt, st.dev)};
    if (lstm) r.push_back(empty_tensor(cx.sizes(), dt, st.dev));
    if (with_ws) r.push_back(empty_tensor(ws_shape, ct, st.dev));
    return r;
  }
  RnnForwardArgs a;
  a.x = prep(input, ct);
  a.hx = prep(hx, ct);
  a.cx = prep_defined(cx, ct);
  a.w_ih = prep(w_ih, ct);
  a.w_hh = prep(w_hh, ct);
  a.b_ih = prep_defined(b_ih, ct);
  a.b_hh = prep_defined(b_hh, ct);
  a.w_hr = prep_defined(w_hr, ct);
  a.out = empty_tensor(out_shape, ct, st.dev);
  a.hy = empty_tensor(hx.sizes(), ct, st.dev);
  if (lstm) a.cy = empty_tensor(cx.sizes(), ct, st.dev);
  a.ws = empty_tensor(ws_shape, ct, st.dev);
  rnn_forward_stub(st.dev.type, g, a);
  TensorVec r{to_dtype(a.out, dt), to_dtype(a.hy, dt)};
  if (lstm) r.push_back(to_dtype(a.cy, dt));
  if (with_ws) r.push_back(a.ws);
  return r;
}

// The backward of every cell: [d input, d hx, d cx (LSTM), d w_ih, d w_hh, d b_ih, d b_hh, d w_hr (LSTM)].
TensorVec layer_backward(const char* op, RnnCell cell, const Tensor& grad_output, const Tensor& grad_hy,
                         const Tensor& grad_cy, const Tensor& input, const Tensor& hx, const Tensor& cx,
                         const Tensor& w_ih, const Tensor& w_hh, const Tensor& w_hr, const Tensor& batch_sizes,
                         const Tensor& output, const Tensor& workspace, bool reverse, bool has_biases) {
  RnnSetup st = setup_rnn(op, cell, input, hx, cx, w_ih, w_hh, Tensor(), Tensor(), w_hr, batch_sizes, reverse);
  const RnnGeom& g = st.g;
  const bool lstm = cell == RnnCell::Lstm, with_ws = cell == RnnCell::Lstm || cell == RnnCell::Gru;
  const DimVector out_shape = output_shape(st, input);
  check_shape(op, grad_output, "grad_output", out_shape);
  check_shape(op, output, "output", out_shape);
  check_shape(op, grad_hy, "grad_hy", hx.sizes());
  if (lstm) check_shape(op, grad_cy, "grad_cy", cx.sizes());
  if (with_ws) check_shape(op, workspace, "workspace", {g.rows, workspace_cols(g)});
  check_devices(op, {input, grad_output, grad_hy, grad_cy, output, workspace});
  const ScalarType dt = input.dtype(), ct = compute_type(dt);
  if (with_ws)
    STRATA_CHECK(workspace.dtype() == ct, op, ": expected a ", dtype_name(ct), " workspace (from the forward), but got ",
                 "a ", workspace.describe());
  const int64_t G = rnn_gates(cell) * g.hidden;
  const bool meta = st.dev.is_meta();
  auto result = [&](IntArrayRef sizes) { return empty_tensor(sizes, meta ? dt : ct, st.dev); };
  RnnBackwardArgs a;
  a.dx = result(input.sizes());
  a.dhx = result(hx.sizes());
  if (lstm) a.dcx = result(cx.sizes());
  a.dw_ih = result(w_ih.sizes());
  a.dw_hh = result(w_hh.sizes());
  if (has_biases) {
    a.db_ih = result(std::vector<int64_t>{G});
    a.db_hh = result(std::vector<int64_t>{G});
  }
  if (g.proj) a.dw_hr = result(w_hr.sizes());
  if (!meta) {
    a.gout = prep(grad_output, ct);
    a.ghy = prep(grad_hy, ct);
    a.gcy = lstm ? prep(grad_cy, ct) : Tensor();
    a.x = prep(input, ct);
    a.hx = prep(hx, ct);
    a.cx = prep_defined(cx, ct);
    a.w_ih = prep(w_ih, ct);
    a.w_hh = prep(w_hh, ct);
    a.w_hr = prep_defined(w_hr, ct);
    a.out = prep(output, ct);
    a.ws = with_ws ? contiguous(workspace) : Tensor();
    rnn_backward_stub(st.dev.type, g, a);
  }
  // Gradients of absent arguments come back as empty tensors (a Tensor[] result holds no None).
  auto back = [&](const Tensor& t) {
    return t.defined() ? to_dtype(t, dt) : empty_tensor(std::vector<int64_t>{0}, dt, st.dev);
  };
  TensorVec r{back(a.dx), back(a.dhx)};
  if (lstm) r.push_back(back(a.dcx));
  for (const Tensor* t : {&a.dw_ih, &a.dw_hh, &a.db_ih, &a.db_hh}) r.push_back(back(*t));
  if (lstm) r.push_back(back(a.dw_hr));
  return r;
}

}  // namespace

TensorVec lstm_layer_impl(const Tensor& input, const Tensor& hx, const Tensor& cx, const Tensor& w_ih,
                          const Tensor& w_hh, const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh,
                          const std::optional<Tensor>& w_hr, const std::optional<Tensor>& batch_sizes, bool reverse) {
  return layer_forward("_lstm_layer", RnnCell::Lstm, input, hx, cx, w_ih, w_hh, opt_ref(b_ih), opt_ref(b_hh),
                       opt_ref(w_hr), opt_ref(batch_sizes), reverse);
}
STRATA_IMPL_CPU_META(_lstm_layer, lstm_layer_impl);

TensorVec gru_layer_impl(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                         const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh,
                         const std::optional<Tensor>& batch_sizes, bool reverse) {
  return layer_forward("_gru_layer", RnnCell::Gru, input, hx, kNone, w_ih, w_hh, opt_ref(b_ih), opt_ref(b_hh), kNone,
                       opt_ref(batch_sizes), reverse);
}
STRATA_IMPL_CPU_META(_gru_layer, gru_layer_impl);

TensorVec rnn_tanh_layer_impl(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                              const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh,
                              const std::optional<Tensor>& batch_sizes, bool reverse) {
  return layer_forward("_rnn_tanh_layer", RnnCell::Tanh, input, hx, kNone, w_ih, w_hh, opt_ref(b_ih), opt_ref(b_hh),
                       kNone, opt_ref(batch_sizes), reverse);
}
STRATA_IMPL_CPU_META(_rnn_tanh_layer, rnn_tanh_layer_impl);

TensorVec rnn_relu_layer_impl(const Tensor& input, const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                              const std::optional<Tensor>& b_ih, const std::optional<Tensor>& b_hh,
                              const std::optional<Tensor>& batch_sizes, bool reverse) {
  return layer_forward("_rnn_relu_layer", RnnCell::Relu, input, hx, kNone, w_ih, w_hh, opt_ref(b_ih), opt_ref(b_hh),
                       kNone, opt_ref(batch_sizes), reverse);
}
STRATA_IMPL_CPU_META(_rnn_relu_layer, rnn_relu_layer_impl);

TensorVec lstm_layer_backward_impl(const Tensor& grad_output, const Tensor& grad_hy, const Tensor& grad_cy,
                                   const Tensor& input, const Tensor& hx, const Tensor& cx, const Tensor& w_ih,
                                   const Tensor& w_hh, const std::optional<Tensor>& w_hr,
                                   const std::optional<Tensor>& batch_sizes, const Tensor& output,
                                   const Tensor& workspace, bool reverse, bool has_biases) {
  return layer_backward("_lstm_layer_backward", RnnCell::Lstm, grad_output, grad_hy, grad_cy, input, hx, cx, w_ih,
                        w_hh, opt_ref(w_hr), opt_ref(batch_sizes), output, workspace, reverse, has_biases);
}
STRATA_IMPL_CPU_META(_lstm_layer_backward, lstm_layer_backward_impl);

TensorVec gru_layer_backward_impl(const Tensor& grad_output, const Tensor& grad_hy, const Tensor& input,
                                  const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                                  const std::optional<Tensor>& batch_sizes, const Tensor& output,
                                  const Tensor& workspace, bool reverse, bool has_biases) {
  return layer_backward("_gru_layer_backward", RnnCell::Gru, grad_output, grad_hy, kNone, input, hx, kNone, w_ih,
                        w_hh, kNone, opt_ref(batch_sizes), output, workspace, reverse, has_biases);
}
STRATA_IMPL_CPU_META(_gru_layer_backward, gru_layer_backward_impl);

TensorVec rnn_layer_backward_impl(const Tensor& grad_output, const Tensor& grad_hy, const Tensor& input,
                                  const Tensor& hx, const Tensor& w_ih, const Tensor& w_hh,
                                  const std::optional<Tensor>& batch_sizes, const Tensor& output, bool reverse,
                                  bool has_biases, bool relu) {
  return layer_backward("_rnn_layer_backward", relu ? RnnCell::Relu : RnnCell::Tanh, grad_output, grad_hy, kNone,
                        input, hx, kNone, w_ih, w_hh, kNone, opt_ref(batch_sizes), output, kNone, reverse,
                        has_biases);
}
STRATA_IMPL_CPU_META(_rnn_layer_backward, rnn_layer_backward_impl);

}  // namespace nn
}  // namespace strata
