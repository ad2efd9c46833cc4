"""The collectives of strata.distributed (torch's names, arguments and semantics), on the MPI engine.

Each call checks its tensors, makes an MPI-ready buffer for each one (the tensor itself when it is contiguous and
of a dtype MPI has; otherwise a contiguous copy: float16 and bfloat16 travel and reduce as float32, bool as uint8),
submits one job to the communication thread and returns a Work. `async_op=False` waits at once. A Work's wait()
copies the results back into the caller's tensors (non-contiguous ones, other dtypes, AVG's division), so a
result is in place once wait() returns (or is_completed() answered True)."""

import pickle

import strata

from . import ReduceOp, GroupMember, DistError, ProcessGroup as _PG, _C, _group, _state

_KIND = dict(allreduce=0, broadcast=1, reduce=2, allgather=3, gather=4, scatter=5, reduce_scatter=6, alltoall=7,
             alltoallv=8, send=9, recv=10, barrier=11, raw_allreduce=12)


def _mpi_types():
    s = strata
    return {s.int8: 0, s.uint8: 1, s.int16: 2, s.int32: 3, s.int64: 4, s.float32: 5, s.float64: 6}


_TRAVEL = {}  # dtype -> dtype it travels as

# The hot synchronous collectives (all_reduce, broadcast, all_gather_into_tensor, reduce_scatter_tensor) first try
# one C++ call, _distributed.sync_tensors: it takes contiguous CPU tensors of a dtype MPI has and runs the job
# (on the caller's thread when the engine is idle: mpi_comm.h, run_sync). Anything else (other dtypes or layouts,
# a bad argument, async_op, the debug mode) returns False there or is never tried, and the general path below runs,
# with the same checks and messages as before. AVG is SUM, then the division, as on the general path.
_FAST_OPS = {ReduceOp.SUM: 0, ReduceOp.MAX: 1, ReduceOp.MIN: 2, ReduceOp.PRODUCT: 3, ReduceOp.AVG: 0}
_OP_TYPES = (ReduceOp.RedOpType, int)
_engine = None


def _E():
    global _engine
    if _engine is None:
        _engine = _C()
    return _engine


def _fast_group(group):
    """The process group for a fast call, or None (not initialized, not a member, not a group: the general path
    raises or returns)."""
    if group is None or group is GroupMember.WORLD:
        return _state.default
    return group if type(group) is _PG and _state.default is not None else None


def _sync_tensors(kind, g, a, b, code, root, what):
    try:
        return _E().sync_tensors(kind, g._comm, len(g._ranks), a, b, code, root, what, g._timeout)
    except RuntimeError as e:
        raise DistError(str(e)) from None


def _travel_dtype(dt):
    if not _TRAVEL:
        s = strata
        _TRAVEL.update({d: d for d in _mpi_types()})
        _TRAVEL.update({s.float16: s.float32, s.bfloat16: s.float32, s.bool: s.uint8})
    try:
        return _TRAVEL[dt]
    except KeyError:
        raise TypeError(f"strata.distributed: tensors of dtype {dt} cannot be communicated") from None


