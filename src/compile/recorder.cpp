// Note [Recording ops on DispatchKey::Tracer]
// While a RecordGuard is alive, Tracer is in the thread's included key set,
// so every op call reaches tracer_fallback first (only the profiler's layer
// sits above it). The fallback turns the boxed arguments into a Node (tensors
// must already be bound to values; Python numbers the binding wrapped become
// constants), then runs the op on Meta: real tensors in the stack are replaced
// by meta tensors of the same geometry, Device arguments become Meta, and the
// call continues below Tracer with Tracer excluded, so ops that a composite
// (or a kernel) calls internally are not recorded a second time. Autograd runs
// on the meta tensors as usual, which gives the results their requires_grad.
// The node is appended only once the meta call has succeeded: an error in the
// op leaves the graph as it was.
//
// Note [Devices in a captured graph]
// Capture runs on Meta but values keep the device the real tensors will have:
// inputs and constants that of their example, op results that of the op's
// Device argument when it names one, else that of the first tensor argument
// (wrapped numbers aside), else CPU (a factory with device=None). strata code
// that writes `device=x.device` passes Meta while capturing; such an argument
// is recorded as "the graph's device" and resolved at run time to the device
// of the first tensor input of the graph (CPU when there is none).
//
// Note [Recording for AOT autograd]
// AOT autograd (python/strata/_dynamo/aot.py) records a forward graph replayed
// on Meta and then the autograd engine's backward pass over it into one joint
// graph. Two things differ from capture there (RecordGuard(g, aot=true)):
// - A composite op without a derivative of its own is not recorded as one
//   node: it is called below Tracer with Tracer still on, so the ops it is made
//   of are recorded. Autograd records those ops one by one (Note [The autograd
//   layer]), and the tensors their backward nodes save are their results; had
//   the composite been one node, those results would be made below Tracer and
//   be unknown to the graph when a derivative reads them.
// - Autograd keeps a saved output as an alias made without the dispatcher
//   (alias_without_history), and a derivative reads that alias: a tensor that
//   is not bound but is an exact alias of a bound one (same storage, offset,
//   sizes, strides, dtype) stands for that value.
// The backward pass itself needs nothing special: the engine runs derivatives
// with grad mode off (recorded as such in each node) and every op it calls
// itself (accumulating gradients with add, summing a broadcast gradient down
// with sum_to, casting, zeros for outputs that got no gradient) goes through
// the dispatcher, so Tracer sees it.
//
// Note [Autocast in captured graphs]
// Tracer sits above Autocast, so an op recorded inside an autocast region
// reaches the recorder with its inputs in their own dtypes. Before recording
// it, the recorder casts them as the autocast kernel would
// (autocast::cast_inputs: the same to_dtype calls, which record themselves as
// _to_copy nodes), so the graph holds every cast explicitly and each node reads
// inputs of the dtypes it computes in: what AOT autograd, the partitioner and
// the code generator see is the mixed-precision program itself. Each node also
// keeps the autocast state it was recorded under (Node::autocast) and the
// executor replays it under that state, as it does grad mode: the autocast
// kernel then finds the inputs already cast (no second cast), and an op without
// a policy that calls policy ops inside it (a composite) gets its inner casts as
// in eager mode.
#include <unordered_map>

#include "autocast/autocast.h"
#include "autograd/derivative.h"
#include "autograd/variable.h"
#include "compile/graph.h"

