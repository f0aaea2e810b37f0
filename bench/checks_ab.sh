#!/usr/bin/env bash
# A/B of wgpu's shader runtime checks (bounds checks, loop bounding) on
# every workload's kernels: bench/profile_gpu.sh twice, checked and not.
set -uo pipefail
OUT=${OUT:?set OUT}
base=$OUT
mkdir -p $base/checked $base/unchecked
GPUSCOPE_CHECKED_SHADERS=1 OUT=$base/checked bash bench/profile_gpu.sh >/dev/null 2>&1
OUT=$base/unchecked bash bench/profile_gpu.sh >/dev/null 2>&1
for f in $base/checked/profile_*.txt; do
  n=$(basename $f)
  echo "== $n"; paste -d'|' <(sed -n 2,7p $f) <(sed -n 2,7p $base/unchecked/$n)
done
