// Note [Running a graph node by node]
// The executor replays the recorded nodes through the dispatcher on real
// tensors: each node's stack is built from the environment (one IValue slot
// per value id) and pre-built constants, and call_boxed runs the op with the
// same keys an eager call would take, autograd included. Results are
// therefore those of eager mode, bit for bit, and views alias and in-place ops
// write exactly as they did there.
//
// Everything that does not depend on the inputs is resolved once into a Plan:
// the OperatorEntry, constant IValues (wrapped numbers re-made as wrapped
// 0-d tensors), which slots to release after their last use so that
// intermediates die as early as in eager code. A Plan is immutable and shared;
// the Graph rebuilds it after a change.
#include <algorithm>
#include <unordered_set>

#include "autocast/autocast.h"
#include "compile/graph.h"
#include "ops/api/creation.h"
#include "profiler/profiler.h"

namespace strata::compile {

struct PlanArg {
  // EnvMove: the value's last use, moved out of its slot (no reference-count
  // traffic, and the op holds the only reference the executor had).
  enum Kind : uint8_t { Env, EnvMove, Const, TensorList, IntList, GraphDevice };
  Kind kind = Const;
  int vid = -1;
  IValue constant;
  std::vector<ArgElem> elems;
};

struct PlanStep {
  const OperatorEntry* op = nullptr;
  std::vector<PlanArg> args;
  std::vector<int> outs;
  std::vector<int> release;
  bool list_return = false;
  // Grad mode: follow the caller's (the node was recorded in the graph's base mode) or force it.
  bool force_grad = false;
  bool no_grad = false;
  // Autocast: follow the caller's or force the node's own state (Note [Autocast in captured graphs]).
  bool force_autocast = false;
  ScalarType autocast = ScalarType::Undefined;
  int kernel = -1;  // >= 0: a generated kernel (Plan::kernels), whose args are its inputs
};

struct KernelStep {
  KernelSpec spec;
  std::vector<PlanStep> fallback;  // the nodes it replaces, run when the kernel cannot run
  std::vector<int> internal;       // values those nodes make that are not kernel outputs
};

class Plan {
 public:
  size_t num_values = 0;
  std::vector<int> inputs;
  std::vector<ValueKind> input_kinds;
  std::vector<std::string> input_names;
  std::vector<std::pair<int, IValue>> constants;
  std::vector<PlanStep> steps;
  std::vector<int> outputs;
  int first_tensor_input = -1;  // position in inputs
  std::vector<KernelStep> kernels;
  int64_t arena_bytes = 0;
  // The first step with an effect outside the call (Note [Graph errors inside try blocks]);
  // steps.size() when none has one.
  size_t first_effect = 0;
};

size_t plan_num_inputs(const Plan& p) { return p.inputs.size(); }
int64_t plan_arena_bytes(const Plan& p) { return p.arena_bytes; }
size_t plan_num_kernels(const Plan& p) { return p.kernels.size(); }
const std::vector<int>& plan_outputs(const Plan& p) { return p.outputs; }

namespace {

void init_plan(Plan& p, const Graph& g) {
  const auto& values = g.values();
  p.num_values = values.size();
  p.inputs = g.inputs();
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const Value& v = values[p.inputs[i]];
    p.input_kinds.push_back(v.kind);
    p.input_names.push_back(v.name);
    if (p.first_tensor_input < 0 && v.kind == ValueKind::Tensor) p.first_tensor_input = static_cast<int>(i);
  }
  for (int c : g.constants()) p.constants.emplace_back(c, values[c].constant);
  p.outputs = g.outputs();
}

// A node's step, every value argument read by reference (finish_plan decides moves and releases).
PlanStep node_step(const Graph& g, const Node& n) {
  PlanStep st;
  st.op = n.op;
  st.list_return = n.list_return;
  st.no_grad = !n.grad_enabled;
  st.force_grad = n.grad_enabled != g.base_grad_enabled();
  st.autocast = n.autocast;
  st.force_autocast = n.autocast != g.base_autocast();
  st.outs = n.outputs;
  for (const Arg& a : n.args) {
    PlanArg pa;
    switch (a.kind) {
      case Arg::Kind::Value:
        pa.kind = PlanArg::Env;
        pa.vid = a.value;
        break;
      case Arg::Kind::GraphDevice: pa.kind = PlanArg::GraphDevice; break;
      case Arg::Kind::List: {
        bool all_const = true;
        for (const ArgElem& e : a.elems) all_const = all_const && !e.is_value();
        bool tensors = a.type == ArgType::TensorList;
        if (all_const && !tensors) {
          std::vector<int64_t> l;
          for (const ArgElem& e : a.elems) l.push_back(e.constant.to_int());
          pa.constant = IValue(std::move(l));
        } else {
          pa.kind = tensors ? PlanArg::TensorList : PlanArg::IntList;
          pa.elems = a.elems;
        }
        break;
      }
      case Arg::Kind::Constant:
        if (a.wrapped_number) {
          const Tensor& t = a.constant.to_tensor();
          pa.constant = IValue(scalar_to_tensor(t.item(), t.dtype(), Device(), true));
        } else {
          pa.constant = a.constant;
        }
        break;
    }
    st.args.push_back(std::move(pa));
  }
  return st;
}

// Release each intermediate after its last use (right after it is made when nothing uses it);
// graph outputs live to the end. A value used once by plain reference in its last step is moved
// into the stack instead (no reference-count traffic, and the op holds the only reference the
// executor had), except by a kernel step, whose nodes may have to run from the environment.
// Note [Graph errors inside try blocks]
// A graph op that raises at run time (an index out of range, say) raises outside the user's
// frame: the cached entry runs the graph before any of the frame's bytecode. When the captured
// code lies inside a try or with block, the frame cache runs the frame again eagerly from its
// start, so its except / finally / __exit__ see the op's error as in eager mode
// (python/strata/_dynamo/eval_frame.py, _run_again_eagerly). That is only the same as eager if
// the failed call left nothing behind: each plan knows its first step with an effect outside the
// call (a random op, which advances a generator; a write into a tensor the graph did not make,
// through in-place ops, out= or a view of an input), and execute() notes whether a failure came
// before it. A failure after such a step propagates as before.
void find_first_effect(Plan& p) {
  std::vector<char> fresh(p.num_values, 0);  // made by this call, aliasing nothing outside it
  auto is_fresh = [&](const PlanArg& a) {
    if (a.kind == PlanArg::Env || a.kind == PlanArg::EnvMove) return fresh[a.vid] != 0;
    for (const ArgElem& e : a.elems)
      if (e.is_value() && !fresh[e.value]) return false;
    return a.kind != PlanArg::Const || !a.constant.is_tensor();
  };
  // One node: whether it has an effect; marks its outputs fresh or not.
  auto node_effect = [&](const PlanStep& st) {
    const uint32_t fl = st.op->flags();
    const auto& args = st.op->schema().args;
    bool writes = false, all_fresh = true;
    for (size_t i = 0; i < st.args.size(); ++i) {
      const bool f = is_fresh(st.args[i]);
      all_fresh = all_fresh && f;
      if (i < args.size() && args[i].is_write && !f) writes = true;
    }
    bool aliases = (fl & (kView | kInplace)) != 0 || st.op->schema().is_inplace();
    bool random = (fl & kRandom) != 0;
    for (size_t i = 0; i < args.size(); ++i) {
      // A given out= tensor is the result; out=None is not.
      const bool given = i < st.args.size() && !(st.args[i].kind == PlanArg::Const && st.args[i].constant.is_none());
      aliases = aliases || (args[i].is_write && given);
      random = random || args[i].name == "generator";  // dropout and the like draw from a generator too
    }
    for (int o : st.outs) fresh[o] = aliases ? all_fresh : 1;
    return writes || random;
  };
  p.first_effect = p.steps.size();
  for (size_t si = 0; si < p.steps.size(); ++si) {
    const PlanStep& st = p.steps[si];
    bool effect = false;
    if (st.kernel >= 0) {
      for (const PlanStep& f : p.kernels[st.kernel].fallback) effect = node_effect(f) || effect;
    } else {
      effect = node_effect(st);
    }
    if (effect && p.first_effect == p.steps.size()) p.first_effect = si;
  }
}

void finish_plan(Plan& p) {
  std::vector<int> last_use(p.num_values, -1);
  for (size_t si = 0; si < p.steps.size(); ++si) {
    for (const PlanArg& a : p.steps[si].args) {
      if (a.kind == PlanArg::Env) last_use[a.vid] = static_cast<int>(si);
      for (const ArgElem& e : a.elems)
        if (e.is_value()) last_use[e.value] = static_cast<int>(si);
    }
  }
  std::vector<char> is_output(p.num_values, 0);
  for (int o : p.outputs) is_output[o] = 1;
  for (size_t si = 0; si < p.steps.size(); ++si) {
    for (int o : p.steps[si].outs)
      if (last_use[o] < 0 && !is_output[o]) p.steps[si].release.push_back(o);
  }
  for (size_t v = 0; v < p.num_values; ++v) {
    if (last_use[v] < 0 || is_output[v]) continue;
    PlanStep& st = p.steps[last_use[v]];
    int refs = 0;
    PlanArg* only = nullptr;
    for (PlanArg& a : st.args) {
      if (a.kind == PlanArg::Env && a.vid == static_cast<int>(v)) {
        ++refs;
        only = &a;
      }
      for (const ArgElem& e : a.elems) refs += e.value == static_cast<int>(v);
    }
    if (refs == 1 && only && st.kernel < 0) {
      only->kind = PlanArg::EnvMove;
    } else {
      st.release.push_back(static_cast<int>(v));
    }
  }
  find_first_effect(p);
}

std::shared_ptr<const Plan> build_plan(const Graph& g) {
  auto p = std::make_shared<Plan>();
  init_plan(*p, g);
  for (const auto& n : g.nodes()) p->steps.push_back(node_step(g, *n));
  finish_plan(*p);
  return p;
}

bool kind_matches(ValueKind k, const IValue& v) {
  const auto& r = v.raw();
  switch (k) {
    case ValueKind::Tensor: return v.is_tensor() && v.to_tensor().defined();
    case ValueKind::Int: return std::holds_alternative<int64_t>(r);
    case ValueKind::Float: return std::holds_alternative<double>(r) || std::holds_alternative<int64_t>(r);
    case ValueKind::Bool: return std::holds_alternative<bool>(r);
  }
  return false;
}

// Clears the environment whatever happens (an op may throw).
struct EnvReset {
  std::vector<IValue>& env;
  Stack& stack;
  ~EnvReset() {
    for (IValue& v : env) v = IValue();
    stack.clear();
  }
};

}  // namespace