def _check_tensor(t, what, name="tensor"):
    if not isinstance(t, strata.Tensor):
        raise TypeError(f"{what}: {name} must be a Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise RuntimeError(f"{what}: {name} is on device {t.device}; the MPI backend serves CPU tensors")
    _travel_dtype(t.dtype)


def _buffer(t):
    """(buffer, MPI datatype code, write-back): the buffer MPI reads and writes for tensor `t`."""
    tr = _travel_dtype(t.dtype)
    if tr == t.dtype and t.is_contiguous():
        return t, _mpi_types()[tr], None
    buf = t.to(tr).contiguous() if tr != t.dtype else t.contiguous()
    if buf.data_ptr() == t.data_ptr() and buf.dtype == t.dtype:
        return t, _mpi_types()[tr], None
    return buf, _mpi_types()[tr], (lambda: t.copy_(buf if t.dtype != strata.bool else buf != 0))


def _flat_travel(tensors):
    """One contiguous travel-dtype buffer with the tensors' elements one after the other."""
    if not tensors:
        raise ValueError("expected a non-empty list of tensors")
    tr = _travel_dtype(tensors[0].dtype)
    return strata.cat([t.reshape(-1).to(tr) for t in tensors]) if len(tensors) > 1 else \
        tensors[0].reshape(-1).to(tr).contiguous()


def _op(op, dtype, what):
    """(MPI op code, needs AVG division) for a ReduceOp on tensors of `dtype`."""
    try:
        o = ReduceOp.RedOpType(int(op))
    except (TypeError, ValueError):
        raise ValueError(f"{what}: unknown reduce op {op!r}") from None
    if o in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR, ReduceOp.RedOpType.PREMUL_SUM):
        raise ValueError(f"{what}: ReduceOp.{o.name} is not supported by the MPI backend (SUM, AVG, PRODUCT, MIN, "
                         "MAX are)")
    if dtype == strata.bool:
        if o == ReduceOp.AVG:
            raise ValueError(f"{what}: ReduceOp.AVG is not defined for bool tensors")
        return {ReduceOp.SUM: 1, ReduceOp.MAX: 1, ReduceOp.PRODUCT: 2, ReduceOp.MIN: 2}[o], False
    return {ReduceOp.SUM: 0, ReduceOp.AVG: 0, ReduceOp.MAX: 1, ReduceOp.MIN: 2, ReduceOp.PRODUCT: 3}[o], \
        o == ReduceOp.AVG


def _average(buf, n):
    if buf.dtype.is_floating_point:
        buf.div_(n)
    else:
        buf.copy_(buf.div(n, rounding_mode="trunc"))


class Work:
    """A collective in flight: wait(), is_completed(), is_success(), exception(), result(), source_rank()."""

    def __init__(self, cwork, name, timeout, finish=None, keep=(), result=()):
        self._cwork = cwork
        self._name = name
        self._timeout = timeout
        self._finish = finish
        self._keep = keep  # buffers MPI reads or writes, alive until the job is done
        self._result = list(result)
        self._done = cwork is None
        self._error = None
        self._source = -1
        if self._done and finish is not None:
            finish(-1)

    def wait(self, timeout=None):
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        t = self._timeout if timeout is None else (timeout.total_seconds() if hasattr(timeout, "total_seconds")
                                                   else float(timeout))
        try:
            self._source = self._cwork.wait(t, self._name)
        except RuntimeError as e:
            self._error = DistError(str(e))
            self._done = True
            raise self._error from None
        self._done = True
        self._keep = ()
        if self._finish is not None:
            self._finish(self._source)
        return True

    def is_completed(self):
        if self._done:
            return True
        if self._cwork.is_completed():
            try:
                self.wait()
            except DistError:
                pass
            return True
        return False

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._result

    def source_rank(self):
        self.wait()
        return self._source

    def get_future(self):
        from ..futures import Future

        fut = Future()
        self.wait()
        fut.set_result(self._result)
        return fut

    def synchronize(self):
        self.wait()


def _debug_check(g, desc):
    """STRATA_DISTRIBUTED_DEBUG=DETAIL: every rank's call, compared before the collective runs."""
    raw = desc.encode()[:240].ljust(240)
    mine = strata.from_numpy(__import__("numpy").frombuffer(raw, dtype="uint8").copy())
    out = strata.empty(240 * g.size(), dtype=strata.uint8)
    _C().submit(_KIND["allgather"], g._comm, mine.data_ptr(), out.data_ptr(), 240, 1, 0, 0, 0, "debug check",
                [], [], [], []).wait(g._timeout, "STRATA_DISTRIBUTED_DEBUG check")
    allb = out.numpy().tobytes()
    calls = [allb[i * 240:(i + 1) * 240].decode(errors="replace").rstrip() for i in range(g.size())]
    if len(set(calls)) > 1:
        lines = "\n".join(f"  rank {g._ranks[i]}: {c}" for i, c in enumerate(calls))
        raise DistError(f"strata.distributed: ranks called different collectives (STRATA_DISTRIBUTED_DEBUG=DETAIL):\n"
                        f"{lines}")


