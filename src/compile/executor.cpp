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

#include "compile/graph.h"

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
};

size_t plan_num_inputs(const Plan& p) { return p.inputs.size(); }
const std::vector<int>& plan_outputs(const Plan& p) { return p.outputs; }

namespace {

std::shared_ptr<const Plan> build_plan(const Graph& g) {
  auto p = std::make_shared<Plan>();
  const auto& values = g.values();
  p->num_values = values.size();
  p->inputs = g.inputs();
  for (size_t i = 0; i < p->inputs.size(); ++i) {
    const Value& v = values[p->inputs[i]];
    p->input_kinds.push_back(v.kind);
    p->input_names.push_back(v.name);
    if (p->first_tensor_input < 0 && v.kind == ValueKind::Tensor) p->first_tensor_input = static_cast<int>(i);
  }
  for (int c : g.constants()) p->constants.emplace_back(c, values[c].constant);
  p->outputs = g.outputs();

  std::vector<int> last_use(values.size(), -1);
  const auto& nodes = g.nodes();
  for (size_t si = 0; si < nodes.size(); ++si) {
    const Node& n = *nodes[si];
    PlanStep st;
    st.op = n.op;
    st.list_return = n.list_return;
    st.no_grad = !n.grad_enabled;
    st.force_grad = n.grad_enabled != g.base_grad_enabled();
    st.outs = n.outputs;
    for (const Arg& a : n.args) {
      PlanArg pa;
      switch (a.kind) {
        case Arg::Kind::Value:
          pa.kind = PlanArg::Env;
          pa.vid = a.value;
          last_use[a.value] = static_cast<int>(si);
          break;
        case Arg::Kind::GraphDevice: pa.kind = PlanArg::GraphDevice; break;
        case Arg::Kind::List: {
          bool all_const = true;
          for (const ArgElem& e : a.elems) {
            if (e.is_value()) {
              all_const = false;
              last_use[e.value] = static_cast<int>(si);
            }
          }
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
    p->steps.push_back(std::move(st));
  }
  // Release each intermediate after its last use (right after it is made
  // when nothing uses it); graph outputs live to the end.
  std::vector<char> is_output(values.size(), 0);
  for (int o : p->outputs) is_output[o] = 1;
  for (size_t si = 0; si < p->steps.size(); ++si) {
    for (int o : p->steps[si].outs)
      if (last_use[o] < 0 && !is_output[o]) p->steps[si].release.push_back(o);
  }
  for (size_t v = 0; v < values.size(); ++v) {
    if (last_use[v] < 0 || is_output[v]) continue;
    PlanStep& st = p->steps[last_use[v]];
    // Used once by plain reference in its last step: move it into the stack.
    int refs = 0;
    PlanArg* only = nullptr;
    for (PlanArg& a : st.args) {
      if (a.kind == PlanArg::Env && a.vid == static_cast<int>(v)) {
        ++refs;
        only = &a;
      }
      for (const ArgElem& e : a.elems) refs += e.value == static_cast<int>(v);
    }
    if (refs == 1 && only) {
      only->kind = PlanArg::EnvMove;
    } else {
      st.release.push_back(static_cast<int>(v));
    }
  }
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

void execute(const Plan& p, const IValue* inputs, size_t n, std::vector<IValue>& env, Stack& stack,
             std::vector<IValue>& outs) {
  if (n != p.inputs.size())
    throw TypeError(str("compile: the graph takes ", p.inputs.size(), " inputs but ", n, " were given"));
  if (env.size() < p.num_values) env.resize(p.num_values);
  EnvReset reset{env, stack};
  for (size_t i = 0; i < n; ++i) {
    if (!kind_matches(p.input_kinds[i], inputs[i]))
      throw TypeError(str("compile: input ", i, " ('", p.input_names[i], "') must be a ",
                          value_kind_name(p.input_kinds[i])));
    env[p.inputs[i]] = inputs[i];
  }
  for (const auto& [vid, c] : p.constants) env[vid] = c;
  Device graph_device;
  if (p.first_tensor_input >= 0) graph_device = inputs[p.first_tensor_input].to_tensor().device();

  for (const PlanStep& st : p.steps) {
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
    if (!st.force_grad || tls.excluded.has(DispatchKey::Autograd) == st.no_grad) {
      call_boxed(*st.op, stack);
    } else {
      struct Restore {
        LocalDispatchKeySet& tls;
        DispatchKeySet prev;
        ~Restore() { tls.excluded = prev; }
      } restore{tls, tls.excluded};
      tls.excluded = st.no_grad ? tls.excluded.add(DispatchKey::Autograd) : tls.excluded.remove(DispatchKey::Autograd);
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
    for (int r : st.release) env[r] = IValue();
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
