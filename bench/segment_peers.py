"""Kappa-sigma clipping and labelling: gpuscope against CuPy on one GPU.

Run on the GPU machine (see ../shared/docs/gpu-machine.md), from the
repository root, with a release binary and CuPy installed:
    python3 bench/segment_peers.py --gpuscope .device/gpuscope [--repeat 7]
Prints one JSON object: per workload our kernel time (sum of timestamp
queries over every submission of the op, median of the runs after the
first) and end-to-end time (`total_ms`: host array in, result on the host),
the peer's device time (CUDA events, median after a warm-up), the ratio,
and whether the answers agree (labels identical to cupyx / scipy, kept
count identical to the workshop loop).

Inputs are those of ../shared/docs/benchmarks.md, generated exactly as
../shared/tools/peers.py does (radio_image: seed 1, N(0, 0.0133) + 185
Gaussian sources; label-sources: that image > 5 * 0.0133; binary_blobs
with rng=2).
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

import numpy as np


def radio_image():
    rng = np.random.default_rng(1)
    img = rng.normal(0, 0.0133, (2048, 2048)).astype(np.float32)
    ys, xs = rng.integers(20, 2028, 185), rng.integers(20, 2028, 185)
    yy, xx = np.mgrid[-6:7, -6:7]
    psf = np.exp(-(xx ** 2 + yy ** 2) / (2 * 1.5 ** 2)).astype(np.float32)
    for y, x, a in zip(ys, xs, rng.uniform(0.1, 2.0, 185)):
        img[y - 6:y + 7, x - 6:x + 7] += a * psf
    return img


def ks_clip(xp, flat):
    """The workshop's loop (strict comparisons, until nothing changes)."""
    while True:
        med = xp.median(flat)
        std = xp.std(flat)
        c = flat.compress(flat > med - 3 * std)
        c = c.compress(c < med + 3 * std)
        if len(c) == len(flat):
            return flat
        flat = c


def cuda_ms(fn, repeat):
    import cupy as cp
    fn()  # warm-up (kernel compilation, memory pool)
    times = []
    for _ in range(repeat):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return statistics.median(times)


def ours(exe, args, repeat):
    runs = []
    for _ in range(repeat):
        out = subprocess.run([exe] + args + ["--json"], check=True, capture_output=True, text=True)
        runs.append(json.loads(out.stdout))
    later = runs[1:] if len(runs) > 1 else runs
    kernel = [r["kernel_ms"] for r in later if r.get("kernel_ms") is not None]
    return {
        "kernel_ms": statistics.median(kernel) if kernel else None,
        "total_ms": statistics.median(r["total_ms"] for r in later),
        "device": runs[0].get("device"),
        "last": runs[-1],
    }


def label_inputs(img):
    """The label workloads' masks (benchmarks.md), by name."""
    from skimage.data import binary_blobs
    return {
        "label-sources": img > 5 * 0.0133,
        "label-blobs-2d": binary_blobs(2048, blob_size_fraction=0.02, volume_fraction=0.5, rng=2),
        "label-blobs-3d": binary_blobs(512, n_dim=3, volume_fraction=0.3, rng=2),
    }


def write_inputs(folder):
    os.makedirs(folder, exist_ok=True)
    img = radio_image()
    np.save(os.path.join(folder, "radio.npy"), img)
    for name, b in label_inputs(img).items():
        np.save(os.path.join(folder, name + ".npy"), b.astype(np.uint8))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", default="target/release/gpuscope")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--out", default=os.environ.get("OUT", tempfile.gettempdir()))
    ap.add_argument("--write-inputs", metavar="DIR",
                    help="only write the inputs (radio.npy and the label masks) to DIR "
                         "for `gpuscope bench --inputs DIR`, then stop")
    a = ap.parse_args()
    if a.write_inputs:
        write_inputs(a.write_inputs)
        return
    import cupy as cp
    import cupyx.scipy.ndimage as cn
    import scipy.ndimage as ndi

    tmp = tempfile.mkdtemp()
    rows = []

    # kappa-sigma: sigma-clipped stats until convergence, workshop variant.
    img = radio_image()
    path = os.path.join(tmp, "radio.npy")
    np.save(path, img)
    r = ours(a.gpuscope, ["clip", path, "--workshop"], a.repeat)
    d = cp.asarray(img.ravel())
    peer_ms = cuda_ms(lambda: ks_clip(cp, d), a.repeat)
    kept = len(ks_clip(np, img.ravel()))
    rows.append({"workload": "kappa-sigma", "input": "2048^2 f32 radio image",
                 "ours_kernel_ms": r["kernel_ms"], "ours_total_ms": r["total_ms"],
                 "peer": "workshop CuPy loop", "peer_ms": peer_ms,
                 "ratio_kernel": peer_ms / r["kernel_ms"] if r["kernel_ms"] else None,
                 "ratio_total": peer_ms / r["total_ms"],
                 "same_answer": r["last"]["n_kept"] == kept, "n_kept": r["last"]["n_kept"]})
    r = ours(a.gpuscope, ["clip", path, "--maxiters", "none"], a.repeat)
    rows.append({"workload": "kappa-sigma (astropy semantics)", "ours_kernel_ms": r["kernel_ms"],
                 "ours_total_ms": r["total_ms"], "n_kept": r["last"]["n_kept"]})

    # Labelling: 2-D sources, 2-D blobs, 3-D blobs (scipy's default structure).
    cases = label_inputs(img)
    for name, b in cases.items():
        path = os.path.join(tmp, name + ".npy")
        np.save(path, b.astype(np.uint8))
        out = os.path.join(tmp, name + "_labels.npy")
        r = ours(a.gpuscope, ["label", path, out], a.repeat)
        db = cp.asarray(b)
        peer_ms = cuda_ms(lambda: cn.label(db), a.repeat)
        peer_labels, n = cn.label(db)
        got = np.load(out)
        same = bool(r["last"]["n_labels"] == int(n) and np.array_equal(got, cp.asnumpy(peer_labels)))
        ref, ref_n = ndi.label(b)
        same_scipy = bool(np.array_equal(got, ref))
        rows.append({"workload": name, "shape": list(b.shape),
                     "ours_kernel_ms": r["kernel_ms"], "ours_total_ms": r["total_ms"],
                     "peer": "cupyx.scipy.ndimage.label", "peer_ms": peer_ms,
                     "ratio_kernel": peer_ms / r["kernel_ms"] if r["kernel_ms"] else None,
                     "ratio_total": peer_ms / r["total_ms"],
                     "same_labels_as_cupyx": same, "same_labels_as_scipy": same_scipy,
                     "n_labels": r["last"]["n_labels"],
                     "scipy_n_labels": int(ref_n)})

    report = {"device": r["device"], "cupy": cp.__version__, "rows": rows}
    text = json.dumps(report, indent=1)
    print(text)
    with open(os.path.join(a.out, "segment_bench.json"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