def _run(g, kind, name, send, recv, count, dtype, op=0, root=0, tag=0, finish=None, keep=(), result=(),
         async_op=False, splits=None, desc=None):
    if _state.debug and kind not in (_KIND["send"], _KIND["recv"]):
        _debug_check(g, desc or name)
    if count == 0 and splits is None:
        w = Work(None, name, g._timeout, finish, result=result)
    elif not async_op:
        sc, sd, rc, rd = splits or ([], [], [], [])
        try:
            source = _E().run_sync(kind, g._comm, 0 if send is None else send.data_ptr(),
                                   0 if recv is None else recv.data_ptr(), count, dtype, op, root, tag, name, sc, sd,
                                   rc, rd, g._timeout)
        except RuntimeError as e:
            raise DistError(str(e)) from None
        if finish is not None:
            finish(source)
        return None
    else:
        sc, sd, rc, rd = splits or ([], [], [], [])
        cw = _C().submit(kind, g._comm, 0 if send is None else send.data_ptr(), 0 if recv is None else recv.data_ptr(),
                         count, dtype, op, root, tag, name, sc, sd, rc, rd, async_op)
        w = Work(cw, name, g._timeout, finish, keep=(send, recv) + tuple(keep), result=result)
    if async_op:
        return w
    w.wait()
    return None


def _member(group, what):
    g = _group(group)
    if g is GroupMember.NON_GROUP_MEMBER:
        return None
    return g


def _group_rank(g, rank, group_rank, what, role):
    if group_rank is not None:
        r = group_rank
    else:
        if rank is None:
            rank = 0
        if rank not in g._ranks:
            raise ValueError(f"{what}: {role} rank {rank} is not part of the group {g._ranks}")
        r = g._ranks.index(rank)
    if not 0 <= r < g.size():
        raise ValueError(f"{what}: {role} group rank {r} is out of range for a group of {g.size()}")
    return r


def _desc(name, *tensors, **extra):
    parts = [name] + [f"{tuple(t.shape)}:{t.dtype}" for t in tensors] + [f"{k}={v}" for k, v in extra.items()]
    return " ".join(parts)


def _reduced_finish(recv, write_back, avg, world):
    # After a reducing collective: divide for AVG, then copy into a non-contiguous output.
    def finish(_):
        if avg:
            _average(recv, world)
        if write_back:
            write_back()
    return finish


# ReduceOp value (SUM, AVG, PRODUCT, MIN, MAX: 0..4) -> the engine's code, indexed (hashing an enum member runs
# Python code: slower than the rest of a 1 KiB all_reduce's Python side).
_FAST_CODES = (0, 0, 3, 2, 1)
_SUM = ReduceOp.SUM


def all_reduce(tensor, op=_SUM, group=None, async_op=False):
    if async_op or _state.debug:
        pass
    elif op is _SUM and group is None:  # the common call, checked first
        g = _state.default
        if g is not None:  # _sync_tensors, inlined: the hottest call
            try:
                if (_engine or _E()).all_reduce_sync(tensor, g._comm, len(g._ranks), 0, g._timeout):
                    return None
            except RuntimeError as e:
                raise DistError(str(e)) from None
    elif type(op) in _OP_TYPES and 0 <= op <= 4:
        g = _fast_group(group)
        if g is not None:
            try:
                if (_engine or _E()).all_reduce_sync(tensor, g._comm, len(g._ranks), _FAST_CODES[op], g._timeout):
                    if op == 1:  # AVG
                        _average(tensor, len(g._ranks))
                    return None
            except RuntimeError as e:
                raise DistError(str(e)) from None
    what = "all_reduce"
    _check_tensor(tensor, what)
    g = _member(group, what)
    if g is None:
        return None
    code, avg = _op(op, tensor.dtype, what)
    buf, dt, wb = _buffer(tensor)
    finish = _reduced_finish(buf, wb, avg, g.size())
    return _run(g, _KIND["allreduce"], what, None, buf, buf.numel(), dt, code, finish=finish, result=[tensor],
                async_op=async_op, desc=_desc(what, tensor, op=int(op)))


def _make_all_reduce():
    """strata.distributed.all_reduce: the C-level callable of _C._distributed.make_all_reduce, which runs the common
    call (all_reduce(t) or all_reduce(t, op=ReduceOp.SUM), default group, async_op False, the debug mode off, a
    contiguous CPU tensor of a dtype MPI has) with no Python frame and hands everything else, arguments untouched, to
    _all_reduce_general above; _all_reduce_general itself where the binding lacks it."""
    import sys

    try:
        make = _E().make_all_reduce
    except (ImportError, AttributeError):
        return _all_reduce_general
    return make(_all_reduce_general, _state, _SUM, DistError, sys.modules[__name__])


