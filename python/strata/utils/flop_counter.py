"""strata.utils.flop_counter: FlopCounterMode counts the FLOPs of matrix products, convolutions and attention, in
total, per op and per module, in the forward and the backward pass.

How it observes ops: the block runs as a profiler session (Note [The profiler] in src/profiler/profiler.h) with
`record_args` on, so every dispatched op call is recorded with its input shapes, its int/bool arguments and its
output shapes; nothing is added to the normal dispatch path. After the block, each op with a formula is counted
once: an op whose caller (an enclosing op event) was counted already is part of that count (linear's inner matmul,
matmul's inner mm). Module attribution comes from a ModuleTracker whose changes are written into the same event
stream as instantaneous markers, so ops and module boundaries are ordered exactly.

The formulas are torch's (2 * multiply-adds; bias terms and pointwise ops are not counted; convolution as
torch.utils.flop_counter.conv_flop_count, its backward per gradient computed). Differences from torch on the CPU:
torch's CPU attention kernel has no formula there and counts 0, we count scaled_dot_product_attention with torch's
own attention formulas (what torch reports on GPUs); see docs/SURFACE.md.
"""

from collections import defaultdict
from math import prod

from .. import _C
from .module_tracker import ModuleTracker

__all__ = ["FlopCounterMode", "register_flop_formula", "get_flop_formula"]

_MARK = "flop_counter::"


def mm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs):
    m, k = a_shape
    k2, n = b_shape
    if k != k2:
        raise AssertionError(f"mm_flop: inner dimensions differ: {a_shape} @ {b_shape}")
    return m * n * 2 * k


def addmm_flop(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs):
    return mm_flop(a_shape, b_shape)


def bmm_flop(a_shape, b_shape, *args, out_shape=None, **kwargs):
    b, m, k = a_shape
    b2, k2, n = b_shape
    if b != b2 or k != k2:
        raise AssertionError(f"bmm_flop: shapes differ: {a_shape} @ {b_shape}")
    return b * m * n * 2 * k


def baddbmm_flop(self_shape, a_shape, b_shape, *args, out_shape=None, **kwargs):
    return bmm_flop(a_shape, b_shape)


def matmul_flop(a_shape, b_shape, *args, out_shape=None, **kwargs):
    """As torch's matmul decomposes: a matrix-vector or vector-vector product (mv, dot) has no formula (0), the
    others are one mm or bmm over the broadcast batch."""
    da, db = len(a_shape), len(b_shape)
    if db == 1 or da == 0 or db == 0:
        return 0
    k, n = b_shape[-2], b_shape[-1]
    m = 1 if da == 1 else a_shape[-2]
    batch_a = a_shape[:-2] if da >= 2 else []
    batch_b = b_shape[:-2]
    nb = max(len(batch_a), len(batch_b))
    ba = [1] * (nb - len(batch_a)) + list(batch_a)
    bb = [1] * (nb - len(batch_b)) + list(batch_b)
    batch = prod(max(x, y) for x, y in zip(ba, bb))
    return batch * m * n * 2 * k


def linear_flop(x_shape, w_shape, *args, out_shape=None, **kwargs):
    out_f, in_f = w_shape if len(w_shape) == 2 else (1, w_shape[0])
    return prod(x_shape[:-1]) * in_f * out_f * 2


def conv_flop_count(x_shape, w_shape, out_shape, transposed=False):
    """Multiplications and additions of a convolution (torch's count, bias ignored): 2 * batch * spatial size of
    the output (of the input when transposed) * prod(weight shape)."""
    batch_size = x_shape[0]
    conv_shape = (x_shape if transposed else out_shape)[2:]
    c_out, c_in, *filter_size = w_shape
    return prod(conv_shape) * prod(filter_size) * batch_size * c_out * c_in * 2


def conv_flop(x_shape, w_shape, *args, out_shape=None, transposed=False, **kwargs):
    return conv_flop_count(x_shape, w_shape, out_shape, transposed=transposed)


def conv_backward_flop(grad_out_shape, x_shape, w_shape, *, output_mask, out_shape, transposed=False):
    def t(shape):
        return [shape[1], shape[0]] + list(shape[2:])

    flops = 0
    if output_mask[0]:
        flops += conv_flop_count(grad_out_shape, w_shape, out_shape[0], not transposed)
    if output_mask[1]:
        if transposed:
            flops += conv_flop_count(t(grad_out_shape), t(x_shape), t(out_shape[1]), transposed=False)
        else:
            flops += conv_flop_count(t(x_shape), t(grad_out_shape), t(out_shape[1]), transposed=False)
    return flops


