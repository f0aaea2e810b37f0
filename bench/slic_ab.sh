#!/usr/bin/env bash
# A/B of two gpuscope binaries on SLIC: slic-2d-rgb and slic-3d-200 timed
# in alternating rounds, then labels of both compared byte for byte
# (astronaut RGB, its SLICO, coins grayscale, a 200^3 binary_blobs volume).
# Usage: bash bench/slic_ab.sh OLD NEW   (on the GPU machine, from the root)
set -uo pipefail
O=$1; N=$2
A=${ASTRONAUT:-.device/data/images/astronaut.png}
C=${COINS:-.device/data/images/coins.png}
export NODEVICE_SELECT=1
mkdir -p /tmp/slic_ab
python3 -c "import numpy as np, skimage.data as d; np.save('/tmp/slic_ab/blobs_200.npy', d.binary_blobs(200, n_dim=3, rng=1).astype(np.float32))"
pick() { grep -o '"e2e_ms":[0-9.]*\|"workload":"[a-z0-9-]*"' | paste -s -d' ' | sed 's/"e2e_ms"/\n"e2e_ms"/g'; echo; }
$O bench --only slic-2d-rgb --repeat 2 --astronaut "$A" >/dev/null 2>&1
for r in 1 2; do for g in $O $N; do
  echo "== $g"
  $g bench --only slic-2d-rgb,slic-3d-200 --repeat 5 --astronaut "$A" --blobs-dir /tmp/slic_ab 2>&1 | pick
done; done
ok=1
for args in "$A --n-segments 1000" "$A --n-segments 300 --slic-zero" "$C --n-segments 200 --channel-axis none" "/tmp/slic_ab/blobs_200.npy --n-segments 64000 --compactness 1 --max-num-iter 5 --channel-axis none"; do
  set -- $args; in=$1; shift
  $O slic $in /tmp/slic_ab/a.npy "$@" >/dev/null; $N slic $in /tmp/slic_ab/b.npy "$@" >/dev/null
  if cmp -s /tmp/slic_ab/a.npy /tmp/slic_ab/b.npy; then echo "same: $args"; else echo "DIFFER: $args"; ok=0; fi
done
echo "identical=$ok"
