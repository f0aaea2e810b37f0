#!/usr/bin/env bash
# Host phases per warm call of two gpuscope binaries: each workload run with
# GPUSCOPE_PROFILE=1 at --repeat 2 and --repeat 22, alternating binaries; the
# difference of the summed phases over the 20 extra calls, per call (the
# first call's compilation and allocation cancel out).
# Usage: bash bench/phase_ab.sh OLD NEW WORKLOAD [bench args...]
set -uo pipefail
O=$1; N=$2; W=$3; shift 3
export NODEVICE_SELECT=1
for round in 1 2; do for g in $O $N; do
  a=$(mktemp); b=$(mktemp)
  GPUSCOPE_PROFILE=1 $g bench --only $W --repeat 2 "$@" 2>$a >/dev/null
  GPUSCOPE_PROFILE=1 $g bench --only $W --repeat 22 "$@" 2>$b >/dev/null
  echo "== $g round $round: $(grep -o '"e2e_ms":[0-9.]*' $b | head -1)"
  python3 - "$a" "$b" <<'PY'
import re, sys
def rows(f):
    out = {}
    for line in open(f):
        m = re.match(r"\s+([0-9.]+) ms\s+(\d+) passes\s+(.*)$", line)
        if m:
            out[m.group(3)] = float(m.group(1))
    return out
a, b = rows(sys.argv[1]), rows(sys.argv[2])
for k in sorted(b, key=lambda k: -(b[k] - a.get(k, 0))):
    d = (b[k] - a.get(k, 0)) / 20
    if d > 0.02 and 'median_network' not in k:
        print(f"  {d:8.3f} ms/call  {k}")
PY
  rm -f $a $b
done; done