namespace strata::compile {

namespace {

struct RecordState {
  std::vector<std::shared_ptr<Graph>> graphs;  // innermost last
  std::vector<char> aot;                       // per graph: Note [Recording for AOT autograd]
  std::string source;
};

RecordState& state() {
  thread_local RecordState s;
  return s;
}

// Note [Symbolic ints in recorded nodes] (graph.h): the note for argument i,
// element elem, or null.
const SymIntNote* find_note(const std::vector<SymIntNote>& notes, size_t i, int elem) {
  for (const SymIntNote& n : notes)
    if (n.arg == static_cast<int>(i) && n.elem == elem) return &n;
  return nullptr;
}

[[noreturn]] void bad_symint(const OperatorEntry& op, const Argument& a, const std::string& why) {
  throw Error(str("compile: no symbolic shape support for argument '", a.name, "' of op '", op.schema().full_name(),
                  "': ", why));
}

// Argument i as a reference to the noted int value(s), if any note names it.
bool symint_arg(const OperatorEntry& op, const Argument& a, size_t i, const IValue& v,
                const std::vector<SymIntNote>& notes, Graph& g, Arg* out) {
  bool any = false;
  for (const SymIntNote& n : notes) any = any || n.arg == static_cast<int>(i);
  if (!any) return false;
  auto check_vid = [&](const SymIntNote& n) {
    if (n.vid < 0 || n.vid >= static_cast<int>(g.values().size()) || g.value(n.vid).kind != ValueKind::Int)
      bad_symint(op, a, str("value ", n.vid, " is not an int value of the graph"));
  };
  const auto* iv = std::get_if<int64_t>(&v.raw());
  const auto* sv = std::get_if<Scalar>(&v.raw());
  if (iv || (sv && sv->is_integral(false))) {
    const int64_t x = iv ? *iv : sv->to_int();
    const SymIntNote* n = find_note(notes, i, -1);
    if (!n) bad_symint(op, a, "a list element was noted for an int argument");
    if (n->value != x) bad_symint(op, a, str("the noted int ", n->value, " is not the argument ", x));
    check_vid(*n);
    *out = Arg::make_value(n->vid, a.type);
    return true;
  }
  if (const auto* lp = std::get_if<std::vector<int64_t>>(&v.raw())) {
    const std::vector<int64_t>& l = *lp;
    Arg arg;
    arg.kind = Arg::Kind::List;
    arg.type = a.type;
    const SymIntNote* whole = find_note(notes, i, -1);  // one int given for an int[N]
    for (size_t j = 0; j < l.size(); ++j) {
      ArgElem e;
      const SymIntNote* n = whole ? whole : find_note(notes, i, static_cast<int>(j));
      if (n) {
        if (n->value != l[j]) bad_symint(op, a, str("the noted int ", n->value, " is not element ", j, " (", l[j], ")"));
        check_vid(*n);
        e.value = n->vid;
      } else {
        e.constant = IValue(l[j]);
      }
      arg.elems.push_back(std::move(e));
    }
    *out = std::move(arg);
    return true;
  }
  bad_symint(op, a, str("a symbolic size cannot be passed as ", arg_type_name(a.type),
                        " (only int and int[] arguments take one)"));
}

Tensor meta_like(const Tensor& t) {
  const int64_t es = static_cast<int64_t>(element_size(t.dtype()));
  int64_t extent = 0;
  if (t.numel() > 0) {
    extent = t.storage_offset() + 1;
    for (int64_t d = 0; d < t.dim(); ++d) extent += (t.size(d) - 1) * t.stride(d);
  }
  Tensor m(make_intrusive<TensorImpl>(make_storage(static_cast<size_t>(extent * es), Device(DeviceType::Meta)),
                                       t.storage_offset(), t.sizes(), t.strides(), t.dtype()));
  if (autograd::requires_grad(t)) autograd::set_requires_grad(m, true);
  return m;
}

bool needs_meta_copy(const Tensor& t) {
  return t.defined() && !t.device().is_meta() && !t.impl()->is_wrapped_number();
}

[[noreturn]] void unbound_tensor(const OperatorEntry& op, const Argument& a, const Tensor& t) {
  throw Error(str("compile: op '", op.schema().full_name(), "' received a tensor that is not part of the graph (",
                  "argument '", a.name, "': ", t.describe(),
                  "). Every tensor an op reads while recording must first be bound to a graph value "
                  "(Graph.add_input, Graph.add_constant or Graph.bind)."));
}

ValueKind kind_of_result(const IValue& v) {
  const auto& r = v.raw();
  if (std::holds_alternative<bool>(r)) return ValueKind::Bool;
  if (std::holds_alternative<int64_t>(r)) return ValueKind::Int;
  if (std::holds_alternative<double>(r)) return ValueKind::Float;
  if (auto* s = std::get_if<Scalar>(&r))
    return s->is_bool() ? ValueKind::Bool : s->is_floating_point() ? ValueKind::Float : ValueKind::Int;
  return ValueKind::Tensor;
}

std::string base_name(const FunctionSchema& s) {
  std::string n = s.name;
  if (auto p = n.rfind("::"); p != std::string::npos) n = n.substr(p + 2);
  return n;
}

void tracer_fallback(const OperatorEntry& op, DispatchKeySet ks, Stack& stack) {
  RecordState& st = state();
  if (st.graphs.empty()) {
    // Tracer included by someone else with nothing to record into: be transparent.
    ExcludeDispatchKeyGuard no_trace(DispatchKey::Tracer);
    call_boxed(op, stack);
    return;
  }
  Graph& g = *st.graphs.back();
  const bool aot = st.aot.back();
  const bool autocast_on = autocast::is_active();
  if (autocast_on && autocast::policy_of(op) != autocast::Policy::None)
    autocast::cast_inputs(op, stack);  // Note [Autocast in captured graphs]
  const FunctionSchema& schema = op.schema();
  const size_t nargs = schema.args.size();
  STRATA_CHECK(stack.size() >= nargs, "compile: op '", schema.full_name(), "' called with ", stack.size(),
               " arguments, its schema has ", nargs);
  const size_t base = stack.size() - nargs;
  if (aot && !autograd::find_derivative(op.id()) &&
      op.source_of(ks.highest_backend()) == DispatchKey::CompositeImplicit) {
    bool writes = false;
    for (size_t i = 0; i < nargs; ++i)
      writes = writes || (schema.args[i].is_write && !stack[base + i].is_none());
    if (!writes) {
      redispatch_boxed(op, ks, DispatchKey::Tracer, stack);  // its ops record themselves
      return;
    }
  }

  auto node = std::make_shared<Node>();
  node->op = &op;
  node->source = st.source;
  node->grad_enabled = !tls_local_dispatch_key_set().excluded.has(DispatchKey::Autograd);
  node->autocast = autocast_on ? autocast::dtype() : ScalarType::Undefined;
  node->args.reserve(nargs);

  // Device of the results (Note [Devices in a captured graph]).
  std::optional<Device> device_arg, first_tensor_device;
  bool any_tensor = false;
  auto bound = [&](const Argument& a, const Tensor& t) {
    std::optional<int> vid = aot ? g.value_of_alias(t) : g.value_of(t);
    if (!vid) unbound_tensor(op, a, t);
    if (!first_tensor_device) first_tensor_device = g.value(*vid).device;
    return *vid;
  };

  std::vector<SymIntNote> notes;
  notes.swap(symint_notes());
  for (size_t i = 0; i < nargs; ++i) {
    const Argument& a = schema.args[i];
    const IValue& v = stack[base + i];
    Arg sym;
    if (!notes.empty() && symint_arg(op, a, i, v, notes, g, &sym)) {
      node->args.push_back(std::move(sym));
    } else if (v.is_tensor()) {
      const Tensor& t = v.to_tensor();
      if (!t.defined()) {
        node->args.push_back(Arg::make_constant(IValue(), a.type));
      } else if (t.impl()->is_wrapped_number()) {
        Arg arg = Arg::make_constant(v, a.type);
        arg.wrapped_number = true;
        node->args.push_back(std::move(arg));
        any_tensor = true;
      } else {
        node->args.push_back(Arg::make_value(bound(a, t), a.type));
        any_tensor = true;
      }
    } else if (v.is_tensor_list()) {
      Arg arg;
      arg.kind = Arg::Kind::List;
      arg.type = a.type;
      for (const Tensor& t : v.to_tensor_list()) {
        ArgElem e;
        if (t.defined()) {
          e.value = bound(a, t);
          any_tensor = true;
        }
        arg.elems.push_back(std::move(e));
      }
      node->args.push_back(std::move(arg));
    } else if (v.is_device()) {
      Device d = v.to_device();
      if (d.is_meta()) {
        Arg arg;
        arg.kind = Arg::Kind::GraphDevice;
        arg.type = a.type;
        node->args.push_back(std::move(arg));
        if (!device_arg) device_arg = g.capture_device();
      } else {
        node->args.push_back(Arg::make_constant(v, a.type));
        if (!device_arg) device_arg = d;
      }
    } else {
      node->args.push_back(Arg::make_constant(v, a.type));
    }
  }

  // Run on Meta. Real tensors get meta stand-ins; an in-place or out= result
  // that is a stand-in also moves the real tensor's binding.
  std::vector<std::pair<TensorImpl*, Tensor>> stand_ins;  // stand-in impl -> real tensor
  auto to_meta = [&](Tensor& t) {
    if (!needs_meta_copy(t)) return;
    Tensor m = meta_like(t);
    stand_ins.emplace_back(m.impl(), t);
    t = std::move(m);
  };
  for (size_t i = 0; i < nargs; ++i) {
    IValue& v = stack[base + i];
    if (v.is_tensor()) {
      to_meta(v.to_tensor());
    } else if (v.is_tensor_list()) {
      std::vector<Tensor> l = v.to_tensor_list();
      bool changed = false;
      for (Tensor& t : l) {
        if (needs_meta_copy(t)) {
          to_meta(t);
          changed = true;
        }
      }
      if (changed) v = IValue(std::move(l));
    } else if (v.is_device()) {
      v = IValue(Device(DeviceType::Meta));
    } else if (v.is_none() && schema.args[i].type == ArgType::OptDevice && !any_tensor) {
      // A factory with no device: CPU at run time, Meta now.
      v = IValue(Device(DeviceType::Meta));
    }
  }
  {
    ExcludeDispatchKeyGuard no_trace(DispatchKey::Tracer);
    DispatchKeySet mks;
    for (size_t i = base; i < stack.size(); ++i) {
      const IValue& v = stack[i];
      if (v.is_tensor()) {
        if (v.to_tensor().defined()) mks = mks | v.to_tensor().key_set();
      } else if (v.is_tensor_list()) {
        for (const Tensor& t : v.to_tensor_list())
          if (t.defined()) mks = mks | t.key_set();
      }
    }
    mks = apply_tls(mks, op).below(DispatchKey::Tracer);
    mks = (mks - DispatchKeySet(uint64_t(0xff), 0)).add(DispatchKey::Meta);
    op.lookup(mks).boxed(op, mks, stack);
  }

  // Results: new values, bound to the meta results.
  Device out_device = device_arg ? *device_arg : first_tensor_device ? *first_tensor_device : Device();
  const std::string name = base_name(schema);
  auto add_result = [&](const IValue& r) {
    ValueKind k = kind_of_result(r);
    int vid = g.new_value(k, name);
    node->outputs.push_back(vid);
    if (k != ValueKind::Tensor) return;
    Value& val = g.mutable_value(vid);
    const Tensor& t = r.to_tensor();
    val.device = out_device;
    if (!t.defined()) return;
    val.dtype = t.dtype();
    val.sizes.assign(t.sizes().begin(), t.sizes().end());
    val.strides.assign(t.strides().begin(), t.strides().end());
    val.requires_grad = autograd::requires_grad(t);
    g.bind(t, vid);
    for (const auto& [impl, real] : stand_ins)
      if (impl == t.impl()) g.bind(real, vid);
  };
  if (schema.returns.size() == 1 && schema.returns[0] == ArgType::TensorList && !stack.empty() &&
      stack.back().is_tensor_list()) {
    node->list_return = true;
    for (const Tensor& t : stack.back().to_tensor_list()) add_result(IValue(t));
  } else {
    for (size_t i = base; i < stack.size(); ++i) add_result(stack[i]);
  }
  g.append_node(std::move(node));
}

FallbackRegistrar g_tracer_layer(DispatchKey::Tracer, KernelFunction::make_boxed(&tracer_fallback, "tracer"));

}  // namespace

RecordGuard::RecordGuard(std::shared_ptr<Graph> g, bool aot) {
  STRATA_CHECK(g, "compile: record needs a graph");
  auto& tls = tls_local_dispatch_key_set();
  prev_included_ = tls.included.has(DispatchKey::Tracer);
  state().graphs.push_back(std::move(g));
  state().aot.push_back(aot);
  tls.included = tls.included.add(DispatchKey::Tracer);
}

RecordGuard::~RecordGuard() {
  RecordState& st = state();
  if (!st.graphs.empty()) st.graphs.pop_back();
  if (!st.aot.empty()) st.aot.pop_back();
  auto& tls = tls_local_dispatch_key_set();
  if (!prev_included_) tls.included = tls.included.remove(DispatchKey::Tracer);
  if (st.graphs.empty()) st.source.clear();
}

bool is_recording() {
  return !state().graphs.empty() && tls_local_dispatch_key_set().included.has(DispatchKey::Tracer);
}

const Tensor& adopt_literal(const Tensor& t) {
  RecordState& st = state();
  if (!st.graphs.empty() && t.defined() && !st.graphs.back()->value_of(t)) st.graphs.back()->add_constant(t, "_literal");
  return t;
}

Graph* recording_graph() {
  RecordState& st = state();
  return st.graphs.empty() ? nullptr : st.graphs.back().get();
}

void set_source(std::string s) { state().source = std::move(s); }

std::vector<SymIntNote>& symint_notes() {
  thread_local std::vector<SymIntNote> notes;
  return notes;
}
const std::string& current_source() { return state().source; }

}  // namespace strata::compile
