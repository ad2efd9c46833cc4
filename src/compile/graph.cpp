#include "compile/graph.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

#include "autocast/autocast.h"
#include "autograd/variable.h"

namespace strata::compile {

const char* value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Tensor: return "tensor";
    case ValueKind::Int: return "int";
    case ValueKind::Float: return "float";
    case ValueKind::Bool: return "bool";
  }
  return "?";
}

bool Node::has_side_effects() const {
  const FunctionSchema& s = op->schema();
  if (s.is_inplace() || (op->flags() & (kInplace | kRandom))) return true;
  for (size_t i = 0; i < args.size() && i < s.args.size(); ++i) {
    if (!s.args[i].is_write) continue;
    const Arg& a = args[i];
    if (a.kind != Arg::Kind::Constant || !a.constant.is_none()) return true;
  }
  return false;
}

// ---- names -------------------------------------------------------------------

namespace {

bool is_python_keyword(const std::string& s) {
  static const std::unordered_set<std::string> kw = {
      "False", "None",   "True",    "and",      "as",     "assert", "async", "await",  "break",
      "class", "continue", "def",   "del",      "elif",   "else",   "except", "finally", "for",
      "from",  "global", "if",      "import",   "in",     "is",     "lambda", "nonlocal", "not",
      "or",    "pass",   "raise",   "return",   "try",    "while",  "with",   "yield",
      // Names the readable listing uses itself.
      "self", "strata"};
  return kw.count(s) > 0;
}

std::string sanitize(const std::string& in) {
  std::string s;
  s.reserve(in.size());
  for (char c : in) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (s.empty()) s = "v";
  if (std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  if (is_python_keyword(s)) s += "_";
  return s;
}

ValueKind kind_of_number(const IValue& v, const char* what) {
  const auto& raw = v.raw();
  if (std::holds_alternative<bool>(raw)) return ValueKind::Bool;
  if (std::holds_alternative<int64_t>(raw)) return ValueKind::Int;
  if (std::holds_alternative<double>(raw)) return ValueKind::Float;
  if (auto* s = std::get_if<Scalar>(&raw))
    return s->is_bool() ? ValueKind::Bool : s->is_floating_point() ? ValueKind::Float : ValueKind::Int;
  throw TypeError(str("compile: ", what, " expects a tensor or a Python int, float or bool"));
}

// A number as the IValue alternative its kind uses (int64_t, double, bool).
IValue normalize_number(const IValue& v, ValueKind k) {
  Scalar s = v.to_scalar();
  switch (k) {
    case ValueKind::Bool: return IValue(s.to_bool());
    case ValueKind::Int: return IValue(s.to_int());
    default: return IValue(s.to_double());
  }
}

void fill_tensor_meta(Value& v, const Tensor& t) {
  v.kind = ValueKind::Tensor;
  v.dtype = t.dtype();
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  v.device = t.device();
  v.requires_grad = autograd::requires_grad(t);
}

}  // namespace

std::string Graph::unique_name(const std::string& base_in) {
  std::string base = sanitize(base_in);
  if (names_.insert(base).second) return base;
  int& n = name_counts_[base];
  for (;;) {
    std::string cand = base + "_" + std::to_string(++n);
    if (names_.insert(cand).second) return cand;
  }
}

int Graph::add_value(Value v, const std::string& base) {
  v.id = static_cast<int>(values_.size());
  v.name = unique_name(base);
  values_.push_back(std::move(v));
  producer_.push_back(-1);
  changed();
  return values_.back().id;
}

int Graph::add_input(const std::string& name, const Tensor& example, std::optional<Device> device) {
  STRATA_CHECK(example.defined(), "compile: add_input('", name, "') got an undefined tensor");
  Value v;
  v.origin = ValueOrigin::Input;
  fill_tensor_meta(v, example);
  if (device) v.device = *device;
  int id = add_value(std::move(v), name);
  inputs_.push_back(id);
  bind(example, id);
  return id;
}

int Graph::add_input(const std::string& name, const IValue& number) {
  Value v;
  v.origin = ValueOrigin::Input;
  v.kind = kind_of_number(number, "add_input");
  int id = add_value(std::move(v), name);
  inputs_.push_back(id);
  return id;
}

int Graph::add_constant(const Tensor& t, const std::string& name) {
  STRATA_CHECK(t.defined(), "compile: add_constant got an undefined tensor");
  Value v;
  v.origin = ValueOrigin::Constant;
  fill_tensor_meta(v, t);
  v.constant = IValue(t);
  int id = add_value(std::move(v), name.empty() ? "_tensor_constant" : name);
  constants_.push_back(id);
  bind(t, id);
  return id;
}

int Graph::add_constant(const IValue& number, const std::string& name) {
  Value v;
  v.origin = ValueOrigin::Constant;
  v.kind = kind_of_number(number, "add_constant");
  v.constant = normalize_number(number, v.kind);
  int id = add_value(std::move(v), name.empty() ? "_constant" : name);
  constants_.push_back(id);
  return id;
}

const Value& Graph::value(int vid) const {
  if (vid < 0 || vid >= static_cast<int>(values_.size()))
    throw IndexError(str("compile: no value with id ", vid, " (the graph has ", values_.size(), " values)"));
  return values_[vid];
}

Value& Graph::mutable_value(int vid) {
  (void)value(vid);
  changed();
  return values_[vid];
}

int Graph::new_value(ValueKind kind, const std::string& base) {
  Value v;
  v.origin = ValueOrigin::Op;
  v.kind = kind;
  return add_value(std::move(v), base);
}

void Graph::bind(const Tensor& t, int vid) {
  STRATA_CHECK(t.defined(), "compile: bind got an undefined tensor");
  const Value& v = value(vid);
  STRATA_CHECK(v.kind == ValueKind::Tensor, "compile: bind: value ", vid, " ('", v.name, "') is a ",
               value_kind_name(v.kind), ", not a tensor");
  bindings_[t.impl()] = {t.impl_ptr(), vid};
}

std::optional<int> Graph::value_of(const Tensor& t) const {
  if (!t.defined()) return std::nullopt;
  auto it = bindings_.find(t.impl());
  if (it == bindings_.end()) return std::nullopt;
  return it->second.second;
}

std::optional<int> Graph::value_of_alias(const Tensor& t) const {
  if (!t.defined()) return std::nullopt;
  if (auto v = value_of(t)) return v;
  const TensorImpl* ti = t.impl();
  std::optional<int> best;
  for (const auto& [impl, entry] : bindings_) {
    if (impl->storage().get() != ti->storage().get() || impl->dtype() != ti->dtype() ||
        impl->storage_offset() != ti->storage_offset())
      continue;
    if (!std::equal(impl->sizes().begin(), impl->sizes().end(), ti->sizes().begin(), ti->sizes().end()) ||
        !std::equal(impl->strides().begin(), impl->strides().end(), ti->strides().begin(), ti->strides().end()))
      continue;
    if (!best || entry.second > *best) best = entry.second;
  }
  return best;
}

std::shared_ptr<Graph> Graph::extract(const std::vector<int>& inputs, const std::vector<int>& node_positions,
                                      const std::vector<int>& outputs, std::optional<bool> grad_enabled) const {
  auto g = std::make_shared<Graph>();
  std::vector<int> map(values_.size(), -1);
  for (int vid : inputs) {
    const Value& v = value(vid);
    STRATA_CHECK(map[vid] < 0, "compile: extract: value ", vid, " ('", v.name, "') is given twice as an input");
    Value nv = v;
    nv.origin = ValueOrigin::Input;
    nv.constant = IValue();
    int id = g->add_value(std::move(nv), v.name);
    g->inputs_.push_back(id);
    map[vid] = id;
  }
  auto ref = [&](int vid, const Node& n) {
    if (map[vid] >= 0) return map[vid];
    const Value& v = values_[vid];
    STRATA_CHECK(v.origin == ValueOrigin::Constant, "compile: extract: node '", n.op->schema().full_name(),
                 "' reads value '", v.name, "', which is neither an input of the new graph nor made by a chosen node");
    int id = g->add_value(v, v.name);
    g->constants_.push_back(id);
    map[vid] = id;
    return id;
  };
  std::vector<char> taken(nodes_.size(), 0);
  for (int pos : node_positions) {
    STRATA_CHECK(pos >= 0 && pos < static_cast<int>(nodes_.size()) && !taken[pos], "compile: extract: node positions "
                 "must be distinct and below ", nodes_.size(), " (got ", pos, ")");
    taken[pos] = 1;
    const Node& n = *nodes_[pos];
    auto c = std::make_shared<Node>(n);
    for (Arg& a : c->args) {
      if (a.kind == Arg::Kind::Value) a.value = ref(a.value, n);
      for (ArgElem& e : a.elems)
        if (e.is_value()) e.value = ref(e.value, n);
    }
    for (int& o : c->outputs) {
      STRATA_CHECK(map[o] < 0, "compile: extract: value '", values_[o].name, "' is both an input and made by node '",
                   n.op->schema().full_name(), "'");
      Value nv = values_[o];
      int id = g->add_value(std::move(nv), values_[o].name);
      map[o] = id;
      o = id;
    }
    if (grad_enabled) c->grad_enabled = *grad_enabled;
    g->append_node(std::move(c));
  }
  std::vector<int> outs;
  for (int o : outputs) {
    (void)value(o);
    if (map[o] < 0) {
      STRATA_CHECK(values_[o].origin == ValueOrigin::Constant, "compile: extract: output '", values_[o].name,
                   "' is neither an input of the new graph nor made by a chosen node");
      int id = g->add_value(values_[o], values_[o].name);
      g->constants_.push_back(id);
      map[o] = id;
    }
    outs.push_back(map[o]);
  }
  g->set_outputs(std::move(outs));
  return g;
}

void Graph::set_outputs(std::vector<int> outs) {
  for (int o : outs) (void)value(o);
  outputs_ = std::move(outs);
  changed();
}

void Graph::append_node(std::shared_ptr<Node> n) {
  STRATA_CHECK(n && n->op, "compile: append_node: a node needs an op");
  auto check_ref = [&](int vid) {
    (void)value(vid);
  };
  for (const Arg& a : n->args) {
    if (a.kind == Arg::Kind::Value) check_ref(a.value);
    for (const ArgElem& e : a.elems)
      if (e.is_value()) check_ref(e.value);
  }
  for (int o : n->outputs) {
    (void)value(o);
    STRATA_CHECK(values_[o].origin == ValueOrigin::Op && producer_[o] < 0, "compile: append_node: value ", o,
                 " ('", values_[o].name, "') is already defined");
    producer_[o] = static_cast<int>(nodes_.size());
  }
  nodes_.push_back(std::move(n));
  changed();
}

ScalarType Graph::current_autocast() {
  return autocast::is_active() ? autocast::dtype() : ScalarType::Undefined;
}

Device Graph::capture_device() const {
  for (int i : inputs_)
    if (values_[i].kind == ValueKind::Tensor) return values_[i].device.is_meta() ? Device() : values_[i].device;
  return Device();
}

int Graph::eliminate_dead_code() {
  std::vector<char> live(values_.size(), 0);
  for (int o : outputs_) live[o] = 1;
  std::vector<char> keep(nodes_.size(), 0);
  for (size_t i = nodes_.size(); i-- > 0;) {
    const Node& n = *nodes_[i];
    bool k = n.has_side_effects();
    for (int o : n.outputs) k = k || live[o];
    if (!k) continue;
    keep[i] = 1;
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Value) live[a.value] = 1;
      for (const ArgElem& e : a.elems)
        if (e.is_value()) live[e.value] = 1;
    }
  }
  std::vector<std::shared_ptr<Node>> kept;
  kept.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (keep[i]) kept.push_back(std::move(nodes_[i]));
  int removed = static_cast<int>(nodes_.size() - kept.size());
  nodes_ = std::move(kept);
  if (removed) changed();
  return removed;
}

