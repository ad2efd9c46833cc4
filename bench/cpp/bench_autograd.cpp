// What recording an autograd node costs on a tiny op: add/mul on two 4-element float32 tensors, where the arithmetic
// is negligible and the difference from the no-grad call is the autograd layer (finding the inputs that need grad,
// creating the node with its edges and saved state, giving the result its history, and freeing all that again when
// the result dies at the end of the iteration):
//   AddNoGrad            add(a, b) on plain tensors: the baseline, never enters the autograd layer
//   AddOneRequiresGrad   add(a, b) where only a requires grad (b's edge is empty)
//   AddBothRequireGrad   add(a, b) where both require grad (what bench/suite.py's overhead.add_requires_grad runs)
//   MulBothRequireGrad   mul(a, b): the derivative saves both inputs
//   AddBoxedRequiresGrad call_boxed with a Stack (the Python binding's path)
//   ChainBackward        y = (a * b + a).sum(); backward: a whole small graph, recording plus the engine
// Run: build/bench/bench_autograd [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include "autograd/engine.h"
#include "autograd/variable.h"
#include "ops/ops.h"

namespace {

using namespace strata;

Tensor tiny(float fill) {
  const int64_t shape[] = {4};
  Tensor t = empty_tensor(shape, ScalarType::Float32, Device(DeviceType::CPU));
  float* p = static_cast<float*>(t.data_ptr());
  for (int i = 0; i < 4; ++i) p[i] = fill + float(i);
  return t;
}

struct Inputs {
  Tensor a, b, ga, gb;  // ga, gb require grad
  Inputs() : a(tiny(0)), b(tiny(0.5f)), ga(tiny(0)), gb(tiny(0.5f)) {
    autograd::set_requires_grad(ga, true);
    autograd::set_requires_grad(gb, true);
  }
};

Inputs& inputs() {
  static Inputs in;
  return in;
}

void AddNoGrad(benchmark::State& st) {
  Inputs& in = inputs();
  for (auto _ : st) benchmark::DoNotOptimize(add(in.a, in.b));
}
BENCHMARK(AddNoGrad);

void AddOneRequiresGrad(benchmark::State& st) {
  Inputs& in = inputs();
  for (auto _ : st) benchmark::DoNotOptimize(add(in.ga, in.b));
}
BENCHMARK(AddOneRequiresGrad);

void AddBothRequireGrad(benchmark::State& st) {
  Inputs& in = inputs();
  for (auto _ : st) benchmark::DoNotOptimize(add(in.ga, in.gb));
}
BENCHMARK(AddBothRequireGrad);

void MulBothRequireGrad(benchmark::State& st) {
  Inputs& in = inputs();
  for (auto _ : st) benchmark::DoNotOptimize(mul(in.ga, in.gb));
}
BENCHMARK(MulBothRequireGrad);

void AddBoxedRequiresGrad(benchmark::State& st) {
  Inputs& in = inputs();
  const OperatorEntry& op = op_entry(OpId::add);
  Stack s;
  for (auto _ : st) {
    s.clear();
    s.emplace_back(in.ga);
    s.emplace_back(in.gb);
    s.emplace_back(Scalar(1));
    s.emplace_back(std::nullopt);
    call_boxed(op, s);
    benchmark::DoNotOptimize(s.data());
  }
}
BENCHMARK(AddBoxedRequiresGrad);

void ChainBackward(benchmark::State& st) {
  Inputs& in = inputs();
  for (auto _ : st) {
    Tensor y = sum(add(mul(in.ga, in.gb), in.ga));
    autograd::run_backward({y}, {}, {}, autograd::BackwardOptions{});
    benchmark::DoNotOptimize(y);
  }
  autograd::set_grad(in.ga, Tensor());
  autograd::set_grad(in.gb, Tensor());
}
BENCHMARK(ChainBackward);

}  // namespace

BENCHMARK_MAIN();
