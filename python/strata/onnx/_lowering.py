"""Lowering a captured graph (strata.export's ExportedProgram) to an ONNX model.

Each graph node is handed to the lowering registered for its op's full name (LOWERINGS), which
emits ONNX nodes through an Emitter. A number given for a Tensor argument (a wrapped number)
becomes an initializer of the op's result dtype, as type promotion would make it; operands of
another dtype are Cast to it.

Note [Symbolic dimensions]
With dynamic_axes (or dynamic_shapes) the program is normally exported with those dims as symbols
(strata.export, Note [Exported symbolic sizes] in export/_dims.py): every value's symbolic shape
is known (ep.sym_shapes) and sizes the model computes from the dims are int graph values. The
lowering reads each symbol once from its input with Shape+Gather, builds the int values and any
size expression with integer Add/Sub/Mul/Div (_lower_sym_sizes), and uses them wherever an op
takes sizes: view/reshape/expand targets (from the int values in the op's list, or from the
output's exact symbolic shape), slice/narrow/select bounds, split sizes, factories
(ConstantOfShape, Range) and the causal attention mask. Those exact shapes also name the output
dims (dim_param "batch", "t - 2").

When the program cannot keep a marked dim symbolic (export warns), it is captured with concrete
sizes and the lowering falls back to tracking, for every value, which of its dimensions follow an
input dimension marked dynamic (a string: the dim_param name, or an expression of names) and which
are static (an int). Reshape-like ops (view, reshape, flatten) then pair input and output
dimensions by products of sizes: a dynamic dimension kept as is is read with Shape+Gather, merged
ones are left to -1, and the target shape is built with Concat; expand broadcasts with 1 where the
input dimension is kept. A size that the model computes from a dynamic dimension by itself (a new
tensor of batch size made with strata.zeros(x.size(0), ...)) is baked in on that path."""

import math

import numpy as np

from .. import _C
from . import UnsupportedOperatorError, OnnxExporterError

_compile = _C._compile

LOWERINGS = {}


def lowering(*names):
    def deco(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return deco


_NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64, "int32": np.int32,
       "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}


def _dname(dtype):
    return str(dtype).split(".")[-1]


def onnx_dtype(dtype):
    import onnx
    m = {"float32": onnx.TensorProto.FLOAT, "float64": onnx.TensorProto.DOUBLE, "float16": onnx.TensorProto.FLOAT16,
         "bfloat16": onnx.TensorProto.BFLOAT16, "int64": onnx.TensorProto.INT64, "int32": onnx.TensorProto.INT32,
         "int16": onnx.TensorProto.INT16, "int8": onnx.TensorProto.INT8, "uint8": onnx.TensorProto.UINT8,
         "bool": onnx.TensorProto.BOOL}
    name = _dname(dtype)
    if name not in m:
        raise OnnxExporterError(f"strata.onnx.export: dtype {name} has no ONNX equivalent here")
    return m[name]


def _to_numpy(t):
    name = _dname(t.dtype)
    if name not in _NP:
        raise OnnxExporterError(f"strata.onnx.export: cannot write a {name} tensor as an ONNX initializer")
    return np.ascontiguousarray(t.detach().cpu().numpy())


class Emitter:
    def __init__(self, graph, opset):
        import onnx
        from onnx import helper
        self.onnx, self.helper = onnx, helper
        self.g = graph
        self.opset = opset
        self.values = graph.values
        self.nodes, self.initializers = [], []
        self.names = {}          # value id -> ONNX name
        self.sym = {}            # value id -> [int | str] (Note [Symbolic dimensions])
        self.used = set()
        self.const_cache = {}
        self.shape_cache = {}
        self.node = None         # the graph node being lowered
        self.where = ""

    # -- names ---------------------------------------------------------------------------------
    def fresh(self, base):
        base = base or "t"
        name, i = base, 0
        while name in self.used:
            i += 1
            name = f"{base}_{i}"
        self.used.add(name)
        return name

    # -- value queries -------------------------------------------------------------------------
    @staticmethod
    def is_value(a):
        return isinstance(a, _compile.Value)

    def name(self, a):
        return self.names[a.id]

    def dtype(self, a):
        return self.values[a.id].dtype

    def shape(self, a):
        return list(self.values[a.id].shape)

    def symof(self, a):
        return self.sym.get(a.id) or self.shape(a)

    def out(self, i=0):
        return self.values[self.node.outputs[i]]

    # -- emission ------------------------------------------------------------------------------
    def emit(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.fresh(f"{self.node_base}_{op_type}".lower() if n_out == 1 else f"{op_type}_o{k}")
                for k in range(n_out)]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), outs, name=self.fresh(f"n_{op_type}"),
                                                **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype):
        """An initializer holding value (a number or nested list) as dtype."""
        arr = np.asarray(value, dtype=_NP[_dname(dtype)] if not isinstance(dtype, str) else _NP[dtype])
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        n = self.const_cache.get(key)
        if n is None:
            n = self.const_cache[key] = self.fresh("const")
            self.initializers.append(self.onnx.numpy_helper.from_array(arr, n))
        return n

    def ints(self, values):
        return self.const(np.asarray(values, dtype=np.int64), "int64")

    def operand(self, a, dtype):
        """An operand of an op computing in dtype: a value (Cast when needed) or a number."""
        if self.is_value(a):
            n = self.name(a)
            if _dname(self.dtype(a)) != _dname(dtype):
                n = self.emit("Cast", [n], to=onnx_dtype(dtype))
            return n
        if a is None:
            raise OnnxExporterError(f"strata.onnx.export: {self.node.op} got None where a tensor is needed "
                                    f"({self.where})")
        return self.const(a, dtype)

    def shape_of(self, a):
        n = self.shape_cache.get(a.id)
        if n is None:
            n = self.shape_cache[a.id] = self.emit("Shape", [self.name(a)])
        return n

    # -- sizes the graph reads (int graph values, Note [Symbolic dimensions]) ---------------------
    def has_int_values(self, a):
        return any(self.is_value(x) and x.kind != "tensor" for x in (a if isinstance(a, list) else [a]))

    def int1(self, a):
        """A size as a 1-D int64 tensor of one element: an int graph value (already one) or a number."""
        if self.is_value(a):
            if a.kind == "tensor":
                self.unsupported(f"a tensor ({a.name}) where a size is expected")
            return self.name(a)
        return self.ints([int(a)])

    def int_list(self, items, map_const=None):
        """A list of sizes (numbers and int graph values) as one 1-D int64 tensor (Concat of pieces)."""
        parts, run = [], []
        for x in items:
            if self.is_value(x):
                if run:
                    parts.append(self.ints(run))
                    run = []
                parts.append(self.int1(x))
            else:
                run.append(int(map_const(x)) if map_const else int(x))
        if run:
            parts.append(self.ints(run))
        return parts[0] if len(parts) == 1 else self.emit("Concat", parts, axis=0)

    def int0(self, a):
        """A size as a 0-d int64 tensor."""
        if self.is_value(a):
            return self.emit("Squeeze", [self.int1(a), self.ints([0])])
        return self.const(int(a), "int64")

    def unsupported(self, what):
        raise UnsupportedOperatorError(f"strata.onnx.export: {self.node.op}: {what} has no ONNX lowering "
                                       f"({self.where})")


