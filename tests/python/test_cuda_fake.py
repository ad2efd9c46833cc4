"""strata.cuda over the fake CUDA driver (src/backends/cuda/fake_driver.h): devices, tensors on "cuda", the caching
allocator's figures, streams, events and record_stream, with no GPU. The driver is chosen once per process, so
each check runs in a subprocess with STRATA_CUDA_DRIVER=fake; the rest of the suite keeps seeing no CUDA. The
first test checks that answer: without a driver, is_available() is False with a reason and device="cuda" raises."""

import os
import subprocess
import sys
import textwrap

import pytest

import strata
from _cuda_fake_run import PKG_PARENT, run_fake

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(os.environ.get("STRATA_CUDA_DRIVER") == "fake" or strata.cuda.is_available(),
                    reason="checks the answers of a process without a CUDA driver")
def test_without_a_driver_cuda_is_unavailable_with_a_reason():
    assert strata.cuda.is_available() is False and strata.cuda.device_count() == 0
    reason = strata.cuda.is_available_reason()
    assert "libcuda.so.1" in reason
    with pytest.raises(RuntimeError, match="CUDA is not available: libcuda.so.1"):
        strata.empty(2, device="cuda")
    with pytest.raises(RuntimeError, match="CUDA is not available: libcuda.so.1"):
        strata.zeros(2, 3, device="cuda:0")
    with pytest.raises(AssertionError, match="device 'cuda'.*no CUDA backend.*libcuda.so.1"):
        strata.ones(2).to("cuda")
    with pytest.raises(AssertionError, match=r"strata\.cuda\.synchronize\(\).*libcuda.so.1"):
        strata.cuda.synchronize()
    assert strata.cuda.memory_allocated() == 0 and strata.cuda.memory_stats() == {}


def test_devices_and_properties():
    run_fake("""
        assert strata.cuda.is_available() and strata.cuda.is_available_reason() == ""
        assert strata.cuda.device_count() == 3
        assert strata.cuda.get_device_name(1) == "Strata fake device 1"
        assert strata.cuda.get_device_capability() == (9, 0) and strata.cuda.is_bf16_supported()
        p = strata.cuda.get_device_properties("cuda:2")
        assert p.total_memory == 1 << 30 and p.multi_processor_count > 0 and p.name.endswith("2")
        assert strata.cuda.current_device() == 0
        with strata.cuda.device(2):
            assert strata.cuda.current_device() == 2
            assert strata.empty(3, device="cuda").device == strata.device("cuda:2")
        assert strata.cuda.current_device() == 0
        strata.cuda.set_device(1)
        assert strata.cuda.current_device() == 1
        try:
            strata.cuda.set_device(7)
            raise SystemExit("no error for device 7")
        except IndexError as e:
            assert "invalid CUDA device index 7" in str(e) and "3 devices" in str(e)
        acc = strata.accelerator
        assert acc.is_available() and acc.current_accelerator() == strata.device("cuda") and acc.device_count() == 3
        with acc.device_index(2):
            assert acc.current_device_index() == 2
        assert acc.current_device_index() == 1 and acc.memory_allocated() == 0
        free, total = strata.cuda.mem_get_info(0)
        assert total == 1 << 30 and free == total
    """, STRATA_CUDA_FAKE_DEVICES=3, STRATA_CUDA_FAKE_MEMORY=1 << 30)


def test_tensors_move_between_host_and_devices():
    run_fake("""
        import numpy as np
        import torch
        a = np.arange(12, dtype=np.float32).reshape(3, 4)
        x = strata.tensor(a)
        y = x.to("cuda")
        assert y.device == strata.device("cuda:0") and y.is_cuda and y.shape == (3, 4)
        assert x.cuda(1).device == strata.device("cuda:1")
        np.testing.assert_array_equal(y.cpu().numpy(), a)
        np.testing.assert_array_equal(y.t().cpu().numpy(), a.T)                   # a strided view comes back
        np.testing.assert_array_equal(y.to("cpu", dtype=strata.float64).numpy(), a.astype(np.float64))
        assert y[1, 2].item() == 6.0
        # host -> device with conversion and broadcasting; device -> device; into a strided device view
        z = strata.zeros(3, 4, dtype=strata.float64, device="cuda")
        z.copy_(strata.tensor([1, 2, 3, 4], dtype=strata.int32))
        np.testing.assert_array_equal(z.cpu().numpy(), np.tile([1., 2., 3., 4.], (3, 1)))
        w = strata.empty(3, 4, device="cuda")
        w.copy_(y)
        w.t()[1].copy_(strata.full((3,), -1.0))
        ref = torch.arange(12.).reshape(3, 4)
        ref.t()[1].copy_(torch.full((3,), -1.0))
        np.testing.assert_array_equal(w.cpu().numpy(), ref.numpy())
        o = strata.ones(2, device="cuda:1", dtype=strata.int64)
        assert o.cpu().tolist() == [1, 1] and strata.full((2,), 7.5, device="cuda").cpu().tolist() == [7.5, 7.5]
        assert "device='cuda:0'" in repr(y) and "11." in repr(y)
        assert y.clone().cpu().tolist() == a.tolist()
        assert y.cuda() is y and y.to("cuda") is y and y.to("cuda:0") is y and y.get_device() == 0
        y1 = y.to("cuda:1", dtype=strata.float64)                  # across devices, converting on the way
        assert y1.device == strata.device("cuda:1") and y1.cpu().tolist() == a.tolist()
        assert y.to(strata.int32).cpu().tolist() == a.astype(np.int32).tolist()
        assert strata.empty(0, device="cuda").cpu().shape == (0,) and strata.zeros((), device="cuda").item() == 0.0
        try:
            strata.cumsum(y, 0)  # an op without a CUDA kernel (docs/CUDA.md "Eager kernels" lists those with one)
            raise SystemExit("cumsum ran on cuda")
        except NotImplementedError as e:
            assert "'cumsum'" in str(e) and "CUDA" in str(e) and "no kernel" in str(e)
    """)


