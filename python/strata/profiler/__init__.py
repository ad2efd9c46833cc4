"""strata.profiler: torch.profiler's API over a dispatcher layer.

Profiling is the DispatchKey::Profiler layer switched on for every thread while
a profile is active (see src/profiler/profiler.h): every op call on any thread,
including ops that kernels call internally, is recorded with its nesting and
its thread; nothing runs when it is off.

    with strata.profiler.profile(record_shapes=True) as prof:
        with strata.profiler.record_function("block"):
            y = x @ w
    print(prof.key_averages().table(sort_by="self_cpu_time_total"))
    prof.export_chrome_trace("trace.json")

strata.profiler.explain(fn) shows the path of each op call through the
dispatcher; warn_on("hidden_copy") reports ops that silently copy inputs.
"""

import contextlib
import enum
import functools
import os
import warnings

from .. import _C
from ._events import EventList, FunctionEvent, FunctionEventAvg, build_events
from ._explain import explain, Explanation, OpCall

__all__ = [
    "profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule", "tensorboard_trace_handler",
    "explain", "Explanation", "OpCall", "EventList",
    "FunctionEvent", "FunctionEventAvg", "set_warn_on", "is_warn_on", "warn_on", "HiddenCopyWarning",
    "is_profiling",
]

HiddenCopyWarning = _C.HiddenCopyWarning

# Frames in the package's own files are skipped when a warning or a stack
# points at "the user's line".
_C._profiler_set_package_dir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1  # accepted for compatibility; Strata's profiler records CPU activity
    XPU = 2
    MTIA = 3
    PrivateUse1 = 4


class ProfilerAction(enum.Enum):
    """What the profiler does at a step under a schedule (torch.profiler.ProfilerAction)."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """A step -> ProfilerAction function, as torch.profiler.schedule: after `skip_first` steps, cycles of `wait`
    idle steps, `warmup` steps and `active` recorded steps (the last one saves: on_trace_ready runs after it),
    `repeat` times (0: without end). skip_first_wait=1 starts the first cycle at its warm-up."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError(f"Invalid profiler schedule arguments: wait={wait}, warmup={warmup}, active={active}, "
                         f"repeat={repeat}, skip_first={skip_first}")
    cycle = wait + warmup + active

    def fn(step):
        if step < 0:
            raise ValueError(f"profiler schedule: step must be >= 0, got {step}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait  # the first cycle has no idle steps
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return fn


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False, use_python_export=False):
    """An on_trace_ready handler that writes each saved cycle's Chrome trace to
    dir_name/<worker_name>.<time in ns>.pt.trace.json (.gz with use_gzip), as torch's does."""
    import socket
    import time

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        path = os.path.join(dir_name, f"{worker}.{time.time_ns()}.pt.trace.json")
        if use_gzip:
            import gzip
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                raw = prof.export_chrome_trace(os.path.join(tmp, "trace.json"))
                with open(raw, "rb") as f, gzip.open(path + ".gz", "wb") as g:
                    g.write(f.read())
            return path + ".gz"
        return prof.export_chrome_trace(path)

    return handler


_RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


def supported_activities():
    return {ProfilerActivity.CPU}


def is_profiling():
    """True while this thread records into a profile."""
    return _C._profiler_is_recording()


