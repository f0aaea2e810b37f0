"""Images above one stream chunk (64 MiB), numpy in and out: an 8192²
float32 image against the same bytes as a stack of 16 2048² slices, and
an Eiger-sized 4362 x 4148 float32 frame. Median of --repeat runs, ms.

    python bench/big_images.py [--repeat 7]
"""

import argparse

import numpy as np

from gpuscope import ndimage
from python_e2e import wall_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    big = rng.random((8192, 8192), dtype=np.float32)
    stack = big.reshape(16, 2048, 2048)
    eiger = rng.random((4362, 4148), dtype=np.float32)
    cases = [
        ("8192² median 3x3", lambda: ndimage.median_filter(big, size=3)),
        ("16 x 2048² median (1, 3, 3), the same bytes", lambda: ndimage.median_filter(stack, size=(1, 3, 3))),
        ("8192² gaussian sigma 2", lambda: ndimage.gaussian_filter(big, 2)),
        ("16 x 2048² gaussian (0, 2, 2)", lambda: ndimage.gaussian_filter(stack, (0, 2, 2))),
        ("4362 x 4148 median 3x3", lambda: ndimage.median_filter(eiger, size=3)),
        ("4362 x 4148 gaussian sigma 2", lambda: ndimage.gaussian_filter(eiger, 2)),
    ]
    for name, fn in cases:
        print(f"{name}: {wall_ms(fn, args.repeat, warmup=1):.1f} ms")


if __name__ == "__main__":
    main()