def test_caching_allocator_figures_and_out_of_memory():
    run_fake("""
        MiB = 1 << 20
        assert strata.cuda.memory_allocated() == 0 and strata.cuda.memory_reserved() == 0
        a = strata.empty(100, device="cuda")            # 400 bytes -> one 512-byte block of a 2 MiB segment
        b = strata.empty(1000, device="cuda")           # 4000 -> 4096
        assert strata.cuda.memory_allocated() == 512 + 4096
        assert strata.cuda.memory_reserved() == 2 * MiB
        del b
        assert strata.cuda.memory_allocated() == 512 and strata.cuda.max_memory_allocated() == 512 + 4096
        strata.cuda.reset_peak_memory_stats()
        assert strata.cuda.max_memory_allocated() == 512
        s = strata.cuda.memory_stats()
        assert s["allocation.all.current"] == 1 and s["allocation.all.allocated"] == 2
        assert s["segment.small_pool.current"] == 1 and s["requested_bytes.all.current"] == 400
        assert list(s) == sorted(s) and "num_alloc_retries" in s and "inactive_split_bytes.all.peak" in s
        assert "Allocated memory" in strata.cuda.memory_summary()
        try:
            strata.cuda.memory_stats(5)
            raise SystemExit("no error for device 5")
        except IndexError as e:
            assert "memory_stats" in str(e) and "invalid CUDA device index 5" in str(e)
        del a
        strata.cuda.empty_cache()
        assert strata.cuda.memory_reserved() == 0 and fake.used_memory(0) == 0
        fake.set_total_memory(0, 64 * MiB)
        big = strata.empty(30 * MiB // 4, device="cuda")
        try:
            strata.empty(40 * MiB // 4, device="cuda")
            raise SystemExit("no out-of-memory error")
        except strata.cuda.OutOfMemoryError as e:
            m = str(e)
            assert "CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0 has a total capacity of 64.00 MiB" in m, m
            assert "30.00 MiB is allocated by Strata" in m, m
            assert isinstance(e, RuntimeError)
        st = strata.cuda.memory_stats()
        assert st["num_ooms"] == 1 and st["num_alloc_retries"] == 1
        del big
        again = strata.empty(40 * MiB // 4, device="cuda")   # the cached 30 MiB segment is released, then it fits
        assert strata.cuda.memory_stats()["num_alloc_retries"] == 2
    """)


def test_streams_events_and_ordering():
    run_fake("""
        cuda = strata.cuda
        s = cuda.Stream()
        assert s != cuda.current_stream() and cuda.current_stream() == cuda.default_stream()
        assert s.device == strata.device("cuda:0") and s.stream_id != 0
        with cuda.stream(s):
            assert cuda.current_stream() == s
        assert cuda.current_stream() == cuda.default_stream()
        with cuda.stream(None):
            pass
        fake.set_manual_progress(True)
        x = strata.ones(4, device="cuda")           # host -> device on the default stream, waited for
        y = strata.empty(4, device="cuda")
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record(s)
        s.wait_stream(cuda.default_stream())
        with cuda.stream(s):
            y.copy_(x)                             # device -> device, queued on s
        end.record(s)
        assert fake.pending(s) == 4 and not s.query() and not end.query()
        assert fake.run_pending(s, 1) == 1 and start.query() and not end.query()
        end.synchronize()
        assert end.query() and s.query() and start.elapsed_time(end) >= 0
        assert y.cpu().tolist() == [1.0] * 4
        e = cuda.Event()
        try:
            e.elapsed_time(end)
            raise SystemExit("elapsed_time without timing")
        except RuntimeError as err:
            assert "enable_timing" in str(err)
        assert e.query()                             # never recorded: nothing to wait for
        cuda.synchronize()
    """)


