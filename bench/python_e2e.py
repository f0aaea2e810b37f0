"""Python end to end, for the GPU machine: numpy in, numpy out.

For one 2048 x 2048 float32 image: gpuscope.ndimage.median_filter(x,
size=3) and gaussian_filter(x, 2) against cupyx.scipy.ndimage
(cp.asarray + op + cp.asnumpy, synchronised) when cupy is importable, and
the bus round trip of the same bytes (pageable and pinned host memory,
with cupy); then gpuscope's per-call overhead on a 256 x 256 image, split
into its steps with device arrays (upload, operation on the device,
download), and an operation on device arrays against cupyx on cupy arrays
(data already on the device, synchronised). Wall
clock, median of --repeat runs after warm-ups; prints a table and writes
$OUT/python_e2e.json when OUT is set.

    python bench/python_e2e.py [--repeat 30]

gpuscope must be installed in the interpreter (pip install . from the
repository root); cupy is optional.
"""

import argparse
import json
import os
import statistics
import time

import numpy as np

import gpuscope
from gpuscope import ndimage


def wall_ms(fn, repeat, warmup=3):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def cupy_rows(x, repeat):
    try:
        import cupy as cp
        import cupyx.scipy.ndimage as cn
    except Exception as e:  # cupy missing or without a device
        return [dict(workload="cupyx", error=f"cupy not importable: {e!r}"[:200])]

    def e2e(op):
        def run():
            d = cp.asarray(x)
            r = cp.asnumpy(op(d))
            cp.cuda.Stream.null.synchronize()
            return r
        return run

    rows = [
        dict(workload="median 3x3, 2048² f32", who="cupyx", ms=wall_ms(e2e(lambda d: cn.median_filter(d, size=3)), repeat)),
        dict(workload="gaussian sigma 2, 2048² f32", who="cupyx", ms=wall_ms(e2e(lambda d: cn.gaussian_filter(d, 2.0)), repeat)),
    ]
    d = cp.empty_like(cp.asarray(x))
    out = np.empty_like(x)

    def pageable():
        d.set(x)
        d.get(out=out)
        cp.cuda.Stream.null.synchronize()

    rows.append(dict(workload="bus round trip 16 MiB", who="cupy pageable", ms=wall_ms(pageable, repeat)))
    pinned_mem = cp.cuda.alloc_pinned_memory(x.nbytes)
    pinned = np.frombuffer(pinned_mem, x.dtype, x.size).reshape(x.shape)
    pinned[...] = x

    def pinned_trip():
        d.set(pinned)
        d.get(out=pinned)
        cp.cuda.Stream.null.synchronize()

    rows.append(dict(workload="bus round trip 16 MiB", who="cupy pinned", ms=wall_ms(pinned_trip, repeat)))

    def on_device(op):
        def run():
            op(d)
            cp.cuda.Stream.null.synchronize()
        return run

    d.set(x)
    for name, op in device_ops(cn):
        rows.append(dict(workload=f"on the device: {name}, 2048² f32", who="cupyx", ms=wall_ms(on_device(op), repeat)))
    return rows


def device_ops(nd):
    """The operations compared on arrays already on the device, for
    gpuscope.ndimage and cupyx.scipy.ndimage alike."""
    return [
        ("median 3x3", lambda d: nd.median_filter(d, size=3)),
        ("gaussian sigma 2", lambda d: nd.gaussian_filter(d, 2.0)),
        ("threshold + label", lambda d: nd.label(d > 0.99)),
    ]


def device_rows(x, small, repeat):
    """Device arrays: the steps of a call on a small image, and operations
    on a large image that stays on the GPU."""
    rows = []
    try:
        d_small = gpuscope.asarray(small)
    except Exception as e:  # no GPU adapter
        return [dict(workload="device arrays", error=f"{e!r}"[:200])]
    steps = [
        ("upload (asarray)", lambda: gpuscope.asarray(small)),
        ("median 3x3 on the device", lambda: (ndimage.median_filter(d_small, size=3), gpuscope.synchronize())),
        ("download (get)", lambda: d_small.get()),
    ]
    for name, fn in steps:
        rows.append(dict(workload=f"per-call steps, 256² f32: {name}", who="gpuscope", ms=wall_ms(fn, 5 * repeat)))
    d = gpuscope.asarray(x)

    def on_device(op):
        def run():
            op(d)
            gpuscope.synchronize()
        return run

    for name, op in device_ops(ndimage):
        rows.append(dict(workload=f"on the device: {name}, 2048² f32", who="gpuscope", ms=wall_ms(on_device(op), repeat)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    dev = gpuscope.device()
    rng = np.random.default_rng(0)
    x = rng.random((2048, 2048), dtype=np.float32)
    small = rng.random((256, 256), dtype=np.float32)
    out = np.empty_like(x)
    rows = [
        dict(workload="median 3x3, 2048² f32", who="gpuscope", ms=wall_ms(lambda: ndimage.median_filter(x, size=3), args.repeat)),
        dict(workload="median 3x3, 2048² f32", who="gpuscope output=", ms=wall_ms(lambda: ndimage.median_filter(x, size=3, output=out), args.repeat)),
        dict(workload="gaussian sigma 2, 2048² f32", who="gpuscope", ms=wall_ms(lambda: ndimage.gaussian_filter(x, 2), args.repeat)),
        dict(workload="per-call overhead: median 3x3, 256² f32", who="gpuscope", ms=wall_ms(lambda: ndimage.median_filter(small, size=3), 5 * args.repeat)),
        dict(workload="per-call overhead: gaussian sigma 2, 256² f32", who="gpuscope", ms=wall_ms(lambda: ndimage.gaussian_filter(small, 2), 5 * args.repeat)),
    ]
    rows += device_rows(x, small, args.repeat)
    rows += cupy_rows(x, args.repeat)
    from importlib.metadata import version
    print(f"device: {dev.get('name')} ({dev.get('backend')}); gpuscope {version('gpuscope')}, numpy {np.__version__}")
    print(f"| {'workload':<46} | {'who':<18} | {'ms':>8} |")
    print(f"|{'-' * 48}|{'-' * 20}|{'-' * 10}|")
    for r in rows:
        ms = f"{r['ms']:8.3f}" if "ms" in r else r.get("error", "")
        print(f"| {r['workload']:<46} | {r.get('who', ''):<18} | {ms:>8} |")
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "python_e2e.json"), "w") as f:
            json.dump(dict(device=dev, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
