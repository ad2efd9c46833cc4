// What the dispatcher costs on a tiny op: add on two 4-element float32 tensors, where the arithmetic is negligible and
// every nanosecond is bookkeeping. Each benchmark peels off one layer, so the differences between them are the cost
// of that layer:
//   CallOp           strata::add(a, b): key-set computation + TLS + table lookup + kernel (+ result allocation)
//   KernelDirect     the registered CPU kernel called through its function pointer: no dispatch at all
//   CallBoxed        call_boxed with a Stack of IValues (what the Python binding uses)
//   *Out variants    the same with a preallocated out= tensor, so the allocator is not in the measurement
//   KeySet           collecting the key set from the arguments and applying TLS include/exclude and fallthrough
//   Lookup           the table load for a computed key set
//   TlsExcludeGuard  constructing and destroying an ExcludeDispatchKeyGuard (what no_grad and every layer do)
// Run: build/bench/bench_dispatch [--benchmark_format=json]
#include <benchmark/benchmark.h>

#include "ops/ops.h"

namespace {

using namespace strata;

using AddKernel = Tensor (*)(DispatchKeySet, const Tensor&, const Tensor&, const Scalar&, const std::optional<Tensor>&);

struct Inputs {
  Tensor a, b, out;
  Inputs() {
    const int64_t shape[] = {4};
    a = empty_tensor(shape, ScalarType::Float32, Device(DeviceType::CPU));
    b = empty_tensor(shape, ScalarType::Float32, Device(DeviceType::CPU));
    out = empty_tensor(shape, ScalarType::Float32, Device(DeviceType::CPU));
    float* pa = static_cast<float*>(a.data_ptr());
    float* pb = static_cast<float*>(b.data_ptr());
    for (int i = 0; i < 4; ++i) pa[i] = float(i), pb[i] = 0.5f;
  }
};

Inputs& inputs() {
  static Inputs in;
  return in;
}

AddKernel cpu_add_kernel() {
  void* fn = op_entry(OpId::add).kernel_for(DispatchKey::CPU).unboxed;
  return reinterpret_cast<AddKernel>(fn);
}

void CallOp(benchmark::State& st) {
  Inputs& in = inputs();
  for (auto _ : st) benchmark::DoNotOptimize(add(in.a, in.b));
}
BENCHMARK(CallOp);

void KernelDirect(benchmark::State& st) {
  Inputs& in = inputs();
  AddKernel k = cpu_add_kernel();
  if (!k) return st.SkipWithError("add has no unboxed CPU kernel");
  DispatchKeySet ks(DispatchKey::CPU);
  for (auto _ : st) benchmark::DoNotOptimize(k(ks, in.a, in.b, Scalar(1), std::nullopt));
}
BENCHMARK(KernelDirect);

void CallBoxed(benchmark::State& st) {
  Inputs& in = inputs();
  const OperatorEntry& op = op_entry(OpId::add);
  Stack s;
  for (auto _ : st) {
    s.clear();
    s.emplace_back(in.a);
    s.emplace_back(in.b);
    s.emplace_back(Scalar(1));
    s.emplace_back(std::nullopt);
    call_boxed(op, s);
    benchmark::DoNotOptimize(s.data());
  }
}
BENCHMARK(CallBoxed);

void CallOpOut(benchmark::State& st) {
  Inputs& in = inputs();
  std::optional<Tensor> out = in.out;
  for (auto _ : st) benchmark::DoNotOptimize(add(in.a, in.b, 1, out));
}
BENCHMARK(CallOpOut);

void KernelDirectOut(benchmark::State& st) {
  Inputs& in = inputs();
  AddKernel k = cpu_add_kernel();
  if (!k) return st.SkipWithError("add has no unboxed CPU kernel");
  std::optional<Tensor> out = in.out;
  DispatchKeySet ks(DispatchKey::CPU);
  for (auto _ : st) benchmark::DoNotOptimize(k(ks, in.a, in.b, Scalar(1), out));
}
BENCHMARK(KernelDirectOut);

void CallBoxedOut(benchmark::State& st) {
  Inputs& in = inputs();
  const OperatorEntry& op = op_entry(OpId::add);
  Stack s;
  for (auto _ : st) {
    s.clear();
    s.emplace_back(in.a);
    s.emplace_back(in.b);
    s.emplace_back(Scalar(1));
    s.emplace_back(in.out);
    call_boxed(op, s);
    benchmark::DoNotOptimize(s.data());
  }
}
BENCHMARK(CallBoxedOut);

void KeySet(benchmark::State& st) {
  Inputs& in = inputs();
  const OperatorEntry& op = op_entry(OpId::add);
  for (auto _ : st) {
    DispatchKeySet ks;
    detail::collect_keys(ks, in.a);
    detail::collect_keys(ks, in.b);
    benchmark::DoNotOptimize(apply_tls(ks, op));
  }
}
BENCHMARK(KeySet);

void Lookup(benchmark::State& st) {
  const OperatorEntry& op = op_entry(OpId::add);
  DispatchKeySet ks(DispatchKey::CPU);
  for (auto _ : st) {
    benchmark::DoNotOptimize(ks);
    benchmark::DoNotOptimize(&op.lookup(ks));
  }
}
BENCHMARK(Lookup);

void TlsExcludeGuard(benchmark::State& st) {
  for (auto _ : st) {
    ExcludeDispatchKeyGuard g(DispatchKeySet(DispatchKey::Autograd));
    benchmark::ClobberMemory();
  }
}
BENCHMARK(TlsExcludeGuard);

}  // namespace

BENCHMARK_MAIN();
