"""Note [The loop IR and its renderer]
A pointwise kernel (PwKernel, Note [Pointwise kernels with index expressions]) is typed buffers in
and out and a straight-line body run for each index of its iteration space:

    for i in range(n):
        t0 = load(in0, i)          # Load (a 0-d input is loaded once: Load.scalar)
        c0 = const(1.5)            # Const, converted to the kernel dtype like eager's wrapped numbers
        t1 = Add(t0, c0)           # Compute: a functor of src/ops/pointwise_functors.h / nn_functors.h
        store(out0, i, t1)         # Store

The IR says nothing about C++: cpp.py renders it (functor calls, OpenMP, vectorisation), and a
later renderer (CUDA, another ISA) can read the same IR. Each Compute keeps the graph node it came
from (op name, position, source line) so the rendered code can name them. The IR and the lowering
live in Python: they run once per compiled graph, next to a g++ call that costs a second, and the
graph is already visible from Python (strata._C._compile); the kernels themselves run in C++.

Lowering: LOWERINGS maps an op name to a function (node args, dtype) -> (functor, operand
positions/constants), or None when this slice does not fuse that form; the functors are the ones
eager's CPU kernels instantiate (src/backends/cpu/kernels/*.cpp), chosen the same way (add with
alpha 1 is Add, alpha -1 Sub, otherwise AddAlpha; sub(a, b, alpha) is add with -alpha)."""

_MISSING = object()


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


def field(*, default_factory):
    """dataclasses.field(default_factory=...) for the records below."""
    return _Factory(default_factory)


def dataclass(cls=None, *, frozen=False):
    """The part of dataclasses.dataclass these IR records use: __init__ (positional or keyword, defaults,
    default factories), __repr__ and __eq__ as it writes them, __hash__ and read-only fields when frozen.
    Made without generating source: strata.compile imports this module in every process, and the
    standard decorator's exec of 16 classes' methods was ~5 ms of an 11 ms warm compile."""
    def wrap(cls):
        names = list(cls.__dict__.get("__annotations__", {}))
        defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}
        for n, d in defaults.items():
            if isinstance(d, _Factory):
                delattr(cls, n)
        qual = cls.__qualname__

        def __init__(self, *args, **kw):
            if len(args) > len(names):
                raise TypeError(f"{qual}() takes {len(names)} arguments, got {len(args)}")
            vals = dict(zip(names, args))
            for n, v in kw.items():
                if n not in names or n in vals:
                    raise TypeError(f"{qual}() got an unexpected or repeated argument {n!r}")
                vals[n] = v
            for n in names:
                if n not in vals:
                    d = defaults.get(n, _MISSING)
                    if d is _MISSING:
                        raise TypeError(f"{qual}() missing required argument {n!r}")
                    vals[n] = d.make() if isinstance(d, _Factory) else d
            for n in names:
                object.__setattr__(self, n, vals[n])

        def __repr__(self):
            return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

        def _astuple(self):
            return tuple(getattr(self, n) for n in names)

        def __eq__(self, other):
            if other.__class__ is self.__class__:
                return _astuple(self) == _astuple(other)
            return NotImplemented

        own = cls.__dict__
        for name, fn in (("__init__", __init__), ("__repr__", __repr__), ("__eq__", __eq__)):
            if name not in own:   # as dataclass: a method the class defines itself stays
                setattr(cls, name, fn)
        if frozen:
            def __setattr__(self, n, v):
                raise AttributeError(f"cannot assign to field {n!r}")

            cls.__hash__ = lambda self: hash(_astuple(self))
            cls.__setattr__ = __setattr__
            cls.__delattr__ = lambda self, n: __setattr__(self, n, None)
        elif "__hash__" not in own or own["__hash__"] is None:
            cls.__hash__ = None
        return cls
    return wrap if cls is None else wrap(cls)


@dataclass(frozen=True)
class Functor:
    name: str            # strata::fn::<name>, or a special renderer name ("GeluErfF32")
    params: tuple = ()   # constructor arguments (doubles)


@dataclass
class Buffer:
    name: str
    dtype: str           # "float" | "double" | "bool"
    scalar: bool = False  # 0-d: one element, loaded before the loop
    kind: str = ""        # row kernels: "full" | "row" | "col" | "scalar" (Note [Row kernels])


@dataclass
class Load:
    var: str
    buf: int             # index into the kernel's inputs


@dataclass
class Const:
    var: str
    value: float


