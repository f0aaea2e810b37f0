"""Spot finding: gpuscope against a CuPy port of DIALS' dispersion formula
on one GPU (benchmarks.md: spots-eiger, spots-series; spots-series-disk, the
series streamed from a .npy on disk), plus numpy/scipy.

Run on the GPU machine (../shared/docs/gpu-machine.md) from the repository
root, with a release binary, the shared data and tools copied into .device/:
    python3 bench/spots_peers.py --gpuscope .device/gpuscope \
        --data .device/data --tools .device/tools --out $OUT [--frames 200]
Writes $OUT/spots_bench.json (also printed): our kernel time (timestamp
queries, min over repeats) and end-to-end time (host array in, spot table
out; median), the CuPy port's device time (CUDA events, median after a
warm-up) and end-to-end time (host array in, strong mask on the host), the
numpy port's time, the ratios, and the strong-pixel counts of each (the
CuPy port computes in float64 with uniform filters, so small differences
from DIALS' exact integer sums are possible; ours is checked pixel for pixel
in the test suite).

The CuPy port (dispersion_extended, DIALS' defaults): window sums by
cupyx.scipy.ndimage.uniform_filter (zero outside the image, times the window
size), the dispersion test, the erosion as a minimum filter of the
non-background mask, the widened 11 x 11 mean over background pixels, the
final test. Labelling (cupyx.scipy.ndimage.label) is timed with it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def dispersion_extended(xp, nd, img, nsig_b=6.0, nsig_s=3.0, min_count=2, k=3):
    mask = img >= 0
    valid = mask & (img < (1 << 24))
    v = xp.where(valid, img, 0).astype(xp.float64)
    size = 2 * k + 1

    def wsum(a, s):
        return nd.uniform_filter(a, size=s, mode="constant", cval=0.0) * (s * s)

    m = xp.rint(wsum(valid.astype(xp.float64), size))
    x = wsum(v, size)
    y = wsum(v * v, size)
    a = m * y - x * x - x * (m - 1)
    c = x * nsig_b * xp.sqrt(xp.maximum(2 * (m - 1), 0))
    nonbg = ~mask | ((m >= min_count) & (x >= 0) & (a > c))
    # Chebyshev distance >= k: no background in the (2k-1)^2 box.
    far = nd.minimum_filter(nonbg.astype(xp.uint8), size=2 * k - 1, mode="constant", cval=1) == 1
    cand = mask & nonbg & far
    bg = valid & ~cand
    s2 = 2 * (k + 2) + 1
    m2 = xp.rint(wsum(bg.astype(xp.float64), s2))
    x2 = wsum(xp.where(bg, v, 0), s2)
    mean = xp.where(m2 >= 2, x2 / xp.maximum(m2, 1), 0)
    strong = cand & (img > 0) & (img >= mean + nsig_s * xp.sqrt(mean))
    return strong


def cuda_ms(fn, repeat):
    import cupy as cp
    fn()
    times = []
    for _ in range(repeat):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def wall_ms(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", default="target/release/gpuscope")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--tools", default="../shared/tools")
    ap.add_argument("--out", default=".")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--frames", type=int, default=200)
    a = ap.parse_args()
    sys.path.insert(0, a.tools)
    from cbf import read_cbf

    frame_path = os.path.join(a.data, "diffraction/dlsnxs2cbf_therm_0001.cbf.gz")
    img, _ = read_cbf(frame_path)
    report = {"frame": frame_path, "shape": list(img.shape)}

    # Ours, in the same call.
    tmp = os.path.join(a.out, "gpuscope_spots_bench.json")
    subprocess.run([a.gpuscope, "bench", "--only", "spots-eiger,spots-series,spots-series-disk", "--data", a.data,
                    "--frames", str(a.frames), "--repeat", str(a.repeat), "--json", tmp], check=True)
    ours = json.load(open(tmp))
    report["gpuscope"] = ours
    rows = {r["workload"]: r for r in ours["results"]}
    out = subprocess.run([a.gpuscope, "spots", frame_path, "--json"], check=True,
                         capture_output=True, text=True)
    report["gpuscope_spots"] = json.loads(out.stdout)

    # Exactness on this GPU: the three real frames, both algorithms, against
    # the committed reference masks (tests/golden/spots).
    golden = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/golden/spots")
    checks = []
    for name in sorted(os.listdir(os.path.join(a.data, "diffraction"))):
        stem = name.split(".cbf")[0]
        for algorithm in ["dispersion_extended", "dispersion"]:
            ref_path = os.path.join(golden, f"{stem}_{algorithm}.npy")
            if not os.path.exists(ref_path):
                continue
            sig = os.path.join(a.out, "signal.npy")
            subprocess.run([a.gpuscope, "spots", os.path.join(a.data, "diffraction", name),
                            "--algorithm", algorithm, "--signal", sig], check=True, capture_output=True)
            got = np.load(sig).astype(bool)
            rc = np.load(ref_path).astype(np.int64)
            want = np.zeros(got.shape, bool)
            want[rc[:, 0], rc[:, 1]] = True
            checks.append({"frame": stem, "algorithm": algorithm, "strong": int(want.sum()),
                           "pixels_differing": int((got != want).sum())})
            os.remove(sig)
    report["exact_vs_reference_masks"] = checks

    # CuPy port.
    try:
        import cupy as cp
        import cupyx.scipy.ndimage as cnd
        dimg = cp.asarray(img)
        dev = cuda_ms(lambda: dispersion_extended(cp, cnd, dimg), a.repeat)
        dev_label = cuda_ms(lambda: cnd.label(dispersion_extended(cp, cnd, dimg)), a.repeat)
        e2e = wall_ms(lambda: cp.asnumpy(cnd.label(dispersion_extended(cp, cnd, cp.asarray(img)))[0]),
                      a.repeat)
        strong = int(dispersion_extended(cp, cnd, dimg).sum())
        report["cupy"] = {"device_ms": dev, "device_ms_with_label": dev_label, "e2e_ms": e2e,
                          "n_strong_pixels": strong, "device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
        # Series: host frames (uint16) in, labels out, one frame at a time.
        frames = np.repeat(np.clip(img, 0, 65535).astype(np.uint16)[None], min(a.frames, 20), axis=0)

        def series():
            for f in frames:
                d = cp.asarray(f).astype(cp.int32)
                cp.asnumpy(cnd.label(dispersion_extended(cp, cnd, d))[0])
        ms = wall_ms(series, 1)
        report["cupy"]["series_frames_per_second"] = len(frames) / (ms / 1e3)
        # From disk: the same frames in a 3-D .npy, read frame by frame
        # (memory-mapped), as spots-series-disk streams them.
        disk = os.path.join(a.out, "spots_series_disk.npy")
        mm = np.lib.format.open_memmap(disk, mode="w+", dtype=np.uint16, shape=frames.shape)
        mm[:] = frames
        mm.flush()
        del mm

        def series_disk():
            for f in np.load(disk, mmap_mode="r"):
                d = cp.asarray(np.ascontiguousarray(f)).astype(cp.int32)
                cp.asnumpy(cnd.label(dispersion_extended(cp, cnd, d))[0])
        ms = wall_ms(series_disk, 1)
        report["cupy"]["series_disk_frames_per_second"] = len(frames) / (ms / 1e3)
        os.remove(disk)
    except Exception as e:  # noqa: BLE001 - report what failed, keep going
        report["cupy"] = {"error": repr(e)}

    # numpy / scipy port, one run.
    import scipy.ndimage as snd
    t = time.perf_counter()
    strong = dispersion_extended(np, snd, img)
    report["numpy"] = {"ms": (time.perf_counter() - t) * 1e3, "n_strong_pixels": int(strong.sum())}

    eiger = rows.get("spots-eiger", {})
    if "device_ms" in report.get("cupy", {}) and eiger.get("kernel_ms_in_stream"):
        report["ratio_cupy_over_ours_kernel"] = report["cupy"]["device_ms"] / eiger["kernel_ms_in_stream"]
        report["ratio_cupy_over_ours_e2e"] = report["cupy"]["e2e_ms"] / eiger["e2e_ms"]
    series_row = next((r for k, r in rows.items()
                       if k.startswith("spots-series") and not k.startswith("spots-series-disk")), None)
    if series_row:
        report["ours_series_frames_per_second"] = a.frames / (series_row["e2e_ms"] / 1e3)
    disk_row = next((r for k, r in rows.items() if k.startswith("spots-series-disk")), None)
    if disk_row:
        report["ours_series_disk_frames_per_second"] = a.frames / (disk_row["e2e_ms"] / 1e3)
    text = json.dumps(report, indent=1)
    print(text)
    with open(os.path.join(a.out, "spots_bench.json"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
