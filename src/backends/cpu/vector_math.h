// Note [Vector math through libmvec]
// Declaring the C math functions with the OpenMP "simd" attribute lets the compiler
// call glibc's vector versions (libmvec, e.g. _ZGVeN16v_expf for 16 floats under
// AVX-512) when it vectorises a loop of std::exp. Accuracy is within 4 ulp, which
// is inside every tolerance PyTorch documents for these ops. Included only by the
// per-ISA kernel files (loops.h).
#pragma once

#include <cmath>

extern "C" {
__attribute__((simd("notinbranch"))) float acosf(float) noexcept;
__attribute__((simd("notinbranch"))) double acos(double) noexcept;
__attribute__((simd("notinbranch"))) float asinf(float) noexcept;
__attribute__((simd("notinbranch"))) double asin(double) noexcept;
__attribute__((simd("notinbranch"))) float atanf(float) noexcept;
__attribute__((simd("notinbranch"))) double atan(double) noexcept;
__attribute__((simd("notinbranch"))) float cbrtf(float) noexcept;
__attribute__((simd("notinbranch"))) double cbrt(double) noexcept;
__attribute__((simd("notinbranch"))) float cosf(float) noexcept;
__attribute__((simd("notinbranch"))) double cos(double) noexcept;
__attribute__((simd("notinbranch"))) float coshf(float) noexcept;
__attribute__((simd("notinbranch"))) double cosh(double) noexcept;
__attribute__((simd("notinbranch"))) float erff(float) noexcept;
__attribute__((simd("notinbranch"))) double erf(double) noexcept;
__attribute__((simd("notinbranch"))) float erfcf(float) noexcept;
__attribute__((simd("notinbranch"))) double erfc(double) noexcept;
__attribute__((simd("notinbranch"))) float expf(float) noexcept;
__attribute__((simd("notinbranch"))) double exp(double) noexcept;
__attribute__((simd("notinbranch"))) float exp10f(float) noexcept;
__attribute__((simd("notinbranch"))) double exp10(double) noexcept;
__attribute__((simd("notinbranch"))) float exp2f(float) noexcept;
__attribute__((simd("notinbranch"))) double exp2(double) noexcept;
__attribute__((simd("notinbranch"))) float expm1f(float) noexcept;
__attribute__((simd("notinbranch"))) double expm1(double) noexcept;
__attribute__((simd("notinbranch"))) float logf(float) noexcept;
__attribute__((simd("notinbranch"))) double log(double) noexcept;
__attribute__((simd("notinbranch"))) float log10f(float) noexcept;
__attribute__((simd("notinbranch"))) double log10(double) noexcept;
__attribute__((simd("notinbranch"))) float log1pf(float) noexcept;
__attribute__((simd("notinbranch"))) double log1p(double) noexcept;
__attribute__((simd("notinbranch"))) float log2f(float) noexcept;
__attribute__((simd("notinbranch"))) double log2(double) noexcept;
__attribute__((simd("notinbranch"))) float sinf(float) noexcept;
__attribute__((simd("notinbranch"))) double sin(double) noexcept;
__attribute__((simd("notinbranch"))) float sinhf(float) noexcept;
__attribute__((simd("notinbranch"))) double sinh(double) noexcept;
__attribute__((simd("notinbranch"))) float tanf(float) noexcept;
__attribute__((simd("notinbranch"))) double tan(double) noexcept;
__attribute__((simd("notinbranch"))) float tanhf(float) noexcept;
__attribute__((simd("notinbranch"))) double tanh(double) noexcept;
__attribute__((simd("notinbranch"))) float asinhf(float) noexcept;
__attribute__((simd("notinbranch"))) double asinh(double) noexcept;
__attribute__((simd("notinbranch"))) float acoshf(float) noexcept;
__attribute__((simd("notinbranch"))) double acosh(double) noexcept;
__attribute__((simd("notinbranch"))) float atanhf(float) noexcept;
__attribute__((simd("notinbranch"))) double atanh(double) noexcept;
__attribute__((simd("notinbranch"))) float atan2f(float, float) noexcept;
__attribute__((simd("notinbranch"))) double atan2(double, double) noexcept;
__attribute__((simd("notinbranch"))) float powf(float, float) noexcept;
__attribute__((simd("notinbranch"))) double pow(double, double) noexcept;
__attribute__((simd("notinbranch"))) float hypotf(float, float) noexcept;
__attribute__((simd("notinbranch"))) double hypot(double, double) noexcept;
}
