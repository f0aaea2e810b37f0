"""Peers of the filter workloads (benchmarks.md), for the GPU machine.

Runs CuPy / cupyx.scipy.ndimage (and cuCIM when importable) on the same
shapes as `gpuscope bench` and writes $OUT/peers_filters.json. Device times
with data resident come from cupyx.profiler.benchmark (min of repeats);
host-to-host times from a wall clock (median of 3). Based on the shared
peers script (../shared/tools/peers.py), restricted to the filter workloads
and extended with the Gaussian sigma=2 and the outliers stack.
"""
import json, os, statistics, sys, time, traceback
import numpy as np
import cupy as cp
import cupyx.scipy.ndimage as cn
from cupyx.profiler import benchmark

OUT = os.environ.get("OUT", "/tmp")
NZ = int(os.environ.get("SLICES", "64"))
rows = []


def emit(**kw):
    rows.append(kw)
    print(json.dumps(kw), flush=True)


def gpu_time(fn, n=10):
    return float(np.min(benchmark(fn, (), n_repeat=n, n_warmup=2).gpu_times)) * 1e3


def wall(fn, n=3):
    ts = []
    for _ in range(n):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


emit(device=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), cupy=cp.__version__)
a = cp.empty(2 ** 28, dtype=cp.float32); b = cp.empty_like(a)
t = gpu_time(lambda: b.__setitem__(Ellipsis, a))
emit(workload="d2d_copy_1GiB", gpu_ms=t, GBps=2 * a.nbytes / t / 1e6)
del a, b
# The same bytes as the 2048² workloads (copy-2048, copy-2048-wgsl).
a = cp.empty(2048 * 2048, dtype=cp.float32); b = cp.empty_like(a)
t = gpu_time(lambda: b.__setitem__(Ellipsis, a), 30)
emit(workload="d2d_copy_2048", gpu_ms=t, GBps=2 * a.nbytes / t / 1e6)
del a, b

rng = np.random.default_rng(0)
img = rng.random((2048, 2048), dtype=np.float32)
di = cp.asarray(img)
for k in (3, 7):
    emit(workload=f"median-{k}", peer="cupyx.scipy.ndimage.median_filter",
         gpu_ms=gpu_time(lambda: cn.median_filter(di, size=k)))
    try:
        from cucim.skimage.filters import median as cmed
        fp = cp.ones((k, k), dtype=bool)
        emit(workload=f"median-{k}", peer="cucim.skimage.filters.median",
             gpu_ms=gpu_time(lambda: cmed(di, fp, mode="reflect")))
    except Exception as e:
        emit(workload=f"median-{k}", peer="cucim", error=repr(e)[:200])
emit(workload="gauss-2", peer="cupyx.scipy.ndimage.gaussian_filter",
     gpu_ms=gpu_time(lambda: cn.gaussian_filter(di, 2.0)))
deltas = np.zeros((2048, 2048), np.float32); deltas[8::16, 8::16] = 1
x, y = np.meshgrid(np.linspace(-2, 2, 15), np.linspace(-2, 2, 15))
g = np.exp(-(x ** 2 + y ** 2) / 2).astype(np.float32)
dd, dg = cp.asarray(deltas), cp.asarray(g)
emit(workload="conv-gauss15", peer="cupyx.scipy.ndimage.convolve",
     gpu_ms=gpu_time(lambda: cn.convolve(dd, dg)))
try:
    import cupyx.scipy.signal as cs
    emit(workload="conv-gauss15", peer="cupyx.scipy.signal.convolve2d",
         gpu_ms=gpu_time(lambda: cs.convolve2d(dd, dg)))
except Exception as e:
    emit(workload="conv-gauss15", peer="cupyx.scipy.signal", error=repr(e)[:200])

stack = rng.random((NZ, 2048, 2048), dtype=np.float32)


def median_stack():
    out = np.empty_like(stack)
    for z0 in range(0, NZ, 16):
        out[z0:z0 + 16] = cp.asnumpy(cn.median_filter(cp.asarray(stack[z0:z0 + 16]), size=(1, 3, 3)))
    return out


kept = np.empty_like(stack)


def median_stack_into():
    """median-stack into one output array kept across calls (our
    median-stack-into): no fresh pages to fault in."""
    for z0 in range(0, NZ, 16):
        cp.asnumpy(cn.median_filter(cp.asarray(stack[z0:z0 + 16]), size=(1, 3, 3)),
                   out=kept[z0:z0 + 16])
    return kept


def outliers_stack():
    out = np.empty_like(stack)
    for z0 in range(0, NZ, 16):
        d = cp.asarray(stack[z0:z0 + 16])
        med = cn.median_filter(d, size=(1, 3, 3), mode="reflect")
        out[z0:z0 + 16] = cp.asnumpy(cp.where(d - med > 0.5, med, d))
    return out


for name, fn in [("median-stack", median_stack), ("median-stack-into", median_stack_into),
                 ("outliers-stack", outliers_stack)]:
    try:
        ms = wall(fn)
        emit(workload=name, peer="cupyx in 16-slice chunks (host to host)", e2e_ms=ms,
             slices_per_s=NZ / ms * 1e3)
    except Exception as e:
        emit(workload=name, error=repr(e)[:200]); traceback.print_exc()

with open(os.path.join(OUT, "peers_filters.json"), "w") as f:
    json.dump(rows, f, indent=1)
