"""Time of one activation backward (autograd.grad of y = act(x) with a given gradient) on a 32x64x512 float32
tensor, Strata or torch, 2 threads. The backward is the fused op plus the engine's overhead.

    PYTHONPATH=python .venv/bin/python bench/act_backward.py strata
    .venv/bin/python bench/act_backward.py torch
"""
import sys
import time

lib_name = sys.argv[1] if len(sys.argv) > 1 else "strata"
lib = __import__(lib_name)
lib.set_num_threads(2)
F = lib.nn.functional
ACTS = {"relu": lib.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
        "sigmoid": lib.sigmoid, "tanh": lib.tanh}

lib.manual_seed(0)
x = lib.randn(32, 64, 512).requires_grad_()
g = lib.randn(32, 64, 512)
for name, f in ACTS.items():
    y = f(x)
    times = []
    for i in range(25):
        t0 = time.perf_counter()
        lib.autograd.grad(y, x, g, retain_graph=True)
        times.append(time.perf_counter() - t0)
    times.sort()
    print(f"{lib_name:7s} {name:10s} median {times[len(times) // 2] * 1e3:7.2f} ms  min {times[0] * 1e3:7.2f} ms")
