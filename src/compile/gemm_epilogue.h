// GEMM epilogues of generated kernel plans (Note [GEMM epilogues] in gemm_epilogue.cpp): a float32 matrix product
// whose bias, activation or elementwise product with another tensor is applied by oneDNN's matmul primitive as it
// writes each output block, so the product is not read back by a second pass.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::compile {

// Descriptor fields, one int64 each (a generated kernel bakes them in and passes a pointer to them).
enum GemmEpilogueField : int {
  kGemmM, kGemmN, kGemmK,         // out[m, n] = a[m, k] @ b[k, n]
  kGemmARs, kGemmACs,             // a's element strides (rows, columns)
  kGemmBRs, kGemmBCs,             // b's element strides
  kGemmBias,                      // 1: a bias[n] (contiguous) follows b in bufs
  kGemmAct,                       // GemmAct
  kGemmMul,                       // 1: a contiguous [m, n] factor follows (the bias) in bufs: out = act(...) * it
  kGemmFields
};
enum GemmAct : int64_t { kActNone = 0, kActRelu = 1, kActGeluErf = 2, kActGeluTanh = 3, kActSilu = 4 };

// Runs the product: bufs = a, b, [bias], [factor], out (contiguous [m, n]). Returns 0, or nonzero when oneDNN is
// unavailable or declined this layout (nothing written; the caller runs the graph's nodes instead).
extern "C" int strata_gemm_epilogue(const int64_t* desc, void* const* bufs);

// Whether strata_gemm_epilogue serves this descriptor (builds and caches the primitive).
bool gemm_epilogue_supported(const std::vector<int64_t>& desc);

}  // namespace strata::compile
