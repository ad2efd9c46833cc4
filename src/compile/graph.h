// Note [The compiled-path graph IR]
// A Graph is what strata.compile captures from a Python function: ordered
// inputs, constants, a list of op nodes in program order, and ordered outputs.
// Every result is a Value (SSA: written once). A node names its op by the
// dispatcher's OperatorEntry and keeps its arguments in schema order, each one
// a reference to a value, a constant IValue, a list of elements that are each
// a value reference or a constant (Tensor[] now, int[] with symbolic sizes
// later), or "the graph's device" (see Note [Devices in a captured graph]).
//
// Tensors are captured on Meta, but values carry the metadata of the real
// tensors they stand for: dtype, sizes, strides, the real device and
// requires_grad. The executor (executor.cpp) replays the nodes through the
// dispatcher on real tensors, so aliasing, in-place writes and autograd behave
// exactly as in eager mode; the value ids do not express aliasing (an in-place
// write through a view changes the base's storage without a new value for the
// base), which a later functionalization pass has to make explicit.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dispatch/dispatcher.h"

namespace strata::compile {

enum class ValueKind : uint8_t { Tensor, Int, Float, Bool };
const char* value_kind_name(ValueKind k);

enum class ValueOrigin : uint8_t { Input, Constant, Op };

struct Value {
  int id = -1;
  std::string name;
  ValueKind kind = ValueKind::Tensor;
  ValueOrigin origin = ValueOrigin::Op;
  // Tensors: metadata at capture. dtype is Undefined for an undefined tensor
  // an op returned (an absent gradient).
  ScalarType dtype = ScalarType::Undefined;
  DimVector sizes, strides;
  Device device;
  bool requires_grad = false;
  // Constants: the tensor or number the graph holds.
  IValue constant;
};

// One element of a list argument: a value reference or a constant.
struct ArgElem {
  int value = -1;
  IValue constant;
  bool is_value() const { return value >= 0; }
};

struct Arg {
  enum class Kind : uint8_t { Constant, Value, List, GraphDevice };
  Kind kind = Kind::Constant;
  int value = -1;
  // Constant. A wrapped number (a Python number the binding made a 0-d
  // tensor) is kept as that tensor with wrapped_number set: it is passed as a
  // wrapped number again at run time, so type promotion is unchanged.
  IValue constant;
  bool wrapped_number = false;
  std::vector<ArgElem> elems;  // List
  ArgType type = ArgType::Tensor;

  static Arg make_constant(IValue v, ArgType t) {
    Arg a;
    a.constant = std::move(v);
    a.type = t;
    return a;
  }
  static Arg make_value(int vid, ArgType t) {
    Arg a;
    a.kind = Kind::Value;
    a.value = vid;
    a.type = t;
    return a;
  }
};

struct Node {
  const OperatorEntry* op = nullptr;
  std::vector<Arg> args;
  std::vector<int> outputs;
  std::string source;
  // Grad mode when the node was recorded. A node recorded in the graph's base mode follows the
  // caller's mode at run time; one recorded in the other mode runs in that mode.
  bool grad_enabled = true;
  // Autocast when the node was recorded: its dtype, Undefined when off (Note [Autocast in captured
  // graphs] in recorder.cpp). Like grad mode, a node recorded in the graph's base state follows
  // the caller's; one recorded in another runs in its own.
  ScalarType autocast = ScalarType::Undefined;
  // The op returns Tensor[]: its elements are the outputs, in order.
  bool list_return = false;

  // In-place, out= (a written argument that was given) or random: never
  // removed as dead code.
  bool has_side_effects() const;
};

// A constant as a Python literal ("2", "1.5", "[1, 2]", "strata.float32").
std::string constant_literal(const IValue& v);

class Plan;  // executor.cpp

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Inputs: a tensor (real or meta; it is bound for recording) or a number.
  // device: the real device a meta example stands for (default: the
  // example's own device).
  int add_input(const std::string& name, const Tensor& example, std::optional<Device> device = std::nullopt);
  int add_input(const std::string& name, const IValue& number);
  // Constants the graph holds and passes at run time.
  int add_constant(const Tensor& t, const std::string& name = "");
  int add_constant(const IValue& number, const std::string& name = "");

  // Tensor objects (by TensorImpl) -> value ids, used while recording. The
  // graph keeps the bound tensors alive so that an address is never reused
  // for another tensor while it is bound.
  void bind(const Tensor& t, int vid);
  std::optional<int> value_of(const Tensor& t) const;
  // The value of a bound tensor that t is an exact alias of (same storage,
  // offset, sizes, strides and dtype; the most recently bound when several
  // are), or nullopt. Used by AOT recording, where autograd hands derivatives
  // aliases it made outside the dispatcher (Note [Recording for AOT autograd]).
  std::optional<int> value_of_alias(const Tensor& t) const;
  void clear_bindings() { bindings_.clear(); }

