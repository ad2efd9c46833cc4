#pragma once
// Planted bugs for the sanitizer build only (docs/HARDENING.md). The sanitizer job calls them and
// fails unless AddressSanitizer / UndefinedBehaviorSanitizer report them: a check that the
// instrumentation of libstrata (and of the Python extension, through strata._C) is really on.
// Compiled only when STRATA_SANITIZER_BUILD is defined (CMake option STRATA_SANITIZE).
#ifdef STRATA_SANITIZER_BUILD
#include <cstdint>

// A ThreadSanitizer build (-DSTRATA_SANITIZE=thread) cannot run the ASan/UBSan canaries, and the others
// cannot run the data race one.
#if defined(__SANITIZE_THREAD__)
#define STRATA_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRATA_TSAN_BUILD 1
#endif
#endif

namespace strata::debug {

enum class Canary : int {
  heap_overflow_read = 0,  // reads one element past the end of a heap buffer
  use_after_free = 1,      // reads a heap buffer after freeing it
  signed_overflow = 2,     // int32 addition that overflows (UBSan)
  data_race = 3,           // two threads add n times to one unsynchronized int64 (ThreadSanitizer)
};

// Runs the planted bug `kind` on a buffer of n elements and returns what it read (never
// returns normally in a working sanitizer build).
int64_t sanitizer_canary(int kind, int64_t n);

}  // namespace strata::debug
#endif