def _attn_dims(q, k, v):
    if len(q) == 3:  # (batch, seq, dim): one head
        q, k, v = [q[0], 1, *q[1:]], [k[0], 1, *k[1:]], [v[0], 1, *v[1:]]
    b = prod(q[:-3]) if len(q) > 4 else q[0]
    return b, q[-3], q[-2], q[-1], k[-3], k[-2], v[-1]


def sdpa_flop_count(query_shape, key_shape, value_shape):
    b, h_q, s_q, d_q, h_kv, s_k, d_v = _attn_dims(query_shape, key_shape, value_shape)
    return bmm_flop((b * h_q, s_q, d_q), (b * h_q, d_q, s_k)) + bmm_flop((b * h_q, s_q, s_k), (b * h_q, s_k, d_v))


def sdpa_flop(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape):
    b, h_q, s_q, d_q, h_kv, s_k, d_v = _attn_dims(query_shape, key_shape, value_shape)
    return (bmm_flop((b * h_q, s_q, d_q), (b * h_q, d_q, s_k))  # scores recomputed
            + bmm_flop((b * h_q, s_q, d_v), (b * h_q, d_v, s_k))  # grad of the scores
            + bmm_flop((b * h_q, s_k, s_q), (b * h_q, s_q, d_v))  # grad of v
            + bmm_flop((b * h_q, s_q, s_k), (b * h_q, s_k, d_q))  # grad of q
            + bmm_flop((b * h_q, d_q, s_q), (b * h_q, s_q, s_k)))  # grad of k


def sdpa_backward_flop(grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs):
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


# Strata op name (without "strata::" and overload) -> formula(event) -> flops.
def _shapes(e):
    return e["input_shapes"]


def _conv_event(transposed):
    def f(e):
        s = _shapes(e)
        return conv_flop_count(s[0], s[1], e["output_shapes"][0], transposed=transposed)
    return f


def _conv2d_backward_event(e):
    s, vals = _shapes(e), e["input_values"]
    mask = (bool(vals[7][0]) if vals[7] else True, bool(vals[8][0]) if vals[8] else True)
    return conv_backward_flop(s[0], s[1], s[2], output_mask=mask, out_shape=[s[1], s[2]])


def _convolution_event(e):
    s, vals = _shapes(e), e["input_values"]
    transposed = bool(vals[6][0]) if len(vals) > 6 and vals[6] else False
    return conv_flop_count(s[0], s[1], e["output_shapes"][0], transposed=transposed)


flop_registry = {
    "mm": lambda e: mm_flop(*_shapes(e)[:2]),
    "addmm": lambda e: addmm_flop(*_shapes(e)[:3]),
    "bmm": lambda e: bmm_flop(*_shapes(e)[:2]),
    "baddbmm": lambda e: baddbmm_flop(*_shapes(e)[:3]),
    "matmul": lambda e: matmul_flop(*_shapes(e)[:2]),
    "linear": lambda e: linear_flop(*_shapes(e)[:2]),
    "conv1d": _conv_event(False), "conv2d": _conv_event(False), "conv3d": _conv_event(False),
    "conv_transpose1d": _conv_event(True), "conv_transpose2d": _conv_event(True),
    "conv_transpose3d": _conv_event(True),
    "convolution": _convolution_event,
    "_conv2d_backward": _conv2d_backward_event,
    "scaled_dot_product_attention": lambda e: sdpa_flop(*_shapes(e)[:3]),
    "_scaled_dot_product_attention_backward": lambda e: sdpa_backward_flop(*_shapes(e)[:4]),
}


def _formula_args(e):
    """Arguments as torch's shape_wrapper passes them: a tensor's shape, an int/bool/int[] value, None otherwise;
    trailing Nones (out=, absent optionals) dropped."""
    vals = e.get("input_values") or []
    args = []
    for i, (shape, dt) in enumerate(zip(e["input_shapes"], e["input_dtypes"])):
        if dt not in ("", "Scalar", "TensorList"):
            args.append(list(shape))
        elif i < len(vals) and vals[i]:
            args.append(vals[i][0] if len(vals[i]) == 1 and dt == "Scalar" else list(vals[i]))
        else:
            args.append(None)
    while args and args[-1] is None:
        args.pop()
    return args


def _user_formula(formula):
    def fn(e):
        outs = e.get("output_shapes") or []
        return formula(*_formula_args(e), out_shape=outs[0] if len(outs) == 1 else outs)
    fn._user = True
    return fn


def _op_key(name):
    if "::" in name:
        name = name.split("::", 1)[1]
    return name.split(".", 1)[0]


