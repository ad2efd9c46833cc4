"""The C++ renderer of the loop IR (Note [The loop IR and its renderer] in ir.py).

One extern "C" function per kernel: `void strata_kernel(void* const* bufs, int64_t n)` with the
inputs then the outputs in bufs. The body calls the same scalar functors as eager's CPU kernels,
with the math library declared vectorisable (backends/cpu/vector_math.h, as in eager's per-ISA
kernel files), so GCC vectorises the loop. Ranges above PARALLEL_MIN elements are split into
blocks (a multiple of every vector width) run by an OpenMP parallel for."""

from .ir import Compute, Const, Load, Store

PARALLEL_MIN = 1 << 17
BLOCK = 1 << 15
TILE = 64  # transposed access: 64 x 64 tiles of the two innermost dims

# Note [Render parameters]
# Every renderer takes `params`, a dict of choices that change the loops' shape but never the order in
# which any output element's value is computed or accumulated (mode="max-autotune" times them: Note
# [Autotuning] in autotune.py). An empty dict renders exactly the default source.
#   parallel_min  elements at or above which the OpenMP region runs threaded (PARALLEL_MIN)
#   threads       a num_threads clause (0: none, OpenMP's default team)
#   block         pointwise kernels: inner elements per tile (BLOCK; a multiple of every vector width)
#   tile          transposed pointwise kernels: the tile edge (TILE)
#   chunk         row kernels: rows per scheduling chunk (0: one contiguous range per thread)
#   prefetch      row kernels: 0 leaves out the prefetch of each full input's next row
#   cols_w        column reductions: columns per tile (1024 bytes of accumulators)
#   vec           a vector width in bits the kernel function is compiled for (0: the flags' width)


def _finish(out, params):
    """The kernel's source from its lines; with params["vec"] (256) the kernel function is compiled for
    that vector width (a target pragma around it: the flags prefer 512-bit vectors on AVX-512)."""
    src = "\n".join(out) + "\n"
    vec = (params or {}).get("vec")
    if vec:
        marker = 'extern "C" void strata_kernel('
        src = src.replace(marker, "#pragma GCC push_options\n"
                          f'#pragma GCC target("prefer-vector-width={int(vec)}")\n' + marker, 1)
        src += "#pragma GCC pop_options\n"
    return src


def _omp_if(params, total):
    """The num_threads and if clauses of an OpenMP parallel pragma over `total` elements."""
    params = params or {}
    t = params.get("threads", 0)
    return (f" num_threads({t})" if t else "") + f" if ({total} >= {params.get('parallel_min', PARALLEL_MIN)})"


def _literal(x, dtype):
    # Exact: a hex float literal converted to the kernel dtype, like eager's wrapped numbers.
    return f"static_cast<{dtype}>({float(x).hex()})"


def _functor(f, dtype=None):
    if f.name == "GeluErfF32":
        return "STRATA_GELU_ERF_F32{}"
    params = ", ".join(float(p).hex() for p in f.params)
    return f"strata::fn::{f.name}{{{params}}}"


def _preamble(header_comment, kernel=None):
    """The lines every kernel starts with: its comment (the fused nodes and their source lines) and
    the functor headers (special_functors.h only for a kernel that uses one of its functors: Note
    [Special functions in generated kernels] in ir.py)."""
    from .ir import SPECIAL_HEADER_FUNCTORS
    out = []
    if header_comment:
        out.append("\n".join("// " + line for line in header_comment.splitlines()))
    out += ["#include <cstdint>", '#include "ops/pointwise_functors.h"', '#include "ops/nn_functors.h"',
            '#include "backends/cpu/vector_math.h"']
    if kernel is not None and any(getattr(getattr(s, "functor", None), "name", None) in SPECIAL_HEADER_FUNCTORS
                                  for s in kernel.body):
        out.append('#include "ops/special_functors.h"')
    return out


# ---- row kernels (Note [Row kernels] in ir.py) -----------------------------------------------------

