#!/usr/bin/env bash
# A/B of two gpuscope binaries on the 2-D filter kernels (two alternating
# rounds of `bench`), then median outputs of both compared byte for byte
# on f32, u16 and f64 arrays. Usage: bash bench/median_ab.sh OLD NEW
set -uo pipefail
O=$1; N=$2
export NODEVICE_SELECT=1
pick() { grep -o '"kernel_ms_in_stream":[0-9.]*\|"workload":"[a-z0-9-]*"' | paste -s -d' ' | sed 's/"workload"/\n/g'; echo; }
$O bench --only gauss-2 --repeat 3 >/dev/null 2>&1
for r in 1 2; do for g in $O $N; do echo "== $g"; $g bench --only median-3,median-7,gauss-2,conv-gauss15 --repeat 7 2>&1 | pick; done; done
python3 - <<'PY'
import numpy as np
r = np.random.default_rng(1)
np.save('/tmp/f32.npy', r.random((2048, 2048), dtype=np.float32))
np.save('/tmp/u16.npy', (r.random((1000, 1300)) * 4000).astype(np.uint16))
np.save('/tmp/f64s.npy', r.random((9, 300, 333)))
PY
ok=1
for args in "/tmp/f32.npy --size 3" "/tmp/f32.npy --size 7 --mode constant --cval 0.5" "/tmp/u16.npy --size 5 --mode wrap" "/tmp/u16.npy --size 4,6" "/tmp/f64s.npy --size 3" "/tmp/f64s.npy --size 1,7,7 --mode mirror" "/tmp/u16.npy --size 3 --mode nearest" "/tmp/f64s.npy --size 1,3,3 --mode constant --cval 0.25"; do
  set -- $args; in=$1; shift
  $O median $in /tmp/a.npy "$@" >/dev/null; $N median $in /tmp/b.npy "$@" > /dev/null
  if cmp -s /tmp/a.npy /tmp/b.npy; then echo "same: $args"; else echo "DIFFER: $args"; ok=0; fi
done
echo "identical=$ok"
