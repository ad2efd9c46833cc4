// CPU inner loops for TensorIterator. Included only by the kernel files that
// are compiled once per ISA level; everything here lives in a namespace named
// after that level so the builds never share an instantiation.
#pragma once

#include <tuple>
#include <utility>

#include "backends/cpu/parallel.h"
#include "backends/cpu/vector_math.h"
#include "ops/tensor_iterator.h"

#ifndef STRATA_CPU_NS
#error "loops.h is for kernel files compiled per ISA level (STRATA_CPU_NS unset)"
#endif

namespace strata::cpu {
inline namespace STRATA_CPU_NS {

template <typename F>
struct fn_traits : fn_traits<decltype(&F::operator())> {};
template <typename C, typename R, typename... A>
struct fn_traits<R (C::*)(A...) const> {
  using ret = R;
  using args = std::tuple<A...>;
  static constexpr size_t arity = sizeof...(A);
};

template <size_t I, size_t S, typename P, typename V>
STRATA_ALWAYS_INLINE auto pick(P ptr, int64_t i, V sv) {
  if constexpr (I == S)
    return sv;
  else
    return ptr[i];
}

template <typename F, typename R, typename Args, size_t... I>
STRATA_ALWAYS_INLINE void loop_contig(char** p, int64_t n, const F& f, std::index_sequence<I...>) {
  R* __restrict out = reinterpret_cast<R*>(p[0]);
  std::tuple<const std::tuple_element_t<I, Args>*...> in{
      reinterpret_cast<const std::tuple_element_t<I, Args>*>(p[I + 1])...};
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = f(std::get<I>(in)[i]...);
}

template <size_t S, typename F, typename R, typename Args, size_t... I>
STRATA_ALWAYS_INLINE void loop_scalar(char** p, int64_t n, const F& f, std::index_sequence<I...>) {
  R* __restrict out = reinterpret_cast<R*>(p[0]);
  std::tuple<const std::tuple_element_t<I, Args>*...> in{
      reinterpret_cast<const std::tuple_element_t<I, Args>*>(p[I + 1])...};
  const auto sv = *std::get<S>(in);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = f(pick<I, S>(std::get<I>(in), i, sv)...);
}

template <typename F, typename R, typename Args, size_t... I>
STRATA_ALWAYS_INLINE void loop_strided(char** p, const int64_t* st, int64_t n, const F& f,
                                       std::index_sequence<I...>) {
  for (int64_t i = 0; i < n; ++i) {
    *reinterpret_cast<R*>(p[0] + i * st[0]) =
        f(*reinterpret_cast<const std::tuple_element_t<I, Args>*>(p[I + 1] + i * st[I + 1])...);
  }
}

template <typename F, typename R, typename Args, size_t... I>
STRATA_ALWAYS_INLINE void try_scalar_loops(char** p, const int64_t* st, int64_t n, const F& f, bool* done,
                                           std::index_sequence<I...> seq) {
  // Input S is broadcast (stride 0) and every other operand is contiguous.
  auto attempt = [&]<size_t S>() {
    if (*done || st[S + 1] != 0) return;
    bool ok = st[0] == sizeof(R);
    ((ok = ok && (I == S || st[I + 1] == sizeof(std::tuple_element_t<I, Args>))), ...);
    if (ok) {
      loop_scalar<S, F, R, Args>(p, n, f, seq);
      *done = true;
    }
  };
  (attempt.template operator()<I>(), ...);
}

// Broadcast-scalar fast paths are generated only for 4- and 8-byte operand
// types: they are the common case, and each extra variant costs compile time
// in every ISA build.
template <typename R, typename Args>
constexpr bool wide_operands() {
  return []<size_t... I>(std::index_sequence<I...>) {
    return (sizeof(R) >= 4 || std::is_same_v<R, bool>) && ((sizeof(std::tuple_element_t<I, Args>) >= 4) && ...);
  }(std::make_index_sequence<std::tuple_size_v<Args>>{});
}

// Runs f over every element of it: out = f(in0, in1, ...). f takes and returns
// the operands' storage types.
template <typename F>
void cpu_kernel(const TensorIterator& it, const F& f) {
  using traits = fn_traits<F>;
  using R = typename traits::ret;
  using Args = typename traits::args;
  constexpr size_t N = traits::arity;
  auto seq = std::make_index_sequence<N>{};
  // One contiguous run that one thread does: straight to the vector loop,
  // without the run walker's index arithmetic (tiny ops).
  if (it.ndim() == 1 && it.numel() <= kGrainSize) {
    bool contig = it.stride_bytes(0, 0) == sizeof(R);
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((contig = contig && it.stride_bytes(I + 1, 0) == sizeof(std::tuple_element_t<I, Args>)), ...);
    }(seq);
    if (contig) {
      char* p[N + 1];
      for (size_t o = 0; o <= N; ++o) p[o] = it.data(static_cast<int>(o));
      loop_contig<F, R, Args>(p, it.numel(), f, seq);
      return;
    }
  }
  parallel_for(0, it.numel(), kGrainSize, [&](int64_t b, int64_t e) {
    it.for_each_run(b, e, [&](char** p, const int64_t* st, int64_t n) {
      bool contig = st[0] == sizeof(R);
      [&]<size_t... I>(std::index_sequence<I...>) {
        ((contig = contig && st[I + 1] == sizeof(std::tuple_element_t<I, Args>)), ...);
      }(seq);
      if (contig) {
        loop_contig<F, R, Args>(p, n, f, seq);
        return;
      }
      if constexpr (N >= 1 && N <= 3 && wide_operands<R, Args>()) {
        bool done = false;
        try_scalar_loops<F, R, Args>(p, st, n, f, &done, seq);
        if (done) return;
      }
      loop_strided<F, R, Args>(p, st, n, f, seq);
    });
  });
}

// The same over a 0-input iterator (fill, arange-like generators): f(linear index).
template <typename R, typename F>
void cpu_generate(const TensorIterator& it, const F& f) {
  parallel_for(0, it.numel(), kGrainSize, [&](int64_t b, int64_t e) {
    int64_t idx = b;
    it.for_each_run(b, e, [&](char** p, const int64_t* st, int64_t n) {
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<R*>(p[0] + i * st[0]) = f(idx + i);
      idx += n;
    });
  });
}

}  // namespace STRATA_CPU_NS
}  // namespace strata::cpu