std::shared_ptr<const Plan> Graph::plan() const {
  std::lock_guard<std::mutex> g(plan_mu_);
  uint64_t v = version();
  if (!plan_ || plan_version_ != v) {
    plan_ = build_plan(*this);
    plan_version_ = v;
  }
  return plan_;
}

// Note [Kernel plans]
// backend "strata_cpp" (python/strata/_dynamo/backends.py) runs a graph whose fused groups became
// generated kernels as one plan: the graph's node steps with each group's nodes replaced by one
// kernel step at the position of its last node, so kernels and the nodes that stay (matmuls,
// views, anything without a lowering) run in this one loop, with no Python between them, and
// every value is released after its last use as in a plain plan. A kernel step checks its inputs
// (defined CPU tensors, contiguous, the captured element count, and for a kernel of static sizes
// the captured sizes of the input it takes its sizes from); when one fails it runs the nodes
// it replaced instead, node by node, so a compiled graph never fails where its nodes would not.
// Kernel outputs the memory plan gave an arena offset (Note [Memory plans] in backends.py) are
// tensors over one arena buffer: allocated per call, or, with ArenaState::keep (mode
// "reduce-overhead"), allocated at the first call together with every output tensor over it and
// reused by later calls. Such outputs are never graph outputs and are read only by kernels and by
// nodes that neither alias nor write them, so nothing outside the call holds them.
std::shared_ptr<const Plan> build_kernel_plan(const Graph& g, const std::vector<KernelSpec>& specs,
                                              int64_t arena_bytes, const std::vector<int>& order_in) {
  const auto& nodes = g.nodes();
  const int num_nodes = static_cast<int>(nodes.size());
  // rank[pos]: where node pos runs (its index in the order).
  std::vector<int> order = order_in, rank(nodes.size(), -1);
  if (order.empty()) {
    order.resize(nodes.size());
    for (int i = 0; i < num_nodes; ++i) order[i] = i;
  }
  STRATA_CHECK(order.size() == nodes.size(), "compile: a kernel plan's order has ", order.size(), " nodes, the graph ",
               num_nodes);
  for (int r = 0; r < num_nodes; ++r) {
    const int pos = order[r];
    STRATA_CHECK(pos >= 0 && pos < num_nodes && rank[pos] < 0, "compile: a kernel plan's order is not a permutation");
    rank[pos] = r;
  }
  const int num_values = static_cast<int>(g.values().size());
  std::vector<int> owner(nodes.size(), -1);
  auto p = std::make_shared<Plan>();
  init_plan(*p, g);
  p->arena_bytes = arena_bytes;
  for (size_t k = 0; k < specs.size(); ++k) {
    const KernelSpec& s = specs[k];
    STRATA_CHECK(s.fn != 0, "compile: kernel ", k, " has a null address");
    STRATA_CHECK(!s.nodes.empty() && !s.out_vids.empty(), "compile: kernel ", k, " replaces no node or has no output");
    STRATA_CHECK(s.ref >= 0 && s.ref < static_cast<int64_t>(s.in_vids.size()), "compile: kernel ", k,
                 ": ref out of range");
    STRATA_CHECK(s.arena_offsets.size() == s.out_vids.size(), "compile: kernel ", k, ": one arena offset per output");
    STRATA_CHECK(!s.rows || s.out_shapes.size() == s.out_vids.size(), "compile: row kernel ", k,
                 ": one shape per output");
    STRATA_CHECK(!s.strided || (s.out_shapes.size() == s.out_vids.size() && s.out_strides.size() == s.out_vids.size() &&
                                s.in_sizes.size() == s.in_vids.size() && s.in_strides.size() == s.in_vids.size()),
                 "compile: strided kernel ", k, ": one geometry per input and output");
    STRATA_CHECK(s.out_dtypes.empty() || s.out_dtypes.size() == s.out_vids.size(), "compile: kernel ", k,
                 ": one dtype per output");
    STRATA_CHECK(s.out_into.empty() || s.out_into.size() == s.out_vids.size(), "compile: kernel ", k,
                 ": one in-place input index (or -1) per output");
    for (size_t j = 0; j < s.out_into.size(); ++j) {
      const int i = s.out_into[j];
      STRATA_CHECK(i >= -1 && i < static_cast<int>(s.in_vids.size()), "compile: kernel ", k, ": output ", j,
                   " is written into input ", i, ", out of range");
      STRATA_CHECK(i < 0 || (!s.rows && !s.strided), "compile: kernel ", k,
                   ": only flat pointwise kernels write an output into an input");
      for (size_t q = 0; q < j; ++q)
        STRATA_CHECK(i < 0 || s.out_into[q] != i, "compile: kernel ", k, ": two outputs written into input ", i);
    }
    for (int v : s.in_vids) STRATA_CHECK(v >= 0 && v < num_values, "compile: kernel ", k, ": bad input value ", v);
    for (size_t j = 0; j < s.out_vids.size(); ++j) {
      STRATA_CHECK(s.out_vids[j] >= 0 && s.out_vids[j] < num_values, "compile: kernel ", k, ": bad output value");
      const int64_t off = s.arena_offsets[j];
      STRATA_CHECK(off < 0 || (off % 64 == 0 && off < std::max<int64_t>(arena_bytes, 1)), "compile: kernel ", k,
                   ": arena offset ", off, " outside the arena of ", arena_bytes, " bytes");
    }
    int prev = -1;
    for (int pos : s.nodes) {
      STRATA_CHECK(pos > prev && pos < num_nodes, "compile: kernel ", k, ": node positions must ascend in range");
      STRATA_CHECK(owner[pos] < 0, "compile: node ", pos, " is in two kernels");
      owner[pos] = static_cast<int>(k);
      prev = pos;
    }
  }
  // Where each kernel runs: at its last node in the order.
  std::vector<int> last_rank(specs.size(), -1);
  for (size_t k = 0; k < specs.size(); ++k)
    for (int pos : specs[k].nodes) last_rank[k] = std::max(last_rank[k], rank[pos]);
  // Every node outside a kernel that reads a kernel's output must run after the kernel.
  std::vector<int> made_by(num_values, -1);
  for (size_t k = 0; k < specs.size(); ++k)
    for (int v : specs[k].out_vids) made_by[v] = static_cast<int>(k);
  for (int pos = 0; pos < num_nodes; ++pos) {
    const Node& n = *nodes[pos];
    auto check = [&](int v) {
      const int k = made_by[v];
      if (k >= 0 && owner[pos] != k)
        STRATA_CHECK(rank[pos] > last_rank[k], "compile: node ", pos, " reads an output of kernel ", k,
                     " before the kernel runs");
    };
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Value) check(a.value);
      for (const ArgElem& e : a.elems)
        if (e.is_value()) check(e.value);
    }
  }
  for (int pos : order) {
    const int k = owner[pos];
    if (k < 0) {
      p->steps.push_back(node_step(g, *nodes[pos]));
      continue;
    }
    const KernelSpec& s = specs[k];
    if (rank[pos] != last_rank[k]) continue;
    KernelStep ks;
    ks.spec = s;
    std::unordered_set<int> outs(s.out_vids.begin(), s.out_vids.end());
    for (int q : s.nodes) {
      ks.fallback.push_back(node_step(g, *nodes[q]));
      for (int o : nodes[q]->outputs)
        if (!outs.count(o)) ks.internal.push_back(o);
    }
    PlanStep st;
    st.kernel = static_cast<int>(p->kernels.size());
    st.outs = s.out_vids;
    for (int v : s.in_vids) {
      PlanArg pa;
      pa.kind = PlanArg::Env;
      pa.vid = v;
      st.args.push_back(std::move(pa));
    }
    p->kernels.push_back(std::move(ks));
    p->steps.push_back(std::move(st));
  }
  finish_plan(*p);
  return p;
}

