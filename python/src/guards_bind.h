// strata._C._guards: the guard evaluator of strata.compile (see Note [Guard
// evaluation] in guards_bind.cpp). Declared here so that C++ callers (the frame
// evaluation hook) can check a GuardSet without going through Python:
//   nb::inst_ptr<strata::py::guards::GuardSet>(obj)->check(args, globals, closure)
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "bind.h"
#include "compile/guards.h"

namespace strata::py::guards {

enum class StepKind : uint8_t { Arg, Global, Closure, Attr, Item, DictItem, Size, Stride };

// One node of the accessor tree: the value reached by a path of steps from
// the frame. Children share this node's value; guards are attached to the
// node whose value they test.
struct Node {
  StepKind kind = StepKind::Arg;
  Node* parent = nullptr;
  nb::object key;          // Global / Attr / Item / DictItem: the name or key
  Py_ssize_t index = 0;    // Arg / Closure: position; Item: int key; Size / Stride: dimension
  bool int_item = false;   // Item with an int key (list/tuple index fast path)
  std::string name;        // printable: L['self']._modules['layer1'].weight
  std::string match_key;   // identity of the step among its siblings
  std::vector<std::unique_ptr<Node>> children;
  std::vector<uint32_t> guards;  // value guards on this node, in insertion order
  int slot = -1;                 // >= 0: kept for the cross-value guards
};

enum class GuardKind : uint8_t {
  Tensor, Type, Id, Equals, Len, DictKeys, NotNone, IsNone, GlobalState, DimRelation, NoAliasing
};

struct Leaf {  // a size (or stride) read by a DimRelation
  Node* node = nullptr;
  int64_t dim = 0;
  bool stride = false;
};

struct Guard {
  GuardKind kind = GuardKind::Type;
  Node* node = nullptr;  // value guards
  compile::TensorSpec spec;
  nb::object obj;        // Type: the type; Id: the object; Equals: the value; DictKeys: tuple of keys
  Py_ssize_t length = 0;
  std::string expected_repr;  // Equals / DictKeys / Id: printable expectation
  compile::GlobalState state;
  compile::DimRelation relation;
  std::vector<Leaf> leaves;
  std::vector<Node*> nodes;  // NoAliasing
};

class GuardSet {
 public:
  explicit GuardSet(std::vector<std::string> arg_names, std::vector<std::string> closure_names = {});
  GuardSet(const GuardSet&) = delete;
  GuardSet& operator=(const GuardSet&) = delete;

  // Source parsing: [("arg", 0), ("attr", "layer1"), ("dict_item", "weight")].
  Node* intern_source(nb::handle source);

  void add_tensor(nb::handle source, nb::handle dtype, nb::handle device, bool requires_grad,
                  nb::handle sizes, nb::handle strides, nb::handle example = nb::none());
  void add_type(nb::handle source, nb::handle type);
  void add_id(nb::handle source, nb::handle obj);
  void add_equals(nb::handle source, nb::handle value);
  void add_len(nb::handle source, Py_ssize_t n);
  void add_dict_keys(nb::handle source, nb::handle keys);
  void add_not_none(nb::handle source);
  void add_is_none(nb::handle source);
  void add_global_state(compile::GlobalState state);
  void add_dim_relation(nb::handle lhs, const std::string& op, nb::handle rhs);
  void add_no_aliasing(nb::handle sources);

  // The fast path: shared-prefix tree walk, no exception escapes. `closure`
  // may be null (or None). Requires the GIL.
  bool check(PyObject* args, PyObject* globals, PyObject* closure);
  // Every guard on its own, each source read from its root (what the tree
  // saves; for measurement and for cross-checking the tree).
  bool check_unshared(PyObject* args, PyObject* globals, PyObject* closure);
  // nullopt when every guard holds, else the first failing guard (insertion order), worded.
  std::optional<std::string> check_verbose(PyObject* args, PyObject* globals, PyObject* closure);
  std::vector<std::string> describe() const;
  size_t size() const { return guards_.size(); }
  size_t num_nodes() const { return num_nodes_; }

  // Garbage-collector support: a GuardSet keeps guarded objects alive (id
  // guards hold modules, which may hold the compiled function and so this set).
  int traverse(visitproc visit, void* arg);
  void clear();

 private:
  struct Ctx {
    PyObject* args;
    PyObject* globals;
    PyObject* closure;
  };
  Guard& push(GuardKind kind, Node* node);
  std::string describe(const Guard& g) const;
  bool walk(const Node& n, PyObject* parent, const Ctx& c, PyObject** slots);
  bool check_value(const Guard& g, PyObject* v) const;
  std::string value_failure(const Guard& g, PyObject* v) const;
  bool check_cross(const Guard& g, PyObject* const* slots) const;
  std::string cross_failure(const Guard& g, PyObject* const* slots) const;
  PyObject* resolve(const Node& n, const Ctx& c) const;  // new reference, or null (error may be set)
  std::string leaf_name(const Leaf& l) const;
  void check_mutable() const;

  std::vector<std::string> arg_names_, closure_names_;
  std::vector<std::unique_ptr<Node>> roots_;
  std::vector<Guard> guards_;
  std::vector<uint32_t> state_guards_, cross_guards_;  // GlobalState; DimRelation and NoAliasing
  int num_slots_ = 0;
  size_t num_nodes_ = 0;
  int active_checks_ = 0;
  bool cleared_ = false;
};

}  // namespace strata::py::guards
