#!/bin/bash
# Disk-to-disk benchmark of the conveyor on the GPU machine: inputs made
# here (2 GiB uint16 and float32 .npy), page cache warm, each run 3 times.
# Usage: bench/device/conveyor.sh DIR_WITH_BINARIES  (gpuscope, gpuscope-base)
set -u
B=${1:-.device-conveyor}
W=${W:-$PWD/.conveyor-scratch}
mkdir -p "$W"
python3 - "$W" <<'PY'
import sys, numpy as np, time
w = sys.argv[1]
t = time.time()
rng = np.random.default_rng(0)
for name, dt, z in [("u16", np.uint16, 256), ("f32", np.float32, 128), ("s16", np.uint16, 16)]:
    a = np.lib.format.open_memmap(f"{w}/{name}.npy", mode="w+", dtype=dt, shape=(z, 2048, 2048))
    for i in range(0, z, 16):
        a[i:i + 16] = rng.integers(0, 4000, size=(min(16, z - i), 2048, 2048)).astype(dt)
    a.flush()
    del a
print(f"inputs made in {time.time() - t:.1f} s", flush=True)
PY
cat "$W"/*.npy > /dev/null
echo "== storage: dd 2 GiB conv=fsync"
for i in 1 2; do rm -f "$W/dd"; dd if=/dev/zero of="$W/dd" bs=16M count=128 conv=fsync 2>&1 | tail -1; done
echo "== storage: read 2 GiB from the page cache"
for i in 1 2; do dd if="$W/u16.npy" of=/dev/null bs=16M 2>&1 | tail -1; done
rm -f "$W/dd"
run() { # label, binary, args...
  local label=$1 bin=$2; shift 2
  for i in 1 2 3; do
    rm -rf "$W/out.npy" "$W/out.zarr"
    local t0=$(date +%s%N)
    local j=$("$B/$bin" "$@" --json 2>&1 | tail -1)
    local t1=$(date +%s%N)
    echo "$label run$i wall_ms=$(( (t1 - t0) / 1000000 )) $j"
  done
}
echo "== gpuscope devices"
for bin in gpuscope-base gpuscope; do
  for i in 1 2 3; do
    t0=$(date +%s%N); "$B/$bin" devices > /dev/null; t1=$(date +%s%N)
    echo "$bin devices wall_ms=$(( (t1 - t0) / 1000000 ))"
  done
done
for bin in gpuscope-base gpuscope; do
  run "$bin median u16 2GiB sync" $bin median "$W/u16.npy" "$W/out.npy" --size 1,3,3
done
run "gpuscope median u16 2GiB no-sync" gpuscope median "$W/u16.npy" "$W/out.npy" --size 1,3,3 --no-sync
run "gpuscope median f32 2GiB no-sync" gpuscope median "$W/f32.npy" "$W/out.npy" --size 1,3,3 --no-sync
run "gpuscope median f32 2GiB sync" gpuscope median "$W/f32.npy" "$W/out.npy" --size 1,3,3
run "gpuscope-base median f32 2GiB sync" gpuscope-base median "$W/f32.npy" "$W/out.npy" --size 1,3,3
run "gpuscope outliers u16 2GiB no-sync" gpuscope outliers "$W/u16.npy" "$W/out.npy" --diff 100 --no-sync
run "gpuscope median u16 16 slices sync" gpuscope median "$W/s16.npy" "$W/out.npy" --size 1,3,3
run "gpuscope median3d u16 2GiB no-sync" gpuscope median "$W/u16.npy" "$W/out.npy" --size 3 --no-sync
run "gpuscope gaussian u16 2GiB no-sync" gpuscope convolve "$W/u16.npy" "$W/out.npy" --gaussian 2 --no-sync
run "gpuscope median u16 npy->zarr no-sync" gpuscope median "$W/u16.npy" "$W/out.zarr" --size 1,3,3 --no-sync
echo "== peer: NumPy mmap + CuPy median, 16 slices at a time, written by np.lib.format.open_memmap (no sync)"
python3 - "$W" <<'PY'
import sys, time, numpy as np
w = sys.argv[1]
try:
    import cupy as cp
    from cupyx.scipy import ndimage as nd
except Exception as e:
    print("no cupy:", e); sys.exit(0)
for name in ["u16", "f32"]:
    for rep in range(3):
        t = time.time()
        a = np.load(f"{w}/{name}.npy", mmap_mode="r")
        out = np.lib.format.open_memmap(f"{w}/peer.npy", mode="w+", dtype=a.dtype, shape=a.shape)
        for z in range(0, a.shape[0], 16):
            g = cp.asarray(a[z:z + 16])
            out[z:z + 16] = cp.asnumpy(nd.median_filter(g, size=(1, 3, 3)))
        out.flush(); del out
        print(f"peer cupy median {name} {a.nbytes / 2**30:.0f} GiB run{rep} {time.time() - t:.2f} s", flush=True)
PY
rm -rf "$W"
