#!/usr/bin/env bash
# A/B of two gpuscope binaries on the spot workloads (H100): masks of the
# three real frames (both algorithms) compared byte for byte, then
# spots-eiger and spots-series timed alternately with per-entry-point GPU
# profiles. Usage: OUT=... bash bench/spots_ab.sh OLD NEW
set -uo pipefail
OUT=${OUT:?set OUT}
A=$1; B=$2
export NODEVICE_SELECT=1
D=.device/data/diffraction
for f in $D/*.cbf.gz; do
  s=$(basename "$f" .cbf.gz)
  for alg in dispersion_extended dispersion; do
    $A spots "$f" --algorithm $alg --signal $OUT/a.npy --out $OUT/a.csv >/dev/null 2>&1
    $B spots "$f" --algorithm $alg --signal $OUT/b.npy --out $OUT/b.csv >/dev/null 2>&1
    if cmp -s $OUT/a.npy $OUT/b.npy && cmp -s $OUT/a.csv $OUT/b.csv; then r=same; else r=DIFFERENT; fi
    echo "$s $alg: $r ($(stat -c %s $OUT/b.csv) bytes of spots)" >> $OUT/masks.txt
  done
done
rm -f $OUT/a.npy $OUT/b.npy $OUT/a.csv $OUT/b.csv
for round in 1 2; do
  for bin in A B; do
    g=${!bin}
    $g bench --only spots-eiger --repeat 3 --data .device/data >/dev/null 2>&1
    GPUSCOPE_PROFILE=1 $g bench --only ${WORK:-spots-eiger,spots-series} --repeat 5 --data .device/data \
      >$OUT/${bin}_$round.json 2>$OUT/${bin}_$round.prof
  done
done
