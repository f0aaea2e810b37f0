#!/usr/bin/env bash
# Every benchmark of BENCHMARKS.md on the GPU machine, ours and the peers'
# in the same call (see ../shared/docs/gpu-machine.md). Expects, from the
# repository root: .device/gpuscope (a release build), .device/data (a copy
# of ../shared/data), .device/tools (../shared/tools), optionally
# .device/py/cuda_slic (the gpu-slic 0.0.1a3 wheel, unpacked), and $OUT.
#   bash bench/gpu_machine.sh filters   # median, stacks, Gaussian, 15x15
#   bash bench/gpu_machine.sh segment   # kappa-sigma, labels
#   bash bench/gpu_machine.sh slic      # slic-3d-L, slic-2d-rgb
#   bash bench/gpu_machine.sh spots     # spots-eiger, spots-series, spots-series-disk
#   bash bench/gpu_machine.sh labelstream  # label-stream (disk to disk)
#   bash bench/gpu_machine.sh decode    # bitshuffle-LZ4 frames decoded on the GPU
set -uo pipefail
OUT=${OUT:?set OUT}
G=.device/gpuscope
export NODEVICE_SELECT=1 PYTHONUNBUFFERED=1
# The SM and memory clocks every 200 ms of the call, to check that timings
# were taken at full clocks (the driver lowers them after ~2 s of light use).
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem --format=csv -lms 200 \
  > $OUT/clocks.csv 2>/dev/null &
CLOCKS=$!
# The first process on a cold GPU runs slower (clocks ramp up): a throwaway run.
$G bench --only gauss-2 --repeat 3 >/dev/null 2>&1
for part in "$@"; do
  case $part in
    filters)
      $G bench --only copy-2048-wgsl,median-3,median-7,gauss-2,conv-gauss15,median-stack,median-stack-into,outliers-stack,stack-roundtrip,host-memory \
        --repeat 7 --json $OUT/ours_filters.json >/dev/null
      OUT=$OUT python3 bench/peers_filters.py >/dev/null ;;
    segment)
      python3 bench/segment_peers.py --gpuscope $G --repeat 5 --out $OUT >/dev/null
      # The same label inputs timed inside `gpuscope bench` (kernel + host to host).
      python3 bench/segment_peers.py --write-inputs /tmp/seg
      $G bench --only kappa-sigma,label-sources,label-blobs-2d,label-blobs-3d --repeat 5 --inputs /tmp/seg \
        --json $OUT/ours_segment.json >/dev/null ;;
    slic)
      mkdir -p /tmp/slic
      PYTHONPATH=.device/py OUT=/tmp/slic REPEAT=2 ASTRONAUT=.device/data/images/astronaut.png \
        python3 bench/slic_peers.py 100 200 300 400 500 >/dev/null
      cp /tmp/slic/slic_peers.json $OUT/
      $G bench --only slic-3d-L,slic-2d-rgb --repeat 9 --blobs-dir /tmp/slic \
        --astronaut .device/data/images/astronaut.png --json $OUT/ours_slic.json >/dev/null ;;
    spots)
      python3 bench/spots_peers.py --gpuscope $G --data .device/data --tools .device/tools \
        --out $OUT --frames 200 --repeat 7 >/dev/null ;;
    decode)
      $G bench --only decode --repeat 7 --json $OUT/ours_decode.json >/dev/null ;;
    labelstream)
      $G bench --only label-stream --repeat 3 --json $OUT/ours_label_stream.json >/dev/null
      python3 bench/label_stream_peers.py --gpuscope $G --planes 128 --budget 256M --repeat 3 \
        --out $OUT >/dev/null ;;
  esac
done
kill $CLOCKS 2>/dev/null
ls $OUT
python3 bench/report.py $OUT > $OUT/table.md   # the side-by-side table of this call
