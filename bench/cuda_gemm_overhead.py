"""Host-side cost of a CUDA GEMM call (dispatch, checks, cuBLAS arguments, enqueue) against the CPU, on small
matrices. Run with STRATA_CUDA_DRIVER=fake (no GPU: the fake cuBLAS queues the work; synchronize runs it, outside
the timing) or on a GPU. Best of 5 x 3000 calls, thread CPU time."""
import time, strata
a, b = strata.randn(8, 8), strata.randn(8, 8)
da, db = a.cuda(), b.cuda()
bias = strata.randn(8); dbias = bias.cuda()
lin = strata.nn.Linear(8, 8)
def t(fn, n=3000):
    best = 1e9
    for _ in range(5):
        strata.cuda.synchronize()
        t0 = time.thread_time()
        for _ in range(n): fn()
        best = min(best, (time.thread_time() - t0) / n)
        strata.cuda.synchronize()
    return best * 1e6
print("mm cpu %.1f us" % t(lambda: strata.mm(a, b)))
print("mm cuda(fake, enqueue) %.1f us" % t(lambda: strata.mm(da, db)))
print("addmm row-bias cpu %.1f us" % t(lambda: strata.addmm(bias, a, b)))
print("addmm row-bias cuda(fake, enqueue) %.1f us" % t(lambda: strata.addmm(dbias, da, db)))
