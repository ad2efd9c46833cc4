"""The CUDA C renderer of the loop IR (Note [The loop IR and its renderer] in ir.py).

Note [Generated CUDA kernels]
The same PwKernel / RowKernel that cpp.py renders for the CPU becomes one `extern "C" __global__` function,
compiled by NVRTC (cuda_compile.py). The body calls the scalar functors of src/ops/pointwise_functors.h and
nn_functors.h through strata::codegen::apply / convert / select exactly as cpp.py does (the functors are
STRATA_HD: __host__ __device__ under a CUDA compiler), so eager, the C++ kernels and the GPU kernels share one
definition of every op. Under NVRTC the standard headers and core/dtype.h come from
src/backends/cuda/nvrtc_include (libcu++ in std::, __half / __nv_bfloat16 as strata::Half / BFloat16).

Pointwise kernels: `strata_kernel(const T0* in0, ..., R0* out0, ..., int64_t n)`, a grid-stride loop over
the iteration space (flat: n elements; otherwise the baked sizes, each buffer's offset from the index by
its strides, 0 along a broadcast dim). Indices are int32 when every index and offset fits in
INT32_LIMIT (the grid-stride step is capped at MAX_THREADS, so i + step cannot overflow), int64 otherwise.
When the innermost dim allows, each thread moves VEC elements per step with one 16-byte access per
buffer (StrataVec<T, VEC>, alignas 16: LDG.E.128 / STG.E.128), VEC = 16 / the widest vector-loaded
element; a buffer broadcast along the innermost dim is read once per vector, a 0-d buffer once per
thread. The vector path runs only when every vector-accessed pointer is aligned to its vector (checked
in the kernel: a view at an odd offset takes the scalar path); the flat form ends in a scalar tail.

Row kernels: `strata_row_kernel(bufs..., int64_t rows, int64_t cols)`, one block per row (grid = rows,
blockDim a multiple of 32, at most 1024). Each reduction: a strided per-thread accumulation over the row,
then a warp-shuffle tree and one shared-memory exchange between the warps, after which every thread holds
the row's value; values an elementwise loop needs are recomputed in each loop (softmax computes its
exp twice: once for the sum, once for the output) rather than kept in a scratch row as cpp.py does.
The accumulation order is the GPU's (per-thread strides, then a tree), not eager's: sums differ from eager
in the last bits; max/min are exact.

Precision: NVRTC runs with --fmad=false (no FMA contraction across two ops, as cpp.py's -ffp-contract=off)
and without --use_fast_math: exp/log/tanh/sin/... are CUDA's accurate library functions (expf 2 ulp,
logf 1 ulp, tanhf 2 ulp per the CUDA math API), which still use the MUFU unit (EX2, LG2, RCP, RSQ) inside.
No fast intrinsic (__expf, __tanhf approximations, tanh.approx) is used: their errors (up to 2^-21.41
relative for __expf over a range, more near overflow) exceed what the float32 tests of the C++ kernels
allow, and eager's CPU results are the reference."""

from .ir import CTYPES, Cast, Compute, Const, Load, PwCompute, PwConst, PwGather, PwLoad, PwStore, Reduce, Store
from .cpp import _functor, _functor_rows, _literal, _pw_literal

INT32_LIMIT = (1 << 31) - (1 << 26)
MAX_THREADS = 1 << 26          # grid * block of a pointwise launch (launch_config caps it)
BLOCK = 256                    # threads per block of a pointwise kernel
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "bool": 1, "uint8": 1, "int8": 1,
            "int16": 2, "int32": 4, "int64": 8}


class CudaSource:
    """A rendered kernel: its source, entry name, parameters [(C type, name)], and how it was shaped."""

    def __init__(self, source, name, params, kind, vec=1, index="int64_t"):
        self.source, self.name, self.params, self.kind = source, name, params, kind
        self.vec, self.index = vec, index

    def __str__(self):
        return self.source


