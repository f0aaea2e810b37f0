"""kappa-sigma: `gpuscope bench --only kappa-sigma` against the
workshop's CuPy loop on the benchmark's radio image, with our per-entry-point
GPU profile.

Run on the GPU machine from the repository root with a release binary:
    python3 bench/clip_peers.py --gpuscope .device/gpuscope [--repeat 7]
Prints one JSON object: our kernel time (sum of the timestamps of every
clipping pass of one call, min over the repeats), end-to-end time, the
GPUSCOPE_PROFILE lines (GPU time and passes per entry point over all calls),
the CuPy loop's device time (CUDA events, median after a warm-up), the ratio
and whether the kept count equals the workshop loop's (numpy, same image).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from segment_peers import cuda_ms, ks_clip, radio_image  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", default="target/release/gpuscope")
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    img = radio_image()
    path = os.path.join(tmp, "radio.npy")
    np.save(path, img)
    out = os.path.join(tmp, "bench.json")
    env = dict(os.environ, GPUSCOPE_PROFILE="1")
    run = subprocess.run(
        [a.gpuscope, "bench", "--only", "kappa-sigma", "--radio", path,
         "--repeat", str(a.repeat), "--json", out],
        check=True, capture_output=True, text=True, env=env)
    ours = json.load(open(out))["results"][0]
    profile = [l for l in run.stderr.splitlines() if "passes" in l or "profile" in l]
    kept = len(ks_clip(np, img.ravel()))
    row = {"workload": "kappa-sigma", "input": "2048^2 f32 radio image",
           "ours_kernel_ms": ours["kernel_ms_in_stream"], "ours_e2e_ms": ours["e2e_ms"],
           "ours_iterations": ours["iterations"], "n_kept": ours["n_kept"],
           "same_answer": ours["n_kept"] == kept, "profile": profile}
    try:
        import cupy as cp
        d = cp.asarray(img.ravel())
        peer = cuda_ms(lambda: ks_clip(cp, d), a.repeat)
        row.update({"peer": "workshop CuPy loop", "peer_ms": peer,
                    "ratio_kernel": peer / ours["kernel_ms_in_stream"]
                    if ours["kernel_ms_in_stream"] else None})
    except ImportError:
        row["peer"] = "CuPy not installed"
    print(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