def test_record_stream_delays_reuse():
    run_fake("""
        fake.set_manual_progress(True)
        side = strata.cuda.Stream()
        x = strata.ones(256, device="cuda")
        out = strata.empty(256, device="cuda")
        side.wait_stream(strata.cuda.current_stream())
        with strata.cuda.stream(side):
            out.copy_(x)                  # side reads x
        x.record_stream(side)
        addr = cc.data_address(x)
        del x
        y = strata.empty(256, device="cuda")
        assert cc.data_address(y) != addr    # side has not run: x's block is not handed out
        side.synchronize()
        z = strata.empty(256, device="cuda")
        assert cc.data_address(z) == addr    # now it is
        assert out.cpu().tolist() == [1.0] * 256
        # without record_stream the block would have come back at once (the use-after-free record_stream prevents)
        w = strata.ones(256, device="cuda")
        a2 = cc.data_address(w)
        del w
        assert cc.data_address(strata.empty(256, device="cuda")) == a2
    """)


def test_private_pool_keeps_addresses():
    run_fake("""
        pool = strata.cuda.graph_pool_handle()
        strata.cuda._begin_allocate_to_pool(0, pool)
        a = strata.empty(1000, device="cuda")
        addr = cc.data_address(a)
        strata.cuda._end_allocate_to_pool(0, pool)
        del a
        b = strata.empty(1000, device="cuda")
        assert cc.data_address(b) != addr
        strata.cuda._begin_allocate_to_pool(0, pool)
        c = strata.empty(1000, device="cuda")
        strata.cuda._end_allocate_to_pool(0, pool)
        assert cc.data_address(c) == addr
        reserved = strata.cuda.memory_reserved()
        del c
        strata.cuda._release_pool(0, pool)
        strata.cuda._release_pool(0, pool)
        assert strata.cuda.memory_reserved() == reserved - (2 << 20)
    """)


def test_pinned_memory_and_non_blocking_copies():
    run_fake("""
        fake.set_manual_progress(True)
        t = strata.arange(8.0).pin_memory()
        assert t.is_pinned() and not strata.arange(8.0).is_pinned() and t.pin_memory() is t
        d = t.to("cuda", non_blocking=True)
        assert fake.pending() == 2                     # queued (the copy and its event), not waited for
        blocking = t.to("cuda")                        # non_blocking=False waits, as torch
        assert fake.pending() == 0
        h = strata.zeros(8).pin_memory()
        h.copy_(d, non_blocking=True)
        assert h.tolist() == [0.0] * 8                 # the copy back has not run yet
        strata.cuda.current_stream().synchronize()
        assert h.tolist() == list(range(8)) and blocking.cpu().tolist() == list(range(8))
        assert cc.pinned_stats()[0] > 0
    """)


def test_sync_debug_mode_reports_implicit_synchronizations():
    run_fake("""
        import warnings
        x = strata.ones(4, device="cuda")
        assert strata.cuda.get_sync_debug_mode() == 0
        strata.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            v = x[1].item()
            strata.cuda.synchronize()                      # asked for: not reported
        assert v == 1.0 and len(w) == 1, [str(m.message) for m in w]
        assert "called a synchronizing CUDA operation" in str(w[0].message) and w[0].category is UserWarning
        strata.cuda.set_sync_debug_mode(2)
        try:
            x.cpu()
            raise SystemExit("no error")
        except RuntimeError as e:
            assert "synchronizing CUDA operation" in str(e)
        try:
            strata.zeros(2, device="cuda").copy_(strata.ones(2))
            raise SystemExit("no error for a blocking host copy")
        except RuntimeError as e:
            assert "non_blocking=False" in str(e)
        strata.cuda.set_sync_debug_mode("default")
        assert x.cpu().tolist() == [1.0] * 4
        try:
            strata.cuda.set_sync_debug_mode("loud")
            raise SystemExit("no error for a bad mode")
        except RuntimeError:
            pass
    """)


def _stub_driver(tmp_path, symbols, init_result):
    """Builds a libcuda.so.1 exporting `symbols` (each returning 0, cuInit returning init_result)."""
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stub driver")
    src = tmp_path / "stub.c"
    lines = [f"int {name}(void) {{ return {init_result if name == 'cuInit' else 0}; }}" for name in symbols]
    src.write_text("\n".join(lines) + "\n")
    lib = tmp_path / "libcuda.so.1"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    return tmp_path


def _driver_symbols():
    import re

    header = open(os.path.join(ROOT, "src", "backends", "cuda", "driver_api.h")).read()
    return re.findall(r'X\(\w+, "(\w+)"', header)