  void set_outputs(std::vector<int> outs);
  const std::vector<int>& outputs() const { return outputs_; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& constants() const { return constants_; }
  const std::vector<Value>& values() const { return values_; }
  const Value& value(int vid) const;
  const std::vector<std::shared_ptr<Node>>& nodes() const { return nodes_; }
  int num_ops() const { return static_cast<int>(nodes_.size()); }

  // A new op result (named after base, made unique); used by the recorder.
  int new_value(ValueKind kind, const std::string& base);
  Value& mutable_value(int vid);
  // Appends a node; its argument value ids must exist and its outputs must be
  // new values produced by no other node.
  void append_node(std::shared_ptr<Node> n);

  // Removes nodes none of whose outputs is used (by a later node or as a
  // graph output), except those with side effects. Returns how many.
  int eliminate_dead_code();

  // A new graph made of some of this graph's nodes (distinct positions in nodes(), in
  // the order the new graph runs them): `inputs` (any values of this graph: inputs or op
  // results) become its inputs in that order, the constants the nodes read are
  // copied, `outputs` are values of this graph the new one returns. Every
  // value a node reads must be an input, a constant or the result of an
  // earlier chosen node. grad_enabled: the grad mode every copied node runs
  // under (nullopt keeps each node's). Note [Partitioning a joint graph] in
  // python/strata/_dynamo/aot.py is its user.
  std::shared_ptr<Graph> extract(const std::vector<int>& inputs, const std::vector<int>& node_positions,
                                 const std::vector<int>& outputs, std::optional<bool> grad_enabled) const;

  // Python-like listing (Note [Readable graphs] in graph.cpp).
  std::string print_readable() const;

  // Executes the graph with one real input per graph input, in order; returns
  // one IValue per output.
  std::vector<IValue> run(const std::vector<IValue>& inputs) const;
  // The same on Meta inputs, with devices and constants made Meta (Note
  // [Replaying a graph on Meta] in executor.cpp).
  std::vector<IValue> run_meta(const std::vector<IValue>& inputs) const;
  // The executable form, built on first use and after every change.
  std::shared_ptr<const Plan> plan() const;
  uint64_t version() const { return version_.load(std::memory_order_acquire); }

  // The device "the graph's device" stands for at capture: that of the first
  // tensor input, CPU when none.
  Device capture_device() const;

  // The grad mode the graph was created in (what a node recorded without a grad-mode change
  // has): see Node::grad_enabled.
  bool base_grad_enabled() const { return base_grad_enabled_; }
  // The autocast state the graph was created in (Undefined: off); see Node::autocast.
  ScalarType base_autocast() const { return base_autocast_; }

 private:
  bool base_grad_enabled_ = !tls_local_dispatch_key_set().excluded.has(DispatchKey::Autograd);
  ScalarType base_autocast_ = current_autocast();
  static ScalarType current_autocast();
  int add_value(Value v, const std::string& base);
  std::string unique_name(const std::string& base);
  void changed() { version_.fetch_add(1, std::memory_order_acq_rel); }

  std::vector<Value> values_;
  std::vector<std::shared_ptr<Node>> nodes_;
  std::vector<int> inputs_, outputs_, constants_;
  std::vector<int> producer_;  // per value: its node's position in nodes_ at append time, -1 if none
  std::unordered_map<const TensorImpl*, std::pair<intrusive_ptr<TensorImpl>, int>> bindings_;
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, int> name_counts_;
  std::atomic<uint64_t> version_{0};
  mutable std::mutex plan_mu_;
  mutable std::shared_ptr<const Plan> plan_;
  mutable uint64_t plan_version_ = ~uint64_t(0);
};

// ---- recording (recorder.cpp) ----------------------------------------------

// While alive on this thread: DispatchKey::Tracer is included and every
// top-level op call is recorded into g and run on Meta. Nests (the innermost
// graph records).
// aot: record for AOT autograd (Note [Recording for AOT autograd] in
// recorder.cpp): composite ops without a derivative of their own are recorded
// as the ops they are made of, and a tensor that is not bound but is an exact
// alias of a bound one stands for that value.
class RecordGuard {
 public:
  explicit RecordGuard(std::shared_ptr<Graph> g, bool aot = false);
  ~RecordGuard();
  RecordGuard(const RecordGuard&) = delete;
  RecordGuard& operator=(const RecordGuard&) = delete;

