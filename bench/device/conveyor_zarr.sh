#!/bin/bash
# Zarr sinks and sources through the conveyor on the GPU machine: a 2 GiB
# uint16 .npy made here, written to a Zarr store by gpuscope itself, then
# read back; each run 3 times, synced and not.
# Usage: bench/device/conveyor_zarr.sh DIR_WITH_BINARY (gpuscope)
set -u
B=${1:-.device-conveyor}
W=${W:-$PWD/.conveyor-scratch}
mkdir -p "$W"
python3 - "$W" <<'PY'
import sys, numpy as np
w = sys.argv[1]
rng = np.random.default_rng(0)
a = np.lib.format.open_memmap(f"{w}/u16.npy", mode="w+", dtype=np.uint16, shape=(256, 2048, 2048))
for i in range(0, 256, 16):
    a[i:i + 16] = rng.integers(0, 4000, size=(16, 2048, 2048)).astype(np.uint16)
a.flush()
PY
cat "$W/u16.npy" > /dev/null
run() { # label, args...
  local label=$1; shift
  for i in 1 2 3; do
    rm -rf "$W/out.npy" "$W/out.zarr"
    local t0=$(date +%s%N)
    local j=$("$B/gpuscope" "$@" --json 2>&1 | tail -1)
    local t1=$(date +%s%N)
    echo "$label run$i wall_ms=$(( (t1 - t0) / 1000000 )) $j"
  done
}
run "median u16 npy->npy no-sync" median "$W/u16.npy" "$W/out.npy" --size 1,3,3 --no-sync
run "median u16 npy->zarr no-sync" median "$W/u16.npy" "$W/out.zarr" --size 1,3,3 --no-sync
run "median u16 npy->zarr sync" median "$W/u16.npy" "$W/out.zarr" --size 1,3,3
"$B/gpuscope" median "$W/u16.npy" "$W/in.zarr" --size 1,1,1 --no-sync > /dev/null
du -sh "$W/in.zarr"
cat $(find "$W/in.zarr" -type f) > /dev/null
run "median u16 zarr->zarr no-sync" median "$W/in.zarr" "$W/out.zarr" --size 1,3,3 --no-sync
run "median u16 zarr->npy no-sync" median "$W/in.zarr" "$W/out.npy" --size 1,3,3 --no-sync
rm -rf "$W"
