#!/usr/bin/env bash
# Labelling A/B between two binaries on the suite's three label inputs:
# outputs compared byte for byte, then each timed with per-pass profiles
# (GPUSCOPE_PROFILE=1) into stdout. Usage: bash bench/label_ab.sh OLD NEW
set -uo pipefail
OLD=${1:?old binary}; NEW=${2:?new binary}
export NODEVICE_SELECT=1
T=$(mktemp -d)
python3 bench/segment_peers.py --write-inputs $T >/dev/null
$NEW bench --only gauss-2 --repeat 3 >/dev/null 2>&1   # cold-GPU throwaway
for w in label-sources label-blobs-2d label-blobs-3d; do
  for round in 1 2; do
    for b in "$OLD" "$NEW"; do
      tag=$(basename "$b")
      "$b" label $T/$w.npy $T/${w}_$tag.npy --json >/dev/null 2>&1
      echo "== $w $tag (round $round)"
      GPUSCOPE_PROFILE=1 "$b" label $T/$w.npy $T/${w}_$tag.npy --json 2>&1 | grep -v "^\s*$" | tail -14
    done
  done
  cmp $T/${w}_$(basename "$OLD").npy $T/${w}_$(basename "$NEW").npy && echo "$w: identical labels"
done
rm -rf "$T"