_all_reduce_general = all_reduce  # its name stays all_reduce: a bad keyword's TypeError reads as before
all_reduce = _make_all_reduce()


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    if not async_op and not _state.debug:
        g = _fast_group(group)
        if g is not None:
            try:
                root = _group_rank(g, src, group_src, "broadcast", "src")
            except (ValueError, TypeError):
                root = None  # the general path raises (after its own checks of the tensor)
            if root is not None and _sync_tensors(1, g, tensor, None, 0, root, "broadcast"):
                return None
    what = "broadcast"
    _check_tensor(tensor, what)
    g = _member(group, what)
    if g is None:
        return None
    root = _group_rank(g, src, group_src, what, "src")
    buf, dt, wb = _buffer(tensor)
    fin = (lambda _: wb()) if (wb and g.rank() != root) else None
    return _run(g, _KIND["broadcast"], what, None, buf, buf.numel(), dt, root=root, finish=fin, result=[tensor],
                async_op=async_op, desc=_desc(what, tensor, src=root))


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    what = "reduce"
    _check_tensor(tensor, what)
    g = _member(group, what)
    if g is None:
        return None
    root = _group_rank(g, dst, group_dst, what, "dst")
    code, avg = _op(op, tensor.dtype, what)
    buf, dt, wb = _buffer(tensor)
    finish = _reduced_finish(buf, wb, avg, g.size()) if g.rank() == root else None
    return _run(g, _KIND["reduce"], what, None, buf, buf.numel(), dt, code, root=root, finish=finish,
                result=[tensor], async_op=async_op, desc=_desc(what, tensor, dst=root, op=int(op)))


def _check_list(lst, n, ref, what, name):
    if not isinstance(lst, (list, tuple)):
        raise TypeError(f"{what}: {name} must be a list of tensors")
    if len(lst) != n:
        raise ValueError(f"{what}: {name} has {len(lst)} tensors, but the group has {n} ranks")
    for i, t in enumerate(lst):
        _check_tensor(t, what, f"{name}[{i}]")
        if t.dtype != ref.dtype:
            raise TypeError(f"{what}: {name}[{i}] has dtype {t.dtype}, but the tensor has dtype {ref.dtype}")
        if t.numel() != ref.numel():
            raise ValueError(f"{what}: {name}[{i}] has shape {tuple(t.shape)}, but the tensor has shape "
                             f"{tuple(ref.shape)}")


def _unflatten_into(flat, outs):
    off = 0
    for o in outs:
        n = o.numel()
        if n:
            o.copy_(flat[off:off + n].view(o.shape))
        off += n


def all_gather(tensor_list, tensor, group=None, async_op=False):
    what = "all_gather"
    _check_tensor(tensor, what)
    g = _member(group, what)
    if g is None:
        return None
    _check_list(tensor_list, g.size(), tensor, what, "tensor_list")
    send, dt, _ = _buffer(tensor)
    recv = strata.empty(tensor.numel() * g.size(), dtype=send.dtype)
    return _run(g, _KIND["allgather"], what, send, recv, tensor.numel(), dt,
                finish=lambda _: _unflatten_into(recv, tensor_list), result=tensor_list, async_op=async_op,
                desc=_desc(what, tensor))