def register_flop_formula(targets, get_raw=False):
    """Decorator: `formula(*input_shapes, out_shape=...)` counts the FLOPs of the ops named in `targets` (op names
    such as "mm", or objects with a __name__). With get_raw, the formula gets the raw event dict instead."""
    if not isinstance(targets, (list, tuple)):
        targets = [targets]

    def register(formula):
        for t in targets:
            name = _op_key(t if isinstance(t, str) else getattr(t, "__name__", str(t)))
            flop_registry[name] = formula if get_raw else _user_formula(formula)
        return formula

    return register


def get_flop_formula(name):
    return flop_registry.get(_op_key(name))


def _suffix(n):
    for s, v in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= v:
            return f"{n / v:.3f}{s}"
    return str(n)


class FlopCounterMode:
    """Counts FLOPs of the ops run in the block:

        with FlopCounterMode(display=False) as fc:
            model(x).sum().backward()
        fc.get_total_flops(); fc.get_flop_counts()["Global"]; print(fc.get_table())

    mods is accepted for torch's signature and ignored (every module is tracked); depth limits get_table();
    custom_mapping maps op names to formulas taking (*input_shapes, out_shape=...).
    """

    def __init__(self, mods=None, depth=2, display=True, custom_mapping=None):
        self.depth = depth
        self.display = display
        self.flop_counts = defaultdict(lambda: defaultdict(int))
        self.mode = None
        self._formulas = dict(flop_registry)
        for k, f in (custom_mapping or {}).items():
            name = _op_key(k if isinstance(k, str) else getattr(k, "__name__", str(k)))
            self._formulas[name] = _user_formula(f)
        self._session = None

    def get_total_flops(self):
        return sum(self.flop_counts["Global"].values())

    def get_flop_counts(self):
        """{module name: {op name: flops}}, with "Global" for everything."""
        return {k: dict(v) for k, v in self.flop_counts.items()}

    def get_table(self, depth=None):
        """A text table: Global then each module down to `depth` dots, each with its ops, FLOPs and % of the
        total."""
        if depth is None:
            depth = self.depth if self.depth is not None else 999999
        total = self.get_total_flops()

        def pct(n):
            return f"{100.0 * n / total:.2f}%" if total else "0.00%"

        rows = [("Module", "FLOP", "% Total")]
        mods = ["Global"] + sorted(m for m in self.flop_counts if m != "Global" and m.count(".") < depth)
        for mod in mods:
            counts = self.flop_counts[mod]
            indent = "" if mod == "Global" else " " * (mod.count(".") + 1)
            rows.append((indent + mod, _suffix(sum(counts.values())), pct(sum(counts.values()))))
            for op, c in counts.items():
                rows.append((indent + " - " + op, _suffix(c), pct(c)))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                         for r in rows)

    def __enter__(self):
        if _C._profiler_is_recording():
            raise RuntimeError("FlopCounterMode: a profiler session is already recording on this thread; "
                               "FlopCounterMode records its own session and cannot run inside another")
        self.flop_counts.clear()
        self._tracker = ModuleTracker()
        self._tracker._listener = self._mark
        self._tracker.__enter__()
        self._session = _C._profiler_start(record_shapes=True, record_args=True)
        return self

    @staticmethod
    def _mark(kind, name):
        _C._record_function_exit(_C._record_function_enter(_MARK + kind + " " + name, "flop_counter"))

    def __exit__(self, *args):
        _C._profiler_stop(self._session)
        self._tracker.__exit__()
        events = _C._profiler_events(self._session)
        self._session = None
        self._count(events)
        if self.display:
            print(self.get_table(self.depth))
        return False

    def _count(self, events):
        # One thread's events are in start order; other threads' ops are counted under Global only.
        main_thread = _C._profiler_thread_id()
        counted = set()
        fw, bw = set(), set()
        for e in events:
            key = (e["thread"], e["index"])
            if e["category"] == "flop_counter":
                kind, _, name = e["name"][len(_MARK):].partition(" ")
                if kind == "fw+":
                    fw.add(name)
                elif kind == "fw-":
                    fw.discard(name)
                elif kind == "bw+":
                    bw.add(name)
                elif kind == "bw-":
                    bw.discard(name)
                else:
                    fw.clear()
                    bw.clear()
                continue
            if e["category"] != "cpu_op":
                continue
            parent = e["parent"]
            if parent >= 0 and (e["thread"], parent) in counted:
                counted.add(key)  # part of a counted op
                continue
            formula = self._formulas.get(_op_key(e["name"]))
            if formula is None:
                continue
            flops = int(formula(e))
            counted.add(key)
            op = _op_key(e["name"])
            mods = {"Global"} | ((fw | bw) if e["thread"] == main_thread else set())
            for m in mods:
                self.flop_counts[m][op] += flops
