#include "ops/op_list.h"

namespace strata {

namespace {
struct BuiltinDecl {
  const char* schema;
  uint32_t flags;
  const char* full_name;
};
// Full names are derived from the schema text at first use.
std::vector<std::string>& builtin_names() {
  static std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const char* s : {
#define STRATA_OP(id, schema, sig, flags) schema,
#include "ops/decl/all.def"
#undef STRATA_OP
         }) {
      std::string t(s);
      v.push_back(t.substr(0, t.find('(')));
    }
    return v;
  }();
  return names;
}
}  // namespace

const char* op_entry_name(OpId id) { return builtin_names()[static_cast<int>(id)].c_str(); }

void register_builtin_schemas(Dispatcher& d) {
  static const BuiltinDecl decls[] = {
#define STRATA_OP(id, schema, sig, flags) {schema, static_cast<uint32_t>(flags), #id},
#include "ops/decl/all.def"
#undef STRATA_OP
  };
  int i = 0;
  for (const auto& decl : decls) d.def(decl.schema, decl.flags, i++);
}

}  // namespace strata