namespace {

void run_node(const PlanStep& st, std::vector<IValue>& env, Stack& stack, const Device& graph_device) {
  stack.clear();
  for (const PlanArg& a : st.args) {
    switch (a.kind) {
      case PlanArg::Env: stack.push_back(env[a.vid]); break;
      case PlanArg::EnvMove: stack.push_back(std::move(env[a.vid])); break;
      case PlanArg::Const: stack.push_back(a.constant); break;
      case PlanArg::GraphDevice: stack.emplace_back(graph_device); break;
      case PlanArg::TensorList: {
        std::vector<Tensor> l;
        l.reserve(a.elems.size());
        for (const ArgElem& e : a.elems) l.push_back(e.is_value() ? env[e.value].to_tensor() : e.constant.to_tensor());
        stack.emplace_back(std::move(l));
        break;
      }
      case PlanArg::IntList: {
        std::vector<int64_t> l;
        l.reserve(a.elems.size());
        for (const ArgElem& e : a.elems) l.push_back(e.is_value() ? env[e.value].to_int() : e.constant.to_int());
        stack.emplace_back(std::move(l));
        break;
      }
    }
  }
  // A node recorded in the graph's base grad mode follows the caller's mode; one recorded in
  // the other mode (inside a no_grad/enable_grad block, or after the end of a block the graph
  // started in) runs in the mode it was recorded in.
  LocalDispatchKeySet& tls = tls_local_dispatch_key_set();
  if (!st.force_autocast && (!st.force_grad || tls.excluded.has(DispatchKey::Autograd) == st.no_grad)) {
    call_boxed(*st.op, stack);
  } else {
    struct Restore {
      LocalDispatchKeySet& tls;
      LocalDispatchKeySet prev;
      ScalarType prev_dtype;
      ~Restore() {
        tls = prev;
        if (autocast::dtype() != prev_dtype) autocast::set_dtype(prev_dtype);
      }
    } restore{tls, tls, autocast::dtype()};
    if (st.force_grad)
      tls.excluded = st.no_grad ? tls.excluded.add(DispatchKey::Autograd) : tls.excluded.remove(DispatchKey::Autograd);
    if (st.force_autocast) {
      // The node's own autocast state (Note [Autocast in captured graphs] in recorder.cpp).
      const bool on = st.autocast != ScalarType::Undefined;
      tls.included = on ? tls.included.add(DispatchKey::Autocast) : tls.included.remove(DispatchKey::Autocast);
      tls.excluded = tls.excluded.remove(DispatchKey::Autocast);
      if (on) autocast::set_dtype(st.autocast);
    }
    call_boxed(*st.op, stack);
  }
  if (st.list_return) {
    const auto& l = stack.back().to_tensor_list();
    STRATA_CHECK(l.size() == st.outs.size(), "compile: op '", st.op->schema().full_name(), "' returned ", l.size(),
                 " tensors at run time but ", st.outs.size(), " when it was captured");
    for (size_t i = 0; i < l.size(); ++i) env[st.outs[i]] = IValue(l[i]);
  } else {
    STRATA_CHECK(stack.size() == st.outs.size(), "compile: op '", st.op->schema().full_name(), "' returned ",
                 stack.size(), " values, expected ", st.outs.size());
    for (size_t i = 0; i < st.outs.size(); ++i) env[st.outs[i]] = std::move(stack[i]);
  }
}

Tensor arena_buffer(int64_t bytes) {
  const int64_t sizes[1] = {bytes};
  return empty_tensor(IntArrayRef(sizes, 1), ScalarType::UInt8, Device());
}

using PointwiseFn = void (*)(void* const*, int64_t);
using RowFn = void (*)(void* const*, int64_t, int64_t);

// One kernel step (Note [Kernel plans]); call_arena: this call's arena buffer, made on first need.
void run_kernel(const Plan& p, const PlanStep& st, std::vector<IValue>& env, Stack& stack, const Device& graph_device,
                ArenaState* arena, Tensor& call_arena) {
  const KernelStep& ks = p.kernels[st.kernel];
  const KernelSpec& s = ks.spec;
  const size_t n_in = s.in_vids.size(), n_buf = n_in + s.out_vids.size() + (s.status ? 1 : 0);
  void* small[16];
  std::vector<void*> large;
  void** bufs = small;
  if (n_buf > 16) {
    large.resize(n_buf);
    bufs = large.data();
  }
  bool ok = true;
  for (size_t i = 0; i < n_in && ok; ++i) {
    const IValue& v = env[s.in_vids[i]];
    if (!v.is_tensor()) {
      ok = false;
      break;
    }
    const Tensor& t = v.to_tensor();
    ok = t.defined() && t.device().is_cpu() &&
         (s.strided ? std::ranges::equal(t.sizes(), s.in_sizes[i]) && std::ranges::equal(t.strides(), s.in_strides[i])
                    : t.is_contiguous());
    if (ok) bufs[i] = t.data_ptr();
  }
  int64_t n = 0;
  if (ok && !s.strided) {
    const Tensor& r = env[s.in_vids[s.ref]].to_tensor();
    n = r.numel();
    ok = (s.numel < 0 || n == s.numel) && (!s.check_sizes || std::ranges::equal(r.sizes(), s.ref_sizes));
  }
  auto run_nodes = [&] {
    for (const PlanStep& f : ks.fallback) run_node(f, env, stack, graph_device);
    for (int v : ks.internal) env[v] = IValue();
    if (arena) ++arena->fallbacks;
  };
  // Outputs written into an input (Note [Reinplacing] in python/strata/_inductor/reinplace.py): that
  // input must hold exactly the output's elements (dtype, sizes; contiguity was checked above) and no
  // other input may share its storage, else the nodes run.
  for (size_t j = 0; ok && j < s.out_into.size(); ++j) {
    const int i = s.out_into[j];
    if (i < 0) continue;
    const Tensor& t = env[s.in_vids[i]].to_tensor();
    const ScalarType dt = s.out_dtypes.empty() ? s.dtype : s.out_dtypes[j];
    const Tensor& r = env[s.in_vids[s.ref]].to_tensor();
    ok = t.dtype() == dt && std::ranges::equal(t.sizes(), r.sizes());
    for (size_t q = 0; ok && q < n_in; ++q)
      if (q != static_cast<size_t>(i) && env[s.in_vids[q]].to_tensor().impl()->storage() == t.impl()->storage())
        ok = false;
  }
  if (!ok) {
    run_nodes();
    return;
  }
  const Tensor& r = env[s.in_vids[s.ref]].to_tensor();
  const bool keep = arena && arena->keep;
  for (size_t j = 0; j < s.out_vids.size(); ++j) {
    if (!s.out_into.empty() && s.out_into[j] >= 0) {
      Tensor out = env[s.in_vids[s.out_into[j]]].to_tensor();
      out.bump_version();  // an in-place write, as eager's in-place ops count it
      bufs[n_in + j] = out.data_ptr();
      env[s.out_vids[j]] = IValue(std::move(out));
      continue;
    }
    Tensor out;
    const int64_t off = s.arena_offsets[j];
    const ScalarType dt = s.out_dtypes.empty() ? s.dtype : s.out_dtypes[j];
    const IntArrayRef sizes = s.rows || s.strided ? IntArrayRef(s.out_shapes[j]) : r.sizes();
    // An output over the arena (the plan's offsets are 64-byte aligned, so any dtype divides them).
    auto over = [&](const Tensor& buf) {
      const int64_t elem = off / static_cast<int64_t>(element_size(dt));
      if (s.strided)
        return Tensor(make_intrusive<TensorImpl>(buf.impl()->storage(), elem, sizes, IntArrayRef(s.out_strides[j]), dt));
      return Tensor(make_intrusive<TensorImpl>(buf.impl()->storage(), elem, sizes, dt));
    };
    if (off >= 0) {
      if (keep) {
        auto& views = arena->views;
        if (views.size() != p.kernels.size()) views.resize(p.kernels.size());
        auto& mine = views[st.kernel];
        if (mine.size() != s.out_vids.size()) mine.resize(s.out_vids.size());
        if (!mine[j].defined()) {
          if (!arena->buffer.defined()) arena->buffer = arena_buffer(p.arena_bytes);
          mine[j] = over(arena->buffer);
        }
        out = mine[j];
      } else {
        if (!call_arena.defined()) call_arena = arena_buffer(p.arena_bytes);
        out = over(call_arena);
      }
    } else if (s.strided) {
      out = empty_strided(sizes, IntArrayRef(s.out_strides[j]), dt, Device());
    } else {
      out = empty_tensor(sizes, dt, Device());
    }
    bufs[n_in + j] = out.data_ptr();
    env[s.out_vids[j]] = IValue(std::move(out));
  }
  int64_t status_word = 0;
  if (s.status) bufs[n_buf - 1] = &status_word;
  {
    profiler::RecordScope scope(s.name, "kernel");  // Note [Kernel names in the profiler] (fusion.py)
    if (s.rows) {
      reinterpret_cast<RowFn>(s.fn)(bufs, s.cols > 0 ? n / s.cols : 0, s.cols);
    } else {
      reinterpret_cast<PointwiseFn>(s.fn)(bufs, n);
    }
  }
  if (status_word != 0) run_nodes();  // a bad gather index: the nodes run and eager raises
}

}  // namespace