def _functor_rows(f, dtype):
    if f.name.startswith("codegen::"):
        return f"strata::{f.name}{{}}"
    return _functor(f, dtype)


EXPENSIVE = {"codegen::VExp", "Exp", "Log", "Tanh", "Sigmoid", "GeluErf", "GeluErfF32", "GeluTanh", "Silu", "Pow"}
_LANE_OPS = {"sum": "Sum", "mean": "Sum", "amax": "Max", "amin": "Min"}
PAIRWISE_BLOCK = 4096


def _gelu_erf_defines(kernel, w):
    """The float32 erf-GELU functor (eager's AVX-512 kernel where the ISA has it) for a kernel
    whose body uses it; every renderer that emits functors calls this."""
    if not any(getattr(getattr(s, "functor", None), "name", None) == "GeluErfF32" for s in kernel.body):
        return
    w("#if defined(__AVX512F__)")
    w("#define STRATA_CPU_NS codegen")
    w('#include "backends/cpu/kernels/gelu_math.h"')
    w("#define STRATA_GELU_ERF_F32 strata::cpu::gelu_math::GeluErfF32")
    w("#else")
    w("#define STRATA_GELU_ERF_F32 strata::fn::GeluErf")
    w("#endif")


def _bind_buffers(kernel, w, ctype, into=None):
    """The kernel's typed, restrict pointers into `bufs`: its inputs (const) then its outputs;
    ctype maps a buffer's dtype to its C type. into {output index: input index}: those outputs are
    stored through their input's pointer, which is then not const, and get no pointer of their own
    (one restrict pointer per storage; Note [Reinplacing] in reinplace.py)."""
    written = set((into or {}).values())
    for k, b in enumerate(kernel.inputs):
        t = ctype(b.dtype)
        if k in written:
            w(f"  {t}* __restrict {b.name} = static_cast<{t}*>(bufs[{k}]);")
        else:
            w(f"  const {t}* __restrict {b.name} = static_cast<const {t}*>(bufs[{k}]);")
    for k, b in enumerate(kernel.outputs):
        if into and k in into:
            continue
        t = ctype(b.dtype)
        w(f"  {t}* __restrict {b.name} = static_cast<{t}*>(bufs[{len(kernel.inputs) + k}]);")


