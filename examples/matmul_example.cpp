// Uses the C++ core on its own, without Python.
#include <cstdio>

#include "ops/ops.h"

int main() {
  using namespace strata;
  Tensor a = empty_tensor(std::vector<int64_t>{2, 3}, ScalarType::Float32, Device());
  fill_(a, 2.0);
  Tensor b = exp(a);
  std::printf("exp(2) = %f, shape %s\n", b.data_ptr<float>()[0], b.shape_str().c_str());
  return 0;
}