void execute(const Plan& p, const IValue* inputs, size_t n, std::vector<IValue>& env, Stack& stack,
             std::vector<IValue>& outs) {
  execute(p, const_cast<IValue*>(inputs), n, env, stack, outs, nullptr, false);
}

thread_local bool t_failed_before_effects = false;

bool last_failure_before_effects() { return t_failed_before_effects; }
void clear_failure_before_effects() { t_failed_before_effects = false; }

void execute(const Plan& p, IValue* inputs, size_t n, std::vector<IValue>& env, Stack& stack,
             std::vector<IValue>& outs, ArenaState* arena, bool consume) {
  if (n != p.inputs.size())
    throw TypeError(str("compile: the graph takes ", p.inputs.size(), " inputs but ", n, " were given"));
  if (env.size() < p.num_values) env.resize(p.num_values);
  EnvReset reset{env, stack};
  for (size_t i = 0; i < n; ++i) {
    if (!kind_matches(p.input_kinds[i], inputs[i]))
      throw TypeError(str("compile: input ", i, " ('", p.input_names[i], "') must be a ",
                          value_kind_name(p.input_kinds[i])));
    if (consume) {
      env[p.inputs[i]] = std::move(inputs[i]);
    } else {
      env[p.inputs[i]] = inputs[i];
    }
  }
  for (const auto& [vid, c] : p.constants) env[vid] = c;
  Device graph_device;
  if (p.first_tensor_input >= 0) graph_device = env[p.inputs[p.first_tensor_input]].to_tensor().device();
  Tensor call_arena;
  if (arena) ++arena->calls;

  size_t si = 0;
  try {
    for (; si < p.steps.size(); ++si) {
      const PlanStep& st = p.steps[si];
      if (st.kernel >= 0) {
        run_kernel(p, st, env, stack, graph_device, arena, call_arena);
      } else {
        run_node(st, env, stack, graph_device);
      }
      for (int r : st.release) env[r] = IValue();
    }
  } catch (...) {
    t_failed_before_effects = si < p.first_effect;
    throw;
  }
  outs.clear();
  outs.reserve(p.outputs.size());
  for (int o : p.outputs) outs.push_back(env[o]);
}

