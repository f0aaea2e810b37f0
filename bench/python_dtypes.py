"""Python end to end on every dtype, for the GPU machine: numpy in, numpy
out, wall clock (median of --repeat runs after a warm-up).

    python bench/python_dtypes.py --who gpuscope [--tag NAME] [--repeat 7]
    python bench/python_dtypes.py --who cupy           # the peers, composed

gpuscope rows: the median 3x3 of 2048² and (1,3,3) of a 16-slice stack
per dtype, outlier removal of a 64-slice uint16 stack and a 16-slice
float32 one, Gaussian per dtype, label + regionprops_table of a star
field, sigma_clipped_stats per dtype, slic of a 160³ volume, the per-call
cost (median 3x3 of 256² float32). cupy rows: cupyx for the same calls
(cp.asarray + op + cp.asnumpy, synchronised), composed where cupyx has no
such function. Writes $OUT/python_dtypes-<tag>.json when OUT is set.
"""

import argparse
import json
import os
import statistics
import time

import numpy as np

DTYPES = ["uint8", "uint16", "int16", "int32", "float32", "float64"]


def wall_ms(fn, repeat, warmup=1):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def data():
    rng = np.random.default_rng(0)
    img = {d: (rng.random((2048, 2048)) * 1000).astype(d) for d in DTYPES}
    stack16 = (rng.random((16, 2048, 2048)) * 4000).astype(np.uint16)
    stack64 = rng.integers(900, 1100, (64, 2048, 2048), dtype=np.uint16)
    stack64[rng.random(stack64.shape, dtype=np.float32) < 0.001] = 4000
    # A star field: 400 Gaussian sources on noise.
    yy, xx = np.mgrid[0:2048, 0:2048]
    stars = rng.normal(100, 5, (2048, 2048)).astype(np.float32)
    for cy, cx in rng.integers(20, 2028, (400, 2)):
        sl = np.s_[cy - 8 : cy + 9, cx - 8 : cx + 9]
        stars[sl] += 500 * np.exp(-((yy[sl] - cy) ** 2 + (xx[sl] - cx) ** 2) / 8.0)
    vol = rng.random((160, 160, 160), dtype=np.float32)
    small = rng.random((256, 256), dtype=np.float32)
    return img, stack16, stack64, stars, vol, small


def gpuscope_rows(repeat, profile_only=False, only=None):
    import gpuscope
    from gpuscope import measure, ndimage, segmentation, stats, tomo

    img, stack16, stack64, stars, vol, small = data()
    rows = []

    def add(workload, fn, r=repeat):
        if profile_only or (only and only not in workload):
            return
        rows.append(dict(workload=workload, ms=wall_ms(fn, r)))
        print(f"{workload}: {rows[-1]['ms']:.3f} ms", flush=True)

    for d in DTYPES:
        add(f"median 3x3 2048² {d}", lambda d=d: ndimage.median_filter(img[d], 3))
    add("median (1,3,3) 16x2048² uint16", lambda: ndimage.median_filter(stack16, size=(1, 3, 3)))
    s16f = stack16.astype(np.float32)
    add("median (1,3,3) 16x2048² float32", lambda: ndimage.median_filter(s16f, size=(1, 3, 3)))
    add("remove_outliers 64x2048² uint16", lambda: tomo.remove_outliers(stack64, 150, size=3, mode="bright"), 3)
    s64f = stack64[:16].astype(np.float32)
    add("remove_outliers 16x2048² float32", lambda: tomo.remove_outliers(s64f, 150, size=3, mode="bright"))
    for d in DTYPES:
        add(f"gaussian sigma 2 2048² {d}", lambda d=d: ndimage.gaussian_filter(img[d], 2.0))
    t = 200.0

    def star_table():
        lab, _ = ndimage.label(stars > t)
        return measure.regionprops_table(lab, stars, properties=("label", "area", "centroid", "intensity_mean"))

    add("label + regionprops_table 2048² stars", star_table)
    # Its steps.
    mask = stars > t
    lab, _ = ndimage.label(mask)
    add("stars step: x > t", lambda: stars > t)
    add("stars step: label", lambda: ndimage.label(mask))
    add("stars step: regionprops_table", lambda: measure.regionprops_table(
        lab, stars, properties=("label", "area", "centroid", "intensity_mean")))
    for d in DTYPES:
        add(f"sigma_clipped_stats 2048² {d}", lambda d=d: stats.sigma_clipped_stats(img[d], sigma=3, maxiters=5))
    add("slic 160³ float32", lambda: segmentation.slic(vol, n_segments=500, compactness=0.1, channel_axis=None), 5)
    add("per call: median 3x3 256² float32", lambda: ndimage.median_filter(small, 3), 10 * repeat)
    # Where the time of one call goes (GPUSCOPE_PROFILE=1: kernels and the
    # core's timed host phases), where the wheel offers it.
    profile = getattr(gpuscope._gpuscope, "pass_profile", None)
    if profile is not None and os.environ.get("GPUSCOPE_PROFILE"):
        for name, fn in [
            ("slic 160³ float32", lambda: segmentation.slic(vol, n_segments=500, compactness=0.1, channel_axis=None)),
            ("sigma_clipped_stats 2048² float32", lambda: stats.sigma_clipped_stats(img["float32"], sigma=3, maxiters=5)),
            ("label + regionprops_table 2048² stars", star_table),
        ]:
            fn()  # warm-up (compiles the kernels)
            profile()
            t0 = time.perf_counter()
            fn()
            wall = (time.perf_counter() - t0) * 1e3
            rows.append(dict(workload=f"profile: {name}", ms=wall, passes=profile()[:12]))
            print(name, f"{wall:.3f} ms", rows[-1]["passes"], flush=True)
    return rows, gpuscope.device()