def _check_pair(out, out_name, inp, in_name, group, what, big):
    """Checks of the flat-tensor collectives: both tensors valid, the caller in the group, one
    dtype, and the `big` side ("output" or "input") holding world_size times the other.
    Returns the group, or None when this rank is not a member."""
    _check_tensor(out, what, out_name)
    _check_tensor(inp, what, in_name)
    g = _member(group, what)
    if g is None:
        return None
    if out.dtype != inp.dtype:
        raise TypeError(f"{what}: {out_name} has dtype {out.dtype}, {in_name} {inp.dtype}")
    (b, bn), (s, sn) = ((out, out_name), (inp, in_name)) if big == "output" else ((inp, in_name), (out, out_name))
    if b.numel() != s.numel() * g.size():
        raise ValueError(f"{what}: {bn} of shape {tuple(b.shape)} must hold world_size "
                         f"({g.size()}) times {sn} of shape {tuple(s.shape)}")
    return g


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    if not async_op and not _state.debug:
        g = _fast_group(group)
        if g is not None and _sync_tensors(3, g, output_tensor, input_tensor, 0, 0, "all_gather_into_tensor"):
            return None
    what = "all_gather_into_tensor"
    g = _check_pair(output_tensor, "output_tensor", input_tensor, "input_tensor", group, what, big="output")
    if g is None:
        return None
    send, dt, _ = _buffer(input_tensor)
    recv, _, wb = _buffer(output_tensor)
    return _run(g, _KIND["allgather"], what, send, recv, input_tensor.numel(), dt,
                finish=(lambda _: wb()) if wb else None, result=[output_tensor], async_op=async_op,
                desc=_desc(what, input_tensor))


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    what = "gather"
    _check_tensor(tensor, what)
    g = _member(group, what)
    if g is None:
        return None
    root = _group_rank(g, dst, group_dst, what, "dst")
    send, dt, _ = _buffer(tensor)
    recv, fin = None, None
    if g.rank() == root:
        _check_list(gather_list, g.size(), tensor, what, "gather_list")
        recv = strata.empty(tensor.numel() * g.size(), dtype=send.dtype)
        fin = lambda _: _unflatten_into(recv, gather_list)  # noqa: E731
    elif gather_list:
        raise ValueError(f"{what}: gather_list must be given on the destination rank only (dst={root})")
    return _run(g, _KIND["gather"], what, send, recv, tensor.numel(), dt, root=root, finish=fin,
                result=list(gather_list or []), async_op=async_op, desc=_desc(what, tensor, dst=root))


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    what = "scatter"
    _check_tensor(tensor, what)
    g = _member(group, what)
    if g is None:
        return None
    root = _group_rank(g, src, group_src, what, "src")
    recv, dt, wb = _buffer(tensor)
    send = None
    if g.rank() == root:
        _check_list(scatter_list, g.size(), tensor, what, "scatter_list")
        send = _flat_travel(list(scatter_list))
    elif scatter_list:
        raise ValueError(f"{what}: scatter_list must be given on the source rank only (src={root})")
    return _run(g, _KIND["scatter"], what, send, recv, tensor.numel(), dt, root=root,
                finish=(lambda _: wb()) if wb else None, result=[tensor], async_op=async_op,
                desc=_desc(what, tensor, src=root))


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    what = "reduce_scatter"
    _check_tensor(output, what, "output")
    g = _member(group, what)
    if g is None:
        return None
    _check_list(input_list, g.size(), output, what, "input_list")
    code, avg = _op(op, output.dtype, what)
    send = _flat_travel(list(input_list))
    recv, dt, wb = _buffer(output)
    finish = _reduced_finish(recv, wb, avg, g.size())
    return _run(g, _KIND["reduce_scatter"], what, send, recv, output.numel(), dt, code, finish=finish,
                result=[output], async_op=async_op, desc=_desc(what, output, op=int(op)))


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    if not async_op and not _state.debug and type(op) in _OP_TYPES:
        g = _fast_group(group)
        code = _FAST_OPS.get(op)
        if g is not None and code is not None and _sync_tensors(6, g, output, input, code, 0,
                                                                 "reduce_scatter_tensor"):
            if op == ReduceOp.AVG:
                _average(output, len(g._ranks))
            return None
    what = "reduce_scatter_tensor"
    g = _check_pair(output, "output", input, "input", group, what, big="input")
    if g is None:
        return None
    code, avg = _op(op, output.dtype, what)
    send, dt, _ = _buffer(input)
    recv, _, wb = _buffer(output)
    finish = _reduced_finish(recv, wb, avg, g.size())
    return _run(g, _KIND["reduce_scatter"], what, send, recv, output.numel(), dt, code, finish=finish,
                result=[output], async_op=async_op, desc=_desc(what, output, op=int(op)))