@dataclass
class Compute:
    var: str
    functor: Functor
    args: list
    node: str            # "add (node 3)" for comments
    source: str = ""


@dataclass
class Store:
    buf: int             # index into the kernel's outputs
    var: str


def _num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# Each lowering: (args, dtype) -> (Functor, [operand arg positions or ("const", number)]) or None.
# Operand positions refer to the node's schema-ordered args; the last arg (out=) must be None.
def _unary(name):
    return lambda a, dt: (Functor(name), [0])


def _add(a, dt, sign=1):
    alpha = a[2]
    if not _num(alpha):
        return None
    alpha = sign * alpha
    if alpha == 1:
        return Functor("Add"), [0, 1]
    if alpha == -1:
        return Functor("Sub"), [0, 1]
    return Functor("AddAlpha", (float(alpha),)), [0, 1]


def _gelu(a, dt):
    if a[1] == "tanh":
        return Functor("GeluTanh"), [0]
    if a[1] == "none":
        # float32 gelu (erf form) runs gelu_math::GeluErfF32 in eager's AVX-512 kernels.
        return Functor("GeluErfF32" if dt == "float" else "GeluErf"), [0]
    return None


def _clamp(a, dt):
    lo, hi = a[1], a[2]
    if lo is not None and not _num(lo) or hi is not None and not _num(hi):
        return None
    if lo is not None and hi is not None:
        return Functor("Clamp"), [0, 1, 2]
    if lo is not None:
        return Functor("ClampMin"), [0, 1]
    if hi is not None:
        return Functor("ClampMax"), [0, 2]
    return None


def _div(a, dt):
    return (Functor("Div"), [0, 1]) if a[2] is None else None


LOWERINGS = {
    "add": _add,
    "sub": lambda a, dt: _add(a, dt, -1),
    "mul": lambda a, dt: (Functor("Mul"), [0, 1]),
    "div": _div,
    "neg": _unary("Neg"), "abs": _unary("Abs"), "relu": _unary("Relu"),
    "sigmoid": _unary("Sigmoid"), "tanh": _unary("Tanh"), "exp": _unary("Exp"), "log": _unary("Log"),
    "sqrt": _unary("Sqrt"), "rsqrt": _unary("Rsqrt"), "silu": _unary("Silu"),
    "gelu": _gelu,
    "pow": lambda a, dt: (Functor("Pow"), [0, 1]) if _num(a[1]) else None,
    "maximum": lambda a, dt: (Functor("Maximum"), [0, 1]),
    "minimum": lambda a, dt: (Functor("Minimum"), [0, 1]),
    "where": lambda a, dt: (Functor("Where"), [0, 1, 2]),
    "clamp": _clamp,
}

# Ops whose functor, once inlined, eager's build may compute with fused multiply-adds (eager is
# built with GCC's default -ffp-contract=fast, the generated kernels with =off so that no FMA spans
# two ops): these can differ from eager in the last bit. Transcendentals go through libmvec on both
# sides, but the scalar tail of a loop calls libm, so a handful of elements can differ by an ulp.
# Measured (tests/python/compile/test_codegen.py, AVX-512 machine): these differ from eager in the
# last bits on float32 and float64; every other lowered op is bit-exact (NaNs included).
NOT_BIT_EXACT = {"AddAlpha", "GeluTanh", "GeluErf", "GeluErfF32", "Sigmoid", "Tanh", "Exp", "Log", "Silu", "Pow"}


# ---- row kernels ---------------------------------------------------------------------------------
"""Note [Row kernels]
A RowKernel runs over `rows` contiguous rows of `cols` elements (the last dim) and holds values at two
levels: "elem" (one per element of a row, index j) and "row" (one per row: a reduction's result or a
[..., 1] operand broadcast along the row). Buffers have a kind: "full" (rows x cols), "row" (one per
row), "col" (one per column: layer_norm's weight and bias) or "scalar" (0-d). A Reduce turns an elem
value into a row value with one of the accumulation orders of src/compile/codegen_rows.h (Note [Row
reductions mirror eager's accumulation order]); the renderer recomputes, inside each reduction's row
loop and the final output loop, just the elem statements that loop needs, except an expensive value
that a reduction loop already computed, which it keeps in a per-thread scratch row (Note [Cached elem
values] in cpp.py): softmax is three passes over one row in cache, and only outputs reach memory."""


