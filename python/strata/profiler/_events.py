"""Recorded events and their aggregation, shaped like torch.autograd.profiler_util.

Times are kept in nanoseconds and exposed in microseconds (floats), as torch
does. Self time is total time minus the time of direct children on the same
thread."""

import builtins
import json
import os
from collections import OrderedDict

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList"]


class Interval:
    def __init__(self, start_us, end_us):
        self.start = start_us
        self.end = end_us

    def elapsed_us(self):
        return self.end - self.start


class FunctionEvent:
    """One recorded range: an op call, a record_function block, or a C++ RecordScope."""

    def __init__(self, raw, id, base_ns):
        self.id = id
        self.name = raw["name"]
        self.key = self.name
        self.category = raw["category"]
        self.thread = raw["thread"]
        self.depth = raw["depth"]
        self.start_ns = raw["start_ns"]
        self.end_ns = raw["end_ns"]
        self.input_shapes = raw["input_shapes"]
        self.input_dtypes = raw["input_dtypes"]
        self.cpu_memory_usage = raw["alloc_bytes"]
        self.num_allocs = raw["num_allocs"]
        self._stack = raw["stack"]
        self.explain = raw["explain"]
        self._base_ns = base_ns
        self.cpu_parent = None
        self.cpu_children = []
        self.count = 1
        self.is_user_annotation = self.category == "user_annotation"
        self.device_type = "CPU"
        self.is_async = False

    @property
    def time_range(self):
        return Interval((self.start_ns - self._base_ns) / 1000.0, (self.end_ns - self._base_ns) / 1000.0)

    @property
    def cpu_time_total(self):
        return (self.end_ns - self.start_ns) / 1000.0

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - builtins.sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def cpu_time(self):
        return self.cpu_time_total

    @property
    def self_cpu_memory_usage(self):
        return self.cpu_memory_usage - builtins.sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def stack(self):
        # Nested ranges share their root's Python stack; it is recorded once.
        e = self
        while e is not None and not e._stack:
            e = e.cpu_parent
        return e._stack.split("\n") if e is not None else []

    # Device columns torch has; always zero on a CPU-only profile.
    cuda_time_total = self_cuda_time_total = device_time_total = self_device_time_total = 0.0
    cuda_memory_usage = self_cuda_memory_usage = device_memory_usage = self_device_memory_usage = 0

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} depth={self.depth} "
                f"cpu_time_total={self.cpu_time_total:.3f}us self_cpu_time_total={self.self_cpu_time_total:.3f}us "
                f"input_shapes={self.input_shapes} cpu_children={[c.id for c in self.cpu_children]}>")


class FunctionEventAvg:
    """Events with the same key (name, and input shapes when grouped by shape)."""

    def __init__(self, key, input_shapes=None):
        self.key = key
        self.name = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.is_user_annotation = False
        self.stack = []

    cuda_time_total = self_cuda_time_total = device_time_total = self_device_time_total = 0.0
    cuda_memory_usage = self_cuda_memory_usage = device_memory_usage = self_device_memory_usage = 0

    def add(self, e):
        self.count += e.count
        self.cpu_time_total += e.cpu_time_total
        self.self_cpu_time_total += e.self_cpu_time_total
        self.cpu_memory_usage += e.cpu_memory_usage
        self.self_cpu_memory_usage += e.self_cpu_memory_usage
        self.is_user_annotation = e.is_user_annotation
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} cpu_time_total={self.cpu_time_total:.3f}us "
                f"self_cpu_time_total={self.self_cpu_time_total:.3f}us input_shapes={self.input_shapes}>")


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _format_memory(nbytes):
    kb, mb, gb = 1024, 1024 * 1024, 1024 * 1024 * 1024
    if abs(nbytes) >= gb:
        return f"{nbytes / gb:.2f} Gb"
    if abs(nbytes) >= mb:
        return f"{nbytes / mb:.2f} Mb"
    if abs(nbytes) >= kb:
        return f"{nbytes / kb:.2f} Kb"
    return f"{nbytes} b"


_SORT_KEYS = (
    "cpu_time", "cuda_time", "device_time", "cpu_time_total", "cuda_time_total", "device_time_total",
    "self_cpu_time_total", "self_cuda_time_total", "self_device_time_total", "cpu_memory_usage",
    "cuda_memory_usage", "device_memory_usage", "self_cpu_memory_usage", "self_cuda_memory_usage",
    "self_device_memory_usage", "count",
)


def _truncate(s, width):
    return s if len(s) <= width else s[: width - 3] + "..."


