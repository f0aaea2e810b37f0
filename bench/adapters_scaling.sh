#!/usr/bin/env bash
# Scaling over several GPUs of one host (`--adapters`), on
# the GPU machine from the repository root with a release build in
# .device/gpuscope and the shared data in .device/data, $OUT set:
#   bash bench/adapters_scaling.sh            # nvidia-h200-x2 (or -x4, -x8)
#   ONE=nvidia ALL=nvidia,nvidia bash bench/adapters_scaling.sh
#                                             # one GPU, two contexts on it
# Runs the same workloads without --adapters (the plain path), on one
# context (ONE, default: the first adapter named nvidia; one context runs
# the plain path itself, so these two should agree) and on
# all (ALL, default: `all`; each context runs the plain code on its range):
# the bench workloads median-stack, outliers-stack, stack-roundtrip (host
# memory in and out), spots-series (host memory) and spots-series-disk (a
# .npy on disk), and the command `gpuscope median` of a 3-D .npy stack disk
# to disk. Writes $OUT/adapters_{plain,one,all}.json (bench rows) and
# $OUT/adapters_cli.json (the disk-to-disk runs), and prints the speed-ups.
set -uo pipefail
OUT=${OUT:?set OUT}
G=${G:-.device/gpuscope}
DATA=${DATA:-.device/data}
ONE=${ONE:-nvidia}
ALL=${ALL:-all}
export NODEVICE_SELECT=1
$G devices
$G bench --only gauss-2 --repeat 3 >/dev/null 2>&1   # cold clocks
W=median-stack,outliers-stack,stack-roundtrip,spots-series,spots-series-disk
$G bench --only $W --slices 64 --frames 200 --repeat 5 --data $DATA \
  --json $OUT/adapters_plain.json >/dev/null
$G --adapters="$ONE" bench --only $W --slices 64 --frames 200 --repeat 5 --data $DATA \
  --json $OUT/adapters_one.json >/dev/null
$G --adapters="$ALL" bench --only $W --slices 64 --frames 200 --repeat 5 --data $DATA \
  --json $OUT/adapters_all.json >/dev/null
# Disk to disk: a 256 x 2048 x 2048 uint16 stack (2 GiB), 3x3x3 median.
STACK=/tmp/adapters_stack.npy
python3 -c "
import numpy as np
a = np.lib.format.open_memmap('$STACK', 'w+', np.uint16, (256, 2048, 2048))
r = np.random.default_rng(0)
for z in range(256): a[z] = r.integers(0, 4096, (2048, 2048), dtype=np.uint16)
a.flush()"
: > $OUT/adapters_cli.json
for list in "$ONE" "$ALL" "$ONE" "$ALL"; do   # twice each, the second warm
  $G --adapters="$list" median $STACK /tmp/adapters_out.npy --size 3 --json >> $OUT/adapters_cli.json
done
rm -f /tmp/adapters_out.npy $STACK
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
one = {r["workload"]: r for r in json.load(open(f"{out}/adapters_one.json"))["results"]}
plain = {r["workload"]: r for r in json.load(open(f"{out}/adapters_plain.json"))["results"]}
all_ = json.load(open(f"{out}/adapters_all.json"))
n = len(all_.get("adapters", [])) or 1
print(f"adapters: {all_.get('adapters')}")
for r in all_["results"]:
    o = one.get(r["workload"])
    p = plain.get(r["workload"])
    if o and p:
        print(f"{r['workload']:24s} plain {p['e2e_ms']:9.1f} ms   1 context {o['e2e_ms']:9.1f} ms"
              f"   {n} contexts {r['e2e_ms']:9.1f} ms   speed-up over plain {p['e2e_ms'] / r['e2e_ms']:.2f}x")
runs = [json.loads(l) for l in open(f"{out}/adapters_cli.json") if l.strip()]
if len(runs) == 4:
    a, b = runs[2], runs[3]  # the warm pair
    print(f"median disk to disk ({a['n_adapters']} vs {b['n_adapters']} contexts): "
          f"{a['total_ms']:.0f} ms vs {b['total_ms']:.0f} ms, speed-up {a['total_ms'] / b['total_ms']:.2f}x")
PY