# -- symbolic dimension rules --------------------------------------------------------------------

def _broadcast_sym(e, n, args):
    out = list(e.out().shape)
    ins = [a for a in args if e.is_value(a)]
    for a in args:
        if isinstance(a, list):
            ins += [x for x in a if e.is_value(x)]
    res = list(out)
    for a in ins:
        s, sh = e.symof(a), e.shape(a)
        off = len(out) - len(sh)
        for j, d in enumerate(s):
            k = j + off
            if k >= 0 and isinstance(d, str) and sh[j] == out[k] and not isinstance(res[k], str):
                res[k] = d
    return res


def _groups(a, b):
    """Pairs dimensions of shapes a -> b (same number of elements) into groups of equal product."""
    i = j = 0
    groups = []
    while i < len(a) or j < len(b):
        gi, gj, pi, pj = [], [], 1, 1
        if i < len(a):
            gi.append(i)
            pi *= a[i]
            i += 1
        if j < len(b):
            gj.append(j)
            pj *= b[j]
            j += 1
        while pi != pj:
            if pi < pj and i < len(a):
                gi.append(i)
                pi *= a[i]
                i += 1
            elif j < len(b):
                gj.append(j)
                pj *= b[j]
                j += 1
            elif i < len(a):
                gi.append(i)
                pi *= a[i]
                i += 1
            else:
                break
        # trailing size-1 dimensions join the last group
        groups.append((gi, gj))
    return groups


def _norm(d, rank):
    return d + rank if d < 0 else d


# -- lowerings -----------------------------------------------------------------------------------

def _binary(op_type):
    def lower(e, n, a):
        dt = e.out().dtype
        x, y = e.operand(a[0], dt), e.operand(a[1], dt)
        if n.op in ("add", "sub") and len(a) > 2 and a[2] != 1:
            y = e.emit("Mul", [y, e.const(a[2], dt)])
        if n.op == "div" and len(a) > 2 and a[2] is not None:
            e.unsupported(f"rounding_mode={a[2]!r}")
        return e.emit(op_type, [x, y])
    return lower


