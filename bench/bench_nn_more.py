"""Quick timing of max_pool2d, conv_transpose2d and bilinear interpolation against torch on U-Net-sized
float32 tensors. Prints min-of-N times and the ratio strata / torch. On a shared machine run it single-threaded
(OMP_NUM_THREADS=1 ... --cpu): it then measures process CPU time, which other processes disturb far less than
wall time."""

import sys
import time

import numpy as np
import torch

import strata as st
import strata.nn.functional as SF
import torch.nn.functional as TF


CLOCK = time.process_time if "--cpu" in sys.argv else time.perf_counter


def bench(f, n=15):
    f()
    ts = []
    for _ in range(n):
        t = CLOCK()
        f()
        ts.append(CLOCK() - t)
    return min(ts)


def case(name, fs, ft, shapes, back):
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    xs = [st.tensor(a, requires_grad=back) for a in arrs]
    xt = [torch.tensor(a, requires_grad=back) for a in arrs]
    if back:
        def rs():
            fs(*xs).sum().backward()

        def rt():
            ft(*xt).sum().backward()
    else:
        def rs():
            fs(*xs)

        def rt():
            ft(*xt)
    a, b = bench(rs), bench(rt)
    print(f"{name:48s} strata {a * 1e3:8.2f} ms  torch {b * 1e3:8.2f} ms  ratio {a / b:5.2f}")


def main():
    torch.set_num_threads(1 if "--cpu" in sys.argv else 2)
    for back in (False, True):
        sfx = " fwd+bwd" if back else " fwd"
        case("max_pool2d 2x2 (4,64,128,128)" + sfx, lambda x: SF.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2),
             [(4, 64, 128, 128)], back)
        case("conv_transpose2d k2s2 (4,128,32,32)->64" + sfx, lambda x, w, b: SF.conv_transpose2d(x, w, b, 2),
             lambda x, w, b: TF.conv_transpose2d(x, w, b, 2), [(4, 128, 32, 32), (128, 64, 2, 2), (64,)], back)
        case("bilinear x2 (4,64,64,64)" + sfx,
             lambda x: SF.interpolate(x, scale_factor=2, mode="bilinear"),
             lambda x: TF.interpolate(x, scale_factor=2, mode="bilinear"), [(4, 64, 64, 64)], back)
        case("bilinear x2 align_corners (4,64,64,64)" + sfx,
             lambda x: SF.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
             lambda x: TF.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True), [(4, 64, 64, 64)],
             back)


if __name__ == "__main__":
    main()
