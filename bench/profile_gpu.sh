#!/usr/bin/env bash
# Where each workload spends its GPU time: every workload of the suite run
# once warm with GPUSCOPE_PROFILE=1, the per-entry-point table of each into
# $OUT/profile_<workload>.txt. Same setup as bench/gpu_machine.sh.
set -uo pipefail
OUT=${OUT:?set OUT}
G=.device/gpuscope
export NODEVICE_SELECT=1
T=$(mktemp -d)
python3 - "$T" <<'PY'
import sys, os
import numpy as np
sys.path.insert(0, "bench")
from segment_peers import radio_image
from skimage.data import binary_blobs
t = sys.argv[1]
img = radio_image()
np.save(os.path.join(t, "radio.npy"), img)
np.save(os.path.join(t, "label-sources.npy"), (img > 5 * 0.0133).astype(np.uint8))
np.save(os.path.join(t, "label-blobs-2d.npy"),
        binary_blobs(2048, blob_size_fraction=0.02, volume_fraction=0.5, rng=2).astype(np.uint8))
np.save(os.path.join(t, "label-blobs-3d.npy"),
        binary_blobs(512, n_dim=3, volume_fraction=0.3, rng=2).astype(np.uint8))
PY
$G bench --only gauss-2 --repeat 3 >/dev/null 2>&1   # cold-GPU throwaway
prof() { # name, command...
  local name=$1; shift
  "$@" >/dev/null 2>&1
  GPUSCOPE_PROFILE=1 "$@" 2>"$OUT/profile_$name.txt" >"$OUT/stdout_$name.txt"
}
prof kappa-sigma $G clip $T/radio.npy --workshop --json
prof kappa-sigma-astropy $G clip $T/radio.npy --maxiters none --json
for w in label-sources label-blobs-2d label-blobs-3d; do
  prof $w $G label $T/$w.npy $T/${w}_labels.npy --json
done
prof spots-eiger $G bench --only spots-eiger --repeat 3 --data .device/data
prof slic-2d-rgb $G bench --only slic-2d-rgb --repeat 3 --astronaut .device/data/images/astronaut.png
prof slic-3d-200 $G bench --only slic-3d-200 --repeat 2
prof filters $G bench --only median-3,median-7,gauss-2,conv-gauss15 --repeat 3
rm -rf "$T"
ls $OUT