for _op, _t in (("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("div", "Div"), ("pow", "Pow")):
    lowering(_op)(_binary(_t))


@lowering("rsub")
def _rsub(e, n, a):
    dt = e.out().dtype
    x, y = e.operand(a[0], dt), e.operand(a[1], dt)
    if len(a) > 2 and a[2] != 1:
        x = e.emit("Mul", [x, e.const(a[2], dt)])
    return e.emit("Sub", [y, x])


def _unary(op_type):
    def lower(e, n, a):
        return e.emit(op_type, [e.operand(a[0], e.out().dtype)])
    return lower


for _op, _t in (("relu", "Relu"), ("sigmoid", "Sigmoid"), ("tanh", "Tanh"), ("exp", "Exp"), ("log", "Log"),
                ("sqrt", "Sqrt"), ("neg", "Neg"), ("abs", "Abs"), ("erf", "Erf"), ("sin", "Sin"), ("cos", "Cos"),
                ("reciprocal", "Reciprocal"), ("floor", "Floor"), ("ceil", "Ceil")):
    lowering(_op)(_unary(_t))


@lowering("rsqrt")
def _rsqrt(e, n, a):
    return e.emit("Reciprocal", [e.emit("Sqrt", [e.operand(a[0], e.out().dtype)])])


@lowering("silu")
def _silu(e, n, a):
    x = e.operand(a[0], e.out().dtype)
    return e.emit("Mul", [x, e.emit("Sigmoid", [x])])


@lowering("gelu")
def _gelu(e, n, a):
    dt = e.out().dtype
    x = e.operand(a[0], dt)
    approx = a[1] if len(a) > 1 else "none"
    half = e.emit("Mul", [x, e.const(0.5, dt)])
    if approx == "tanh":
        x3 = e.emit("Mul", [e.emit("Mul", [x, x]), x])
        inner = e.emit("Add", [x, e.emit("Mul", [x3, e.const(0.044715, dt)])])
        t = e.emit("Tanh", [e.emit("Mul", [inner, e.const(math.sqrt(2.0 / math.pi), dt)])])
    elif approx == "none":
        t = e.emit("Erf", [e.emit("Mul", [x, e.const(1.0 / math.sqrt(2.0), dt)])])
    else:
        e.unsupported(f"approximate={approx!r}")
    return e.emit("Mul", [half, e.emit("Add", [t, e.const(1.0, dt)])])


@lowering("softmax", "log_softmax", "_softmax", "_log_softmax")
def _softmax(e, n, a):
    x = e.operand(a[0], e.out().dtype)
    return e.emit("Softmax" if "log" not in n.op else "LogSoftmax", [x], axis=int(a[1]))


@lowering("clone", "contiguous", "detach", "alias", "lift_fresh")
def _identity(e, n, a):
    return e.emit("Identity", [e.name(a[0])])


@lowering("dropout", "feature_dropout", "alpha_dropout")
def _dropout(e, n, a):
    if len(a) > 2 and a[2]:
        e.unsupported("dropout in training mode (train=True)")
    return e.emit("Identity", [e.name(a[0])])


@lowering("matmul", "mm", "bmm")
def _matmul(e, n, a):
    dt = e.out().dtype
    return e.emit("MatMul", [e.operand(a[0], dt), e.operand(a[1], dt)])


@lowering("addmm")
def _addmm(e, n, a):
    dt = e.out().dtype
    c, m1, m2 = (e.operand(x, dt) for x in a[:3])
    beta, alpha = (a[3] if len(a) > 3 else 1), (a[4] if len(a) > 4 else 1)
    return e.emit("Gemm", [m1, m2, c], alpha=float(alpha), beta=float(beta))


@lowering("linear")
def _linear(e, n, a):
    dt = e.out().dtype
    x, w = e.operand(a[0], dt), e.operand(a[1], dt)
    b = e.operand(a[2], dt) if len(a) > 2 and a[2] is not None else None
    if len(e.shape(a[0])) == 2:
        return e.emit("Gemm", [x, w] + ([b] if b else []), transB=1)
    y = e.emit("MatMul", [x, e.emit("Transpose", [w], perm=[1, 0])])
    return e.emit("Add", [y, b]) if b else y


@lowering("layer_norm")
def _layer_norm(e, n, a):
    dt = e.out().dtype
    x = e.operand(a[0], dt)
    shape = list(a[1])
    w = e.operand(a[2], dt) if a[2] is not None else e.const(np.ones(shape), dt)
    ins = [x, w] + ([e.operand(a[3], dt)] if a[3] is not None else [])
    eps = a[4] if len(a) > 4 else 1e-5
    return e.emit("LayerNormalization", ins, axis=-len(shape), epsilon=float(eps))


@lowering("batch_norm")
def _batch_norm(e, n, a):
    dt = e.out().dtype
    x, w, b, mean, var, training, momentum, eps = a[:8]
    if training:
        e.unsupported("batch_norm in training mode (export the module in eval mode)")
    if mean is None or var is None:
        e.unsupported("batch_norm without running statistics")
    c = e.shape(a[0])[1]
    w = e.operand(w, dt) if w is not None else e.const(np.ones(c), dt)
    b = e.operand(b, dt) if b is not None else e.const(np.zeros(c), dt)
    return e.emit("BatchNormalization", [e.operand(x, dt), w, b, e.operand(mean, dt), e.operand(var, dt)],
                  epsilon=float(eps),
                  momentum=float(1.0 - momentum))


def _pair(v, k=2):
    return [int(v)] * k if isinstance(v, int) else [int(x) for x in v]


@lowering("conv2d", "conv1d", "conv3d")
def _conv(e, n, a):
    dt = e.out().dtype
    k = int(n.op[4])
    x, w = e.operand(a[0], dt), e.operand(a[1], dt)
    b = [e.operand(a[2], dt)] if a[2] is not None else []
    stride, padding, dilation, groups = a[3], a[4], a[5], a[6]
    if isinstance(padding, str):
        e.unsupported(f"padding={padding!r}")
    p = _pair(padding, k)
    kernel = e.shape(a[1])[2:]
    return e.emit("Conv", [x, w] + b, strides=_pair(stride, k), pads=p + p, dilations=_pair(dilation, k),
                  group=int(groups), kernel_shape=kernel)


@lowering("max_pool2d_with_indices", "max_pool1d_with_indices")
def _max_pool_with_indices(e, n, a):
    if n.outputs[1] in e.uses:
        e.unsupported("the indices of max_pool (ONNX MaxPool numbers them differently)")
    return _max_pool(e, n, a)


@lowering("max_pool2d", "max_pool1d")
def _max_pool(e, n, a):
    k = 2 if "2d" in n.op else 1
    kernel = _pair(a[1], k)
    stride = _pair(a[2], k) if a[2] is not None and a[2] != [] else kernel
    p = _pair(a[3], k)
    return e.emit("MaxPool", [e.name(a[0])], kernel_shape=kernel, strides=stride, pads=p + p,
                  dilations=_pair(a[4], k), ceil_mode=int(bool(a[5])))


@lowering("avg_pool2d", "avg_pool1d")
def _avg_pool(e, n, a):
    k = 2 if "2d" in n.op else 1
    kernel = _pair(a[1], k)
    stride = _pair(a[2], k) if a[2] is not None and a[2] != [] else kernel
    p = _pair(a[3], k)
    if len(a) > 6 and a[6] is not None:
        e.unsupported("divisor_override")
    return e.emit("AveragePool", [e.name(a[0])], kernel_shape=kernel, strides=stride, pads=p + p,
                  ceil_mode=int(bool(a[4])), count_include_pad=int(bool(a[5])))


@lowering("adaptive_avg_pool2d", "adaptive_avg_pool1d")
def _adaptive_avg_pool(e, n, a):
    k = 2 if "2d" in n.op else 1
    out = _pair(a[1], k)
    spatial = e.shape(a[0])[-k:]
    if all(o == 1 for o in out):
        return e.emit("GlobalAveragePool", [e.name(a[0])])
    if all(s % o == 0 for s, o in zip(spatial, out)):
        kern = [s // o for s, o in zip(spatial, out)]
        return e.emit("AveragePool", [e.name(a[0])], kernel_shape=kern, strides=kern)
    e.unsupported(f"output_size {out} that does not divide the input size {spatial}")


@lowering("embedding")
def _embedding(e, n, a):
    return e.emit("Gather", [e.name(a[0]), e.operand(a[1], "int64")], axis=0)


@lowering("permute")
def _permute(e, n, a):
    r = len(e.shape(a[0]))
    return e.emit("Transpose", [e.name(a[0])], perm=[_norm(int(d), r) for d in a[1]])


@lowering("transpose.int", "transpose", "swapaxes", "swapdims")
def _transpose(e, n, a):
    r = len(e.shape(a[0]))
    perm = list(range(r))
    d0, d1 = _norm(int(a[1]), r), _norm(int(a[2]), r)
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return e.emit("Transpose", [e.name(a[0])], perm=perm)


@lowering("t")
def _t(e, n, a):
    if len(e.shape(a[0])) < 2:
        return e.emit("Identity", [e.name(a[0])])
    return e.emit("Transpose", [e.name(a[0])], perm=[1, 0])


@lowering("unsqueeze")
def _unsqueeze(e, n, a):
    r = len(e.shape(a[0])) + 1
    return e.emit("Unsqueeze", [e.name(a[0]), e.ints([_norm(int(a[1]), r)])])


@lowering("squeeze", "squeeze.dim", "squeeze.dims")
def _squeeze(e, n, a):
    shape = e.shape(a[0])
    r = len(shape)
    if n.op == "squeeze":
        dims = [i for i, s in enumerate(shape) if s == 1]
    else:
        dims = [a[1]] if isinstance(a[1], int) else list(a[1])
        dims = [_norm(int(d), r) for d in dims]
        dims = [d for d in dims if shape[d] == 1]
    sym = e.symof(a[0])
    if any(isinstance(sym[d], str) for d in dims):
        e.unsupported("squeezing a dimension marked dynamic")
    if not dims:
        return e.emit("Identity", [e.name(a[0])])
    return e.emit("Squeeze", [e.name(a[0]), e.ints(dims)])


@lowering("view", "reshape", "flatten.using_ints", "flatten", "unflatten", "view_as", "reshape_as", "_unsafe_view")
def _reshape(e, n, a):
    x = a[0]
    src, dst = e.shape(x), list(e.out().shape)
    sym = e.symof(x)
    if n.op in ("view", "reshape", "_unsafe_view") and isinstance(a[1], list) and e.has_int_values(a[1]):
        # sizes computed from dynamic dims (strata.export with dynamic shapes): the target is built from them
        return e.emit("Reshape", [e.name(x), e.int_list(a[1])])
    target = exact_shape(e, n.outputs[0])
    if target is not None:   # the output's symbolic shape (flatten, view(-1, 16), view_as, ...)
        return e.emit("Reshape", [e.name(x), target])
    if not any(isinstance(s, str) for s in sym):
        e.sym[n.outputs[0]] = list(dst)
        return e.emit("Reshape", [e.name(x), e.ints(dst)])
    pieces = [None] * len(dst)
    out_sym = list(dst)
    for gi, gj in _groups(src, dst):
        dyn = [i for i in gi if isinstance(sym[i], str)]
        if not dyn:
            for j in gj:
                pieces[j] = dst[j]
            continue
        if len(gi) == 1 and len(gj) == 1:
            pieces[gj[0]] = ("dim", gi[0])
            out_sym[gj[0]] = sym[gi[0]]
        elif len(gj) == 1:
            pieces[gj[0]] = ("prod", gi)
            out_sym[gj[0]] = "(" + "*".join(str(sym[i]) for i in gi) + ")"
        else:
            big = [j for j in gj if dst[j] != 1]
            for j in gj:
                pieces[j] = dst[j]
            pieces[big[0] if big else gj[0]] = ("infer", gi)
            out_sym[big[0] if big else gj[0]] = "?" + "*".join(str(sym[i]) for i in gi)
    e.sym[n.outputs[0]] = out_sym
    open_ = [k for k, p in enumerate(pieces) if isinstance(p, tuple) and p[0] in ("prod", "infer")]
    if sum(1 for k in open_ if pieces[k][0] == "infer") > 1:
        e.unsupported("a reshape that splits more than one dynamic dimension")
    parts = []
    shape = None
    for k, p in enumerate(pieces):
        if isinstance(p, int):
            parts.append(e.ints([p]))
        elif p[0] == "dim":
            shape = shape or e.shape_of(x)
            parts.append(e.emit("Gather", [shape, e.ints([p[1]])], axis=0))
        elif len(open_) == 1:
            parts.append(e.ints([-1]))
        elif p[0] == "prod":
            shape = shape or e.shape_of(x)
            acc = None
            for i in p[1]:
                d = e.emit("Gather", [shape, e.ints([i])], axis=0)
                acc = d if acc is None else e.emit("Mul", [acc, d])
            parts.append(acc)
        else:
            parts.append(e.ints([-1]))
    target = e.emit("Concat", parts, axis=0) if len(parts) > 1 else parts[0]
    return e.emit("Reshape", [e.name(x), target])


@lowering("expand", "expand_as", "broadcast_to")
def _expand(e, n, a):
    x = a[0]
    src, dst = e.shape(x), list(e.out().shape)
    sym = e.symof(x)
    if n.op == "expand" and e.has_int_values(a[1]):
        # -1 keeps a dim; ONNX Expand broadcasts, where 1 keeps it
        return e.emit("Expand", [e.name(x), e.int_list(a[1], map_const=lambda v: 1 if v == -1 else v)])
    target = exact_shape(e, n.outputs[0])
    if target is not None:
        return e.emit("Expand", [e.name(x), target])
    off = len(dst) - len(src)
    target, out_sym = [], []
    for k, d in enumerate(dst):
        j = k - off
        if j >= 0 and src[j] == d:
            target.append(1)
            out_sym.append(sym[j])
        else:
            target.append(d)
            out_sym.append(d)
    e.sym[n.outputs[0]] = out_sym
    return e.emit("Expand", [e.name(x), e.ints(target)])


@lowering("cat", "concat", "concatenate")
def _cat(e, n, a):
    dt = e.out().dtype
    ts = [t for t in a[0] if e.is_value(t) and e.shape(t) != [0]]
    r = len(e.out().shape)
    dim = _norm(int(a[1]) if len(a) > 1 else 0, r)
    return e.emit("Concat", [e.operand(t, dt) for t in ts], axis=dim)


def _reduce_dims(a, rank):
    dims = a[1] if len(a) > 1 else None
    if dims is None or dims == []:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted(_norm(int(d), rank) for d in dims)


@lowering("mean", "mean.dim", "sum", "sum.dim_IntList", "amax", "amin")
def _reduce(e, n, a):
    x = a[0]
    rank = len(e.shape(x))
    dims = _reduce_dims(a, rank)
    keep = int(bool(a[2])) if len(a) > 2 else 0
    base = n.op.split(".")[0]
    xin = e.operand(x, e.out().dtype)
    if rank == 0:
        return e.emit("Identity", [xin])
    if base == "sum":
        return e.emit("ReduceSum", [xin, e.ints(dims)], keepdims=keep)
    op = {"mean": "ReduceMean", "amax": "ReduceMax", "amin": "ReduceMin"}[base]
    if e.opset >= 18:  # axes became an input
        return e.emit(op, [xin, e.ints(dims)], keepdims=keep)
    return e.emit(op, [xin], axes=dims, keepdims=keep)


def _full_slice(shape, dim, start, end, step):
    return step == 1 and (start in (None, 0) or start <= -shape[dim]) and (end is None or end >= shape[dim])


@lowering("slice.Tensor", "slice")
def _slice(e, n, a):
    x = a[0]
    shape = e.shape(x)
    dim = _norm(int(a[1]), len(shape))
    start, end, step = a[2], a[3], int(a[4]) if len(a) > 4 else 1
    sym = list(e.symof(x))
    if e.has_int_values(start) or e.has_int_values(end):
        st = e.int1(0 if start is None else start)
        en = e.int1((1 << 62) if end is None else end)
        return e.emit("Slice", [e.name(x), st, en, e.ints([dim]), e.ints([step])])
    if _full_slice(shape, dim, start, end, step):
        e.sym[n.outputs[0]] = sym
        return e.emit("Identity", [e.name(x)])
    sym[dim] = e.out().shape[dim]
    e.sym[n.outputs[0]] = sym
    start = 0 if start is None else int(start)
    end = (1 << 62) if end is None else min(int(end), 1 << 62)
    return e.emit("Slice", [e.name(x), e.ints([start]), e.ints([end]), e.ints([dim]), e.ints([step])])


@lowering("narrow")
def _narrow(e, n, a):
    x = a[0]
    shape = e.shape(x)
    dim = _norm(int(a[1]), len(shape))
    if e.has_int_values(a[2]) or e.has_int_values(a[3]):
        if not e.is_value(a[2]) and int(a[2]) < 0:
            e.unsupported("a negative start with a dynamic length")
        st = e.int1(a[2])
        return e.emit("Slice", [e.name(x), st, e.emit("Add", [st, e.int1(a[3])]), e.ints([dim])])
    start = _norm(int(a[2]), shape[dim])
    sym = list(e.symof(x))
    sym[dim] = int(a[3])
    e.sym[n.outputs[0]] = sym
    return e.emit("Slice", [e.name(x), e.ints([start]), e.ints([start + int(a[3])]), e.ints([dim])])


@lowering("select.int", "select")
def _select(e, n, a):
    x = a[0]
    sym = list(e.symof(x))
    dim = _norm(int(a[1]), len(sym))
    del sym[dim]
    e.sym[n.outputs[0]] = sym
    if e.has_int_values(a[2]):
        return e.emit("Gather", [e.name(x), e.int0(a[2])], axis=dim)
    return e.emit("Gather", [e.name(x), e.const(int(a[2]), "int64")], axis=dim)


@lowering("chunk", "split.Tensor", "split", "split_with_sizes", "unbind.int", "unbind")
def _split(e, n, a):
    x = a[0]
    shape = e.shape(x)
    unbind = n.op.startswith("unbind")
    dim = _norm(int(a[1] if unbind else a[2]) if len(a) > (1 if unbind else 2) else 0, len(shape))
    sizes = [e.values[o].shape[dim] if not unbind else 1 for o in n.outputs]
    sym = list(e.symof(x))
    if isinstance(sym[dim], str) and getattr(e, "exact", False) and not unbind:
        # the pieces' sizes along the dim from the program's symbolic shapes ((t + 1)//2 and t//2)
        from ..export._dims import is_tree
        parts = []
        for o in n.outputs:
            d = e.ep.sym_shapes.get(o, e.values[o].shape)[dim]
            parts.append(e.tree_value(d) if is_tree(d) else e.ints([int(d)]))
        sizes_in = parts[0] if len(parts) == 1 else e.emit("Concat", parts, axis=0)
        outs = e.emit("Split", [e.name(x), sizes_in], n_out=len(parts), axis=dim)
        return outs if isinstance(outs, list) else [outs]
    if isinstance(sym[dim], str):
        e.unsupported("splitting along a dynamic dimension")
    outs = e.emit("Split", [e.name(x), e.ints(sizes)], n_out=len(sizes), axis=dim)
    outs = outs if isinstance(outs, list) else [outs]
    for o in n.outputs:
        s = list(sym)
        s[dim] = e.values[o].shape[dim] if not unbind else 1
        if unbind:
            del s[dim]
        e.sym[o] = s
    if unbind:
        outs = [e.emit("Squeeze", [o, e.ints([dim])]) for o in outs]
    return outs


def _compute_dtype(e, args):
    """The dtype two operands of a comparison / where are compared in (type promotion)."""
    import strata
    vals = [x for x in args if e.is_value(x)]
    dt = vals[0].dtype if vals else strata.get_default_dtype()
    for v in vals[1:]:
        dt = strata.promote_types(dt, v.dtype)
    if not dt.is_floating_point and any(isinstance(x, float) for x in args):
        dt = strata.get_default_dtype()
    return dt


def _compare(op_type, negate=False):
    def lower(e, n, a):
        dt = _compute_dtype(e, a[:2])
        r = e.emit(op_type, [e.operand(a[0], dt), e.operand(a[1], dt)])
        return e.emit("Not", [r]) if negate else r
    return lower


for _op, _t, _neg in (("gt", "Greater", False), ("lt", "Less", False), ("ge", "GreaterOrEqual", False),
                      ("le", "LessOrEqual", False), ("eq", "Equal", False), ("ne", "Equal", True)):
    lowering(_op, _op + ".Tensor", _op + ".Scalar")(_compare(_t, _neg))


def _logical(op_type):
    def lower(e, n, a):
        if _dname(e.out().dtype) != "bool":
            e.unsupported(f"integer operands (ONNX {op_type} is boolean; bitwise ops on integers need opset 18)")
        return e.emit(op_type, [e.operand(a[0], "bool"), e.operand(a[1], "bool")])
    return lower


for _op, _t in (("bitwise_and", "And"), ("bitwise_or", "Or"), ("bitwise_xor", "Xor"), ("logical_and", "And"),
                ("logical_or", "Or"), ("logical_xor", "Xor")):
    lowering(_op, _op + ".Tensor")(_logical(_t))


@lowering("logical_not")
def _logical_not(e, n, a):
    return e.emit("Not", [e.operand(a[0], "bool")])


@lowering("where", "where.self")
def _where(e, n, a):
    dt = e.out().dtype
    return e.emit("Where", [e.operand(a[0], "bool"), e.operand(a[1], dt), e.operand(a[2], dt)])


@lowering("masked_fill", "masked_fill.Scalar", "masked_fill.Tensor")
def _masked_fill(e, n, a):
    dt = e.out().dtype
    return e.emit("Where", [e.operand(a[1], "bool"), e.operand(a[2], dt), e.operand(a[0], dt)])


@lowering("_to_copy", "to", "type_as")
def _to_copy(e, n, a):
    if _dname(e.dtype(a[0])) == _dname(e.out().dtype):
        return e.emit("Identity", [e.name(a[0])])
    return e.emit("Cast", [e.name(a[0])], to=onnx_dtype(e.out().dtype))


@lowering("scaled_dot_product_attention")
def _sdpa(e, n, a):
    q, k, v, mask, dropout_p, is_causal = a[:6]
    scale = a[6] if len(a) > 6 else None
    if dropout_p:
        e.unsupported("dropout_p > 0")
    if len(a) > 7 and a[7]:
        e.unsupported("enable_gqa=True")
    dt = e.out().dtype
    L, S, E = e.shape(q)[-2], e.shape(k)[-2], e.shape(q)[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    rank = len(e.shape(k))
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    kt = e.emit("Transpose", [e.operand(k, dt)], perm=perm)
    scores = e.emit("Mul", [e.emit("MatMul", [e.operand(q, dt), kt]), e.const(scale, dt)])
    if is_causal and (isinstance(e.symof(q)[-2], str) or isinstance(e.symof(k)[-2], str)):
        # keep[i, j] = j <= i, from the sizes at run time (torch's top-left aligned causal mask)
        qs, ks = e.shape_of(q), e.shape_of(k)
        lq = e.emit("Squeeze", [e.emit("Gather", [qs, e.ints([len(e.shape(q)) - 2])], axis=0), e.ints([0])])
        lk = e.emit("Squeeze", [e.emit("Gather", [ks, e.ints([rank - 2])], axis=0), e.ints([0])])
        zero, one = e.const(0, "int64"), e.const(1, "int64")
        rows = e.emit("Unsqueeze", [e.emit("Range", [zero, lq, one]), e.ints([1])])
        cols = e.emit("Unsqueeze", [e.emit("Range", [zero, lk, one]), e.ints([0])])
        keep = e.emit("LessOrEqual", [cols, rows])
        scores = e.emit("Where", [keep, scores, e.const(-np.inf, dt)])
    elif is_causal:
        keep = np.tril(np.ones((L, S), dtype=bool))
        scores = e.emit("Where", [e.const(keep, "bool"), scores, e.const(-np.inf, dt)])
    if mask is not None:
        if _dname(e.dtype(mask)) == "bool":
            scores = e.emit("Where", [e.name(mask), scores, e.const(-np.inf, dt)])
        else:
            scores = e.emit("Add", [scores, e.operand(mask, dt)])
    return e.emit("MatMul", [e.emit("Softmax", [scores], axis=-1), e.operand(v, dt)])


def _creation_dtype(e, n):
    return e.out().dtype


@lowering("zeros", "ones", "full", "empty")
def _filled(e, n, a):
    dt = _creation_dtype(e, n)
    fill = {"zeros": 0, "ones": 1, "empty": 0}.get(n.op)
    if fill is None:
        fill = a[1]
        if e.is_value(fill):
            e.unsupported("a fill value computed in the graph")
    value = e.onnx.numpy_helper.from_array(np.asarray([fill], dtype=_NP[_dname(dt)]), "value")
    return e.emit("ConstantOfShape", [e.int_list(a[0])], value=value)


@lowering("arange", "arange.start", "arange.start_step")
def _arange(e, n, a):
    dt = e.out().dtype
    start, end, step = a[0], a[1], a[2] if len(a) > 2 else 1

    def scalar(v):
        if e.is_value(v):
            x = e.int0(v)
            return x if _dname(dt) == "int64" else e.emit("Cast", [x], to=onnx_dtype(dt))
        return e.const(v, dt)
    return e.emit("Range", [scalar(start), scalar(end), scalar(step)])


@lowering("tril", "triu")
def _trilu(e, n, a):
    k = a[1] if len(a) > 1 else 0
    return e.emit("Trilu", [e.name(a[0]), e.int0(k)], upper=int(n.op == "triu"))


def _sym_sdpa(e, n, a):
    return list(e.symof(a[0]))[:-1] + [e.shape(a[2])[-1]]


# Symbolic-dimension rules of ops whose output dimensions do not line up with their inputs'
# from the right (everything else: _broadcast_sym).
def _sym_reduce(e, n, a):
    s = e.symof(a[0])
    dims = set(_reduce_dims(a, len(s)))
    keep = len(a) > 2 and bool(a[2])
    return [1 if i in dims else d for i, d in enumerate(s)] if keep else [d for i, d in enumerate(s) if i not in dims]


def _sym_permute(e, n, a):
    s = e.symof(a[0])
    if n.op == "permute":
        return [s[_norm(int(d), len(s))] for d in a[1]]
    if n.op == "t":
        return s[::-1]
    s = list(s)
    d0, d1 = _norm(int(a[1]), len(s)), _norm(int(a[2]), len(s))
    s[d0], s[d1] = s[d1], s[d0]
    return s


def _sym_unsqueeze(e, n, a):
    s = list(e.symof(a[0]))
    s.insert(_norm(int(a[1]), len(s) + 1), 1)
    return s


def _sym_squeeze(e, n, a):
    s, shape = e.symof(a[0]), e.shape(a[0])
    if n.op == "squeeze":
        return [d for d, z in zip(s, shape) if z != 1]
    dims = [a[1]] if isinstance(a[1], int) else list(a[1])
    dims = {_norm(int(d), len(s)) for d in dims}
    return [d for i, (d, z) in enumerate(zip(s, shape)) if not (i in dims and z == 1)]


def _sym_matmul(e, n, a):
    out = list(e.out().shape)
    sa, sb = list(e.symof(a[0])), list(e.symof(a[1]))
    if len(sa) == 1 or len(sb) == 1:
        return out
    res = list(out)
    res[-2], res[-1] = sa[-2], sb[-1]
    for s in (sa[:-2], sb[:-2]):
        off = len(out) - 2 - len(s)
        for j, d in enumerate(s):
            if isinstance(d, str):
                res[off + j] = d
    return res


def _sym_linear(e, n, a):
    return list(e.symof(a[0]))[:-1] + [e.shape(a[1])[0]]


def _sym_addmm(e, n, a):
    return [e.symof(a[1])[0], e.symof(a[2])[1]]


def _sym_embedding(e, n, a):
    return list(e.symof(a[1])) + [e.shape(a[0])[1]]


def _sym_cat(e, n, a):
    ts = [t for t in a[0] if e.is_value(t) and e.shape(t) != [0]]
    r = len(e.out().shape)
    dim = _norm(int(a[1]) if len(a) > 1 else 0, r)
    res = list(e.symof(ts[0]))
    res[dim] = e.out().shape[dim]
    if any(isinstance(e.symof(t)[dim], str) for t in ts):
        res[dim] = "?" + "+".join(str(e.symof(t)[dim]) for t in ts)
    for t in ts[1:]:
        for k, d in enumerate(e.symof(t)):
            if k != dim and isinstance(d, str):
                res[k] = d
    return res


def _sym_conv(e, n, a):
    s = e.symof(a[0])
    out = list(e.out().shape)
    res = [s[0]] + out[1:]
    for k in range(2, len(s)):
        if isinstance(s[k], str):
            res[k] = f"?{n.op}({s[k]})"
    return res


SYM_RULES = {"mean": _sym_reduce, "mean.dim": _sym_reduce, "sum": _sym_reduce, "sum.dim_IntList": _sym_reduce,
             "amax": _sym_reduce, "amin": _sym_reduce, "permute": _sym_permute, "t": _sym_permute,
             "transpose.int": _sym_permute, "transpose": _sym_permute, "unsqueeze": _sym_unsqueeze,
             "squeeze": _sym_squeeze, "squeeze.dim": _sym_squeeze, "squeeze.dims": _sym_squeeze,
             "matmul": _sym_matmul, "mm": _sym_matmul, "bmm": _sym_matmul, "linear": _sym_linear,
             "addmm": _sym_addmm, "embedding": _sym_embedding, "cat": _sym_cat, "concat": _sym_cat,
             "concatenate": _sym_cat, "scaled_dot_product_attention": _sym_sdpa}
for _op in ("conv1d", "conv2d", "conv3d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
            "adaptive_avg_pool1d", "adaptive_avg_pool2d"):
    SYM_RULES[_op] = _sym_conv


# -- the model -----------------------------------------------------------------------------------

def _dynamic_axes(spec, names):
    """{name: {axis: dim_name}} from torch's dynamic_axes."""
    out = {}
    for name, axes in (spec or {}).items():
        if name not in names:
            raise ValueError(f"strata.onnx.export: dynamic_axes names {name!r}, which is not an input or output name "
                             f"({', '.join(names)})")
        if isinstance(axes, dict):
            out[name] = {int(k): str(v) for k, v in axes.items()}
        else:
            out[name] = {int(k): f"{name}_dynamic_axes_{int(k) + 1}" for k in axes}
    return out


def _value_info(helper, name, dtype, shape):
    return helper.make_tensor_value_info(name, onnx_dtype(dtype), [d if isinstance(d, (int, str)) else None
                                                                   for d in shape])


def lower(ep, *, opset=17, input_names=None, output_names=None, dynamic_axes=None, export_params=True,
          params_as_inputs=False):
    import onnx
    from onnx import helper
    g = ep.graph
    e = Emitter(g, opset)
    e.ep = ep
    values = g.values
    sig = ep.graph_signature
    user = [(vid, s) for vid, s in zip(g.inputs, sig.input_specs) if s.kind == "user_input"]
    input_names = list(input_names or [])
    if len(input_names) > len(user):
        raise ValueError(f"strata.onnx.export: {len(input_names)} input_names for {len(user)} inputs")
    in_names = input_names + [values[vid].name for vid, _ in user[len(input_names):]]
    outs = list(g.outputs)
    output_names = list(output_names or [])
    if len(output_names) > len(outs):
        raise ValueError(f"strata.onnx.export: {len(output_names)} output_names for {len(outs)} outputs")
    out_names = output_names + [values[v].name for v in outs[len(output_names):]]
    dyn = _dynamic_axes(dynamic_axes, in_names + out_names)
    for nm in in_names + out_names:
        e.used.add(nm)

    graph_inputs, inits = [], []
    # Dynamic dims the program has as symbols (strata.export with dynamic shapes): every value's
    # symbolic shape, with the symbols' names as ONNX dim_params.
    from ..export._dims import tree_str, is_tree
    for vid, shape in ep.sym_shapes.items():
        e.sym[vid] = [tree_str(d) if is_tree(d) else d for d in shape]
    for (vid, s), nm in zip(user, in_names):
        v = values[vid]
        e.names[vid] = nm
        shape = list(e.sym.get(vid) or v.shape)
        for ax, dn in dyn.get(nm, {}).items():
            if not 0 <= ax < len(shape):
                raise ValueError(f"strata.onnx.export: dynamic_axes: input {nm!r} has {len(shape)} dimensions, "
                                 f"no axis {ax}")
            shape[ax] = dn
        e.sym[vid] = shape
        graph_inputs.append(_value_info(helper, nm, v.dtype, shape))
    tensors = dict(ep.state_dict)
    tensors.update(ep.constants)
    for vid, s in zip(g.inputs, sig.input_specs):
        if s.kind in ("user_input", "sym_size"):
            continue
        nm = e.fresh(s.target)
        e.names[vid] = nm
        t = tensors[s.target]
        if params_as_inputs:
            graph_inputs.append(_value_info(helper, nm, t.dtype, list(t.shape)))
        if export_params:
            inits.append(onnx.numpy_helper.from_array(_to_numpy(t), nm))
    for cid in g.constants:
        v = values[cid]
        nm = e.fresh(v.name)
        e.names[cid] = nm
        c = v.constant
        if v.kind == "tensor":
            inits.append(onnx.numpy_helper.from_array(_to_numpy(c), nm))
        else:
            inits.append(onnx.numpy_helper.from_array(np.asarray(c), nm))

    _lower_sym_sizes(e, ep, user)

    # Outputs produced by a node write to their output name directly.
    first_out = {}
    for vid, nm in zip(outs, out_names):
        if vid not in first_out and vid not in e.names:
            first_out[vid] = nm

    e.uses = set(outs)
    for n in g.nodes:
        for x in n.args:
            for y in (x if isinstance(x, list) else [x]):
                if isinstance(y, _compile.Value):
                    e.uses.add(y.id)
    last_source = ""
    for n in g.nodes:
        e.node = n
        last_source = n.source or last_source
        e.where = f"at {n.source}" if n.source else (f"after {last_source}" if last_source else "source unknown")
        fn = LOWERINGS.get(n.op)
        if fn is None:
            raise UnsupportedOperatorError(f"strata.onnx.export: no ONNX lowering for op '{n.op}' ({n.schema}) "
                                           f"{e.where}")
        e.node_base = values[n.outputs[0]].name if n.outputs else "t"
        args = n.args
        result = fn(e, n, args)
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        if len(results) == 1 and n.outputs[0] not in e.sym:
            rule = SYM_RULES.get(n.op, _broadcast_sym)
            e.sym[n.outputs[0]] = rule(e, n, args)
        if getattr(e, "exact", False):   # the program's symbolic shapes are exact: they win over the rules
            for vid in n.outputs:
                shape = ep.sym_shapes.get(vid)
                if shape is not None:
                    e.sym[vid] = [tree_str(d) if is_tree(d) else d for d in shape]
                elif values[vid].kind == "tensor":
                    e.sym[vid] = list(values[vid].shape)
        for vid, res in zip(n.outputs, results):
            if res is None:
                continue
            want = first_out.get(vid)
            if want is not None:
                e.nodes.append(helper.make_node("Identity", [res], [want], name=e.fresh("n_output")))
                e.used.add(want)
                res = want
            e.names[vid] = res

    graph_outputs = []
    for vid, nm in zip(outs, out_names):
        v = values[vid]
        if e.names[vid] != nm:
            e.node = None
            e.nodes.append(helper.make_node("Identity", [e.names[vid]], [nm], name=e.fresh("n_output")))
        shape = ep.sym_shapes.get(vid)
        shape = [tree_str(d) if is_tree(d) else d for d in shape] if shape else list(e.sym.get(vid) or v.shape)
        shape = [d if isinstance(d, int) else str(d) for d in shape]
        for ax, dn in dyn.get(nm, {}).items():
            if not 0 <= ax < len(shape):
                raise ValueError(f"strata.onnx.export: dynamic_axes: output {nm!r} has {len(shape)} dimensions, "
                                 f"no axis {ax}")
            shape[ax] = dn
        if v.kind != "tensor":
            raise OnnxExporterError(f"strata.onnx.export: output {nm!r} is a {v.kind}, not a tensor")
        graph_outputs.append(_value_info(helper, nm, v.dtype, shape))

    graph = helper.make_graph(e.nodes, "strata_graph", graph_inputs, graph_outputs, inits + e.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="strata",
                              producer_version=_version())
    # The IR version that goes with the opset (onnxruntime refuses IR versions newer than it knows).
    model.ir_version = {17: 8, 18: 8, 19: 9, 20: 9, 21: 10}.get(opset, 10)
    onnx.checker.check_model(model)
    return model


def _lower_sym_sizes(e, ep, user):
    """The program's symbols (strata.export with dynamic shapes) read from the ONNX inputs' shapes with
    Shape/Gather, and the int graph inputs (sizes computed from them: the b of x.view(b, -1)) built with
    integer arithmetic; each a 1-D int64 tensor of one element. e.tree_value(tree) builds any size the
    same way (exact reshape targets below)."""
    if not ep.symbols:
        return
    by_path = {tuple(tuple(p) for p in s.target): vid for vid, s in user}
    locs = {}
    for y in ep.symbols:
        vid = by_path.get(tuple(tuple(p) for p in y["path"]))
        if vid is None:
            raise OnnxExporterError(f"strata.onnx.export: the dynamic dim {y['name']} is read from an input that is "
                                    "not a graph input")
        locs[y["name"]] = (vid, y)
    cache = {}
    ops = {"+": "Add", "-": "Sub", "*": "Mul", "//": "Div"}   # sizes are positive: Div is floor division

    def symbol(name):
        v = cache.get(name)
        if v is None:
            vid, y = locs[name]
            base, e.node_base = e.node_base, "size"
            v = e.emit("Gather", [e.shape_of(e.g.value(vid)), e.ints([y["dim"]])], axis=0)
            if y.get("offset", 0):   # read from a derived dim c * symbol + o
                v = e.emit("Sub", [v, e.ints([y["offset"]])])
            if y.get("coeff", 1) != 1:
                v = e.emit("Div", [v, e.ints([y["coeff"]])])
            e.node_base = base
            cache[name] = v
        return v

    def build(t):
        if isinstance(t, int):
            return e.ints([t])
        if t[0] == "sym":
            return symbol(t[1])
        return e.emit(ops[t[0]], [build(t[1]), build(t[2])])
    e.tree_value = build
    e.exact = True
    e.node_base = "size"
    for vid, s in zip(ep.graph.inputs, ep.graph_signature.input_specs):
        if s.kind == "sym_size":
            e.names[vid] = build(s.target)


def exact_shape(e, vid):
    """The shape of a value as one 1-D int64 tensor, built from the symbols (None: the program has no
    symbols, or the value is static)."""
    from ..export._dims import is_tree
    shape = e.ep.sym_shapes.get(vid) if getattr(e, "exact", False) else None
    if not shape:
        return None
    parts, run = [], []
    for d in shape:
        if is_tree(d):
            if run:
                parts.append(e.ints(run))
                run = []
            parts.append(e.tree_value(d))
        else:
            run.append(int(d))
    if run:
        parts.append(e.ints(run))
    return parts[0] if len(parts) == 1 else e.emit("Concat", parts, axis=0)


def _version():
    try:
        from ..version import __version__
        return str(__version__)
    except Exception:
        return "0"
