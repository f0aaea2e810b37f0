"""label-stream: a stack larger than the memory budget labelled disk to disk,
gpuscope against scipy and CuPy, each from the .npy file in to the .npy file
out, on one GPU.

Run on the GPU machine (see ../shared/docs/gpu-machine.md), from the
repository root, with a release binary:
    python3 bench/label_stream_peers.py --gpuscope .device/gpuscope \
        [--planes 128] [--budget 256M] [--repeat 3] [--out $OUT]
The stack: planes x 2048 x 2048 uint8 blobs (the separable waves of
`gpuscope bench --only label-stream`, 6-connected). gpuscope runs with
--memory-budget BUDGET, so it labels slabs of BUDGET/5 pixels with bounded
host memory, and once more with the default budget. The peers hold the
whole stack: scipy.ndimage.label (np.load, label, np.save) and
cupyx.scipy.ndimage.label (np.load, to the device, label, to the host,
np.save). Every run is a child process whose peak resident memory
(ru_maxrss) is reported. Prints one JSON object and writes
label_stream_bench.json to --out: wall times (median after the first run
for ours), kernel time, peak RSS, and whether the labels equal scipy's.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def blobs(planes, n=2048):
    """u8 blobs: za*ya + yb*xa + xb*zb > 0.3 from per-axis waves (float32)."""
    rng = np.random.default_rng(3)
    r = rng.random(6).astype(np.float32)
    f = np.float32(2 * np.pi * 40 / n)
    z = np.arange(planes, dtype=np.float32)
    y = np.arange(n, dtype=np.float32)
    za, zb = np.sin(z * f + 6 * r[0]), np.cos(z * f * 0.8 + 6 * r[5])
    ya, yb = np.cos(y * f * 0.9 + 6 * r[1]), np.sin(y * f + 6 * r[2])
    xa, xb = np.cos(y * f * 1.1 + 6 * r[3]), np.sin(y * f + 6 * r[4])
    out = np.empty((planes, n, n), np.uint8)
    for k in range(planes):
        v = za[k] * ya[:, None] + yb[:, None] * xa[None, :] + xb[None, :] * zb[k]
        out[k] = v > 0.3
    return out


def run_measured(argv):
    """Runs argv as a child and returns (wall ms, stdout, ru_maxrss bytes)."""
    t = time.perf_counter()
    r_fd, w_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r_fd)
        os.dup2(w_fd, 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.execvp(argv[0], argv)
    os.close(w_fd)
    chunks = []
    with os.fdopen(r_fd, "rb") as f:
        for c in iter(lambda: f.read(1 << 16), b""):
            chunks.append(c)
    _, status, usage = os.wait4(pid, 0)
    wall = (time.perf_counter() - t) * 1e3
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} failed with status {status}")
    return wall, b"".join(chunks).decode(), usage.ru_maxrss * 1024


PEER = r"""
import sys, time, json, numpy as np
kind, src, dst = sys.argv[1:4]
t0 = time.perf_counter()
b = np.load(src)
if kind == "scipy":
    import scipy.ndimage as ndi
    t1 = time.perf_counter()
    lab, n = ndi.label(b)
    t2 = time.perf_counter()
    label_ms = (t2 - t1) * 1e3
else:
    import cupy as cp, cupyx.scipy.ndimage as cn
    cn.label(cp.zeros((8, 8, 8), cp.uint8))  # kernels compiled outside the timing
    cp.cuda.Device().synchronize()
    d = cp.asarray(b)
    s, e = cp.cuda.Event(), cp.cuda.Event()
    s.record()
    dl, n = cn.label(d)
    e.record(); e.synchronize()
    label_ms = cp.cuda.get_elapsed_time(s, e)
    lab = cp.asnumpy(dl)
np.save(dst, lab.astype(np.int32))
print(json.dumps({"n_labels": int(n), "label_ms": label_ms,
                  "total_ms": (time.perf_counter() - t0) * 1e3}))
"""


def same_labels(a_path, b_path, planes_per_step=8):
    a = np.load(a_path, mmap_mode="r")
    b = np.load(b_path, mmap_mode="r")
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return all(np.array_equal(a[k:k + planes_per_step], b[k:k + planes_per_step])
               for k in range(0, a.shape[0], planes_per_step))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpuscope", default="target/release/gpuscope")
    ap.add_argument("--planes", type=int, default=128)
    ap.add_argument("--budget", default="256M")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scratch", default=tempfile.gettempdir())
    ap.add_argument("--no-cupy", action="store_true")
    ap.add_argument("--out", default=os.environ.get("OUT", tempfile.gettempdir()))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(dir=a.scratch)
    src = os.path.join(tmp, "blobs.npy")
    np.save(src, blobs(a.planes))
    rows = []

    def ours(name, extra):
        dst = os.path.join(tmp, name + ".npy")
        runs = []
        for _ in range(max(a.repeat, 1)):
            wall, out, rss = run_measured([a.gpuscope, "label", src, dst, "--json"] + extra)
            r = json.loads(out)
            r["wall_ms"], r["child_maxrss_bytes"] = wall, rss
            runs.append(r)
        later = runs[1:] if len(runs) > 1 else runs
        kernel = [r["kernel_ms"] for r in later if r.get("kernel_ms") is not None]
        return dst, {
            "workload": name, "shape": [a.planes, 2048, 2048], "args": extra,
            "streamed": runs[-1]["streamed"], "n_labels": runs[-1]["n_labels"],
            "kernel_ms": statistics.median(kernel) if kernel else None,
            "total_ms": statistics.median(r["total_ms"] for r in later),
            "wall_ms": statistics.median(r["wall_ms"] for r in later),
            "peak_rss_bytes": max(r["child_maxrss_bytes"] for r in runs),
            "device": runs[-1]["device"],
        }

    streamed_out, row = ours("gpuscope-streamed", ["--memory-budget", a.budget])
    rows.append(row)
    whole_out, row = ours("gpuscope-default-budget", [])
    rows.append(row)

    peers = ["scipy"] + ([] if a.no_cupy else ["cupy"])
    ref = None
    for kind in peers:
        dst = os.path.join(tmp, kind + ".npy")
        wall, out, rss = run_measured([sys.executable, "-c", PEER, kind, src, dst])
        r = json.loads(out)
        rows.append({"workload": kind, "n_labels": r["n_labels"], "label_ms": r["label_ms"],
                     "total_ms": r["total_ms"], "wall_ms": wall, "peak_rss_bytes": rss})
        if kind == "scipy":
            ref = dst
    for row, path in [(rows[0], streamed_out), (rows[1], whole_out)] + (
            [(rows[3], os.path.join(tmp, "cupy.npy"))] if not a.no_cupy else []):
        row["same_labels_as_scipy"] = same_labels(path, ref)
    scipy_wall = rows[2]["wall_ms"]
    for row in rows[:2]:
        row["speedup_vs_scipy_wall"] = scipy_wall / row["wall_ms"]
        if not a.no_cupy:
            row["speedup_vs_cupy_wall"] = rows[3]["wall_ms"] / row["wall_ms"]
    report = {"input": f"{a.planes}x2048x2048 uint8 blobs, 6-connected",
              "budget": a.budget, "rows": rows}
    text = json.dumps(report, indent=1)
    print(text)
    with open(os.path.join(a.out, "label_stream_bench.json"), "w") as f:
        f.write(text)
    for name in os.listdir(tmp):
        os.remove(os.path.join(tmp, name))
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
