"""Peers of the SLIC workloads (benchmarks.md), for the GPU machine.

slic-3d-L: skimage.data.binary_blobs(L, n_dim=3, rng=2) as float32,
n_segments = L^3 / 125, compactness 1, 5 iterations, connectivity
enforced, host array in -> labels out:
  - gpu-slic 0.0.1a3 (the CuPy build of cuda-slic: `from cuda_slic.slic
    import slic`, or `from gpu_slic import slic`; skipped when neither is
    importable; install its wheel with --no-deps in a carried folder and
    put that on PYTHONPATH),
  - scikit-image (only for L <= 200).
slic-2d-rgb: astronaut.png (512x512 RGB), n_segments 1000, compactness 10:
  - scikit-image.
Also writes $OUT/blobs_<L>.npy so that `gpuscope bench --blobs-dir $OUT`
runs on the very same volumes. Times: wall clock, median of REPEAT runs
after a warm-up (at least 9 runs where one takes under a second). Results: $OUT/slic_peers.json (one JSON object per line
on stdout too).

Usage: OUT=/tmp/out python3 bench/slic_peers.py [L ...]   (default 100 200 300 400 500)
"""
import json, os, statistics, sys, time, traceback
import numpy as np
import skimage
from skimage.data import binary_blobs
from skimage.segmentation import slic as sk_slic

OUT = os.environ.get("OUT", "/tmp")
REPEAT = int(os.environ.get("REPEAT", "3"))
SIZES = [int(a) for a in sys.argv[1:]] or [100, 200, 300, 400, 500]
# scikit-image takes ~2 s at L=100 and ~20 s at L=200 (a device call is
# limited to 10 minutes): SKIMAGE_MAX_L=100 skips the larger.
SKIMAGE_MAX_L = int(os.environ.get("SKIMAGE_MAX_L", "200"))
HERE = os.path.dirname(os.path.abspath(__file__))
ASTRONAUT = os.environ.get("ASTRONAUT", os.path.join(HERE, "..", "..", "shared", "data", "images", "astronaut.png"))
rows = []


def emit(**kw):
    rows.append(kw)
    print(json.dumps(kw), flush=True)


def wall(fn, n=REPEAT):
    t = time.perf_counter()
    fn()  # warm-up (CUDA context, kernel compilation)
    # Calls under a second get at least 9 runs: gpu-slic's 100^3 took 58
    # and 99 ms in two calls of 2 runs on the same kind of machine.
    if time.perf_counter() - t < 1.0:
        n = max(n, 9)
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3, out


gpu_slic = None
for mod in ("cuda_slic.slic", "gpu_slic"):
    try:
        gpu_slic = __import__(mod, fromlist=["slic"]).slic
        emit(peer="gpu-slic", module=mod)
        break
    except Exception as e:  # not importable: skip the peer
        emit(peer="gpu-slic", module=mod, skipped=repr(e)[:200])

emit(skimage=skimage.__version__, numpy=np.__version__)
for L in SIZES:
    vol = binary_blobs(L, n_dim=3, rng=2).astype(np.float32)
    np.save(os.path.join(OUT, f"blobs_{L}.npy"), vol)
    n = L ** 3 // 125
    name = f"slic-3d-{L}"
    if gpu_slic is not None:
        try:
            ms, lab = wall(lambda: gpu_slic(vol, n_segments=n, compactness=1, max_iter=5,
                                            multichannel=False, enforce_connectivity=True))
            emit(workload=name, peer="gpu-slic", e2e_ms=ms, n_labels=int(len(np.unique(lab))))
        except Exception as e:
            emit(workload=name, peer="gpu-slic", error=repr(e)[:300], trace=traceback.format_exc()[-500:])
    if L <= SKIMAGE_MAX_L:
        ms, lab = wall(lambda: sk_slic(vol, n_segments=n, compactness=1.0, max_num_iter=5,
                                       channel_axis=None), n=1)
        emit(workload=name, peer="skimage", e2e_ms=ms, n_labels=int(len(np.unique(lab))))

from skimage import io
ast = io.imread(ASTRONAUT)
ms, lab = wall(lambda: sk_slic(ast, n_segments=1000, compactness=10))
emit(workload="slic-2d-rgb", peer="skimage", e2e_ms=ms, n_labels=int(len(np.unique(lab))))

with open(os.path.join(OUT, "slic_peers.json"), "w") as f:
    json.dump(rows, f, indent=1)
