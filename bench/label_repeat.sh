#!/usr/bin/env bash
# Determinism check: labels every suite input N times with one binary and
# compares each output with the first. Usage: bash bench/label_repeat.sh BIN N
set -uo pipefail
B=${1:?binary}; N=${2:-10}
export NODEVICE_SELECT=1
T=$(mktemp -d)
python3 bench/segment_peers.py --write-inputs $T >/dev/null
for w in label-sources label-blobs-2d label-blobs-3d; do
  "$B" label $T/$w.npy $T/first.npy --json | sed 's/.*"n_labels":\([0-9]*\).*/first n_labels \1/'
  bad=0
  for i in $(seq 2 $N); do
    out=$("$B" label $T/$w.npy $T/again.npy --json)
    cmp -s $T/first.npy $T/again.npy || { bad=$((bad+1)); echo "$w run $i differs: $out" | head -c 300; echo; }
  done
  echo "$w: $((N-1)) repeats, $bad differ"
done
rm -rf "$T"