def render_rows(kernel, header_comment="", params=None):
    """`void strata_kernel(void* const* bufs, int64_t rows, int64_t cols)`: parallel over rows."""
    from .ir import Cast, Reduce
    T = kernel.dtype
    out = _preamble(header_comment, kernel)
    w = out.append
    w("#include <memory>")
    w('#include "compile/codegen_rows.h"')
    _gelu_erf_defines(kernel, w)
    w("")
    w('extern "C" void strata_kernel(void* const* bufs, int64_t rows, int64_t cols) {')
    _bind_buffers(kernel, w, lambda d: d)  # row kernels name C types already
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

    avail = set()  # cached elem vars already stored to their scratch row by an earlier loop

    def closure_vars(root, stop=()):
        need, stack = set(), [root]
        while stack:
            v = stack.pop()
            if v in need or kernel.level.get(v) != "elem":
                continue
            need.add(v)
            if v not in stop:
                stack.extend(deps.get(v, []))
        return need

    def closure(root):
        # The elem statements `root` needs, in body order; a cached value is read back, not recomputed.
        need = closure_vars(root, avail)
        return [s for s in kernel.body if getattr(s, "var", None) in need and not isinstance(s, (Reduce, Store))]

    # Note [Cached elem values]: an expensive elem value (EXPENSIVE functors) that a reduction loop
    # computes and the final loop needs again is stored by the reduction loop to a per-thread scratch
    # row and read back (softmax's exp); the value is the same either way.
    final_roots = [st.var for st in kernel.body if isinstance(st, Store) and kernel.outputs[st.buf].kind != "row"]
    in_final = set().union(*[closure_vars(v) for v in final_roots]) if final_roots else set()
    cached = []
    for st in kernel.body:
        if isinstance(st, Reduce):
            for v in sorted(closure_vars(st.arg) & in_final):
                if isinstance(defs.get(v), Compute) and defs[v].functor.name in EXPENSIVE and v not in cached:
                    cached.append(v)

    def loop_lines(root, ind):
        lines = []
        for d in closure(root):
            if d.var in avail:
                lines.append(f"{ind}const {ct(d.var)} {d.var} = scr_{d.var}[j];")
            else:
                lines.append(elem_line(d, ind))
                if d.var in cached:
                    lines.append(f"{ind}scr_{d.var}[j] = {d.var};")
        return lines

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
            rowb.extend(loop_lines(s.arg, "      "))
            if s.op == "simd_sum":
                rowb.append(f"      {s.var} += static_cast<{s.acc}>({s.arg});")
            else:
                rowb.append(f"      const {s.acc} c_{s.var} = static_cast<{s.acc}>({s.arg}) - {s.extra};")
                rowb.append(f"      {s.var} = strata::codegen::Fma{{}}(c_{s.var}, c_{s.var}, {s.var});")
            rowb.append("    }")
        elif isinstance(s, Reduce):
            rowb.append(f"    // {s.node}")
            body = loop_lines(s.arg, "        ")
            A, v = s.acc, s.var
            if s.op == "softmax_max":
                # Note [Softmax row max lanes]: four vectors of lanes, not one. A max is exact, so any
                # grouping gives eager's value (eager's 16 lanes in sequence; a signed zero or a NaN's payload
                # may come from another element, which changes no output bit of softmax), and four
                # independent compare-and-select chains run at the load rate where one was bound by the
                # chain's latency (~6 cycles a vector: 0.4 ms of a 4096 x 1024 softmax on one core).
                ML = 64 if A == "float" else 32
                rowb += [f"    {A} {v}_mx[{ML}];",
                         f"    for (int l = 0; l < {ML}; ++l) {v}_mx[l] = -std::numeric_limits<{A}>::infinity();",
                         f"    int64_t {v}_i = 0;",
                         f"    for (; {v}_i + {ML} <= cols; {v}_i += {ML}) {{",
                         "#pragma omp simd",
                         f"      for (int l = 0; l < {ML}; ++l) {{",
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
                         f"    for (int l = 1; l < {ML}; ++l) {v} = ({v}_mx[l] > {v} || {v}_mx[l] != {v}_mx[l]) ? {v}_mx[l] : {v};"]
        if isinstance(s, Reduce) and s.op not in ("simd_sum", "simd_sqdev", "softmax_max"):
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
        if isinstance(s, Reduce):
            avail.update(c for c in cached if c in closure_vars(s.arg))
        elif isinstance(s, (Compute, Cast)) and lvl == "row":
            rowb.append(elem_line(s, "    "))
        elif isinstance(s, Store):
            b = kernel.outputs[s.buf]
            if b.kind == "row":
                rowb.append(f"    {b.name}[r] = {s.var};")
            else:
                final_stores.append(s)
    out.extend(hoisted)
    w(f"#pragma omp parallel{_omp_if(params, 'rows * cols')}")
    w("  {")
    for v in cached:
        w(f"  std::unique_ptr<{ct(v)}[]> scr_{v}_row(new {ct(v)}[cols]);")
        w(f"  {ct(v)}* __restrict scr_{v} = scr_{v}_row.get();")
    chunk = (params or {}).get("chunk", 0)
    w(f"#pragma omp for schedule(static{f', {chunk}' if chunk else ''})")
    w("  for (int64_t r = 0; r < rows; ++r) {")
    for b in kernel.inputs:
        if b.kind == "full" and (params or {}).get("prefetch", 1):
            step = 64 // (8 if b.dtype == "double" else 4 if b.dtype == "float" else 1)
            w(f"    if (r + 1 < rows) for (int64_t j = 0; j < cols; j += {step}) __builtin_prefetch({b.name} + (r + 1) * cols + j);")
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
        out.extend(f"      const {ct(d.var)} {d.var} = scr_{d.var}[j];" if d.var in avail else elem_line(d, "      ")
                   for d in need)
        for s in final_stores:
            w(f"      {kernel.outputs[s.buf].name}[r * cols + j] = {s.var};")
        w("    }")
    w("  }")
    w("  }")
    w("}")
    return _finish(out, params)


