// Discrete Fourier transforms on the CPU through oneMKL's DFTI interface (torch.fft's library on x86 too),
// loaded with dlopen at first use: the build needs neither MKL nor its headers, and a missing library only
// makes the FFT ops raise (see Note [FFT library] in ops/fft.cpp and docs/DESIGN.md, "FFT").
#pragma once

#include <cstdint>
#include <vector>

namespace strata::cpu::dft {

// True once libmkl_rt is loaded and exports the DFTI functions.
bool available();
// Why available() is false, for error messages (where Strata looked, and how to install MKL).
const char* unavailable_reason();

enum class Kind { C2C, R2C, C2R };

// One batch of transforms over `lengths` (the real signal's sizes for R2C/C2R; the complex side holds
// lengths.back() / 2 + 1 elements along its last dim). Strides and distances count elements of the side's own
// type (complex or real); `in`/`out` never alias. `howmany` transforms sit `in_dist`/`out_dist` apart. The result
// is multiplied by `scale`. C2C runs forward (sign -1) or backward (+1); R2C is always forward and C2R always
// backward. `dbl` picks double precision. Raises strata::Error when MKL refuses the layout.
struct Geometry {
  Kind kind = Kind::C2C;
  bool dbl = false;
  bool forward = true;
  std::vector<int64_t> lengths, in_strides, out_strides;
  int64_t howmany = 1, in_dist = 0, out_dist = 0;
  double scale = 1.0;
};
void execute(const Geometry& g, const void* in, void* out);

}  // namespace strata::cpu::dft
