// Exceptions carry the facts (op, shapes, dtypes, devices). Each class maps to
// the Python exception that PyTorch raises in the same situation.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace strata {

struct Error : std::runtime_error {  // -> RuntimeError
  using std::runtime_error::runtime_error;
};
struct TypeError : Error {  // -> TypeError
  using Error::Error;
};
struct ValueError : Error {  // -> ValueError
  using Error::Error;
};
struct IndexError : Error {  // -> IndexError
  using Error::Error;
};
struct NotImplementedError : Error {  // -> NotImplementedError
  using Error::Error;
};
struct OutOfMemoryError : Error {  // -> MemoryError (torch.OutOfMemoryError on CUDA)
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream ss;
  (ss << ... << args);
  return ss.str();
}
}  // namespace detail

template <typename... Args>
std::string str(const Args&... args) {
  return detail::str_cat(args...);
}

}  // namespace strata

#define STRATA_CONCAT_IMPL(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_IMPL(a, b)
#define STRATA_UNIQUE(prefix) STRATA_CONCAT(prefix, __COUNTER__)

// Raise E with the streamed message when cond is false. Not compiled out in release.
#define STRATA_CHECK_T(E, cond, ...)                      \
  do {                                                    \
    if (__builtin_expect(!(cond), 0)) {                   \
      throw E(::strata::detail::str_cat(__VA_ARGS__));    \
    }                                                     \
  } while (0)
#define STRATA_CHECK(cond, ...) STRATA_CHECK_T(::strata::Error, cond, __VA_ARGS__)
#define STRATA_CHECK_TYPE(cond, ...) STRATA_CHECK_T(::strata::TypeError, cond, __VA_ARGS__)
#define STRATA_CHECK_VALUE(cond, ...) STRATA_CHECK_T(::strata::ValueError, cond, __VA_ARGS__)
#define STRATA_CHECK_INDEX(cond, ...) STRATA_CHECK_T(::strata::IndexError, cond, __VA_ARGS__)
