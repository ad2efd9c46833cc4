#include "dispatch/schema.h"

#include <cctype>

namespace strata {

const char* arg_type_name(ArgType t) {
  switch (t) {
    case ArgType::Tensor: return "Tensor";
    case ArgType::OptTensor: return "Tensor?";
    case ArgType::TensorList: return "Tensor[]";
    case ArgType::Scalar: return "Scalar";
    case ArgType::OptScalar: return "Scalar?";
    case ArgType::Int: return "int";
    case ArgType::OptInt: return "int?";
    case ArgType::IntList: return "int[]";
    case ArgType::OptIntList: return "int[]?";
    case ArgType::Float: return "float";
    case ArgType::OptFloat: return "float?";
    case ArgType::Bool: return "bool";
    case ArgType::OptBool: return "bool?";
    case ArgType::DType: return "ScalarType";
    case ArgType::OptDType: return "ScalarType?";
    case ArgType::Str: return "str";
    case ArgType::OptStr: return "str?";
    case ArgType::OptDevice: return "Device?";
    case ArgType::TensorTuple2: return "(Tensor, Tensor)";
    case ArgType::TensorTuple3: return "(Tensor, Tensor, Tensor)";
  }
  return "?";
}

namespace {

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\n");
  size_t e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Splits on commas at bracket depth 0.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  std::string cur;
  for (char c : s) {
    if (c == '(' || c == '[') depth++;
    if (c == ')' || c == ']') depth--;
    if (c == ',' && depth == 0) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

ArgType parse_type(std::string t, bool* is_write, const std::string& schema) {
  // Drop alias annotations: Tensor(a!) / Tensor(a)
  if (auto p = t.find('('); p != std::string::npos) {
    auto q = t.find(')', p);
    *is_write = t.substr(p, q - p).find('!') != std::string::npos;
    t = t.substr(0, p) + t.substr(q + 1);
  }
  bool opt = !t.empty() && t.back() == '?';
  if (opt) t.pop_back();
  bool list = false;
  if (auto p = t.find('['); p != std::string::npos) {
    list = true;
    t = t.substr(0, p);
  }
  if (t == "Tensor") return list ? ArgType::TensorList : opt ? ArgType::OptTensor : ArgType::Tensor;
  if (t == "Scalar") return opt ? ArgType::OptScalar : ArgType::Scalar;
  if (t == "int" || t == "SymInt") {
    if (list) return opt ? ArgType::OptIntList : ArgType::IntList;
    return opt ? ArgType::OptInt : ArgType::Int;
  }
  if (t == "float") return opt ? ArgType::OptFloat : ArgType::Float;
  if (t == "bool") return opt ? ArgType::OptBool : ArgType::Bool;
  if (t == "ScalarType") return opt ? ArgType::OptDType : ArgType::DType;
  if (t == "str") return opt ? ArgType::OptStr : ArgType::Str;
  if (t == "Device") return ArgType::OptDevice;
  throw Error(str("parse_schema: unknown type '", t, "' in ", schema));
}

// std::stoll/stod accept a numeric prefix ("1.2.3" -> 1.2); a default must be one number.
int64_t parse_int(const std::string& v, const std::string& schema) {
  size_t used = 0;
  int64_t r = std::stoll(v, &used);
  STRATA_CHECK(used == v.size(), "parse_schema: bad integer '", v, "' in ", schema);
  return r;
}
double parse_double(const std::string& v, const std::string& schema) {
  size_t used = 0;
  double r = std::stod(v, &used);
  STRATA_CHECK(used == v.size(), "parse_schema: bad number '", v, "' in ", schema);
  return r;
}

IValue parse_default(const std::string& v, ArgType type, const std::string& schema) {
  if (v == "None") return IValue();
  if (v == "True") return IValue(true);
  if (v == "False") return IValue(false);
  if (v.front() == '\'' || v.front() == '"') {
    STRATA_CHECK(v.size() >= 2 && v.back() == v.front(), "parse_schema: unterminated string default ", v, " in ",
                 schema);
    return IValue(v.substr(1, v.size() - 2));
  }
  if (v.front() == '[') {
    STRATA_CHECK(v.back() == ']', "parse_schema: unterminated list default ", v, " in ", schema);
    std::vector<int64_t> l;
    for (auto& e : split_top(v.substr(1, v.size() - 2))) l.push_back(parse_int(e, schema));
    return IValue(std::move(l));
  }
  if (type == ArgType::IntList || type == ArgType::OptIntList) {
    // "int[2] stride=1" means [1, 1]: keep the single value, the binding expands it.
    return IValue(std::vector<int64_t>{parse_int(v, schema)});
  }
  if (type == ArgType::DType || type == ArgType::OptDType) {
    ScalarType st = dtype_from_name(v);
    STRATA_CHECK(st != ScalarType::Undefined, "parse_schema: bad dtype default ", v, " in ", schema);
    return IValue(st);
  }
  bool is_float = v.find_first_of(".eE") != std::string::npos && v.find("inf") == std::string::npos;
  if (v == "inf" || v == "-inf") return IValue(v == "inf" ? INFINITY : -INFINITY);
  if (type == ArgType::Float || type == ArgType::OptFloat || is_float) return IValue(parse_double(v, schema));
  if (type == ArgType::Scalar || type == ArgType::OptScalar) return IValue(Scalar(parse_int(v, schema)));
  return IValue(parse_int(v, schema));
}

}  // namespace

static FunctionSchema parse_schema_impl(const std::string& text) {
  FunctionSchema s;
  s.text = text;
  auto lp = text.find('(');
  auto arrow = text.rfind("->");
  STRATA_CHECK(lp != std::string::npos && arrow != std::string::npos, "parse_schema: malformed schema ", text);
  auto rp = text.rfind(')', arrow);
  STRATA_CHECK(lp < arrow && rp != std::string::npos && rp > lp, "parse_schema: malformed schema ", text);
  std::string name = trim(text.substr(0, lp));
  STRATA_CHECK(!name.empty(), "parse_schema: schema without an op name: ", text);
  if (auto dot = name.find('.'); dot != std::string::npos) {
    s.overload = name.substr(dot + 1);
    name = name.substr(0, dot);
    // ".foo(...)" named no op, only an overload (fuzz_schema).
    STRATA_CHECK(!name.empty() && !s.overload.empty(), "parse_schema: empty op or overload name in ", text);
  }
  s.name = name;
  bool kwonly = false;
  for (auto& a : split_top(text.substr(lp + 1, rp - lp - 1))) {
    if (a == "*") {
      kwonly = true;
      continue;
    }
    Argument arg;
    std::string decl = a, def;
    if (auto eq = a.find('='); eq != std::string::npos) {
      decl = trim(a.substr(0, eq));
      def = trim(a.substr(eq + 1));
    }
    auto sp = decl.rfind(' ');
    STRATA_CHECK(sp != std::string::npos, "parse_schema: argument without a name: '", a, "' in ", text);
    arg.name = decl.substr(sp + 1);
    std::string ty = trim(decl.substr(0, sp));
    arg.type = parse_type(ty, &arg.is_write, text);
    if (auto lb = ty.find('['); lb != std::string::npos && ty[lb + 1] != ']') {
      auto rb = ty.find(']', lb);
      STRATA_CHECK(rb != std::string::npos, "parse_schema: bad list type '", ty, "' in ", text);
      arg.list_size = static_cast<int>(parse_int(ty.substr(lb + 1, rb - lb - 1), text));
    }
    if (!def.empty()) arg.default_value = parse_default(def, arg.type, text);
    arg.kwarg_only = kwonly;
    s.args.push_back(std::move(arg));
  }
  std::string ret = trim(text.substr(arrow + 2));
  STRATA_CHECK(!ret.empty(), "parse_schema: missing return type in ", text);
  if (ret.front() == '(') {
    STRATA_CHECK(ret.back() == ')', "parse_schema: malformed return type in ", text);
    auto parts = split_top(ret.substr(1, ret.size() - 2));
    for (auto& p : parts) {
      bool w = false;
      auto sp = p.find(' ');
      std::string ty = p.substr(0, sp);
      s.returns.push_back(parse_type(ty, &w, text));
      s.return_names.push_back(sp == std::string::npos ? "" : trim(p.substr(sp + 1)));
    }
    if (s.returns.size() == 2) s.returns = {ArgType::TensorTuple2};
    if (s.returns.size() == 3) s.returns = {ArgType::TensorTuple3};
  } else {
    bool w = false;
    s.returns.push_back(parse_type(ret, &w, text));
  }
  return s;
}

FunctionSchema parse_schema(const std::string& text) {
  try {
    return parse_schema_impl(text);
  } catch (const std::logic_error& e) {  // std::stoll/stoi/stod: invalid_argument, out_of_range
    throw Error(str("parse_schema: bad number in ", text, " (", e.what(), ")"));
  }
}

}  // namespace strata
