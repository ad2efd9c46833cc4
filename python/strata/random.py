"""Random number generation state: strata.Generator, the default generator,
manual_seed/seed/initial_seed and get_rng_state/set_rng_state.

CPU random ops reproduce torch's CPU generator (a Mersenne Twister mt19937 and
torch's transformations of its draws): see Note [CPU random streams] in
src/core/generator.h. A generator lives in the C++ core under an integer id
(0 is the default one); the ops take it as ``generator=<id>`` and this module
translates ``strata.Generator`` objects into ids. The state tensor is torch's:
5056 uint8 values, interchangeable with torch.get_rng_state()."""

import builtins
import functools
import itertools
import os
import struct

from . import _C

_ops = _C._ops

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state",
           "set_rng_state", "fork_rng"]

_DEFAULT_SEED = 67280421310721
_MASK64 = (1 << 64) - 1
_ids = itertools.count(1)


_STATE_BYTES = 5056
_MT_N = 624


@functools.lru_cache(maxsize=16)
def _seeded_state(seed_value):
    """The state of a generator just seeded with seed_value: mt19937's standard
    initialisation from the seed's low 32 bits, no cached normal sample. Cached: the
    ops copy from it and never hand it out."""
    import numpy as np

    from ._functions import from_numpy

    w = seed_value & 0xFFFFFFFF
    words = [w]
    for i in range(1, _MT_N):
        w = (1812433253 * (w ^ (w >> 30)) + i) & 0xFFFFFFFF
        words.append(w)
    buf = np.zeros(_STATE_BYTES, np.uint8)
    # initial seed, left = 1 (the next draw regenerates), seeded, next = 0, the words
    buf[:24] = np.frombuffer(struct.pack("<QiiQ", seed_value, 1, 1, 0), np.uint8)
    buf[24:24 + 8 * _MT_N] = np.array(words, np.uint64).view(np.uint8)
    return from_numpy(buf)


def _check_seed(s):
    if isinstance(s, builtins.float) or not hasattr(s, "__index__"):
        raise TypeError(f"manual_seed expected an int, got {type(s).__name__}")
    s = s.__index__()
    if not (-(1 << 63) <= s <= _MASK64):
        raise RuntimeError(f"Overflow when unpacking long long: seed {s} is outside [-2**63, 2**64 - 1]")
    return s & _MASK64


class Generator:
    """An independent random stream: ``g = strata.Generator().manual_seed(0)``,
    then ``strata.rand(3, generator=g)``."""

    def __init__(self, device="cpu"):
        dev = device if isinstance(device, _C.device) else _C.device(str(device))
        if dev.type not in ("cpu", "meta"):
            raise RuntimeError(f"Generator: device type {dev.type} is not supported")
        self._device = dev
        self._id = next(_ids)
        _ops._set_rng_state(_seeded_state(_DEFAULT_SEED), generator=self._id)

    @property
    def device(self):
        return self._device

    def manual_seed(self, seed):
        _ops._set_rng_state(_seeded_state(_check_seed(seed)), generator=self._id)
        return self

    def seed(self):
        s = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self.manual_seed(s)
        return s

    def initial_seed(self):
        return int.from_bytes(bytes(self.get_state().tolist()[:8]), "little")

    def get_state(self):
        return _ops._get_rng_state(generator=self._id)

    def set_state(self, new_state):
        if not isinstance(new_state, _C.Tensor):
            raise TypeError(f"expected a strata.ByteTensor, but got {type(new_state).__name__}")
        _ops._set_rng_state(new_state, generator=self._id)
        return self

    def get_offset(self):
        raise RuntimeError("CPU Generator does not use offset")

    def set_offset(self, offset):
        raise RuntimeError("CPU Generator does not use offset")

    def __del__(self):
        try:
            if self._id != 0:
                _ops._drop_generator(self._id)
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return f"<strata._C.Generator object at {id(self):#x}>"


def _make_default():
    g = Generator.__new__(Generator)
    g._device = _C.device("cpu")
    g._id = 0
    return g


default_generator = _make_default()


def _gen_id(generator):
    """The id the ops take for a generator= argument."""
    if generator is None:
        return None
    if isinstance(generator, Generator):
        return generator._id
    raise TypeError(f"generator must be a strata.Generator, not {type(generator).__name__}")


def manual_seed(seed):
    """Seeds the default generator; returns it."""
    return default_generator.manual_seed(seed)


def seed():
    """Seeds the default generator from the OS's entropy; returns the seed."""
    return default_generator.seed()


def initial_seed():
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state):
    default_generator.set_state(new_state)


class fork_rng:
    """Context manager that restores the default generator's state on exit."""

    def __init__(self, devices=None, enabled=True, **kwargs):
        self.enabled = enabled

    def __enter__(self):
        if self.enabled:
            self._state = get_rng_state()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            set_rng_state(self._state)
        return False
