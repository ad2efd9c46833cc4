"""The main job until the training job exists: real ops through every layer,
with what happened at each step printed."""

import time

import strata as st


def main():
    print(f"strata {st.__version__}: CPU kernels at ISA level '{st._C._cpu_capability()}', "
          f"{st.get_num_threads()} threads")
    a = st.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = st.tensor([10, 20, 30])
    print("a =", a)
    print("b =", b, "(int64)")
    c = a + b
    print("a + b (broadcast, int64 promoted to float32) =", c, c.dtype)
    print("exp(a) > 20 =", st.exp(a) > 20)
    print("where(a > 3, a, -a) =", st.where(a > 3, a, -a))
    m = st.empty((1000, 1000), device="meta") if hasattr(st, "empty") else None
    if m is not None:
        print("meta tensor op (shape only, no data):", st.exp(m).shape)
    x = st.tensor([float(i) for i in range(1 << 20)])
    t0 = time.perf_counter()
    y = st.sigmoid(x * 0.001)
    dt = time.perf_counter() - t0
    print(f"sigmoid over 1M floats: {dt * 1e3:.2f} ms, y[-1] = {y[-1].item() if hasattr(y, '__getitem__') else y.tolist()[-1]:.4f}")
    try:
        st.add(a, st.tensor([1.0, 2.0]))
    except RuntimeError as e:
        print("a clear error:", e)


if __name__ == "__main__":
    main()
