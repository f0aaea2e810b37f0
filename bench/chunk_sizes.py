"""Host to host, numpy in and out, one 2048 x 2048 float32 image: median
3x3 and Gaussian sigma 2, and tomo.normalize of 16 512 x 512 uint16
projections, under the stream chunk size in the environment
(GPUSCOPE_STREAM_CHUNK_BYTES; the default when unset). One line of ms
(median of --repeat runs after warm-ups) for bench/history.

    GPUSCOPE_STREAM_CHUNK_BYTES=4194304 python bench/chunk_sizes.py
"""

import argparse
import os

import numpy as np

from gpuscope import ndimage, tomo
from python_e2e import wall_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    x = np.random.default_rng(0).random((2048, 2048), dtype=np.float32)
    chunk = os.environ.get("GPUSCOPE_STREAM_CHUNK_BYTES", "default")
    med = wall_ms(lambda: ndimage.median_filter(x, size=3), args.repeat)
    gauss = wall_ms(lambda: ndimage.gaussian_filter(x, 2), args.repeat)
    rng = np.random.default_rng(1)
    proj = rng.integers(100, 4000, (16, 512, 512), dtype=np.uint16)
    flat = rng.integers(3000, 4000, (4, 512, 512), dtype=np.uint16)
    dark = rng.integers(0, 100, (4, 512, 512), dtype=np.uint16)
    norm = wall_ms(lambda: tomo.normalize(proj, flat, dark), args.repeat)
    print(f"chunk {chunk}: median 3x3 {med:.3f} ms, gaussian sigma 2 {gauss:.3f} ms, normalize {norm:.3f} ms")


if __name__ == "__main__":
    main()