def cupy_rows(repeat, only=None):
    import cupy as cp
    import cupyx.scipy.ndimage as cn

    img, stack16, stack64, stars, vol, small = data()
    rows = []
    sync = cp.cuda.Stream.null.synchronize

    def add(workload, fn, r=repeat):
        if only and only not in workload:
            return

        def run():
            out = fn()
            sync()
            return out
        rows.append(dict(workload=workload, ms=wall_ms(run, r)))
        print(f"{workload}: {rows[-1]['ms']:.3f} ms", flush=True)

    for d in DTYPES:
        add(f"median 3x3 2048² {d}", lambda d=d: cp.asnumpy(cn.median_filter(cp.asarray(img[d]), 3)))
    add("median (1,3,3) 16x2048² uint16", lambda: cp.asnumpy(cn.median_filter(cp.asarray(stack16), size=(1, 3, 3))))
    s16f = stack16.astype(np.float32)
    add("median (1,3,3) 16x2048² float32", lambda: cp.asnumpy(cn.median_filter(cp.asarray(s16f), size=(1, 3, 3))))

    def outliers(stack):
        out = np.empty_like(stack)
        for z in range(0, stack.shape[0], 16):
            d = cp.asarray(stack[z : z + 16])
            m = cn.median_filter(d, size=(1, 3, 3), mode="reflect")
            diff = d.astype(cp.float32) - m
            out[z : z + 16] = cp.asnumpy(cp.where(diff > 150, m, d))
        return out

    add("remove_outliers 64x2048² uint16", lambda: outliers(stack64), 3)
    for d in DTYPES:
        add(f"gaussian sigma 2 2048² {d}", lambda d=d: cp.asnumpy(cn.gaussian_filter(cp.asarray(img[d]), 2.0)))

    def star_table():
        x = cp.asarray(stars)
        lab, n = cn.label(x > 200.0)
        idx = cp.arange(1, n + 1)
        area = cn.sum_labels(cp.ones_like(x), lab, idx)
        com = cn.center_of_mass(cp.ones_like(x), lab, idx)
        mean = cn.mean(x, lab, idx)
        return cp.asnumpy(area), [cp.asnumpy(c) for c in com], cp.asnumpy(mean)

    add("label + regionprops_table 2048² stars", star_table)

    def clip(a, sigma=3.0, maxiters=5):
        x = cp.asarray(a).astype(cp.float32).ravel()
        keep = cp.isfinite(x)
        for _ in range(maxiters):
            v = x[keep]
            med = cp.median(v)
            std = v.std()
            new = keep & (x >= med - sigma * std) & (x <= med + sigma * std)
            if int(new.sum()) == int(keep.sum()):
                break
            keep = new
        v = x[keep]
        return float(v.mean()), float(cp.median(v)), float(v.std())

    for d in DTYPES:
        add(f"sigma_clipped_stats 2048² {d}", lambda d=d: clip(img[d]))
    add("per call: median 3x3 256² float32", lambda: cp.asnumpy(cn.median_filter(cp.asarray(small), 3)), 10 * repeat)
    return rows, {"name": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--who", choices=["gpuscope", "cupy"], default="gpuscope")
    ap.add_argument("--tag", default=None)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", default=None, help="only the workloads whose name holds this text")
    ap.add_argument("--profile-only", action="store_true",
                    help="only the per-pass profiles (set GPUSCOPE_PROFILE=1)")
    args = ap.parse_args()
    if args.who == "gpuscope":
        rows, dev = gpuscope_rows(args.repeat, args.profile_only, args.only)
    else:
        rows, dev = cupy_rows(args.repeat, args.only)
    tag = args.tag or args.who
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], f"python_dtypes-{tag}.json"), "w") as f:
            json.dump(dict(who=args.who, tag=tag, device=dev, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