@dataclass
class Reduce:
    var: str
    op: str              # "sum" | "mean" | "amax" | "amin" | "softmax_max" | "simd_sum" | "simd_sqdev"
    arg: str             # elem var
    acc: str             # accumulator C type ("float" | "double")
    node: str
    extra: str = ""      # simd_sqdev: the row var of the mean


@dataclass
class Cast:
    var: str
    arg: str
    dtype: str


@dataclass
class RowKernel:
    dtype: str
    cols: int = 0                                 # the last dim (static: sizes the block partials)
    inputs: list = field(default_factory=list)   # Buffer with .kind
    outputs: list = field(default_factory=list)
    body: list = field(default_factory=list)      # Load | Const | Compute | Cast | Reduce | Store
    level: dict = field(default_factory=dict)     # var -> "elem" | "row"
    ctype: dict = field(default_factory=dict)     # var -> C type where it differs from dtype

    def __str__(self):
        lines = [f"row kernel({', '.join(f'{b.name}:{b.kind}' for b in self.inputs)}) -> "
                 f"({', '.join(f'{b.name}:{b.kind}' for b in self.outputs)}), {self.dtype}:",
                 "  for r in range(rows):"]
        for s in self.body:
            if isinstance(s, Load):
                lines.append(f"    {s.var} = load({self.inputs[s.buf].name})")
            elif isinstance(s, Const):
                lines.append(f"    {s.var} = const({s.value!r})")
            elif isinstance(s, Compute):
                p = f"{{{', '.join(map(repr, s.functor.params))}}}" if s.functor.params else ""
                lines.append(f"    {s.var} = {s.functor.name}{p}({', '.join(s.args)})  [{self.level[s.var]}]  # {s.node}")
            elif isinstance(s, Cast):
                lines.append(f"    {s.var} = cast<{s.dtype}>({s.arg})")
            elif isinstance(s, Reduce):
                lines.append(f"    {s.var} = reduce_{s.op}<{s.acc}>({s.arg}{', ' + s.extra if s.extra else ''})  # {s.node}")
            else:
                lines.append(f"    store({self.outputs[s.buf].name}, {s.var})")
        return "\n".join(lines)


# ---- general pointwise kernels -------------------------------------------------------------------
"""Note [Pointwise kernels with index expressions]
A PwKernel: an iteration space of
`sizes` (dims outermost first, already ordered and collapsed by fusion.py so that the first
output's innermost dim is its stride-1 dim), and for each buffer (input or output) its element
strides over those dims, 0 along a broadcast dim. Each buffer and each value has its own dtype
(a strata dtype name); each Compute names its compute dtype C and result dtype (Note [Pointwise
kernels follow eager's per-op dtypes] in src/compile/codegen_pointwise.h). `flat`: every buffer
is contiguous over one dim or 0-d; the kernel then takes the element count at run time (one kernel
serves every size: graphs with symbolic sizes)."""

CTYPES = {"float32": "float", "float64": "double", "float16": "strata::Half", "bfloat16": "strata::BFloat16",
          "bool": "bool", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
          "int64": "int64_t"}
FLOATS = ("float32", "float64", "float16", "bfloat16")


@dataclass
class PwBuffer:
    name: str
    dtype: str                       # strata dtype name
    strides: tuple = ()              # element strides over the kernel's dims (0: broadcast)
    rows: int = 0                    # a gather's table: its row count (indices are checked against it)
    row_stride: int = 0              # ... and the stride between its rows
    count: int = 0                   # an index buffer of a gather: its element count (contiguous)


@dataclass
class PwGather:
    """var = table[index, j]: an embedding lookup read where its consumer needs it. The table buffer's
    strides cover the column (the kernel's innermost dim); the row comes from the index value."""
    var: str
    buf: int                         # the table (an input buffer with rows > 0)
    index: str                       # an integer value (the loaded index)
    node: str = ""


@dataclass
class PwLoad:
    var: str
    buf: int


@dataclass
class PwConst:
    var: str
    value: object                    # already converted to dtype by eager's cast
    dtype: str


@dataclass
class PwCompute:
    var: str
    functor: Functor                 # "Cast" / "Select" are renderer specials
    args: list
    cdtype: str                      # C: the op's common dtype (operands converted to it)
    dtype: str                       # the result's dtype
    node: str
    source: str = ""


@dataclass
class PwStore:
    buf: int
    var: str