def _header(comment, kernel):
    from .ir import SPECIAL_HEADER_FUNCTORS
    out = []
    if comment:
        out.append("\n".join("// " + line for line in comment.splitlines()))
    out += ["#include <cstdint>", '#include "ops/pointwise_functors.h"', '#include "ops/nn_functors.h"',
            '#include "compile/codegen_pointwise.h"']
    if any(getattr(getattr(s, "functor", None), "name", None) in SPECIAL_HEADER_FUNCTORS for s in kernel.body):
        out.append('#include "ops/special_functors.h"')  # large: only where used, as cpp.py does
    out += [
            # The float32 erf-GELU: cpp.py uses eager's AVX-512 variant where the CPU has it; a GPU runs the
            # scalar functor (the same formula as eager's non-AVX-512 kernels).
            "#define STRATA_GELU_ERF_F32 strata::fn::GeluErf",
            "template <typename T, int N>",
            "struct alignas(sizeof(T) * N) StrataVec {",
            "  T v[N];",
            "};"]
    return out


def _unsupported(kernel):
    for s in kernel.body:
        if isinstance(s, PwGather):
            raise NotImplementedError("CUDA renderer: embedding gathers inside a pointwise kernel are not rendered "
                                      "yet (the kernel runs on the C++ renderer only)")
    if getattr(kernel, "reduce", None):
        raise NotImplementedError("CUDA renderer: column reductions (PwKernel.reduce) are not rendered yet")


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def pointwise_index_type(kernel, n=None):
    """"int32_t" when every index of the kernel (n for a flat kernel, else its baked sizes) and every
    buffer offset stays below INT32_LIMIT, else "int64_t". A flat kernel with n unknown gets int64_t."""
    if kernel.flat:
        return "int32_t" if n is not None and n < INT32_LIMIT else "int64_t"
    total = _prod(kernel.sizes)
    span = [sum((sz - 1) * abs(st) for sz, st in zip(kernel.sizes, b.strides)) + 1
            for b in kernel.inputs + kernel.outputs]
    return "int32_t" if max([total] + span) < INT32_LIMIT else "int64_t"


def _vector_plan(kernel):
    """(VEC, the buffers accessed with vectors) or (1, []) where the layout does not allow 16-byte access."""
    bufs = kernel.inputs + kernel.outputs
    if kernel.flat:
        vb = [b for b in bufs if any(b.strides)]
    else:
        if not kernel.sizes:
            return 1, []
        vb = [b for b in bufs if b.strides[-1] == 1]
        if any(b.strides[-1] not in (0, 1) for b in bufs):
            return 1, []
    if not vb or any(b.dtype not in ITEMSIZE for b in vb):
        return 1, []
    vec = 16 // max(ITEMSIZE[b.dtype] for b in vb)
    if vec < 2:
        return 1, []
    if not kernel.flat:
        if kernel.sizes[-1] % vec:
            return 1, []
        # A vector group must not cross a row of any vector-accessed buffer: its other strides are multiples.
        if any(st % vec for b in vb for st in b.strides[:-1]):
            return 1, []
    return vec, vb


