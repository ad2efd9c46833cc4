// The sanitizer build must catch the bugs planted in libstrata (src/core/sanitizer_canary.h):
// each death test fails if the process survives the bug or dies without the sanitizer's report.
// In a normal build there is nothing to check and the tests are not compiled in.
#ifdef STRATA_SANITIZER_BUILD
#include <gtest/gtest.h>

#include "core/sanitizer_canary.h"

using strata::debug::Canary;
using strata::debug::sanitizer_canary;

#ifdef STRATA_TSAN_BUILD
// scripts/tsan.sh runs this with TSAN_OPTIONS=halt_on_error=1: the first report ends the process.
TEST(SanitizerCanary, DataRaceIsReported) {
  EXPECT_DEATH(sanitizer_canary(static_cast<int>(Canary::data_race), 1000), "ThreadSanitizer: data race");
}
#else
TEST(SanitizerCanary, HeapOverflowReadIsReported) {
  EXPECT_DEATH(sanitizer_canary(static_cast<int>(Canary::heap_overflow_read), 16),
               "AddressSanitizer: heap-buffer-overflow");
}

TEST(SanitizerCanary, UseAfterFreeIsReported) {
  EXPECT_DEATH(sanitizer_canary(static_cast<int>(Canary::use_after_free), 16),
               "AddressSanitizer: heap-use-after-free");
}

TEST(SanitizerCanary, SignedOverflowIsReported) {
  EXPECT_DEATH(sanitizer_canary(static_cast<int>(Canary::signed_overflow), 1),
               "runtime error: signed integer overflow");
}
#endif

TEST(SanitizerCanary, RejectsAnEmptyBuffer) {
  EXPECT_THROW(sanitizer_canary(0, 0), std::invalid_argument);
}
#endif
