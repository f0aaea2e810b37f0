"""gpuscope.dask on several GPUs of one host, for the GPU machine: a
float32 volume generated on the workers (a cheap pattern plus noise, so
that disk and random-number generation do not dominate), reduced to a
scalar after each operation, with 1, 2 and 4 workers (one per GPU), and
dask-image on CuPy with the same workers and chunks where it is
importable. Wall clock of one compute after a warm-up on a small volume.

    python bench/dask_scaling.py [--slices 512] [--chunk 32] [--workers 1,2,4]
        [--zarr DIR] [--jobs median,label,dask-image]

With --zarr the volume is written once to DIR/in.zarr (uncompressed, one
chunk per --chunk slices) and every job reads it from there and writes its
result to a Zarr array beside it (Zarr to Zarr, as a beamline's volume
would be processed).

Writes $OUT/dask_scaling.json when OUT is set.
"""

import argparse
import json
import os
import time

import numpy as np


def volume(da, slices, side, chunk):
    def block(block_id=None, **_):
        z0 = block_id[0] * chunk
        n = min(chunk, slices - z0)
        rng = np.random.default_rng(z0)
        base = np.sin(np.arange(side, dtype=np.float32) / 37.0)
        out = np.empty((n, side, side), np.float32)
        out[:] = base[None, :, None] * base[None, None, :]
        out += rng.random((1, side, side), dtype=np.float32) * 0.5
        out += np.arange(n, dtype=np.float32)[:, None, None] * 1e-3
        return out

    return da.map_blocks(block, dtype=np.float32, chunks=((chunk,) * (slices // chunk), (side,), (side,)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--slices", type=int, default=512)
    ap.add_argument("--side", type=int, default=2048)
    ap.add_argument("--chunk", type=int, default=32)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--zarr", default=None, help="folder for the Zarr input and outputs")
    ap.add_argument("--jobs", default="median,label,dask-image")
    a = ap.parse_args()
    wanted = set(a.jobs.split(","))
    import dask.array as da
    from distributed import Client, LocalCluster

    import gpuscope
    import gpuscope.dask as gd

    try:
        import cupy as cp
        from dask_image import ndfilters, ndmeasure
    except Exception as e:  # noqa: BLE001
        cp = None
        print(f"dask-image on CuPy not measured: {e!r}"[:200])
    gpus = [d for d in gpuscope.devices() if not d["software"]]
    print("adapters:", [d["name"] for d in gpus])
    rows = []
    gb = a.slices * a.side * a.side * 4 / 1e9
    for n in [int(w) for w in a.workers.split(",")]:
        if n > max(1, len(gpus)):
            continue
        with LocalCluster(n_workers=n, threads_per_worker=1, dashboard_address=None,
                          memory_limit=0) as cluster, Client(cluster) as client:
            print(n, "workers:", gd.use_gpus(client))
            if cp is not None:
                def pin(dask_worker):
                    import cupy

                    i = int(str(dask_worker.name).rsplit("-", 1)[-1])
                    cupy.cuda.Device(i % cupy.cuda.runtime.getDeviceCount()).use()
                client.run(pin)
            jobs = {}
            if "median" in wanted:
                jobs["gpuscope median 3"] = lambda x: gd.median_filter(x, size=3)
            if "label" in wanted:
                jobs["gpuscope label(x > t)"] = lambda x: gd.label(x > 0.6)[0]
            if cp is not None and "dask-image" in wanted:
                jobs["dask-image+cupy median 3"] = lambda x: ndfilters.median_filter(
                    x.map_blocks(cp.asarray), size=3).map_blocks(cp.asnumpy)
                if "label" in wanted:
                    jobs["dask-image+cupy label(x > t)"] = lambda x: ndmeasure.label(
                        x.map_blocks(cp.asarray) > 0.6)[0].map_blocks(cp.asnumpy)
            if a.zarr and not os.path.exists(os.path.join(a.zarr, "in.zarr")):
                t = time.perf_counter()
                volume(da, a.slices, a.side, a.chunk).to_zarr(
                    os.path.join(a.zarr, "in.zarr"), compressors=None, overwrite=True)
                print(f"wrote {gb:.1f} GB to Zarr in {time.perf_counter() - t:.1f} s", flush=True)
            for name, job in jobs.items():
                warm = volume(da, a.chunk * 2, a.side, a.chunk)
                try:
                    if a.zarr:
                        src = da.from_zarr(os.path.join(a.zarr, "in.zarr"))
                        dst = os.path.join(a.zarr, "out.zarr")
                        run = lambda x: job(x).to_zarr(dst, compressors=None, overwrite=True)
                        job(warm).sum().compute()
                        x = src
                    else:
                        run = lambda x: job(x).sum().compute()
                        run(warm)
                        x = volume(da, a.slices, a.side, a.chunk)
                    t = time.perf_counter()
                    run(x)
                    s = time.perf_counter() - t
                    rows.append(dict(workload=name, workers=n, seconds=s, gb=gb, gb_per_s=gb / s))
                except Exception as e:  # noqa: BLE001
                    rows.append(dict(workload=name, workers=n, error=repr(e)[:300]))
                print(rows[-1], flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "dask_scaling.json"), "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