def render_pointwise(kernel, header_comment="", n=None, vectorize=True):
    """A CudaSource for a PwKernel; n: a flat kernel's element count when known (picks int32 indexing)."""
    _unsupported(kernel)
    idx = pointwise_index_type(kernel, n)
    vec, vbufs = _vector_plan(kernel) if vectorize else (1, [])
    vnames = {b.name for b in vbufs}
    out = _header(header_comment, kernel)
    w = out.append
    params = [(f"const {CTYPES[b.dtype]}* __restrict__", b.name) for b in kernel.inputs] + \
             [(f"{CTYPES[b.dtype]}* __restrict__", b.name) for b in kernel.outputs] + [("int64_t", "n")]
    w("")
    # __launch_bounds__(256) lets ptxas use at most 128 registers, and it keeps small kernels near 32 (full
    # occupancy: the bias kernel of the tests uses 30). A kernel calling ops/special_functors.h (long series) gets
    # (256, 1) instead, a 255-register ceiling: measured, 24 fused special functions spilled 292 bytes at 128
    # registers and use 170 with no spill, while (256, 1) on the small kernels raised them to 40-52 registers.
    from .ir import SPECIAL_HEADER_FUNCTORS
    heavy = any(getattr(getattr(s, "functor", None), "name", None) in SPECIAL_HEADER_FUNCTORS for s in kernel.body)
    w(f'extern "C" __global__ void __launch_bounds__({BLOCK}{", 1" if heavy else ""}) strata_kernel('
      + ", ".join(f"{t} {nm}" for t, nm in params) + ") {")
    w(f"  using index_t = {idx};")
    w("  const index_t start = static_cast<index_t>(blockIdx.x) * static_cast<index_t>(blockDim.x) + "
      "static_cast<index_t>(threadIdx.x);")
    w("  const index_t step = static_cast<index_t>(gridDim.x) * static_cast<index_t>(blockDim.x);")
    nd = len(kernel.sizes)
    total = "static_cast<index_t>(n)" if kernel.flat else str(_prod(kernel.sizes))
    w(f"  const index_t total = {total};")
    w("  (void)n;")

    dtype_of, hoisted, items, invariant = {}, [], [], set()
    for s in kernel.body:
        if isinstance(s, PwLoad):
            b = kernel.inputs[s.buf]
            dtype_of[s.var] = b.dtype
            if not any(b.strides):
                hoisted.append(f"  const {CTYPES[b.dtype]} {s.var} = {b.name}[0];")
                invariant.add(s.var)
            else:
                items.append(("load", s.var, b))
        elif isinstance(s, PwConst):
            dtype_of[s.var] = s.dtype
            hoisted.append(f"  const {CTYPES[s.dtype]} {s.var} = {_pw_literal(s.value, s.dtype)};")
            invariant.add(s.var)
        elif isinstance(s, PwCompute):
            dtype_of[s.var] = s.dtype
            C, R = CTYPES[s.cdtype], CTYPES[s.dtype]
            conv = lambda v: v if dtype_of[v] == s.cdtype else f"strata::codegen::convert<{C}>({v})"  # noqa: E731
            if s.functor.name == "Cast":
                expr = f"strata::codegen::convert<{R}>({s.args[0]})"
            elif s.functor.name == "Select":
                c, a, b2 = s.args
                expr = f"strata::codegen::select<{C}, {R}>({c}, {conv(a)}, {conv(b2)})"
            else:
                expr = f"strata::codegen::apply<{C}, {R}>({_functor(s.functor)}, {', '.join(map(conv, s.args))})"
            src = f"  // {s.source}" if s.source else ""
            lines = [f"// {s.node}{src}", f"const {R} {s.var} = {expr};"]
            if all(a in invariant for a in s.args):
                hoisted += ["  " + ln for ln in lines]
                invariant.add(s.var)
            else:
                items.append(("compute", lines))
        elif isinstance(s, PwStore):
            items.append(("store", kernel.outputs[s.buf], s.var))
    out.extend(hoisted)

    def offset(b, ind):
        """Lines computing o_<name> from the dim indices d0..d{nd-1} (non-flat kernels)."""
        terms = [f"d{d} * {b.strides[d]}" for d in range(nd) if b.strides[d]]
        return f"{ind}const index_t o_{b.name} = {' + '.join(terms) if terms else '0'};"

    def decompose(var, ind):
        lines = [f"{ind}index_t rem = {var};"]
        for d in range(nd - 1, -1, -1):
            if d:
                lines.append(f"{ind}const index_t d{d} = rem % {kernel.sizes[d]};")
                lines.append(f"{ind}rem /= {kernel.sizes[d]};")
            else:
                lines.append(f"{ind}const index_t d0 = rem;")
        return lines

    def scalar_body(ind, where):
        lines = []
        for it in items:
            if it[0] == "load":
                lines.append(f"{ind}const {CTYPES[it[2].dtype]} {it[1]} = {it[2].name}[{where(it[2])}];")
            elif it[0] == "compute":
                lines += [ind + ln for ln in it[1]]
            else:
                lines.append(f"{ind}{it[1].name}[{where(it[1])}] = {it[2]};")
        return lines

    def scalar_loop(first, ind):
        w("#pragma unroll 1")
        w(f"{ind}for (index_t i = {first}; i < total; i += step) {{")
        if kernel.flat:
            out.extend(scalar_body(ind + "  ", lambda b: "i"))
        else:
            out.extend(decompose("i", ind + "  "))
            for b in kernel.inputs + kernel.outputs:
                if any(b.strides):
                    out.append(offset(b, ind + "  "))
            out.extend(scalar_body(ind + "  ", lambda b: f"o_{b.name}"))
        w(f"{ind}}}")

    if vec == 1:
        scalar_loop("start", "  ")
        w("}")
        return CudaSource("\n".join(out) + "\n", "strata_kernel", params, "pointwise", 1, idx)

    checks = " && ".join(f"reinterpret_cast<uintptr_t>({b.name}) % {vec * ITEMSIZE[b.dtype]} == 0" for b in vbufs)
    w(f"  constexpr int VEC = {vec};")
    w(f"  const bool aligned = {checks};")
    w("  index_t done = 0;")
    w("  if (aligned) {")
    w("    const index_t groups = total / VEC;")
    w("#pragma unroll 1")
    w("    for (index_t g = start; g < groups; g += step) {")
    ind = "      "
    if not kernel.flat:
        out.extend(decompose("g * VEC", ind))
        for b in kernel.inputs + kernel.outputs:
            if any(b.strides):
                out.append(offset(b, ind))
    pos = (lambda b: "g") if kernel.flat else (lambda b: f"o_{b.name} / VEC")
    # Vector loads first (all in flight before the first use), then loads broadcast along the inner dim.
    for it in items:
        if it[0] == "load" and it[2].name in vnames:
            b = it[2]
            w(f"{ind}const StrataVec<{CTYPES[b.dtype]}, VEC> v_{it[1]} = "
              f"reinterpret_cast<const StrataVec<{CTYPES[b.dtype]}, VEC>*>({b.name})[{pos(b)}];")
    for it in items:
        if it[0] == "load" and it[2].name not in vnames:
            w(f"{ind}const {CTYPES[it[2].dtype]} {it[1]} = {it[2].name}[o_{it[2].name}];")
    stored = []
    for it in items:
        if it[0] == "store" and it[1].name not in stored:
            stored.append(it[1].name)
            w(f"{ind}StrataVec<{CTYPES[it[1].dtype]}, VEC> s_{it[1].name};")
    w("#pragma unroll")
    w(f"{ind}for (int k = 0; k < VEC; ++k) {{")
    for it in items:
        if it[0] == "load" and it[2].name in vnames:
            w(f"{ind}  const {CTYPES[it[2].dtype]} {it[1]} = v_{it[1]}.v[k];")
        elif it[0] == "compute":
            out.extend(f"{ind}  {ln}" for ln in it[1])
        elif it[0] == "store":
            w(f"{ind}  s_{it[1].name}.v[k] = {it[2]};")
    w(f"{ind}}}")
    for b in kernel.outputs:
        if b.name in stored:
            w(f"{ind}reinterpret_cast<StrataVec<{CTYPES[b.dtype]}, VEC>*>({b.name})[{pos(b)}] = s_{b.name};")
    w("    }")
    w("    done = groups * VEC;")
    w("  }")
    scalar_loop("done + start", "  ")
    w("}")
    return CudaSource("\n".join(out) + "\n", "strata_kernel", params, "pointwise", vec, idx)