@dataclass
class PwKernel:
    sizes: tuple = ()                # iteration space, outermost first
    flat: bool = False
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    body: list = field(default_factory=list)
    # A column reduction of one body value (Note [Column reductions] in fusion.py):
    # (op, var, R, K, outer, output index); the body then runs over [outer, R, K].
    reduce: tuple = None

    def __str__(self):
        geo = "n (flat)" if self.flat else "x".join(map(str, self.sizes)) or "()"
        if self.reduce:
            op, var, R, K, outer, o = self.reduce
            geo = f"[{outer}, {R}, {K}], {op}({var}) over the {R} rows -> {self.outputs[o].name}"
        lines = [f"pointwise kernel({', '.join(f'{b.name}:{b.dtype}{list(b.strides)}' for b in self.inputs)}) -> "
                 f"({', '.join(f'{b.name}:{b.dtype}{list(b.strides)}' for b in self.outputs)}) over {geo}:"]
        for s in self.body:
            if isinstance(s, PwLoad):
                lines.append(f"    {s.var} = load({self.inputs[s.buf].name})")
            elif isinstance(s, PwConst):
                lines.append(f"    {s.var} = const<{s.dtype}>({s.value!r})")
            elif isinstance(s, PwCompute):
                p = f"{{{', '.join(map(repr, s.functor.params))}}}" if s.functor.params else ""
                lines.append(f"    {s.var} = {s.functor.name}{p}<{s.cdtype}->{s.dtype}>({', '.join(s.args)})  # {s.node}")
            elif isinstance(s, PwGather):
                lines.append(f"    {s.var} = gather({self.inputs[s.buf].name}, {s.index})  # {s.node}")
            else:
                lines.append(f"    store({self.outputs[s.buf].name}, {s.var})")
        return "\n".join(lines)


# Lowerings with their dtype rule: "out" (the op computes in its result's dtype: arithmetic, where,
# the float-only unary ops whose integer inputs eager converts to the default float), "common" (the
# operands' promoted dtype, a bool result: comparisons, logical ops), "self" (the first operand's dtype,
# a bool result: isnan & co.), "cast" (_to_copy).
def _cmp(name):
    return lambda a, dt: (Functor(name), [0, 1])


def _masked_fill(a, dt):
    return Functor("Select"), [1, 2, 0]


def _to_copy(a, dt):
    # _to_copy(self, dtype, device): a dtype change on the same device.
    return (Functor("Cast"), [0]) if a[2] is None else None


def _param_unary(name, *positions):
    def lower(a, dt):
        if not all(_num(a[p]) for p in positions):
            return None
        return Functor(name, tuple(float(a[p]) for p in positions)), [0]
    return lower


def _round(a, dt):
    return (Functor("Round"), [0]) if a[1] == 0 else None