def _reason_with(libdir):
    e = {k: v for k, v in os.environ.items() if k != "STRATA_CUDA_DRIVER"}
    e["LD_LIBRARY_PATH"] = str(libdir) + os.pathsep + e.get("LD_LIBRARY_PATH", "")
    e["PYTHONPATH"] = PKG_PARENT
    code = "import strata; print(strata.cuda.is_available(), strata.cuda.is_available_reason())"
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.skipif(strata.cuda.is_available(), reason="a real driver is installed")
def test_a_driver_lacking_functions_or_devices_is_refused_with_the_reason(tmp_path):
    syms = _driver_symbols()
    assert "cuMemAlloc_v2" in syms and "cuLaunchKernel" in syms and len(syms) > 30
    (tmp_path / "old").mkdir()
    old = _stub_driver(tmp_path / "old", ["cuInit", "cuDeviceGetCount"], 0)  # a driver from before these functions
    out = _reason_with(old)
    assert out.startswith("False libcuda.so.1 lacks functions Strata needs") and "cuMemAlloc_v2" in out, out
    (tmp_path / "nodev").mkdir()
    nodev = _stub_driver(tmp_path / "nodev", syms, 100)  # CUDA_ERROR_NO_DEVICE
    out = _reason_with(nodev)
    assert out.startswith("False cuInit failed: CUresult 100") and "no GPU is visible" in out, out
    (tmp_path / "zero").mkdir()
    zero = _stub_driver(tmp_path / "zero", syms, 0)  # initializes, counts no device
    assert _reason_with(zero) == "False the NVIDIA driver sees no CUDA device"


# ---- the same runtime on a real GPU (skipped where there is none) ----------------------------------------------
REAL_CHECKS = """
    import numpy as np
    assert strata.cuda.is_available() and cc.is_fake() == EXPECT_FAKE, strata.cuda.is_available_reason()
    n = strata.cuda.device_count()
    p = strata.cuda.get_device_properties(0)
    assert n >= 1 and p.total_memory > 0 and p.major >= 7
    a = np.random.default_rng(0).standard_normal((64, 33)).astype(np.float32)
    x = strata.tensor(a).cuda()
    np.testing.assert_array_equal(x.cpu().numpy(), a)
    np.testing.assert_array_equal(x.t().cpu().numpy(), a.T)
    np.testing.assert_array_equal(x.to(strata.float64).cpu().numpy(), a.astype(np.float64))
    pinned = strata.tensor(a).pin_memory()
    y = pinned.to("cuda", non_blocking=True)
    s = strata.cuda.Stream()
    s.wait_stream(strata.cuda.current_stream())
    start, end = strata.cuda.Event(enable_timing=True), strata.cuda.Event(enable_timing=True)
    with strata.cuda.stream(s):
        start.record()
        z = strata.empty(64, 33, device="cuda")
        z.copy_(y)
        end.record()
    y.record_stream(s)
    end.synchronize()
    assert start.elapsed_time(end) >= 0
    np.testing.assert_array_equal(z.cpu().numpy(), a)
    before = strata.cuda.memory_allocated()
    big = strata.empty(1 << 20, device="cuda")
    assert strata.cuda.memory_allocated() == before + (4 << 20)
    del big
    strata.cuda.empty_cache()
    free, total = strata.cuda.mem_get_info()
    assert 0 < free <= total
    try:
        strata.empty(1 << 46, device="cuda")
        raise SystemExit("no out-of-memory error")
    except strata.cuda.OutOfMemoryError as e:
        assert "CUDA out of memory" in str(e)
    strata.cuda.synchronize()
    print("REAL-GPU-OK", p.name)
"""


@pytest.mark.cuda
def test_real_gpu_runtime():
    e = {k: v for k, v in os.environ.items() if k != "STRATA_CUDA_DRIVER"}
    e["PYTHONPATH"] = PKG_PARENT
    probe = subprocess.run([sys.executable, "-c", "import strata; print(strata.cuda.is_available())"], env=e,
                           capture_output=True, text=True, timeout=300)
    if probe.stdout.strip() != "True":
        pytest.skip("no GPU with a driver on this machine (the checks above ran on the fake driver)")
    prelude = "import strata\nfrom strata import _C\ncc = _C._cuda\nEXPECT_FAKE = False\n"
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(REAL_CHECKS)], env=e, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "REAL-GPU-OK" in r.stdout, r.stdout + r.stderr


def test_the_real_gpu_checks_pass_on_the_fake_driver():
    # Keeps REAL_CHECKS honest on machines without a GPU.
    assert "REAL-GPU-OK" in run_fake("EXPECT_FAKE = True\n" + textwrap.dedent(REAL_CHECKS))