def build_table(events, sort_by=None, row_limit=100, header=None, profile_memory=False, max_name_column_width=55,
                max_shapes_column_width=80, top_level_events_only=False):
    events = list(events)
    if sort_by is not None:
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"table: sort_by must be one of {', '.join(_SORT_KEYS)}; got {sort_by!r}")
        events.sort(key=lambda e: getattr(e, sort_by), reverse=True)
    if top_level_events_only:
        events = [e for e in events if getattr(e, "cpu_parent", None) is None]
    # As torch: shown when shapes were recorded and (for averages) grouped by.
    has_shapes = builtins.any(e.input_shapes for e in events)
    has_memory = profile_memory or builtins.any(e.cpu_memory_usage for e in events)
    total_self = builtins.sum(e.self_cpu_time_total for e in events)
    shown = events[:row_limit] if row_limit is not None and row_limit > 0 else events

    name_w = min(max([len(e.key) for e in events] + [4]) + 4, max_name_column_width)
    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    widths = [name_w, 12, 12, 12, 12, 12]
    if has_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
        widths += [12, 12]
    headers.append("# of Calls")
    widths.append(12)
    if has_shapes:
        shapes_w = min(max([len(str(e.input_shapes)) for e in events] + [12]) + 4, max_shapes_column_width)
        headers.append("Input Shapes")
        widths.append(shapes_w)

    row_fmt = "".join("{: >" + str(w) + "}  " for w in widths)
    sep = "".join("-" * w + "  " for w in widths)
    lines = []
    if header:
        lines += ["=" * len(sep), header]
    lines += [sep, row_fmt.format(*headers), sep]

    def pct(x):
        return f"{(100.0 * x / total_self) if total_self else 0.0:.2f}%"

    for e in shown:
        row = [
            _truncate(e.key, name_w - 1),
            pct(e.self_cpu_time_total),
            _format_time(e.self_cpu_time_total),
            pct(e.cpu_time_total),
            _format_time(e.cpu_time_total),
            _format_time(e.cpu_time),
        ]
        if has_memory:
            row += [_format_memory(e.cpu_memory_usage), _format_memory(e.self_cpu_memory_usage)]
        row.append(str(e.count))
        if has_shapes:
            row.append(_truncate(str(e.input_shapes), shapes_w - 1))
        lines.append(row_fmt.format(*row))
    lines.append(sep)
    lines.append(f"Self CPU time total: {_format_time(total_self)}")
    return "\n".join(lines) + "\n"


class EventList(list):
    """A list of FunctionEvent (or FunctionEventAvg) with torch's helpers."""

    def __init__(self, *args, profile_memory=False, base_ns=0, **kwargs):
        super().__init__(*args, **kwargs)
        self._profile_memory = profile_memory
        self._base_ns = base_ns

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75, max_name_column_width=55,
              max_shapes_column_width=80, header=None, top_level_events_only=False):
        return build_table(self, sort_by=sort_by, row_limit=row_limit, header=header,
                           profile_memory=self._profile_memory, max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width,
                           top_level_events_only=top_level_events_only)

    def __str__(self):
        return self.table()

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        groups = OrderedDict()
        for e in self:
            k = e.key
            if group_by_input_shape:
                k = (k, str(e.input_shapes))
            if group_by_stack_n > 0:
                k = (k, tuple(e.stack[:group_by_stack_n]))
            if k not in groups:
                groups[k] = FunctionEventAvg(e.key, e.input_shapes if group_by_input_shape else None)
                if group_by_stack_n > 0:
                    groups[k].stack = e.stack[:group_by_stack_n]
            groups[k].add(e)
        return EventList(groups.values(), profile_memory=self._profile_memory, base_ns=self._base_ns)

    def total_average(self):
        total = FunctionEventAvg("Total")
        for e in self:
            total.add(e)
        return total

    def export_chrome_trace(self, path):
        with open(path, "w") as f:
            json.dump(chrome_trace(self, self._base_ns), f)


def chrome_trace(events, base_ns):
    """Trace-event JSON ("X" complete events; ts and dur in microseconds)."""
    pid = os.getpid()
    out = []
    threads = []
    for e in events:
        if e.thread not in threads:
            threads.append(e.thread)
    out.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0, "args": {"name": "python"}})
    for i, t in enumerate(threads):
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": t, "ts": 0,
                    "args": {"name": f"thread {t}"}})
        out.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": t, "ts": 0, "args": {"sort_index": i}})
    for e in events:
        # Integer nanoseconds to microseconds: a child's [ts, ts + dur] stays
        # inside its parent's up to float rounding.
        ts = (e.start_ns - base_ns) / 1000.0
        dur = (e.end_ns - e.start_ns) / 1000.0
        args = {"External id": e.id}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
            args["Input type"] = e.input_dtypes
        if e.cpu_memory_usage or e.num_allocs:
            args["Alloc bytes"] = e.cpu_memory_usage
            args["Allocs"] = e.num_allocs
        if e._stack:
            args["Stack"] = e.stack
        out.append({"ph": "X", "cat": e.category, "name": e.name, "pid": pid, "tid": e.thread, "ts": ts,
                    "dur": dur, "args": args})
    return {"schemaVersion": 1, "displayTimeUnit": "ms", "baseTimeNanoseconds": base_ns, "traceEvents": out}


def build_events(raw, base_ns, profile_memory):
    """FunctionEvents from the binding's dicts, with parent/child links."""
    events = []
    by_thread_index = {}
    for i, r in enumerate(raw):
        e = FunctionEvent(r, i, base_ns)
        events.append(e)
        by_thread_index[(r["thread"], r["index"])] = e
    for r, e in zip(raw, events):
        if r["parent"] >= 0:
            p = by_thread_index.get((r["thread"], r["parent"]))
            if p is not None:
                e.cpu_parent = p
                p.cpu_children.append(e)
    events.sort(key=lambda e: (e.start_ns, e.depth))
    for i, e in enumerate(events):
        e.id = i
    return EventList(events, profile_memory=profile_memory, base_ns=base_ns)