def launch_config(numel, vec=1, sm_count=132, block=BLOCK):
    """(grid, block) for a pointwise kernel: enough blocks to cover numel / vec, at most 8 waves of
    2048 threads per SM (the grid-stride loop takes the rest), and grid * block <= MAX_THREADS."""
    work = max(1, -(-numel // vec))
    grid = max(1, -(-work // block))
    grid = min(grid, sm_count * (2048 // block) * 8, MAX_THREADS // block)
    return grid, block


# ---- row kernels (Note [Row kernels] in ir.py) -----------------------------------------------------------

_CSIZE = {"float": 4, "double": 8}
_ROW_OPS = {"sum": "Sum", "mean": "Sum", "simd_sum": "Sum", "simd_sqdev": "Sum", "amax": "Max", "amin": "Min",
            "softmax_max": "Max"}


def render_rows(kernel, header_comment=""):
    """A CudaSource for a RowKernel: one block per row (see the module note)."""
    _unsupported(kernel)
    T = kernel.dtype
    out = _header(header_comment, kernel)
    w = out.append
    w('#include "compile/codegen_rows.h"')
    w("")
    w("// Every thread of the block gets the combined value (blockDim.x: a multiple of 32, at most 1024).")
    w("template <typename Op, typename A>")
    w("__device__ __forceinline__ A strata_block_reduce(A v, A* red) {")
    w("#pragma unroll")
    w("  for (int o = 16; o > 0; o >>= 1) v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, o));")
    w("  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;")
    w("  __syncthreads();  // red may still be read by the previous reduction")
    w("  if (lane == 0) red[warp] = v;")
    w("  __syncthreads();")
    w("  v = lane < nw ? red[lane] : Op::template identity<A>();")
    w("#pragma unroll")
    w("  for (int o = 16; o > 0; o >>= 1) v = Op::combine(v, __shfl_xor_sync(0xffffffffu, v, o));")
    w("  return v;")
    w("}")
    w("")
    params = [(f"const {b.dtype}* __restrict__", b.name) for b in kernel.inputs] + \
             [(f"{b.dtype}* __restrict__", b.name) for b in kernel.outputs] + [("int64_t", "rows"), ("int64_t", "cols")]
    w('extern "C" __global__ void __launch_bounds__(1024) strata_row_kernel('
      + ", ".join(f"{t} {nm}" for t, nm in params) + ") {")
    w("  const int64_t r = blockIdx.x;")
    w("  (void)rows;")
    ct = lambda v: kernel.ctype.get(v, T)  # noqa: E731
    accs = sorted({s.acc for s in kernel.body if isinstance(s, Reduce)})
    for a in accs:
        w(f"  __shared__ {a} red_{a}[32];")
    deps = {}
    for s in kernel.body:
        if isinstance(s, (Load, Const, Compute, Cast)):
            deps[s.var] = list(s.args) if isinstance(s, Compute) else [s.arg] if isinstance(s, Cast) else []

    def elem_line(s, ind, vector=False):
        if isinstance(s, Load):
            b = kernel.inputs[s.buf]
            if vector:
                return [f"{ind}const {b.dtype} {s.var} = v_{s.var}.v[k];"]
            i = "j" if b.kind == "col" else "r * cols + j"
            return [f"{ind}const {b.dtype} {s.var} = {b.name}[{i}];"]
        if isinstance(s, Cast):
            return [f"{ind}const {s.dtype} {s.var} = static_cast<{s.dtype}>({s.arg});"]
        src = f"  // {s.source}" if s.source else ""
        return [f"{ind}// {s.node}{src}",
                f"{ind}const {ct(s.var)} {s.var} = {_functor_rows(s.functor, T)}({', '.join(s.args)});"]

    def closure(roots):
        need, stack = set(), list(roots)
        while stack:
            v = stack.pop()
            if v in need or kernel.level.get(v) != "elem":
                continue
            need.add(v)
            stack.extend(deps.get(v, []))
        return [s for s in kernel.body if getattr(s, "var", None) in need and not isinstance(s, (Reduce, Store))]

    # 16-byte accesses along the row when every full/col buffer's element size allows (Note [Generated CUDA
    # kernels]); the kernel takes them only when cols is a multiple of VEC and the pointers are aligned.
    vbufs = [b for b in kernel.inputs + kernel.outputs if b.kind in ("full", "col")]
    sizes = [_CSIZE.get(b.dtype) for b in vbufs]
    rvec = 16 // max(sizes) if vbufs and all(sizes) else 1
    if rvec > 1:
        checks = " && ".join(f"reinterpret_cast<uintptr_t>({b.name}) % 16 == 0" for b in vbufs)
        w(f"  constexpr int VEC = {rvec};")
        w(f"  const bool vec_ok = cols % VEC == 0 && {checks};")

    def row_loop(roots, body_end, stores=()):
        """The loops over one row for the elem values `roots` need; body_end(ind) gives the lines that use them
        (an accumulation); stores: Store statements of full outputs."""
        need = closure(roots)

        def scalar(ind):
            w("#pragma unroll 1")
            w(f"{ind}for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {{")
            for d in need:
                out.extend(elem_line(d, ind + "  "))
            out.extend(body_end(ind + "  "))
            for st in stores:
                w(f"{ind}  {kernel.outputs[st.buf].name}[r * cols + j] = {st.var};")
            w(f"{ind}}}")
        if rvec == 1:
            scalar("  ")
            return
        w("  if (vec_ok) {")
        w("#pragma unroll 1")
        w("    for (int64_t jv = threadIdx.x; jv < cols / VEC; jv += blockDim.x) {")
        for d in need:
            if isinstance(d, Load):
                b = kernel.inputs[d.buf]
                base = b.name if b.kind == "col" else f"({b.name} + r * cols)"
                w(f"      const StrataVec<{b.dtype}, VEC> v_{d.var} = "
                  f"reinterpret_cast<const StrataVec<{b.dtype}, VEC>*>({base})[jv];")
        for st in stores:
            w(f"      StrataVec<{kernel.outputs[st.buf].dtype}, VEC> s_{kernel.outputs[st.buf].name};")
        w("#pragma unroll")
        w("      for (int k = 0; k < VEC; ++k) {")
        w("        const int64_t j = jv * VEC + k;")
        w("        (void)j;")
        for d in need:
            out.extend(elem_line(d, "        ", vector=True))
        out.extend(body_end("        "))
        for st in stores:
            w(f"        s_{kernel.outputs[st.buf].name}.v[k] = {st.var};")
        w("      }")
        for st in stores:
            o = kernel.outputs[st.buf]
            w(f"      reinterpret_cast<StrataVec<{o.dtype}, VEC>*>({o.name} + r * cols)[jv] = s_{o.name};")
        w("    }")
        w("  } else {")
        scalar("    ")
        w("  }")

    final = []
    for s in kernel.body:
        lvl = kernel.level.get(getattr(s, "var", None))
        if isinstance(s, Const):
            w(f"  const {ct(s.var)} {s.var} = {_literal(s.value, ct(s.var))};")
        elif isinstance(s, Load):
            b = kernel.inputs[s.buf]
            if b.kind == "scalar":
                w(f"  const {b.dtype} {s.var} = {b.name}[0];")
            elif b.kind == "row":
                w(f"  const {b.dtype} {s.var} = {b.name}[r];")
        elif isinstance(s, Reduce):
            A, v = s.acc, s.var
            op = f"strata::codegen::{_ROW_OPS[s.op]}"
            w(f"  // {s.node}")
            w(f"  {A} {v}_acc = {op}::identity<{A}>();")
            if s.op == "simd_sqdev":
                def acc_lines(ind, s=s, A=A, v=v):
                    return [f"{ind}const {A} c_ = static_cast<{A}>({s.arg}) - {s.extra};",
                            f"{ind}{v}_acc = strata::codegen::Fma{{}}(c_, c_, {v}_acc);"]
            else:
                def acc_lines(ind, s=s, A=A, v=v, op=op):
                    return [f"{ind}{v}_acc = {op}::combine({v}_acc, static_cast<{A}>({s.arg}));"]
            row_loop([s.arg], acc_lines)
            tail = f" / static_cast<{A}>(cols)" if s.op == "mean" else ""
            w(f"  const {A} {v} = strata_block_reduce<{op}, {A}>({v}_acc, red_{A}){tail};")
        elif isinstance(s, (Compute, Cast)) and lvl == "row":
            out.extend(elem_line(s, "  "))
        elif isinstance(s, Store):
            b = kernel.outputs[s.buf]
            if b.kind == "row":
                w(f"  if (threadIdx.x == 0) {b.name}[r] = {s.var};")
            else:
                final.append(s)
    if final:
        row_loop([s.var for s in final], lambda ind: [], final)
    w("}")
    return CudaSource("\n".join(out) + "\n", "strata_row_kernel", params, "rows", rvec, "int64_t")


def row_block(cols):
    """Threads per block of a row kernel: a multiple of 32 near cols / 4 elements per thread, 32..1024."""
    t = -(-max(1, cols // 4) // 32) * 32
    return max(32, min(1024, t))