// Registers fn as this ISA level's CPU kernel for stub.
#define STRATA_REGISTER_CPU_KERNEL(stub, fn)                                       \
  static ::strata::StubRegistrar<decltype(&fn)> STRATA_UNIQUE(strata_stub_reg_)( \
      stub, STRATA_CPU_CAP, &fn)

namespace strata::cpu {
inline namespace STRATA_CPU_NS {

template <typename F>
decltype(auto) visit_floating(ScalarType t, const char* op, F&& f) {
  switch (t) {
    case ScalarType::Float16: return f.template operator()<Half>();
    case ScalarType::BFloat16: return f.template operator()<BFloat16>();
    case ScalarType::Float32: return f.template operator()<float>();
    case ScalarType::Float64: return f.template operator()<double>();
    default: throw NotImplementedError(str(op, ": not implemented for dtype ", dtype_name(t)));
  }
}
// float32 and float64 only (kernels that compute 16-bit floats by converting first).
template <typename F>
decltype(auto) visit_float32_64(ScalarType t, const char* op, F&& f) {
  if (t == ScalarType::Float32) return f.template operator()<float>();
  if (t == ScalarType::Float64) return f.template operator()<double>();
  throw NotImplementedError(str(op, ": no CPU kernel for dtype ", dtype_name(t)));
}
template <typename F>
decltype(auto) visit_integral(ScalarType t, const char* op, F&& f) {
  switch (t) {
    case ScalarType::Bool: return f.template operator()<bool>();
    case ScalarType::UInt8: return f.template operator()<uint8_t>();
    case ScalarType::Int8: return f.template operator()<int8_t>();
    case ScalarType::Int16: return f.template operator()<int16_t>();
    case ScalarType::Int32: return f.template operator()<int32_t>();
    case ScalarType::Int64: return f.template operator()<int64_t>();
    default: throw NotImplementedError(str(op, ": not implemented for dtype ", dtype_name(t)));
  }
}

struct VisitAll {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const { return visit_dtype(t, std::forward<F>(f)); }
};
struct VisitFloat {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const { return visit_floating(t, "op", std::forward<F>(f)); }
};
struct VisitAllAndComplex {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const { return visit_dtype_and_complex(t, std::forward<F>(f)); }
};
struct VisitFloatAndComplex {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const {
    if (t == ScalarType::ComplexFloat) return f.template operator()<std::complex<float>>();
    if (t == ScalarType::ComplexDouble) return f.template operator()<std::complex<double>>();
    return visit_floating(t, "op", std::forward<F>(f));
  }
};
struct VisitEveryDtype {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const { return visit_all_dtypes(t, std::forward<F>(f)); }
};
struct VisitIntegral {
  template <typename F>
  decltype(auto) operator()(ScalarType t, F&& f) const { return visit_integral(t, "op", std::forward<F>(f)); }
};


// out = op(in) computed in opmath, all of one dtype.
template <typename Op>
void unary_kernel(TensorIterator& it, const Op& op, bool float_only) {
  auto body = [&]<typename T>() {
    cpu_kernel(it, [op](T a) -> T { return static_cast<T>(op(static_cast<opmath_t<T>>(a))); });
  };
  if (float_only) visit_floating(it.common_dtype(), "unary op", body);
  else visit_dtype(it.common_dtype(), body);
}
// The same for an op that also takes complex64/complex128 (see Note [Complex
// and barebones-unsigned kernels] in ops/pointwise.cpp).
template <typename Op>
void unary_kernel_complex(TensorIterator& it, const Op& op, bool float_only) {
  ScalarType t = it.common_dtype();
  if (t == ScalarType::ComplexFloat)
    cpu_kernel(it, [op](std::complex<float> a) -> std::complex<float> { return op(a); });
  else if (t == ScalarType::ComplexDouble)
    cpu_kernel(it, [op](std::complex<double> a) -> std::complex<double> { return op(a); });
  else
    unary_kernel(it, op, float_only);
}
template <typename Op, typename Visit = VisitAll>
void unary_bool_kernel(TensorIterator& it, const Op& op, Visit visit = {}) {
  visit(it.input(0).dtype(), [&]<typename T>() {
    cpu_kernel(it, [op](T a) -> bool { return op(static_cast<opmath_t<T>>(a)); });
  });
}
template <typename Op, typename Visit>
void binary_kernel(TensorIterator& it, const Op& op, Visit visit) {
  visit(it.common_dtype(), [&]<typename T>() {
    using O = opmath_t<T>;
    cpu_kernel(it, [op](T a, T b) -> T { return static_cast<T>(op(static_cast<O>(a), static_cast<O>(b))); });
  });
}
template <typename Op, typename Visit = VisitAll>
void binary_bool_kernel(TensorIterator& it, const Op& op, Visit visit = {}) {
  visit(it.common_dtype(), [&]<typename T>() {
    using O = opmath_t<T>;
    cpu_kernel(it, [op](T a, T b) -> bool { return op(static_cast<O>(a), static_cast<O>(b)); });
  });
}

}  // namespace STRATA_CPU_NS
}  // namespace strata::cpu
