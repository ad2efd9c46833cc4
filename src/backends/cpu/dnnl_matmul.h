// bfloat16 matrix products written as bfloat16 by oneDNN's matmul primitive, when libdnnl.so.2 can be loaded (see
// dnnl_matmul.cpp for why). Compiled once; called by the CPU GEMM driver (blas_gemm.cpp).
#pragma once

#include <cstdint>

namespace strata::cpu::dnnl_matmul {

// c[m, n] = a[m, k] @ b[k, n], all bfloat16 (raw bits), element strides given per dimension (rows, columns);
// accumulation in float32 and one rounding to bfloat16, as torch's CPU matmul does. Returns false, touching
// nothing, when oneDNN is unavailable, disabled (STRATA_DNNL_MATMUL=0), failed its start-up check, or would run
// this layout only through its slow reference implementation; the caller then uses its own path.
bool gemm_bf16_out(int64_t m, int64_t n, int64_t k, const uint16_t* a, int64_t a_rs, int64_t a_cs, const uint16_t* b,
                   int64_t b_rs, int64_t b_cs, uint16_t* c, int64_t c_rs, int64_t c_cs);

}  // namespace strata::cpu::dnnl_matmul
