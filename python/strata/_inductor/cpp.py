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


# ---- row kernels (Note [Row kernels] in ir.py) -----------------------------------------------------

def _functor_rows(f, dtype):
    if f.name.startswith("codegen::"):
        return f"strata::{f.name}{{}}"
    return _functor(f, dtype)


_LANE_OPS = {"sum": "Sum", "mean": "Sum", "amax": "Max", "amin": "Min"}
PAIRWISE_BLOCK = 4096


def render_rows(kernel, header_comment=""):
    """`void strata_kernel(void* const* bufs, int64_t rows, int64_t cols)`: parallel over rows."""
    from .ir import Cast, Reduce
    T = kernel.dtype
    out = []
    w = out.append
    if header_comment:
        w("\n".join("// " + line for line in header_comment.splitlines()))
    w("#include <cstdint>")
    w('#include "ops/pointwise_functors.h"')
    w('#include "ops/nn_functors.h"')
    w('#include "backends/cpu/vector_math.h"')
    w('#include "compile/codegen_rows.h"')
    w("")
    w('extern "C" void strata_kernel(void* const* bufs, int64_t rows, int64_t cols) {')
    for k, b in enumerate(kernel.inputs):
        w(f"  const {b.dtype}* __restrict {b.name} = static_cast<const {b.dtype}*>(bufs[{k}]);")
    for k, b in enumerate(kernel.outputs):
        w(f"  {b.dtype}* __restrict {b.name} = static_cast<{b.dtype}*>(bufs[{len(kernel.inputs) + k}]);")
    ct = lambda v: kernel.ctype.get(v, T)  # noqa: E731
    defs = {}  # elem var -> statement
    deps = {}
    for s in kernel.body:
        if isinstance(s, (Load, Const, Compute, Cast)):
            defs[s.var] = s
            deps[s.var] = list(s.args) if isinstance(s, Compute) else [s.arg] if isinstance(s, Cast) else []

    def elem_line(s, ind):
        if isinstance(s, Load):
            b = kernel.inputs[s.buf]
            idx = "j" if b.kind == "col" else "r * cols + j"
            return f"{ind}const {b.dtype} {s.var} = {b.name}[{idx}];"
        if isinstance(s, Cast):
            return f"{ind}const {s.dtype} {s.var} = static_cast<{s.dtype}>({s.arg});"
        src = f"  // {s.source}" if s.source else ""
        return (f"{ind}// {s.node}{src}\n"
                f"{ind}const {ct(s.var)} {s.var} = {_functor_rows(s.functor, T)}({', '.join(s.args)});")

    def closure(root):
        # The elem statements `root` needs, in body order.
        need, stack = set(), [root]
        while stack:
            v = stack.pop()
            if v in need or kernel.level.get(v) != "elem":
                continue
            need.add(v)
            stack.extend(deps.get(v, []))
        return [s for s in kernel.body if getattr(s, "var", None) in need and not isinstance(s, (Reduce, Store))]

    hoisted, rowb, final_stores = [], [], []
    for s in kernel.body:
        lvl = kernel.level.get(getattr(s, "var", None))
        if isinstance(s, Const):
            hoisted.append(f"  const {ct(s.var)} {s.var} = {_literal(s.value, ct(s.var))};")
        elif isinstance(s, Load):
            b = kernel.inputs[s.buf]
            if b.kind == "scalar":
                hoisted.append(f"  const {b.dtype} {s.var} = {b.name}[0];")
            elif b.kind == "row":
                rowb.append(f"    const {b.dtype} {s.var} = {b.name}[r];")
        elif isinstance(s, Reduce) and s.op in ("simd_sum", "simd_sqdev"):
            # Written inline as eager writes these loops (a lambda through the header's template is
            # not vectorised by GCC inside the OpenMP region).
            rowb.append(f"    // {s.node}")
            rowb.append(f"    {s.acc} {s.var} = 0;")
            rowb.append(f"#pragma omp simd reduction(+ : {s.var})")
            rowb.append("    for (int64_t j = 0; j < cols; ++j) {")
            rowb.extend(elem_line(d, "      ") for d in closure(s.arg))
            if s.op == "simd_sum":
                rowb.append(f"      {s.var} += static_cast<{s.acc}>({s.arg});")
            else:
                rowb.append(f"      const {s.acc} c_{s.var} = static_cast<{s.acc}>({s.arg}) - {s.extra};")
                rowb.append(f"      {s.var} = strata::codegen::Fma{{}}(c_{s.var}, c_{s.var}, {s.var});")
            rowb.append("    }")
        elif isinstance(s, Reduce):
            rowb.append(f"    // {s.node}")
            body = [elem_line(d, "        ") for d in closure(s.arg)]
            A, v = s.acc, s.var
            if s.op == "softmax_max":
                rowb += [f"    {A} {v}_mx[16];",
                         f"    for (int l = 0; l < 16; ++l) {v}_mx[l] = -std::numeric_limits<{A}>::infinity();",
                         f"    int64_t {v}_i = 0;",
                         f"    for (; {v}_i + 16 <= cols; {v}_i += 16) {{",
                         "#pragma omp simd",
                         "      for (int l = 0; l < 16; ++l) {",
                         f"        const int64_t j = {v}_i + l;", *body,
                         f"        const {A} x_ = static_cast<{A}>({s.arg});",
                         f"        {v}_mx[l] = (x_ > {v}_mx[l] || x_ != x_) ? x_ : {v}_mx[l];",
                         "      }", "    }",
                         f"    for (int l = 0; {v}_i + l < cols; ++l) {{",
                         f"      const int64_t j = {v}_i + l;", *body,
                         f"      const {A} x_ = static_cast<{A}>({s.arg});",
                         f"      {v}_mx[l] = (x_ > {v}_mx[l] || x_ != x_) ? x_ : {v}_mx[l];",
                         "    }",
                         f"    {A} {v} = {v}_mx[0];",
                         f"    for (int l = 1; l < 16; ++l) {v} = ({v}_mx[l] > {v} || {v}_mx[l] != {v}_mx[l]) ? {v}_mx[l] : {v};"]
                continue
            op = f"strata::codegen::{_LANE_OPS[s.op]}"
            L = max(8, 128 // (8 if A == "double" else 4))
            nb = max(1, -(-kernel.cols // PAIRWISE_BLOCK))
            rowb += [f"    {A} {v}_part[{nb}];",
                     f"    for (int64_t {v}_b = 0; {v}_b < {nb}; ++{v}_b) {{",
                     f"      const int64_t b0 = {v}_b * {PAIRWISE_BLOCK}, n0 = cols - b0 < {PAIRWISE_BLOCK} ? cols - b0 : {PAIRWISE_BLOCK};",
                     f"      {A} acc[{L}];",
                     f"      for (int l = 0; l < {L}; ++l) acc[l] = {op}::identity<{A}>();",
                     "      int64_t i = 0;",
                     f"      for (; i + {L} <= n0; i += {L}) {{",
                     "#pragma omp simd",
                     f"        for (int l = 0; l < {L}; ++l) {{",
                     "          const int64_t j = b0 + i + l;", *["  " + x for x in body],
                     f"          acc[l] = {op}::combine(acc[l], static_cast<{A}>({s.arg}));",
                     "        }", "      }",
                     "      for (int l = 0; i + l < n0; ++l) {",
                     "        const int64_t j = b0 + i + l;", *body,
                     f"        acc[l] = {op}::combine(acc[l], static_cast<{A}>({s.arg}));",
                     "      }",
                     f"      for (int w = {L // 2}; w > 0; w /= 2)",
                     f"        for (int l = 0; l < w; ++l) acc[l] = {op}::combine(acc[l], acc[l + w]);",
                     f"      {v}_part[{v}_b] = acc[0];",
                     "    }",
                     f"    const {A} {v} = strata::codegen::combine_blocks<{op}, {A}>({v}_part, cols)"
                     + (f" / static_cast<{A}>(cols);" if s.op == "mean" else ";")]
        elif isinstance(s, (Compute, Cast)) and lvl == "row":
            rowb.append(elem_line(s, "    ").replace("\n", "\n"))
        elif isinstance(s, Store):
            b = kernel.outputs[s.buf]
            if b.kind == "row":
                rowb.append(f"    {b.name}[r] = {s.var};")
            else:
                final_stores.append(s)
    out.extend(hoisted)
    w(f"#pragma omp parallel for schedule(static) if (rows * cols >= {PARALLEL_MIN})")
    w("  for (int64_t r = 0; r < rows; ++r) {")
    out.extend(rowb)
    if final_stores:
        need = []
        for s in final_stores:
            for d in closure(s.var):
                if d not in need:
                    need.append(d)
        need.sort(key=kernel.body.index)
        w("#pragma omp simd")
        w("    for (int64_t j = 0; j < cols; ++j) {")
        out.extend(elem_line(d, "      ") for d in need)
        for s in final_stores:
            w(f"      {kernel.outputs[s.buf].name}[r * cols + j] = {s.var};")
        w("    }")
    w("  }")
    w("}")
    return "\n".join(out) + "\n"