def _offsets(counts):
    out, acc = [], 0
    for c in counts:
        out.append(acc)
        acc += c
    return out


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None, async_op=False):
    what = "all_to_all_single"
    _check_tensor(output, what, "output")
    _check_tensor(input, what, "input")
    g = _member(group, what)
    if g is None:
        return None
    if output.dtype != input.dtype:
        raise TypeError(f"{what}: output has dtype {output.dtype}, input {input.dtype}")
    n = g.size()
    send, dt, _ = _buffer(input)
    recv, _, wb = _buffer(output)
    fin = (lambda _: wb()) if wb else None

    def counts(t, splits, name):
        rows = t.shape[0] if t.dim() > 0 else 1
        per_row = t.numel() // rows if rows else 0
        if not splits:
            if rows % n:
                raise ValueError(f"{what}: {name} of shape {tuple(t.shape)}: dim 0 must divide evenly by the "
                                 f"group size {n}")
            return [rows // n * per_row] * n
        splits = list(splits)
        if len(splits) != n or sum(splits) != rows:
            raise ValueError(f"{what}: {name}_split_sizes {splits} must have {n} entries summing to {name}'s dim 0 "
                             f"({rows})")
        return [s * per_row for s in splits]

    sc = counts(input, input_split_sizes, "input")
    rc = counts(output, output_split_sizes, "output")
    if not output_split_sizes and not input_split_sizes:
        if output.numel() != input.numel():
            raise ValueError(f"{what}: output of shape {tuple(output.shape)} and input of shape "
                             f"{tuple(input.shape)} must have the same number of elements")
        return _run(g, _KIND["alltoall"], what, send, recv, input.numel() // n, dt, finish=fin, result=[output],
                    async_op=async_op, desc=_desc(what, input, output))
    return _run(g, _KIND["alltoallv"], what, send, recv, 1, dt, finish=fin, result=[output], async_op=async_op,
                splits=(sc, _offsets(sc), rc, _offsets(rc)), desc=_desc(what, input, output) + " (splits)")


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    what = "all_to_all"
    g = _member(group, what)
    if g is None:
        return None
    n = g.size()
    for name, lst in (("output_tensor_list", output_tensor_list), ("input_tensor_list", input_tensor_list)):
        if len(lst) != n:
            raise ValueError(f"{what}: {name} has {len(lst)} tensors, but the group has {n} ranks")
        for i, t in enumerate(lst):
            _check_tensor(t, what, f"{name}[{i}]")
            if t.dtype != input_tensor_list[0].dtype:
                raise TypeError(f"{what}: {name}[{i}] has dtype {t.dtype}, expected {input_tensor_list[0].dtype}")
    send = _flat_travel(list(input_tensor_list))
    recv = strata.empty(sum(t.numel() for t in output_tensor_list), dtype=send.dtype)
    sc = [t.numel() for t in input_tensor_list]
    rc = [t.numel() for t in output_tensor_list]
    return _run(g, _KIND["alltoallv"], what, send, recv, 1, _mpi_types()[send.dtype],
                finish=lambda _: _unflatten_into(recv, output_tensor_list), result=output_tensor_list,
                async_op=async_op, splits=(sc, _offsets(sc), rc, _offsets(rc)), desc=what)


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    what = "isend"
    _check_tensor(tensor, what)
    g = _member(group, what)
    if g is None:
        return None
    peer = _group_rank(g, dst, group_dst, what, "dst")
    send, dt, _ = _buffer(tensor)
    return _run(g, _KIND["send"], what, send, None, send.numel(), dt, root=peer, tag=tag, async_op=True)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    what = "irecv"
    _check_tensor(tensor, what)
    g = _member(group, what)
    if g is None:
        return None
    peer = -1 if (src is None and group_src is None) else _group_rank(g, src, group_src, what, "src")
    recv, dt, wb = _buffer(tensor)
    w = _run(g, _KIND["recv"], what, None, recv, recv.numel(), dt, root=peer, tag=tag,
             finish=(lambda _: wb()) if wb else None, result=[tensor], async_op=True)
    return w


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    w = isend(tensor, dst, group, tag, group_dst)
    if w is not None:
        w.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Returns the sender's global rank (-1 for a non-member)."""
    w = irecv(tensor, src, group, tag, group_src)
    if w is None:
        return -1
    w.wait()
    g = _group(group)
    return g._ranks[w._source] if w._source >= 0 else (src if src is not None else -1)


def barrier(group=None, async_op=False, device_ids=None):
    g = _member(group, "barrier")
    if g is None:
        return None
    if not async_op:  # run_sync: on the caller's thread when the engine is idle (an MPI_Ibarrier with a deadline)
        try:
            _E().run_sync(_KIND["barrier"], g._comm, 0, 0, 0, 0, 0, 0, 0, "barrier", [], [], [], [], g._timeout)
        except RuntimeError as e:
            raise DistError(str(e)) from None
        return None
    cw = _C().submit(_KIND["barrier"], g._comm, 0, 0, 0, 0, 0, 0, 0, "barrier", [], [], [], [])
    return Work(cw, "barrier", g._timeout)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    g = _member(group, "monitored_barrier")
    if g is None:
        return None
    cw = _C().submit(_KIND["barrier"], g._comm, 0, 0, 0, 0, 0, 0, 0, "monitored_barrier", [], [], [], [])
    Work(cw, "monitored_barrier", g._timeout).wait(timeout)


# ---- objects (pickled into uint8 tensors) ---------------------------------------------------------------------


def _to_bytes_tensor(obj):
    import numpy as np

    data = pickle.dumps(obj)
    return strata.from_numpy(np.frombuffer(data, dtype=np.uint8).copy()) if data else strata.empty(0, dtype=strata.uint8)


def _from_bytes_tensor(t, n):
    return pickle.loads(t[:n].numpy().tobytes())


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    g = _member(group, "broadcast_object_list")
    if g is None:
        return
    root = _group_rank(g, src, group_src, "broadcast_object_list", "src")
    n = len(object_list)
    if g.rank() == root:
        parts = [_to_bytes_tensor(o) for o in object_list]
        sizes = strata.tensor([p.numel() for p in parts], dtype=strata.int64)
    else:
        sizes = strata.zeros(n, dtype=strata.int64)
    broadcast(sizes, group=g, group_src=root)
    total = int(sizes.sum().item())
    data = strata.cat(parts) if g.rank() == root and n else strata.empty(total, dtype=strata.uint8)
    broadcast(data, group=g, group_src=root)
    if g.rank() != root:
        off = 0
        for i, s in enumerate(sizes.tolist()):
            object_list[i] = _from_bytes_tensor(data[off:off + s], s)
            off += s


def _gather_bytes(obj, g, root=None):
    mine = _to_bytes_tensor(obj)
    sizes = strata.zeros(g.size(), dtype=strata.int64)
    all_gather_into_tensor(sizes, strata.tensor([mine.numel()], dtype=strata.int64), group=g)
    m = int(sizes.max().item())
    padded = strata.zeros(m, dtype=strata.uint8)
    padded[:mine.numel()] = mine
    out = strata.empty(m * g.size(), dtype=strata.uint8)
    if root is None:
        all_gather_into_tensor(out, padded, group=g)
    else:
        _run(g, _KIND["gather"], "gather_object", padded, out if g.rank() == root else None, m, 1, root=root)
    return out, sizes.tolist(), m


def all_gather_object(object_list, obj, group=None):
    g = _member(group, "all_gather_object")
    if g is None:
        return
    if len(object_list) != g.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries, but the group has "
                         f"{g.size()} ranks")
    out, sizes, m = _gather_bytes(obj, g)
    for i, s in enumerate(sizes):
        object_list[i] = _from_bytes_tensor(out[i * m:i * m + s], s)


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    g = _member(group, "gather_object")
    if g is None:
        return
    root = _group_rank(g, dst, group_dst, "gather_object", "dst")
    if g.rank() == root and (object_gather_list is None or len(object_gather_list) != g.size()):
        raise ValueError(f"gather_object: object_gather_list must have {g.size()} entries on the destination rank")
    out, sizes, m = _gather_bytes(obj, g, root)
    if g.rank() == root:
        for i, s in enumerate(sizes):
            object_gather_list[i] = _from_bytes_tensor(out[i * m:i * m + s], s)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None):
    g = _member(group, "scatter_object_list")
    if g is None:
        return
    root = _group_rank(g, src, group_src, "scatter_object_list", "src")
    objs = [None] * g.size()
    if g.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != g.size():
            raise ValueError(f"scatter_object_list: scatter_object_input_list must have {g.size()} entries on the "
                             "source rank")
        objs = list(scatter_object_input_list)
    broadcast_object_list(objs, group=g, group_src=root)
    scatter_object_output_list[0] = objs[g.rank()]
