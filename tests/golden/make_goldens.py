"""Golden outputs from scipy.ndimage for gpuscope's filter tests.

Run from the repository root with the shared data beside it:
    python3 tests/golden/make_goldens.py
Inputs that are not files of ../shared/data are saved here as .npy next to
their outputs. Library versions go to tests/golden/versions.txt.
The CLI tests (crates/cli/tests/goldens.rs) read MANIFEST.json and run
`gpuscope convolve` on each case, on the GPU and with --cpu.
"""
import json
import os
import sys

import numpy as np
import scipy
import scipy.ndimage as ndi
import skimage
from skimage import io

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "..", "shared", "data")
sys.path.insert(0, os.path.join(DATA, "..", "tools"))
from cbf import read_cbf  # noqa: E402  the shared reference reader

cases = []


def save(name, array):
    np.save(os.path.join(HERE, name), array)
    return name


def case(name, input_path, out, args, exact, crop=None):
    """input_path: relative to the repository's parent (shared/...) or, with
    the prefix golden:, to HERE. crop: [[y0, y1], [x0, x1]] of the output kept
    (large outputs are checked on a border corner and an interior window)."""
    if crop is not None:
        out = out[crop[0][0]:crop[0][1], crop[1][0]:crop[1][1]]
    cases.append({"name": name, "input": input_path, "output": save(name + ".npy", out),
                  "args": args, "exact": exact, "crop": crop})


coins = io.imread(os.path.join(DATA, "images", "coins.png"))
assert coins.dtype == np.uint8 and coins.shape == (303, 384)
for mode in ["reflect", "mirror", "nearest", "wrap", "constant"]:
    out = ndi.gaussian_filter(coins, 2.0, mode=mode, cval=7)
    case(f"coins_gauss2_{mode}", "shared/data/images/coins.png", out,
         ["--gaussian", "2", "--mode", mode, "--cval", "7"], True)

# Float data: a crop of the camera image as float32 in [0, 1].
camera = io.imread(os.path.join(DATA, "images", "camera.png"))
cam = (camera[128:384, 128:384].astype(np.float32) / 255).astype(np.float32)
save("camera_crop_f32.npy", cam)
case("camera_gauss_1_3_trunc3", "golden:camera_crop_f32.npy",
     ndi.gaussian_filter(cam, (1.0, 3.0), truncate=3.0), ["--gaussian", "1,3", "--truncate", "3"], False)

# The workshop's 15x15 Gaussian kernel (sigma 2), convolved with zero fill.
w = scipy.signal.windows.gaussian(15, 2.0)
k15 = np.outer(w, w)
k15 = (k15 / k15.sum()).astype(np.float32)
save("kernel_gauss15.npy", k15)
case("camera_kernel15_constant", "golden:camera_crop_f32.npy",
     ndi.convolve(cam, k15, mode="constant"), ["--kernel", "golden:kernel_gauss15.npy", "--mode", "constant"], False)

# Even-sized asymmetric kernels: convolve shifts the origin, correlate does not flip.
rng = np.random.default_rng(0)
k46 = rng.normal(size=(4, 6)).astype(np.float32)
save("kernel_4x6.npy", k46)
cell = io.imread(os.path.join(DATA, "images", "cell.png"))
cellf = cell[200:328, 100:260].astype(np.float32)
save("cell_crop_f32.npy", cellf)
case("cell_convolve_4x6_wrap", "golden:cell_crop_f32.npy",
     ndi.convolve(cellf, k46, mode="wrap"), ["--kernel", "golden:kernel_4x6.npy", "--mode", "wrap"], False)
case("cell_correlate_4x6_mirror", "golden:cell_crop_f32.npy",
     ndi.correlate(cellf, k46, mode="mirror"),
     ["--kernel", "golden:kernel_4x6.npy", "--correlate", "--mode", "mirror"], False)

# 3-D volume, per-axis sigma, and a full 3-D kernel with a constant border.
vol = rng.random((20, 24, 28)).astype(np.float32)
save("volume_f32.npy", vol)
case("volume_gauss_nearest", "golden:volume_f32.npy",
     ndi.gaussian_filter(vol, (1.0, 2.0, 0.5), mode="nearest"),
     ["--gaussian", "1,2,0.5", "--mode", "nearest"], False)
k333 = rng.normal(size=(3, 3, 3)).astype(np.float32)
save("kernel_3x3x3.npy", k333)
case("volume_convolve333_constant", "golden:volume_f32.npy",
     ndi.convolve(vol, k333, mode="constant", cval=0.5),
     ["--kernel", "golden:kernel_3x3x3.npy", "--mode", "constant", "--cval", "0.5"], False)

# Detector counts (int32 with -1/-2 masked pixels): integer output truncates.
eiger, _ = read_cbf(os.path.join(DATA, "diffraction", "dlsnxs2cbf_therm_0001.cbf.gz"))
assert eiger.shape == (4362, 4148) and eiger.dtype == np.int32
eiger_out = ndi.gaussian_filter(eiger, 1.5)
for crop in ([[0, 96], [0, 96]], [[2100, 2260], [1990, 2150]], [[4300, 4362], [4080, 4148]]):
    case(f"eiger_gauss1_5_{crop[0][0]}_{crop[1][0]}", "shared/data/diffraction/dlsnxs2cbf_therm_0001.cbf.gz",
         eiger_out, ["--gaussian", "1.5"], True, crop)

# RGB: scipy filters the channel axis too unless its sigma is 0.
astro = io.imread(os.path.join(DATA, "images", "astronaut.png"))
case("astronaut_gauss_2_2_0", "shared/data/images/astronaut.png",
     ndi.gaussian_filter(astro, (2, 2, 0)), ["--gaussian", "2,2,0"], True)

with open(os.path.join(HERE, "MANIFEST.json"), "w") as f:
    json.dump(cases, f, indent=1)
with open(os.path.join(HERE, "versions.txt"), "w") as f:
    f.write(f"python {sys.version.split()[0]}\nnumpy {np.__version__}\nscipy {scipy.__version__}\n"
            f"scikit-image {skimage.__version__}\n")
print(f"{len(cases)} cases written")
