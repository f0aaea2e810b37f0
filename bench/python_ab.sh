#!/usr/bin/env bash
# Two gpuscope wheels alternated in one call of the GPU machine:
# bench/python_e2e.py under each, ROUNDS rounds, tables to $OUT/python_ab_*.txt.
#   bash bench/python_ab.sh .device/prev/*.whl .device/new/*.whl
set -uo pipefail
OUT=${OUT:?set OUT}
A=$1 B=$2 ROUNDS=${ROUNDS:-2}
for w in a b; do
  whl=$A; [ $w = b ] && whl=$B
  python3 -m pip install -q --no-index --no-deps --target /tmp/site_$w "$whl"
done
for r in $(seq 1 "$ROUNDS"); do
  for w in a b; do
    echo "== round $r wheel $w" | tee -a $OUT/python_ab_$w.txt
    PYTHONPATH=/tmp/site_$w python3 bench/python_e2e.py --repeat 30 2>&1 | tee -a $OUT/python_ab_$w.txt
  done
done
