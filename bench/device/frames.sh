#!/bin/bash
# Frames larger than the conveyor's blocks on the GPU machine: read and
# written in rows (new) against whole slices (base). Inputs made here with
# NumPy, page cache warm, three runs each; wall time of the process and
# its peak resident size. A stack of 2048^2 slices checks the whole-slice
# road is unchanged.
# Usage: bench/device/frames.sh DIR_WITH_BINARIES  (gpuscope, gpuscope-base)
set -u
B=${1:-.device}
W=${W:-$PWD/.frames-scratch}
mkdir -p "$W"
python3 - "$W" <<'PY'
import sys, numpy as np, time
w = sys.argv[1]
t = time.time()
rng = np.random.default_rng(0)
for name, dt, shape in [("u8", np.uint8, (2, 30000, 30000)), ("u16", np.uint16, (2, 16384, 16384)),
                        ("s16", np.uint16, (64, 2048, 2048))]:
    a = np.lib.format.open_memmap(f"{w}/{name}.npy", mode="w+", dtype=dt, shape=shape)
    for z in range(shape[0]):
        for y in range(0, shape[1], 4096):
            a[z, y:y + 4096] = rng.integers(0, 250, size=a[z, y:y + 4096].shape).astype(dt)
    a.flush()
    del a
print(f"inputs made in {time.time() - t:.1f} s", flush=True)
PY
cat "$W"/*.npy > /dev/null
run() { # label, binary, args...
  local label=$1 bin=$2; shift 2
  for i in 1 2 3; do
    rm -rf "$W/out.npy"
    local t0=$(date +%s%N)
    local j=$(python3 -c "import resource,subprocess,sys; r=subprocess.run(sys.argv[1:],capture_output=True,text=True); print(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr.strip()[-300:], 'peak_rss_mib=%d' % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss//1024))" "$B/$bin" "$@" --json)
    local t1=$(date +%s%N)
    echo "$label run$i wall_ms=$(( (t1 - t0) / 1000000 )) $j"
  done
}
for bin in gpuscope-base gpuscope; do
  run "$bin median u8 2x30000^2" $bin median "$W/u8.npy" "$W/out.npy" --size 1,3,3 --no-sync
  cp "$W/out.npy" "$W/u8-$bin.npy"
  run "$bin median u16 2x16384^2" $bin median "$W/u16.npy" "$W/out.npy" --size 1,3,3 --no-sync
  cp "$W/out.npy" "$W/u16-$bin.npy"
  run "$bin median u16 2x16384^2 budget 1G" $bin median "$W/u16.npy" "$W/out.npy" --size 1,3,3 --no-sync --memory-budget 1G
  run "$bin median u16 64x2048^2" $bin median "$W/s16.npy" "$W/out.npy" --size 1,3,3 --no-sync
  run "$bin gaussian u16 2x16384^2 float32" $bin convolve "$W/u16.npy" "$W/out.npy" --gaussian 0,2,2 --dtype float32 --no-sync
done
for k in u8 u16; do cmp -s "$W/$k-gpuscope-base.npy" "$W/$k-gpuscope.npy" && echo "$k outputs identical" || echo "$k outputs DIFFER"; done
rm -rf "$W"