// ---- readable listing -----------------------------------------------------------

// Note [Readable graphs]
// print_readable() writes the graph as a Python function over strata.ops, one
// line per node, each result annotated with its dtype and shape ("f32[4, 5]"),
// a comment with the node's source line whenever it changes, one with the
// autocast state whenever a node's differs from the one before (the graph's
// own state before the first node), constants read
// from self, keyword-only arguments as name=value, and arguments equal to
// their schema default left out. It is for people; nothing parses it back.

namespace {

std::string dtype_short(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "b8";
    case ScalarType::UInt8: return "u8";
    case ScalarType::Int8: return "i8";
    case ScalarType::Int16: return "i16";
    case ScalarType::Int32: return "i32";
    case ScalarType::Int64: return "i64";
    case ScalarType::Float16: return "f16";
    case ScalarType::BFloat16: return "bf16";
    case ScalarType::Float32: return "f32";
    case ScalarType::Float64: return "f64";
    default: return "?";
  }
}

std::string float_literal(double d) {
  if (std::isnan(d)) return "float('nan')";
  if (std::isinf(d)) return d > 0 ? "float('inf')" : "float('-inf')";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string scalar_literal(const Scalar& s) {
  if (s.is_bool()) return s.to_bool() ? "True" : "False";
  if (s.is_floating_point()) return float_literal(s.to_double());
  return std::to_string(s.to_int());
}

std::string string_literal(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string type_annotation(const Value& v) {
  if (v.kind != ValueKind::Tensor) return value_kind_name(v.kind);
  if (v.dtype == ScalarType::Undefined) return "None";
  std::ostringstream ss;
  if (!v.device.is_cpu()) ss << v.device.str() << " ";
  ss << dtype_short(v.dtype) << "[";
  for (size_t i = 0; i < v.sizes.size(); ++i) ss << (i ? ", " : "") << v.sizes[i];
  ss << "]";
  return ss.str();
}

}  // namespace

std::string constant_literal(const IValue& v) {
  const auto& raw = v.raw();
  if (v.is_none()) return "None";
  if (auto* b = std::get_if<bool>(&raw)) return *b ? "True" : "False";
  if (auto* i = std::get_if<int64_t>(&raw)) return std::to_string(*i);
  if (auto* d = std::get_if<double>(&raw)) return float_literal(*d);
  if (auto* s = std::get_if<Scalar>(&raw)) return scalar_literal(*s);
  if (auto* l = std::get_if<std::vector<int64_t>>(&raw)) {
    std::string out = "[";
    for (size_t i = 0; i < l->size(); ++i) out += (i ? ", " : "") + std::to_string((*l)[i]);
    return out + "]";
  }
  if (auto* s = std::get_if<std::string>(&raw)) return string_literal(*s);
  if (auto* t = std::get_if<ScalarType>(&raw)) return "strata." + std::string(dtype_name(*t));
  if (auto* d = std::get_if<Device>(&raw)) return "strata.device(" + string_literal(d->str()) + ")";
  if (auto* t = std::get_if<Tensor>(&raw)) {
    if (t->defined() && t->impl()->is_wrapped_number()) return scalar_literal(t->item());
    return "<tensor>";
  }
  return "<?>";
}

namespace {

// Whether a recorded constant equals a schema default (numbers by value).
bool same_constant(const IValue& a, const IValue& b) {
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  auto number = [](const IValue& v, double* out, int* cat) {
    const auto& r = v.raw();
    if (auto* x = std::get_if<bool>(&r)) return *out = *x, *cat = 0, true;
    if (auto* x = std::get_if<int64_t>(&r)) return *out = static_cast<double>(*x), *cat = 1, true;
    if (auto* x = std::get_if<double>(&r)) return *out = *x, *cat = 2, true;
    if (auto* x = std::get_if<Scalar>(&r)) {
      *out = x->to_double();
      *cat = x->is_bool() ? 0 : x->is_floating_point() ? 2 : 1;
      return true;
    }
    return false;
  };
  double da, db;
  int ca, cb;
  if (number(a, &da, &ca) && number(b, &db, &cb)) return ca == cb && da == db;
  const auto &ra = a.raw(), &rb = b.raw();
  if (ra.index() != rb.index()) return false;
  if (auto* x = std::get_if<std::vector<int64_t>>(&ra)) return *x == std::get<std::vector<int64_t>>(rb);
  if (auto* x = std::get_if<std::string>(&ra)) return *x == std::get<std::string>(rb);
  if (auto* x = std::get_if<ScalarType>(&ra)) return *x == std::get<ScalarType>(rb);
  if (auto* x = std::get_if<Device>(&ra)) return *x == std::get<Device>(rb);
  return false;
}

}  // namespace

std::string Graph::print_readable() const {
  std::ostringstream ss;
  ss << "def forward(self";
  for (int i : inputs_) ss << ", " << values_[i].name << ": \"" << type_annotation(values_[i]) << "\"";
  ss << "):\n";
  for (int c : constants_)
    ss << "    " << values_[c].name << ": \"" << type_annotation(values_[c]) << "\" = self." << values_[c].name << "\n";
  auto ref = [&](int vid) { return values_[vid].name; };
  auto arg_text = [&](const Arg& a) -> std::string {
    switch (a.kind) {
      case Arg::Kind::Value: return ref(a.value);
      case Arg::Kind::GraphDevice: return "self.device";
      case Arg::Kind::List: {
        std::string out = "[";
        for (size_t i = 0; i < a.elems.size(); ++i)
          out += (i ? ", " : "") + (a.elems[i].is_value() ? ref(a.elems[i].value) : constant_literal(a.elems[i].constant));
        return out + "]";
      }
      default: return constant_literal(a.constant);
    }
  };
  const std::string* last_source = nullptr;
  ScalarType autocast = base_autocast_;
  for (const auto& np : nodes_) {
    const Node& n = *np;
    if (!n.source.empty() && (!last_source || *last_source != n.source)) {
      std::string src = n.source;
      std::replace(src.begin(), src.end(), '\n', ' ');
      ss << "    # " << src << "\n";
    }
    last_source = &n.source;
    if (n.autocast != autocast) {  // the nodes from here on run under another autocast state
      autocast = n.autocast;
      ss << "    # autocast: " << (autocast == ScalarType::Undefined ? "off" : dtype_name(autocast)) << "\n";
    }
    const FunctionSchema& s = n.op->schema();
    auto is_default = [&](size_t i) {
      const Arg& a = n.args[i];
      return a.kind == Arg::Kind::Constant && !a.wrapped_number && s.args[i].default_value &&
             same_constant(a.constant, *s.args[i].default_value);
    };
    // Positional arguments up to the last one that differs from its default.
    size_t npos = 0;
    while (npos < s.args.size() && !s.args[npos].kwarg_only) ++npos;
    size_t last = npos;
    while (last > 0 && is_default(last - 1)) --last;
    std::vector<std::string> parts;
    for (size_t i = 0; i < last; ++i) parts.push_back(arg_text(n.args[i]));
    for (size_t i = npos; i < n.args.size(); ++i)
      if (!is_default(i)) parts.push_back(s.args[i].name + "=" + arg_text(n.args[i]));
    std::string callee = s.full_name();
    if (auto p = callee.find("::"); p != std::string::npos) callee.replace(p, 2, ".");
    ss << "    ";
    if (n.outputs.size() == 1) {
      const Value& o = values_[n.outputs[0]];
      ss << o.name << ": \"" << type_annotation(o) << "\" = ";
    } else if (!n.outputs.empty()) {
      for (size_t i = 0; i < n.outputs.size(); ++i) ss << (i ? ", " : "") << values_[n.outputs[i]].name;
      ss << " = ";
    }
    ss << "strata.ops." << callee << "(";
    for (size_t i = 0; i < parts.size(); ++i) ss << (i ? ", " : "") << parts[i];
    ss << ")";
    if (n.outputs.size() > 1) {
      ss << "  # ";
      for (size_t i = 0; i < n.outputs.size(); ++i) ss << (i ? ", " : "") << type_annotation(values_[n.outputs[i]]);
    }
    ss << "\n";
  }
  ss << "    return (";
  for (size_t i = 0; i < outputs_.size(); ++i) ss << (i ? ", " : "") << values_[outputs_[i]].name;
  ss << (outputs_.size() == 1 ? ",)" : ")") << "\n";
  return ss.str();
}

}  // namespace strata::compile
