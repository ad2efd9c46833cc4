// std:: names for NVRTC-compiled kernels: libcu++'s cuda::std (see the shim headers beside this one), plus
// the CUDA math functions libcu++ 13.0 leaves out of cuda::std (erf, erfc, fma), taken from the global overloads
// that NVRTC declares for float and double.
#pragma once
namespace std {
using namespace cuda::std;
using ::erf;
using ::erfc;
using ::fma;
}  // namespace std
