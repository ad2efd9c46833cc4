"""The main job until the training job exists: real ops through every layer of
Strata, printing what happened at each step."""

import time

import strata as st
import strata.nn.functional as F


def section(title):
    print(f"\n== {title} " + "=" * max(0, 60 - len(title)))


def timed(fn, repeat=5):
    fn()  # warm up (first use loads the BLAS libraries and checks them)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def main():
    section("runtime")
    print(f"strata {st.__version__}: CPU kernels at ISA level '{st._C._cpu_capability()}', "
          f"{st.get_num_threads()} threads")
    print("BLAS:", st.blas.backend())
    print(f"{len(st._C._op_schemas())} ops declared in the op table, each bound to Python by one generic path")

    section("tensors, broadcasting, type promotion")
    a = st.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = st.tensor([10, 20, 30])
    print("a =", a)
    print("b =", b)
    c = a + b
    print("a + b  (int64 promoted to float32, [3] broadcast to [2, 3]) =")
    print(c)
    print("(a > 2) & (b < 25) =", (a > 2) & (b < 25))

    section("views share storage; writes bump the version counter")
    v = a.t()
    print("a.t() is a view:", v._storage_ptr() == a._storage_ptr(), "| contiguous:", v.is_contiguous(),
          "| strides:", v.stride())
    before = a._version
    v[0, 1] = -1.0
    print(f"after v[0, 1] = -1: a = {a.tolist()}  (version {before} -> {a._version})")
    print("indexing: a[:, [0, 2]] =", a[:, [0, 2]], "| a[a > 2] =", a[a > 2])

    section("reductions and linear algebra")
    x = st.randn(256, 512)
    w = st.randn(512, 128)
    y, dt = timed(lambda: x @ w)
    print(f"(256x512) @ (512x128): {2 * 256 * 512 * 128 / dt / 1e9:.1f} GFLOP/s, result {tuple(y.shape)}")
    print("x.sum() =", round(x.sum().item(), 3), "| x.std() =", round(x.std().item(), 4),
          "| softmax rows sum to 1:", st.allclose(st.softmax(y, dim=-1).sum(-1), st.ones(256)))
    big = st.rand(1 << 24)
    _, dt = timed(lambda: big + big)
    print(f"add on 16M floats: {3 * 4 * big.numel() / dt / 1e9:.1f} GB/s")

    section("neural-network functions")
    img = st.randn(8, 3, 32, 32)
    k = st.randn(16, 3, 3, 3)
    out = F.max_pool2d(F.relu(F.conv2d(img, k, padding=1)), 2)
    print("conv2d -> relu -> max_pool2d:", tuple(img.shape), "->", tuple(out.shape))
    logits = st.randn(8, 10)
    target = st.randint(0, 10, (8,))
    print("cross_entropy(logits, target) =", round(F.cross_entropy(logits, target).item(), 4))

    section("meta device: shapes and dtypes without data")
    m = st.empty(4096, 4096, device="meta")
    r = (m @ m).sum(dim=0)
    print("(m @ m).sum(0) on meta ->", tuple(r.shape), r.dtype, r.device)

    section("errors name the op, the shapes and the dtypes")
    for fn in (lambda: a + st.ones(4), lambda: st.mm(a, a), lambda: a[5], lambda: st.tensor([1, 2]) // 0):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            print(f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
