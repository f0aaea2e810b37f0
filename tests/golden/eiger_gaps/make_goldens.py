"""Golden outputs for filters of detector frames with Eiger-style gaps.

Run from the repository root:
    python3 tests/golden/eiger_gaps/make_goldens.py
An Eiger frame marks its module gaps and dead pixels with the largest value
of its dtype: 2^32 - 1 in 32-bit frames, 2^16 - 1 in 16-bit ones. The
frames here are synthetic (Poisson counts, gap rows and columns as an
Eiger's modules leave them, dead pixels, a few pixels just below the top).
References: scipy.ndimage.gaussian_filter and median_filter in the frame's
dtype (scipy sums in float64 and truncates to the dtype).
Every case is checked exactly, on the GPU and with --cpu, by
crates/cli/tests/goldens.rs, and by crates/python/tests/test_ndimage.py.
Library versions go to versions.txt here.
"""
import json
import os
import sys

import numpy as np
import scipy
import scipy.ndimage as ndi

HERE = os.path.dirname(os.path.abspath(__file__))


def frame(dtype, top):
    rng = np.random.default_rng(2024)
    x = rng.poisson(4.0, (64, 80)).astype(dtype)
    x[30:34, :] = top          # the gap between two module rows
    x[:, 38:40] = top          # the gap between two chips
    x[5:8, 60:71] = top        # a block of dead pixels
    x[rng.integers(0, 64, 12), rng.integers(0, 80, 12)] = top
    x[50, 10] = top - 100      # bright pixels just below the marker
    x[51, 12] = top - 1
    x[10:13, 20:23] = rng.integers(1000, 5000, (3, 3))
    return x


cases = []


def case(name, input_name, out, args, command="convolve"):
    np.save(os.path.join(HERE, name + ".npy"), out)
    cases.append({"name": name, "command": command, "input": "golden:" + input_name,
                  "output": name + ".npy", "args": args, "exact": True, "gpu_exact": True,
                  "crop": None})


for dtype, top, tag in [(np.uint32, 2**32 - 1, "u32"), (np.uint16, 2**16 - 1, "u16")]:
    x = frame(dtype, top)
    np.save(os.path.join(HERE, f"eiger_gaps_{tag}.npy"), x)
    out = ndi.gaussian_filter(x, 1.5)
    assert out.dtype == dtype
    case(f"eiger_gaps_{tag}_gauss1_5", f"eiger_gaps_{tag}.npy", out, ["--gaussian", "1.5"])
    case(f"eiger_gaps_{tag}_gauss3_nearest", f"eiger_gaps_{tag}.npy",
         ndi.gaussian_filter(x, 3.0, mode="nearest"), ["--gaussian", "3", "--mode", "nearest"])
    if tag == "u32":
        # A background estimate as astronomers make it: a 51 x 51 median,
        # on a corner holding gaps (small: lavapipe in CI selects slowly).
        corner = np.ascontiguousarray(x[22:38, 28:48])
        np.save(os.path.join(HERE, "eiger_gaps_u32_corner.npy"), corner)
        case("eiger_gaps_u32_corner_median51", "eiger_gaps_u32_corner.npy",
             ndi.median_filter(corner, size=51), ["--size", "51"], command="median")

with open(os.path.join(HERE, "MANIFEST.json"), "w") as f:
    json.dump(cases, f, indent=1)
    f.write("\n")
with open(os.path.join(HERE, "versions.txt"), "w") as f:
    f.write(f"numpy {np.__version__}\nscipy {scipy.__version__}\n"
            f"python {sys.version.split()[0]}\n")
