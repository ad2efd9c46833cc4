"""The C++ renderer of the loop IR (Note [The loop IR and its renderer] in ir.py).

One extern "C" function per kernel: `void strata_kernel(void* const* bufs, int64_t n)` with the
inputs then the outputs in bufs. The body calls the same scalar functors as eager's CPU kernels,
with the math library declared vectorisable (backends/cpu/vector_math.h, as in eager's per-ISA
kernel files), so GCC vectorises the loop. Ranges above PARALLEL_MIN elements are split into
blocks (a multiple of every vector width) run by an OpenMP parallel for."""

from .ir import Compute, Const, Load, Store

PARALLEL_MIN = 1 << 17
BLOCK = 1 << 15


def _literal(x, dtype):
    # Exact: a hex float literal converted to the kernel dtype, like eager's wrapped numbers.
    return f"static_cast<{dtype}>({float(x).hex()})"


def _functor(f, dtype):
    if f.name == "GeluErfF32":
        return "STRATA_GELU_ERF_F32{}"
    params = ", ".join(float(p).hex() for p in f.params)
    return f"strata::fn::{f.name}{{{params}}}"


def render(kernel, header_comment=""):
    T = kernel.dtype
    out = []
    w = out.append
    if header_comment:
        w("\n".join("// " + line for line in header_comment.splitlines()))
    w("#include <cstdint>")
    w('#include "ops/pointwise_functors.h"')
    w('#include "ops/nn_functors.h"')
    w('#include "backends/cpu/vector_math.h"')
    if any(isinstance(s, Compute) and s.functor.name == "GeluErfF32" for s in kernel.body):
        w("#if defined(__AVX512F__)")
        w("#define STRATA_CPU_NS codegen")
        w('#include "backends/cpu/kernels/gelu_math.h"')
        w("#define STRATA_GELU_ERF_F32 strata::cpu::gelu_math::GeluErfF32")
        w("#else")
        w("#define STRATA_GELU_ERF_F32 strata::fn::GeluErf")
        w("#endif")
    w("")
    w('extern "C" void strata_kernel(void* const* bufs, int64_t n) {')
    for k, b in enumerate(kernel.inputs):
        w(f"  const {b.dtype}* __restrict {b.name} = static_cast<const {b.dtype}*>(bufs[{k}]);")
    for k, b in enumerate(kernel.outputs):
        w(f"  {b.dtype}* __restrict {b.name} = static_cast<{b.dtype}*>(bufs[{len(kernel.inputs) + k}]);")
    hoisted = []
    body = []
    for s in kernel.body:
        if isinstance(s, Load):
            b = kernel.inputs[s.buf]
            if b.scalar:
                hoisted.append(f"  const {b.dtype} {s.var} = {b.name}[0];")
            else:
                body.append(f"      const {b.dtype} {s.var} = {b.name}[i];")
        elif isinstance(s, Const):
            hoisted.append(f"  const {T} {s.var} = {_literal(s.value, T)};")
        elif isinstance(s, Compute):
            src = f"  // {s.source}" if s.source else ""
            body.append(f"      // {s.node}{src}")
            body.append(f"      const {T} {s.var} = {_functor(s.functor, T)}({', '.join(s.args)});")
        elif isinstance(s, Store):
            body.append(f"      {kernel.outputs[s.buf].name}[i] = {s.var};")
    out.extend(hoisted)
    w(f"  const int64_t nblocks = (n + {BLOCK} - 1) / {BLOCK};")
    w(f"#pragma omp parallel for schedule(static) if (n >= {PARALLEL_MIN})")
    w("  for (int64_t blk = 0; blk < nblocks; ++blk) {")
    w(f"    const int64_t begin = blk * {BLOCK}, end = begin + {BLOCK} < n ? begin + {BLOCK} : n;")
    w("    for (int64_t i = begin; i < end; ++i) {")
    out.extend(body)
    w("    }")
    w("  }")
    w("}")
    return "\n".join(out) + "\n"
