"""strata.cuda.Stream and strata.cuda.Event over Strata's CUDA runtime (src/backends/cuda/cuda_runtime.h).

A Stream is a (driver handle, device) pair: streams come from a per-device pool of 32 created on first use (as
torch's), so a Stream object can be made and dropped freely. The default stream has handle 0. Events are created
on the device of the first stream they record."""

from .. import _C

_cc = _C._cuda


def _index(device):
    """The device index of `device` (None: the current device)."""
    if device is None:
        return _cc.current_device()
    if isinstance(device, str):
        device = _C.device(device)
    if isinstance(device, _C.device):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return _cc.current_device() if device.index is None else device.index
    return int(device)


class Stream:
    """A CUDA stream: work queued on it runs in order, asynchronously to the host."""

    def __init__(self, device=None, priority=0, **kwargs):
        if "_handle" in kwargs:  # a stream the runtime named
            self._handle, self._device = kwargs["_handle"], kwargs["_device"]
        else:
            self._handle, self._device = _cc.new_stream(_index(device))
        self.priority = priority

    @classmethod
    def _wrap(cls, pair):
        return cls(_handle=pair[0], _device=pair[1])

    @property
    def device(self):
        return _C.device("cuda", self._device)

    @property
    def device_index(self):
        return self._device

    @property
    def cuda_stream(self):
        return self._handle

    @property
    def stream_id(self):
        return _cc.stream_id(self._handle, self._device)

    def query(self):
        """Whether all work queued on the stream so far has completed."""
        return _cc.stream_query(self._handle, self._device)

    def synchronize(self):
        _cc.stream_synchronize(self._handle, self._device)

    def wait_event(self, event):
        """Work queued on this stream from now on waits for `event` (recorded before) to complete."""
        _cc.stream_wait_event(self._handle, self._device, event._e)

    def wait_stream(self, stream):
        """Work queued on this stream from now on waits for all work queued on `stream` so far."""
        _cc.stream_wait_stream(self._handle, self._device, stream._handle, stream._device)

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and (self._handle, self._device) == (other._handle, other._device)

    def __hash__(self):
        return hash((self._handle, self._device))

    def __repr__(self):
        return f"<strata.cuda.Stream device=cuda:{self._device} cuda_stream={self._handle:#x}>"


class Event:
    """A CUDA event: a marker in a stream's work, for synchronization and timing."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise NotImplementedError("strata.cuda.Event(interprocess=True): IPC event handles are not supported")
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self._e = _cc.Event(self.enable_timing)

    def record(self, stream=None):
        stream = current_stream() if stream is None else stream
        self._e.record(stream._handle, stream._device)

    def wait(self, stream=None):
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self):
        return self._e.query()

    def synchronize(self):
        self._e.synchronize()

    def elapsed_time(self, end_event):
        """Milliseconds between this event and `end_event`, both recorded, completed and with enable_timing."""
        return self._e.elapsed_time(end_event._e)

    @property
    def cuda_event(self):
        return self._e.handle

    def __repr__(self):
        return f"<strata.cuda.Event {self._e.handle:#x}>" if self._e.recorded else "<strata.cuda.Event uninitialized>"


def current_stream(device=None):
    return Stream._wrap(_cc.current_stream(_index(device)))


def default_stream(device=None):
    return Stream._wrap(_cc.default_stream(_index(device)))


def set_stream(stream):
    if stream is not None:
        _cc.set_current_stream(stream._handle, stream._device)


class StreamContext:
    """`with strata.cuda.stream(s):` makes `s` the current stream (and its device the current device) inside;
    `stream(None)` does nothing, as torch's."""

    def __init__(self, stream):
        self.stream = stream
        self._saved = None

    def __enter__(self):
        s = self.stream
        if s is None:
            return None
        prev_dev = _cc.current_device()
        prev_on_dev = current_stream(s._device)
        self._saved = (prev_dev, prev_on_dev)
        if s._device != prev_dev:
            _cc.set_device(s._device)
        set_stream(s)
        return s

    def __exit__(self, *exc):
        if self._saved is not None:
            prev_dev, prev_on_dev = self._saved
            set_stream(prev_on_dev)
            if prev_dev != _cc.current_device():
                _cc.set_device(prev_dev)
            self._saved = None
        return False