std::vector<IValue> Graph::run(const std::vector<IValue>& inputs) const {
  std::shared_ptr<const Plan> p = plan();
  std::vector<IValue> env, outs;
  Stack stack;
  execute(*p, inputs.data(), inputs.size(), env, stack, outs);
  return outs;
}

// Note [Replaying a graph on Meta]
// strata.compile checks that a graph captured with symbolic sizes holds at
// other sizes by running it on Meta tensors of those sizes (symshape.py). A
// factory recorded without a device (CPU at run time) or with a real device,
// and the graph's constant tensors, would mix real and meta tensors there: in
// this copy of the plan every device argument is the graph's device (Meta,
// from the inputs) and every constant tensor a meta tensor of its geometry.
std::vector<IValue> Graph::run_meta(const std::vector<IValue>& inputs) const {
  Plan p = *plan();
  auto to_meta = [](const IValue& v) -> IValue {
    if (!v.is_tensor() || !v.to_tensor().defined() || v.to_tensor().device().is_meta()) return v;
    const Tensor& t = v.to_tensor();
    if (t.impl()->is_wrapped_number()) return v;
    int64_t extent = 0;
    if (t.numel() > 0) {
      extent = t.storage_offset() + 1;
      for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.stride(d);
    }
    const auto bytes = static_cast<size_t>(extent * static_cast<int64_t>(element_size(t.dtype())));
    return IValue(Tensor(make_intrusive<TensorImpl>(make_storage(bytes, Device(DeviceType::Meta)), t.storage_offset(),
                                                    t.sizes(), t.strides(), t.dtype())));
  };
  for (auto& c : p.constants) c.second = to_meta(c.second);
  for (PlanStep& st : p.steps) {
    const auto& args = st.op->schema().args;
    for (size_t i = 0; i < st.args.size() && i < args.size(); ++i) {
      PlanArg& a = st.args[i];
      if (a.kind != PlanArg::Const) continue;
      if (a.constant.is_device() || (a.constant.is_none() && args[i].type == ArgType::OptDevice)) {
        a.kind = PlanArg::GraphDevice;
      } else {
        a.constant = to_meta(a.constant);
      }
    }
  }
  std::vector<IValue> env, outs;
  Stack stack;
  execute(p, inputs.data(), inputs.size(), env, stack, outs);
  return outs;
}

}  // namespace strata::compile