GENERAL_LOWERINGS = dict(LOWERINGS)
GENERAL_LOWERINGS.update({
    "where": lambda a, dt: (Functor("Select"), [0, 1, 2]),
    "pow": lambda a, dt: (Functor("Pow"), [0, 1]),  # tensor exponents too (floating only: fusion.py)
    "masked_fill": _masked_fill,
    "_to_copy": _to_copy,
    "eq": _cmp("Eq"), "ne": _cmp("Ne"), "lt": _cmp("Lt"), "le": _cmp("Le"), "gt": _cmp("Gt"), "ge": _cmp("Ge"),
    "logical_and": _cmp("LogicalAnd"), "logical_or": _cmp("LogicalOr"), "logical_xor": _cmp("LogicalXor"),
    "logical_not": _unary("LogicalNot"), "isnan": _unary("IsNan"), "isinf": _unary("IsInf"),
    "isfinite": _unary("IsFinite"),
    "sin": _unary("Sin"), "cos": _unary("Cos"), "erf": _unary("Erf"), "log1p": _unary("Log1p"),
    "expm1": _unary("Expm1"), "reciprocal": _unary("Reciprocal"), "square": _unary("Square"),
    "sign": _unary("Sign"), "floor": _unary("Floor"), "ceil": _unary("Ceil"), "trunc": _unary("Trunc"),
    "round": _round, "log2": _unary("Log2"), "exp2": _unary("Exp2"),
    "hardsigmoid": _unary("Hardsigmoid"), "hardswish": _unary("Hardswish"), "mish": _unary("Mish"),
    "leaky_relu": _param_unary("LeakyRelu", 1), "hardtanh": _param_unary("Hardtanh", 1, 2),
    "softplus": _param_unary("Softplus", 1, 2), "elu": _param_unary("Elu", 1, 2, 3),
})
# Note [Special functions in generated kernels]
# The special functions eager computes with the scalar functors of src/ops/pointwise_functors_more.h
# and src/ops/special_functors.h, one element at a time as `static_cast<T>(f(opmath_t<T>(x)))` over
# floating dtypes (integers converted to the default float first): the same functor call in a fused
# loop gives eager's values (up to FMA contraction, which eager's build may apply inside a functor
# and the kernels' -ffp-contract=off does not, hence NOT_BIT_EXACT_MORE). The kernels include
# special_functors.h only when they use one of SPECIAL_HEADER_FUNCTORS (it is large).
SPECIAL_UNARY = {
    "lgamma": "Lgamma", "digamma": "Digamma", "erfinv": "Erfinv", "i0": "I0", "special_i1": "I1", "sinc": "Sinc",
    "erfc": "Erfc", "special_modified_bessel_i0": "I0", "special_modified_bessel_i1": "I1",
    "special_airy_ai": "AiryAi", "special_bessel_j0": "BesselJ0", "special_bessel_j1": "BesselJ1",
    "special_bessel_y0": "BesselY0", "special_bessel_y1": "BesselY1",
    "special_modified_bessel_k0": "ModifiedBesselK0", "special_modified_bessel_k1": "ModifiedBesselK1",
    "special_scaled_modified_bessel_k0": "ScaledModifiedBesselK0",
    "special_scaled_modified_bessel_k1": "ScaledModifiedBesselK1",
    "special_spherical_bessel_j0": "SphericalBesselJ0", "special_i0e": "I0e", "special_i1e": "I1e",
    "special_entr": "Entr", "special_erfcx": "Erfcx", "special_ndtr": "Ndtr", "special_log_ndtr": "LogNdtr",
    "special_ndtri": "Ndtri",
}
SPECIAL_BINARY = {
    "xlogy": "Xlogy", "special_xlog1py": "Xlog1py", "special_zeta": "Zeta", "igamma": "Igamma", "igammac": "Igammac",
    "special_chebyshev_polynomial_t": "ChebyshevT", "special_chebyshev_polynomial_u": "ChebyshevU",
    "special_chebyshev_polynomial_v": "ChebyshevV", "special_chebyshev_polynomial_w": "ChebyshevW",
    "special_shifted_chebyshev_polynomial_t": "ShiftedChebyshevT",
    "special_shifted_chebyshev_polynomial_u": "ShiftedChebyshevU",
    "special_shifted_chebyshev_polynomial_v": "ShiftedChebyshevV",
    "special_shifted_chebyshev_polynomial_w": "ShiftedChebyshevW",
    "special_hermite_polynomial_h": "HermiteH", "special_hermite_polynomial_he": "HermiteHe",
    "special_laguerre_polynomial_l": "LaguerreL", "special_legendre_polynomial_p": "LegendreP",
}
SPECIAL_HEADER_FUNCTORS = {f for f in list(SPECIAL_UNARY.values()) + list(SPECIAL_BINARY.values())
                           if f not in ("Lgamma", "Digamma", "Erfinv", "I0", "I1", "Sinc", "Erfc", "Xlogy")}
GENERAL_LOWERINGS.update({op: _unary(f) for op, f in SPECIAL_UNARY.items()})
GENERAL_LOWERINGS.update({op: _cmp(f) for op, f in SPECIAL_BINARY.items()})

DTYPE_RULE = {op: "common" for op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor")}
DTYPE_RULE.update({op: "self" for op in ("logical_not", "isnan", "isinf", "isfinite")})
DTYPE_RULE["_to_copy"] = "cast"
# Ops eager runs only on floating inputs after converting integers (their C is the float result).
FLOAT_ONLY = {"GeluErf", "GeluErfF32", "GeluTanh", "Silu", "Mish", "Softplus", "LeakyRelu", "Elu", "Hardtanh",
              "Hardsigmoid", "Hardswish"}
FLOAT_ONLY |= set(SPECIAL_UNARY.values()) | set(SPECIAL_BINARY.values())
NOT_BIT_EXACT_MORE = NOT_BIT_EXACT | {"Sin", "Cos", "Erf", "Log1p", "Expm1", "Log2", "Exp2", "Mish", "Softplus", "Elu"}
NOT_BIT_EXACT_MORE |= FLOAT_ONLY & (set(SPECIAL_UNARY.values()) | set(SPECIAL_BINARY.values()))