# ---- general pointwise kernels (Note [Pointwise kernels with index expressions] in ir.py) -----------

def _pw_literal(value, dtype):
    from .ir import CTYPES
    t = CTYPES[dtype]
    if dtype == "bool":
        return "true" if value else "false"
    if dtype.startswith(("int", "uint")):
        v = int(value)
        return f"static_cast<{t}>({v}LL)" if v != -(1 << 63) else "std::numeric_limits<int64_t>::min()"
    x = float(value)
    if x != x:
        body = "std::numeric_limits<float>::quiet_NaN()" if dtype != "float64" else "std::numeric_limits<double>::quiet_NaN()"
    elif x in (float("inf"), float("-inf")):
        body = ("-" if x < 0 else "") + ("std::numeric_limits<double>::infinity()" if dtype == "float64"
                                         else "std::numeric_limits<float>::infinity()")
    else:
        # Exact: the value was already converted to dtype by eager's cast.
        body = float(x).hex() if dtype == "float64" else f"static_cast<float>({float(x).hex()})"
    return f"{t}({body})" if dtype in ("float16", "bfloat16") else f"static_cast<{t}>({body})"


def is_tiled(kernel):
    """Whether render_pointwise writes the kernel's loops as tiles of its two innermost dims (an operand
    with an inner stride other than 0 or 1, both dims at least 2 * TILE)."""
    sizes, nd = kernel.sizes, len(kernel.sizes)
    return (not kernel.flat and nd >= 2 and sizes[-1] >= 2 * TILE and sizes[-2] >= 2 * TILE
            and any(b.strides[-1] not in (0, 1) for b in kernel.inputs + kernel.outputs))


