"""Where a Python call's host time goes, for the GPU machine: runs one
operation in a loop for a few seconds (under `py-spy record --native`,
which samples the Rust frames too) and prints its mean time.

    py-spy record --native -r 1000 -f raw -o $OUT/stacks.txt -- \
        python bench/profile_python.py device-median
    python bench/profile_python.py --fold $OUT/stacks.txt   # top frames

Cases: device-median (a 2048² device array, synchronised), numpy-median
(2048² numpy in and out), small-median (256² numpy in and out), normalize
(tomo.normalize of 16 512² uint16 projections, 4 flats, 4 darks).
"""

import sys
import time
from collections import Counter

import numpy as np


def run(case, seconds=6.0):
    import gpuscope
    from gpuscope import ndimage

    rng = np.random.default_rng(0)
    if case == "device-median":
        d = gpuscope.asarray(rng.random((2048, 2048), dtype=np.float32))

        def op():
            ndimage.median_filter(d, size=3)
            gpuscope.synchronize()
    elif case == "normalize":
        from gpuscope import tomo

        proj = rng.integers(100, 4000, (16, 512, 512), dtype=np.uint16)
        flat = rng.integers(3000, 4000, (4, 512, 512), dtype=np.uint16)
        dark = rng.integers(0, 100, (4, 512, 512), dtype=np.uint16)

        def op():
            tomo.normalize(proj, flat, dark)
    elif case == "numpy-median":
        x = rng.random((2048, 2048), dtype=np.float32)

        def op():
            ndimage.median_filter(x, size=3)
    else:
        x = rng.random((256, 256), dtype=np.float32)

        def op():
            ndimage.median_filter(x, size=3)
    for _ in range(20):
        op()
    n, t = 0, time.perf_counter()
    while time.perf_counter() - t < seconds:
        op()
        n += 1
    print(f"{case}: {(time.perf_counter() - t) / n * 1e3:.3f} ms a call ({n} calls)")


def fold(path, top=40):
    """The frames most often on the stack (inclusive), from py-spy's raw
    (collapsed) output: 'frame;frame;... count' per line."""
    inclusive, total = Counter(), 0
    for line in open(path):
        stack, _, count = line.rstrip().rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        for frame in set(stack.split(";")):
            inclusive[frame.split(" (")[0][:110]] += n
    print(f"{total} samples")
    for frame, n in inclusive.most_common(top):
        print(f"{100 * n / total:5.1f}%  {frame}")


if __name__ == "__main__":
    if sys.argv[1] == "--fold":
        fold(sys.argv[2])
    else:
        run(sys.argv[1])