 private:
  bool prev_included_;
};

bool is_recording();
// A tensor the Python binding builds from Python literals behind the user's
// back (an index list in x[:, [0, 2]], the value of x[idx] = 1.5): while
// recording it becomes a constant of the graph, so the op reading it finds it
// bound. Build it under ExcludeDispatchKeyGuard(DispatchKey::Tracer) so that
// the ops making it are not recorded. Returns t.
const Tensor& adopt_literal(const Tensor& t);
// The graph being recorded on this thread, or null.
Graph* recording_graph();
// Note [Symbolic ints in recorded nodes]
// strata.compile with symbolic shapes passes a size that depends on an input's
// size to an op as a Python int subclass carrying the id of the int graph
// value that computes it. While noting is on (the Python binding's flag, set
// by the capture), the binding notes, for the overload it finally matched,
// each such int it converted: argument index, list element (-1: the argument
// itself), graph value, and the int itself. The next recorded node reads the
// notes and makes those arguments (list elements) references to the value
// instead of constants; every parse starts a fresh table.
struct SymIntNote {
  int arg = -1;
  int elem = -1;
  int vid = -1;
  int64_t value = 0;
};
std::vector<SymIntNote>& symint_notes();
// Source text attached to the nodes recorded next on this thread.
void set_source(std::string s);
const std::string& current_source();

// Executes plan with the given inputs into outs, using env and stack as
// scratch (sized by the callee). Used by Graph::run and the fast runner.
void execute(const Plan& plan, const IValue* inputs, size_t n, std::vector<IValue>& env, Stack& stack,
             std::vector<IValue>& outs);
size_t plan_num_inputs(const Plan& p);
const std::vector<int>& plan_outputs(const Plan& p);

// ---- generated kernels in the plan (Note [Kernel plans] in executor.cpp) -------------------

// One generated kernel that replaces some nodes of a graph: an extern "C" function taking the
// buffers (inputs then outputs), `void(void* const*, int64_t n)` for a pointwise kernel and
// `void(void* const*, int64_t rows, int64_t cols)` for a row kernel.
struct KernelSpec {
  uintptr_t fn = 0;
  bool rows = false;
  int64_t ref = 0;     // the input whose element count (and, pointwise, sizes) the kernel takes
  int64_t numel = -1;  // the captured element count of that input; -1: any (symbolic sizes)
  int64_t cols = 1;    // row kernels: the last dim
  ScalarType dtype = ScalarType::Float32;
  std::vector<int> in_vids, out_vids;
  std::vector<std::vector<int64_t>> out_shapes;  // row kernels: each output's sizes
  std::vector<int> nodes;                        // positions of the nodes it replaces, ascending
  std::vector<int64_t> arena_offsets;            // per output: byte offset in the arena, or -1
  bool check_sizes = false;                      // the ref input must have exactly ref_sizes
  std::vector<int64_t> ref_sizes;
  // Each output's dtype (empty: all `dtype`).
  std::vector<ScalarType> out_dtypes;
  // A pointwise kernel over a baked geometry (broadcast, strided or reducing over a non-last dim):
  // each input must have exactly in_sizes/in_strides, each output is made with out_shapes/out_strides,
  // and the kernel ignores n.
  bool strided = false;
  std::vector<std::vector<int64_t>> in_sizes, in_strides, out_strides;
  // The kernel takes a status word after its outputs (a gather's bounds check); nonzero: the nodes
  // run instead (eager raises its own error).
  bool status = false;
  // The profiler's name for it (Note [Kernel names in the profiler] in python/strata/_inductor/fusion.py).
  std::string name = "strata_kernel";
  // Per output: the index of the input whose storage it is written into (Note [Reinplacing] in
  // python/strata/_inductor/reinplace.py), or -1 for a new tensor; empty: none. The kernel writes
  // that input's elements in place, so such an output is that input's tensor itself (its version
  // bumped); when the input's dtype or sizes differ at run time, or another input shares its storage,
  // the kernel's nodes run instead.
  std::vector<int> out_into;
};

// The graph's plan with each spec's nodes replaced by one kernel step placed at its last node.
// arena_bytes: the size of the arena the specs' offsets point into.
// order: the nodes in the order to run them (a permutation of all positions, the code generator's
// schedule, which may move independent nodes past a kernel's); empty: graph order. Each kernel runs
// where its last node in that order would.
std::shared_ptr<const Plan> build_kernel_plan(const Graph& g, const std::vector<KernelSpec>& specs,
                                              int64_t arena_bytes, const std::vector<int>& order = {});

// Where kernel outputs with an arena offset live during a call: with keep, the buffer and the
// tensors over it are made at the first call and reused by later ones (mode "reduce-overhead");
// otherwise one buffer is allocated per call.
struct ArenaState {
  bool keep = false;
  Tensor buffer;
  std::vector<std::vector<Tensor>> views;  // per kernel, per output (undefined: no arena slot)
  int64_t calls = 0;
  int64_t fallbacks = 0;  // kernel steps that ran their nodes instead (an input not contiguous, another size)
};
// consume: the inputs are moved into the environment (and so released at their last use).
void execute(const Plan& plan, IValue* inputs, size_t n, std::vector<IValue>& env, Stack& stack,
             std::vector<IValue>& outs, ArenaState* arena, bool consume = false);
int64_t plan_arena_bytes(const Plan& p);
size_t plan_num_kernels(const Plan& p);
// Whether the last execute() on this thread that threw did so before any step with an effect
// outside the call (Note [Graph errors inside try blocks] in executor.cpp); clear sets it false.
bool last_failure_before_effects();
void clear_failure_before_effects();

}  // namespace strata::compile