def render_pointwise(kernel, header_comment="", params=None, into=None):
    """`void strata_kernel(void* const* bufs, int64_t n)`: for a flat kernel n is the element count;
    otherwise the geometry is in the code and n is unused. The iteration space is cut into tiles (an
    outer index and a block of at most BLOCK inner elements), run by an OpenMP parallel for above
    PARALLEL_MIN elements; the inner loop has constant strides (1, 0 or k) so GCC vectorises it.
    into {output index: input index} (flat kernels): those outputs are stored into their input's
    buffer (each element after it was loaded, in the same iteration)."""
    assert not into or kernel.flat
    from .ir import CTYPES, PwCompute, PwConst, PwGather, PwLoad, PwStore
    out = _preamble(header_comment, kernel)
    w = out.append
    w('#include "compile/codegen_pointwise.h"')
    _gelu_erf_defines(kernel, w)
    w("")
    w('extern "C" void strata_kernel(void* const* bufs, int64_t n) {')
    bufs = kernel.inputs + kernel.outputs
    _bind_buffers(kernel, w, CTYPES.__getitem__, into)
    gathers = [s for s in kernel.body if isinstance(s, PwGather)]
    if gathers:
        # Every index is checked before anything is written (eager raises IndexError on a bad one): the
        # status word after the outputs tells the caller, which then runs the nodes through eager.
        loads = {s.var: kernel.inputs[s.buf] for s in kernel.body if isinstance(s, PwLoad)}
        w(f"  int64_t* status = static_cast<int64_t*>(bufs[{len(kernel.inputs) + len(kernel.outputs)}]);")
        w("  bool bad = false;")
        for g in gathers:
            ib, tb = loads[g.index], kernel.inputs[g.buf]
            w(f"  for (int64_t k = 0; k < {ib.count}; ++k)")
            w(f"    bad |= static_cast<uint64_t>(static_cast<int64_t>({ib.name}[k])) >= {tb.rows}u;")
        w("  if (bad) {")
        w("    *status = 1;")
        w("    return;")
        w("  }")
    dtype_of = {}
    hoisted, body = [], []
    nd = len(kernel.sizes)

    def inner_index(b):
        if not any(b.strides):   # a broadcast scalar: loaded once, before the loops (hoisted below)
            return "0"
        if kernel.flat:
            return "i"
        st = b.strides[-1] if nd else 0
        base = f"o_{b.name}"
        return base if st == 0 else f"{base} + i" if st == 1 else f"{base} + i * {st}"

    invariant = set()  # vars that do not change along the inner loop (hoisted per tile)
    for s in kernel.body:
        if isinstance(s, PwLoad):
            b = kernel.inputs[s.buf]
            dtype_of[s.var] = b.dtype
            line = f"const {CTYPES[b.dtype]} {s.var} = {b.name}[{inner_index(b)}];"
            if not any(b.strides):
                hoisted.append("  " + line)
                invariant.add(s.var)
            else:
                body.append("      " + line)
        elif isinstance(s, PwConst):
            dtype_of[s.var] = s.dtype
            hoisted.append(f"  const {CTYPES[s.dtype]} {s.var} = {_pw_literal(s.value, s.dtype)};")
            invariant.add(s.var)
        elif isinstance(s, PwCompute):
            dtype_of[s.var] = s.dtype
            C, R = CTYPES[s.cdtype], CTYPES[s.dtype]
            if s.functor.name == "Cast":
                expr = f"strata::codegen::convert<{R}>({s.args[0]})"
            elif s.functor.name == "Select":
                c, a, b2 = s.args
                cv = lambda v: v if dtype_of[v] == s.cdtype else f"strata::codegen::convert<{C}>({v})"  # noqa: E731
                expr = f"strata::codegen::select<{C}, {R}>({c}, {cv(a)}, {cv(b2)})"
            else:
                conv = [a if dtype_of[a] == s.cdtype else f"strata::codegen::convert<{C}>({a})" for a in s.args]
                expr = f"strata::codegen::apply<{C}, {R}>({_functor(s.functor)}, {', '.join(conv)})"
            src = f"  // {s.source}" if s.source else ""
            line = f"const {R} {s.var} = {expr};"
            if all(a in invariant for a in s.args):
                hoisted.append(f"  // {s.node}{src}")
                hoisted.append("  " + line)
                invariant.add(s.var)
            else:
                body.append(f"      // {s.node}{src}")
                body.append("      " + line)
        elif isinstance(s, PwGather):
            b = kernel.inputs[s.buf]
            dtype_of[s.var] = b.dtype
            body.append(f"      // {s.node}")
            body.append(f"      const {CTYPES[b.dtype]} {s.var} = "
                        f"{b.name}[static_cast<int64_t>({s.index}) * {b.row_stride} + {inner_index(b)}];")
        elif isinstance(s, PwStore):
            b = kernel.outputs[s.buf]
            name = kernel.inputs[into[s.buf]].name if into and s.buf in into else b.name
            body.append(f"      {name}[{inner_index(b)}] = {s.var};")
    out.extend(hoisted)
    blk_n = (params or {}).get("block", BLOCK)
    if kernel.flat:
        w(f"  const int64_t nblocks = (n + {blk_n} - 1) / {blk_n};")
        w(f"#pragma omp parallel for schedule(static){_omp_if(params, 'n')}")
        w("  for (int64_t blk = 0; blk < nblocks; ++blk) {")
        w(f"    const int64_t begin = blk * {blk_n}, end = begin + {blk_n} < n ? begin + {blk_n} : n;")
        w("    for (int64_t i = begin; i < end; ++i) {")
        out.extend(body)
        w("    }")
        w("  }")
        w("}")
        return _finish(out, params)
    sizes = kernel.sizes
    if is_tiled(kernel):
        _tiled_loops(w, out, body, kernel, params)
        return _finish(out, params)
    inner = sizes[-1] if nd else 1
    outer = 1
    for s in sizes[:-1]:
        outer *= s
    nblk = max(1, -(-inner // blk_n))
    total = outer * inner
    w(f"  (void)n;")
    w(f"#pragma omp parallel for schedule(static){_omp_if(params, total)}")
    w(f"  for (int64_t tile = 0; tile < {outer * nblk}; ++tile) {{")
    w(f"    const int64_t blk = tile % {nblk}, o = tile / {nblk};")
    w(f"    const int64_t begin = blk * {blk_n}, end = begin + {blk_n} < {inner} ? begin + {blk_n} : {inner};")
    # Outer dims' indices from o (innermost outer dim varies fastest), then each buffer's offset.
    _outer_indices(w, sizes[:-1])
    for b in bufs:
        terms = [f"i{d} * {b.strides[d]}" for d in range(nd - 1) if b.strides[d]]
        w(f"    const int64_t o_{b.name} = {' + '.join(terms) if terms else '0'};")
    w("    (void)begin;")
    w("    for (int64_t i = begin; i < end; ++i) {")
    out.extend(body)
    w("    }")
    w("  }")
    w("}")
    return _finish(out, params)


# ---- column reductions (Note [Column reductions] in fusion.py) ----------------------------------------

_COL_OPS = {"sum": "Sum", "mean": "Sum", "amax": "Max", "amin": "Min"}


def render_columns(kernel, header_comment="", params=None):
    """A flat pointwise body over [outer, R, K] whose value `var` is reduced over R, in the
    reduction engine's column order: `void strata_kernel(void* const* bufs, int64_t n)`, n unused."""
    from .ir import CTYPES, PwCompute, PwConst, PwLoad, PwStore
    op, rvar, R, K, outer, ro = kernel.reduce
    out = _preamble(header_comment, kernel)
    w = out.append
    w('#include "compile/codegen_pointwise.h"')
    w('#include "compile/codegen_rows.h"')
    _gelu_erf_defines(kernel, w)
    w("")
    w('extern "C" void strata_kernel(void* const* bufs, int64_t n) {')
    _bind_buffers(kernel, w, CTYPES.__getitem__)
    A = CTYPES[kernel.outputs[ro].dtype]
    dtype_of, hoisted, body, invariant = {}, [], [], set()
    for s in kernel.body:
        if isinstance(s, PwLoad):
            b = kernel.inputs[s.buf]
            dtype_of[s.var] = b.dtype
            if not any(b.strides):
                hoisted.append(f"  const {CTYPES[b.dtype]} {s.var} = {b.name}[0];")
                invariant.add(s.var)
            else:
                body.append(("load", s.var, f"const {CTYPES[b.dtype]} {{v}} = {b.name}[{{ix}}];"))
        elif isinstance(s, PwConst):
            dtype_of[s.var] = s.dtype
            hoisted.append(f"  const {CTYPES[s.dtype]} {s.var} = {_pw_literal(s.value, s.dtype)};")
            invariant.add(s.var)
        elif isinstance(s, PwCompute):
            dtype_of[s.var] = s.dtype
            C, Rt = CTYPES[s.cdtype], CTYPES[s.dtype]
            conv = lambda a: a if dtype_of[a] == s.cdtype else f"strata::codegen::convert<{C}>({a})"  # noqa: E731
            if s.functor.name == "Cast":
                expr = f"strata::codegen::convert<{Rt}>({{0}})"
            elif s.functor.name == "Select":
                expr = f"strata::codegen::select<{C}, {Rt}>({{0}}, {{1}}, {{2}})"
            else:
                expr = f"strata::codegen::apply<{C}, {Rt}>({_functor(s.functor)}, " + \
                    ", ".join(f"{{{j}}}" for j in range(len(s.args))) + ")"
            args = [a if s.functor.name in ("Cast",) or (s.functor.name == "Select" and j == 0) else conv(a)
                    for j, a in enumerate(s.args)]
            line = f"const {Rt} {{v}} = {expr};"
            if all(a in invariant for a in s.args):
                hoisted.append("  " + _fill(line.replace("{v}", s.var), args))
                invariant.add(s.var)
            else:
                body.append(("compute", s.var, line, args, s.node))
        elif isinstance(s, PwStore):
            body.append(("store", s.var, kernel.outputs[s.buf].name))
    out.extend(hoisted)

    def elem(ix, suf, ind):
        """The body at element index ix, its vars suffixed (the max/min fold computes four rows)."""
        ren = lambda v: v if v in invariant else v + suf  # noqa: E731
        lines = []
        for item in body:
            if item[0] == "load":
                lines.append(ind + item[2].replace("{v}", ren(item[1])).replace("{ix}", ix))
            elif item[0] == "compute":
                _, var, line, args, node = item
                args = [_rename_operand(a, ren) for a in args]
                lines.append(f"{ind}// {node}")
                lines.append(ind + _fill(line.replace("{v}", ren(var)), args))
            else:
                lines.append(f"{ind}{item[2]}[{ix}] = {ren(item[1])};")
        return lines, ren(rvar)

    Op = f"strata::codegen::{_COL_OPS[op]}"
    W = (params or {}).get("cols_w") or 1024 // (8 if A == "double" else 4)
    nblk = -(-K // W)
    w(f"  constexpr int64_t W = {W}, R = {R}, K = {K};")
    w(f"#pragma omp parallel for schedule(static){_omp_if(params, outer * R * K)}")
    w(f"  for (int64_t t = 0; t < {outer * nblk}; ++t) {{")
    w(f"    const int64_t oo = t / {nblk}, j0 = (t % {nblk}) * W, w = K - j0 < W ? K - j0 : W;")
    w("    const int64_t base = oo * R * K + j0;")
    w(f"    {A} acc[W], tot[W], big[W];")
    w(f"    for (int64_t j = 0; j < W; ++j) acc[j] = tot[j] = big[j] = {Op}::identity<{A}>();")
    w("    int64_t r = 0;")
    if op in ("amax", "amin"):
        w("    if (w == W) {")
        w("      for (; r + 4 <= R; r += 4) {")
        w("#pragma omp simd")
        w("        for (int64_t j = 0; j < W; ++j) {")
        vs = []
        for q in range(4):
            lines, v = elem(f"base + (r + {q}) * K + j", f"_{q}", "          ")
            out.extend(lines)
            vs.append(f"static_cast<{A}>({v})")
        w(f"          const {A} f_ = {Op}::combine({Op}::combine({vs[0]}, {vs[1]}), {Op}::combine({vs[2]}, {vs[3]}));")
        w(f"          acc[j] = {Op}::combine(acc[j], f_);")
        w("        }")
        w("      }")
        w("    }")
    else:
        w("    int64_t rows = 0, groups = 0;")
    w("    for (; r < R; ++r) {")
    lines, v = elem("base + r * K + j", "", "          ")
    w("      if (w == W) {")
    w("#pragma omp simd")
    w("        for (int64_t j = 0; j < W; ++j) {")
    out.extend(lines)
    w(f"          acc[j] = {Op}::combine(acc[j], static_cast<{A}>({v}));")
    w("        }")
    w("      } else {")
    w("        for (int64_t j = 0; j < w; ++j) {")
    out.extend(lines)
    w(f"          acc[j] = {Op}::combine(acc[j], static_cast<{A}>({v}));")
    w("        }")
    w("      }")
    if op in ("sum", "mean"):
        w("      if (++rows == 256) {")
        w("        rows = 0;")
        w(f"        for (int64_t j = 0; j < W; ++j) {{ tot[j] = tot[j] + acc[j]; acc[j] = {A}(0); }}")
        w("        if (++groups == 256) {")
        w("          groups = 0;")
        w(f"          for (int64_t j = 0; j < W; ++j) {{ big[j] = big[j] + tot[j]; tot[j] = {A}(0); }}")
        w("        }")
        w("      }")
    w("    }")
    o = kernel.outputs[ro].name
    fin = f"(big[j] + (tot[j] + acc[j])) / static_cast<{A}>(R)" if op == "mean" else \
        "big[j] + (tot[j] + acc[j])" if op == "sum" else \
        f"{Op}::combine(big[j], {Op}::combine(tot[j], acc[j]))"
    w(f"    for (int64_t j = 0; j < w; ++j) {o}[oo * K + j0 + j] = {fin};")
    w("  }")
    w("}")
    return _finish(out, params)


def _fill(line, args):
    for j, a in enumerate(args):
        line = line.replace(f"{{{j}}}", a)
    return line


def _rename_operand(a, ren):
    """An operand (a variable, or `strata::codegen::convert<C>(v)`) with its variable renamed."""
    if a.startswith("strata::codegen::convert<"):
        k = a.rindex("(")
        return a[:k + 1] + ren(a[k + 1:-1]) + ")"
    return ren(a)


def _outer_indices(w, outer_sizes):
    """Emits i0..i{k-1}, the indices of the outer dims (sizes outer_sizes, the last varying fastest), from
    the flat outer index `o` of a tile loop."""
    if not outer_sizes:
        w("    (void)o;")
        return
    w("    int64_t rem = o;")
    for d in range(len(outer_sizes) - 1, -1, -1):
        w(f"    const int64_t i{d} = rem % {outer_sizes[d]};")
        if d:
            w(f"    rem /= {outer_sizes[d]};")


def _tiled_loops(w, out, body, kernel, params=None):
    """The loops of a pointwise kernel with an operand whose innermost stride is not 1 (a transposed
    read or write): TILE x TILE tiles of the two innermost dims, so the lines a strided operand
    touches in one row are reused by the next rows of the tile while still in cache. (The loop
    variables must not look like the body's c<N> / x<N> / t<N> values.)"""
    sizes = kernel.sizes
    nd = len(sizes)
    NR, NC = sizes[-2], sizes[-1]
    outer = 1
    for s in sizes[:-2]:
        outer *= s
    tile = (params or {}).get("tile", TILE)
    nrb, ncb = -(-NR // tile), -(-NC // tile)
    w(f"  (void)n;")
    w(f"#pragma omp parallel for schedule(static){_omp_if(params, outer * NR * NC)}")
    w(f"  for (int64_t tile = 0; tile < {outer * nrb * ncb}; ++tile) {{")
    w(f"    const int64_t cb = tile % {ncb}, rb = (tile / {ncb}) % {nrb}, o = tile / {ncb * nrb};")
    _outer_indices(w, sizes[:-2])
    w(f"    const int64_t col_lo = cb * {tile}, col_hi = col_lo + {tile} < {NC} ? col_lo + {tile} : {NC};")
    w(f"    const int64_t row_hi = rb * {tile} + {tile} < {NR} ? rb * {tile} + {tile} : {NR};")
    w(f"    for (int64_t r = rb * {tile}; r < row_hi; ++r) {{")
    for b in kernel.inputs + kernel.outputs:
        terms = [f"i{d} * {b.strides[d]}" for d in range(nd - 2) if b.strides[d]]
        if b.strides[nd - 2]:
            terms.append(f"r * {b.strides[nd - 2]}")
        w(f"      const int64_t o_{b.name} = {' + '.join(terms) if terms else '0'};")
    w("      for (int64_t i = col_lo; i < col_hi; ++i) {")
    out.extend("  " + line for line in body)
    w("      }")
    w("    }")
    w("  }")
    w("}")
