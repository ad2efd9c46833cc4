// Uses the C++ core on its own, without Python: a small matmul on real data.
#include <cstdio>

#include "backends/cpu/blas.h"
#include "ops/ops.h"

int main() {
  using namespace strata;
  // a = [[1, 2, 3], [4, 5, 6]], b = [[7, 8], [9, 10], [11, 12]]
  Tensor a = empty_tensor(std::vector<int64_t>{2, 3}, ScalarType::Float32, Device());
  Tensor b = empty_tensor(std::vector<int64_t>{3, 2}, ScalarType::Float32, Device());
  for (int i = 0; i < 6; ++i) a.data_ptr<float>()[i] = float(i + 1), b.data_ptr<float>()[i] = float(i + 7);
  Tensor c = matmul(a, b);
  const float* p = c.data_ptr<float>();
  std::printf("a @ b, shape %s:\n[[%g, %g],\n [%g, %g]]\n", c.shape_str().c_str(), p[0], p[1], p[2], p[3]);
  bool ok = p[0] == 58 && p[1] == 64 && p[2] == 139 && p[3] == 154;
  std::printf("expected [[58, 64], [139, 154]]: %s\n", ok ? "ok" : "MISMATCH");
  std::printf("BLAS: %s\n", cpublas::backend_name().c_str());
  return ok ? 0 : 1;
}
