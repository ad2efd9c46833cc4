// Helpers shared by creation.cpp and random.cpp (factories with dtype=,
// device= and out=), and the stubs of their CPU kernels.
#pragma once

#include "core/generator.h"
#include "ops/op_list.h"
#include "ops/stub.h"

namespace strata {

// The dtype a factory produces: dtype= if given, else out's, else `dflt`.
// An explicit dtype= that disagrees with out= is an error, as in torch.
ScalarType factory_dtype(const char* op, OptDType dtype, const std::optional<Tensor>& out, ScalarType dflt);
Device factory_device(const char* op, OptDevice device, const std::optional<Tensor>& out);
// Allocates the result of a factory: a fresh contiguous tensor (out= is
// filled afterwards by finish_factory).
Tensor factory_alloc(const char* op, IntArrayRef size, ScalarType dtype, Device device);
// Copies result into out= (resizing it) and returns the tensor to hand back.
Tensor finish_factory(const char* op, const Tensor& result, const std::optional<Tensor>& out);

// arange / linspace / logspace over a contiguous output.
struct RangeParams {
  enum Kind : int8_t { Arange, Linspace, Logspace } kind = Arange;
  double start = 0, end = 0, step = 0, base = 10;      // floating dtypes (and linspace's integer step)
  int64_t istart = 0, iend = 0, istep = 0, steps = 0;  // integral dtypes
};
using RangeFn = void (*)(const Tensor& out, const RangeParams& p);
STRATA_DECLARE_STUB(range_stub, RangeFn);

// What a random op produces per element (see Note [CPU random streams] in
// core/generator.h).
enum class RandomKind : int8_t { Uniform, Normal, Bernoulli, Exponential, IntRange };

// Random fills of a contiguous output, drawn from `gen` (locked by the caller)
// in element order. `contiguous_layout` tells whether the op's real output is
// contiguous: torch's normal takes its vectorised path only then.
struct RandomParams {
  RandomKind kind = RandomKind::Uniform;
  double a = 0, b = 1;   // uniform [a, b); normal mean a, std b; bernoulli p = a; exponential lambda = a
  int64_t low = 0;       // IntRange: low + (bits % range); range 0 = all 2^64 values
  uint64_t range = 0;
  std::optional<bool> wide_draws;  // IntRange: 64-bit draws; unset: by range
  bool contiguous_layout = true;
  CPUGenerator* gen = nullptr;
};
using RandomFn = void (*)(const Tensor& out, const RandomParams& p);
STRATA_DECLARE_STUB(random_stub, RandomFn);
// A uniform permutation of 0..n-1 into a contiguous output of n elements.
using RandpermFn = void (*)(const Tensor& out, int64_t n, CPUGenerator& gen);
STRATA_DECLARE_STUB(randperm_stub, RandpermFn);

}  // namespace strata
