"""Fuzzing the checkpoint loaders (strata.load), which are Python code over C++ tensor construction: random
mutations of valid files (byte flips, truncations, insertions, rewritten header fields) must load or raise a
ValueError naming strata.load for safetensors; for torch's zip format any exception is accepted (zip, pickle
and the unpickler raise their own), but never a crash. scripts/sanitize.sh runs this file under ASan+UBSan
(docs/HARDENING.md), where an out-of-bounds read while building a tensor from the file is a crash.
STRATA_FUZZ_EXAMPLES sets the number of examples per test (default 150)."""

import io
import json
import os
import struct

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import strata  # noqa: E402

EXAMPLES = int(os.environ.get("STRATA_FUZZ_EXAMPLES", "150"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=os.environ.get("STRATA_FUZZ_RANDOM") != "1",
                    suppress_health_check=list(HealthCheck), database=None)


def _saved(fmt):
    obj = {
        "w": strata.arange(6, dtype=strata.float32).reshape(2, 3),
        "b": strata.ones(3, dtype=strata.bfloat16),
        "i": strata.tensor([1, -2, 3], dtype=strata.int64),
        "m": strata.tensor([True, False]),
    }
    buf = io.BytesIO()
    strata.save(obj, buf, format=fmt)
    return buf.getvalue()


SAFETENSORS = _saved("safetensors")
ZIPFILE = _saved(None)  # torch's zip format, the default


def _load(data):
    return strata.load(io.BytesIO(data), weights_only=True)


def _check_loaded(out):
    # Whatever loaded must be usable: every tensor's elements readable (ASan checks the reads).
    for v in out.values() if isinstance(out, dict) else [out]:
        if isinstance(v, strata.Tensor):
            v.contiguous().sum()


@st.composite
def mutations(draw, data):
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            data[i] = draw(st.sampled_from([0, 0x22, 0x2C, 0x2D, 0x30, 0x39, 0x5B, 0x5D, 0x7B, 0x7D, 0xFF]))
        elif kind == "cut":
            del data[i:]
        elif kind == "insert":
            data[i:i] = draw(st.binary(min_size=1, max_size=8))
        else:
            del data[i:i + draw(st.integers(1, 8))]
    return bytes(data)


def _header():
    (n,) = struct.unpack("<Q", SAFETENSORS[:8])
    return json.loads(SAFETENSORS[8:8 + n]), SAFETENSORS[8 + n:]


_INTS = st.one_of(st.integers(-3, 40), st.sampled_from([2**31, 2**32 - 1, 2**62, 2**63 - 1, -(2**63), 2**64]))


@st.composite
def rewritten_headers(draw):
    """Valid JSON whose fields lie: shapes, offsets and dtypes drawn independently of the data."""
    header, data = _header()
    for name in draw(st.lists(st.sampled_from(sorted(k for k in header if k != "__metadata__")), min_size=1)):
        entry = header[name]
        field = draw(st.sampled_from(["shape", "data_offsets", "dtype"]))
        if field == "shape":
            entry["shape"] = draw(st.lists(_INTS, max_size=5))
        elif field == "data_offsets":
            entry["data_offsets"] = draw(st.lists(_INTS, min_size=0, max_size=3))
        else:
            entry["dtype"] = draw(st.sampled_from(["F32", "F16", "BF16", "F64", "I64", "I32", "I8", "U8", "BOOL",
                                                   "F8_E4M3", "C64", "X"]))
    h = json.dumps(header).encode()
    data = data[:draw(st.integers(0, len(data)))] if draw(st.booleans()) else data
    return struct.pack("<Q", len(h)) + h + data


def _loads_or_raises_value_error(blob):
    try:
        out = _load(blob)
    except ValueError as e:
        assert "strata.load" in str(e)
        return
    _check_loaded(out)


@SETTINGS
@given(mutations(SAFETENSORS))
def test_mutated_safetensors_load_or_raise_value_error(blob):
    _loads_or_raises_value_error(blob)


@SETTINGS
@given(rewritten_headers())
def test_lying_safetensors_headers_load_or_raise_value_error(blob):
    _loads_or_raises_value_error(blob)


@SETTINGS
@given(mutations(ZIPFILE))
def test_mutated_zip_checkpoints_never_crash(blob):
    try:
        out = _load(blob)
    except Exception:  # zipfile.BadZipFile, pickle errors, ValueError, RuntimeError: all clean refusals
        return
    _check_loaded(out)