class profile:
    """Records every op call, on every thread, while active (torch.profiler.profile).

    activities: accepted for compatibility (only CPU activity exists).
    record_shapes: record input shapes and dtypes of each op call.
    profile_memory: record CPU allocator bytes/allocations per call.
    with_stack: record the Python stack (file, line, function) of each top-level call.
    """

    def __init__(self, activities=None, record_shapes=False, profile_memory=False, with_stack=False,
                 schedule=None, on_trace_ready=None, with_flops=False, with_modules=False, experimental_config=None,
                 acc_events=False, use_cuda=None, **kwargs):
        if schedule is not None and not callable(schedule):
            raise TypeError("profile: schedule must be a callable step -> ProfilerAction (see "
                            "strata.profiler.schedule)")
        self.schedule = schedule
        self.step_num = 0
        self._action = None  # the schedule's action for the current step, once started
        self._step_token = None  # the open ProfilerStep#N range
        acts = set(activities) if activities is not None else {ProfilerActivity.CPU}
        if acts - {ProfilerActivity.CPU}:
            warnings.warn("strata.profiler.profile: only ProfilerActivity.CPU is recorded; other activities "
                          "are ignored", stacklevel=2)
        self.activities = acts
        self.record_shapes = bool(record_shapes)
        self.profile_memory = bool(profile_memory)
        self.with_stack = bool(with_stack)
        self.on_trace_ready = on_trace_ready
        self._explain = bool(kwargs.pop("_explain", False))
        if kwargs:
            raise TypeError(f"profile() got unexpected keyword arguments {sorted(kwargs)}")
        self._session = None
        self._events = None

    def _start_session(self):
        self._session = _C._profiler_start(record_shapes=self.record_shapes or self._explain,
                                           profile_memory=self.profile_memory, with_stack=self.with_stack,
                                           explain=self._explain, all_threads=not self._explain)

    def _stop_session(self):
        """Ends the recording: its events become this profile's results and on_trace_ready sees them."""
        if self._step_token is not None:
            _C._record_function_exit(self._step_token)
            self._step_token = None
        s, self._session = self._session, None
        _C._profiler_stop(s)
        self._events = build_events(_C._profiler_events(s), s.start_ns, self.profile_memory)
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    def _enter_action(self, action):
        """Under a schedule: record the steps whose action records, each inside a ProfilerStep#<n> range."""
        self._action = action
        if action in _RECORDING:
            if self._session is None:
                self._start_session()
            self._step_token = _C._record_function_enter(f"ProfilerStep#{self.step_num}", "user_annotation")

    def start(self):
        if self._session is not None or self._action is not None:
            raise RuntimeError("profile: already started")
        if self.schedule is None:
            self._start_session()
        else:
            self._enter_action(self.schedule(self.step_num))
        return self

    def stop(self):
        if self.schedule is not None:
            self._action = None
        if self._session is not None:
            self._stop_session()

    def step(self):
        """Marks the end of a training step. Under a schedule, moves to the next step's action: recording starts
        and stops as the schedule says, and after each saving step the cycle's results go to on_trace_ready.
        Without a schedule it only counts steps (every step is recorded)."""
        self.step_num += 1
        if self.schedule is None or self._action is None:
            return
        prev, action = self._action, self.schedule(self.step_num)
        if self._step_token is not None:
            _C._record_function_exit(self._step_token)
            self._step_token = None
        if self._session is not None and (prev == ProfilerAction.RECORD_AND_SAVE or action not in _RECORDING):
            self._stop_session()
        self._enter_action(action)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def _finished(self):
        if self._events is None:
            raise RuntimeError("profile: results are available once the profiler has stopped (after the with-block)")
        return self._events

    def events(self):
        """Every recorded range (FunctionEvent), in start order, with cpu_parent/cpu_children links."""
        return self._finished()

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        if group_by_input_shape and not self.record_shapes:
            raise RuntimeError("key_averages(group_by_input_shape=True) needs profile(record_shapes=True)")
        return self._finished().key_averages(group_by_input_shape, group_by_stack_n)

    def table(self, *args, **kwargs):
        return self.key_averages().table(*args, **kwargs)

    def export_chrome_trace(self, path):
        self._finished().export_chrome_trace(path)
        return path

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self._finished())


class record_function(contextlib.ContextDecorator):
    """A named range in the profile (context manager or decorator); free when not profiling."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self._tokens = []

    def __enter__(self):
        self._tokens.append(_C._record_function_enter(self.name, "user_annotation"))
        return self

    def __exit__(self, *exc):
        _C._record_function_exit(self._tokens.pop())
        return False

    def __call__(self, fn):
        # A fresh range per call, so recursion and threads do not share tokens.
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)

        return wrapper


# ---- silent-cost warnings ----------------------------------------------------

_WARN_KINDS = ("hidden_copy",)


def _check_kind(kind):
    if kind not in _WARN_KINDS:
        raise ValueError(f"set_warn_on: unknown warning kind {kind!r}; expected one of {', '.join(_WARN_KINDS)}")


def set_warn_on(kind, enabled=True):
    """Turns a silent-cost warning on or off for this thread.

    "hidden_copy": warn (HiddenCopyWarning, at the caller's line) when an op
    makes a contiguous copy of a non-contiguous input behind your back.
    """
    _check_kind(kind)
    _C._set_warn_hidden_copy(bool(enabled))


def is_warn_on(kind):
    _check_kind(kind)
    return _C._warn_hidden_copy_enabled()


@contextlib.contextmanager
def warn_on(*kinds, enabled=True):
    """with strata.profiler.warn_on("hidden_copy"): ... (restores the previous setting)."""
    kinds = kinds or _WARN_KINDS
    prev = {k: is_warn_on(k) for k in kinds}
    try:
        for k in kinds:
            set_warn_on(k, enabled)
        yield
    finally:
        for k, v in prev.items():
            set_warn_on(k, v)
