"""Golden outputs for `gpuscope median` and `gpuscope outliers`.

Run from the repository root with the shared data beside it:
    python3 tests/golden/median/make_goldens.py
References:
- median: scipy.ndimage.median_filter (exact: the output is one of the inputs).
- NaN: Mantid Imaging's rule (NaN neighbours taken as -inf, NaN elements
  restored), composed here with numpy around scipy.
- outliers: Mantid Imaging's remove_outlier composed from scipy
  (median_filter(size, mode='reflect') per 2-D slice, then np.where with a
  strict comparison; tomopy's variant with >=). Differences are computed in
  the input's float dtype, and in float64 for integer data (numpy would wrap
  around for unsigned dtypes; gpuscope does not, on purpose).
Every case is checked exactly, on the GPU and with --cpu, by
crates/cli/tests/goldens.rs. Library versions go to versions.txt here.
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
DATA = os.path.join(HERE, "..", "..", "..", "..", "shared", "data")
sys.path.insert(0, os.path.join(DATA, "..", "tools"))
from cbf import read_cbf  # noqa: E402  the shared reference reader

cases = []


def save(name, array):
    np.save(os.path.join(HERE, name), array)
    return name


def case(name, input_path, out, args, command="median"):
    cases.append({"name": name, "command": command, "input": input_path,
                  "output": save(name + ".npy", out), "args": args,
                  "exact": True, "gpu_exact": True, "crop": None})


def mantid_median(x, **kw):
    """Mantid Imaging's NaN rule around scipy's median."""
    if x.dtype.kind != "f":
        return ndi.median_filter(x, **kw)
    nan = np.isnan(x)
    out = ndi.median_filter(np.where(nan, -np.inf, x).astype(x.dtype), **kw)
    out[nan] = np.nan
    return out


def outliers(x, diff, size, mode):
    size3 = (1, size, size) if x.ndim == 3 else size
    med = mantid_median(x, size=size3, mode="reflect")
    xf, mf = (x, med) if x.dtype.kind == "f" else (x.astype(np.float64), med.astype(np.float64))
    if mode == "tomopy":
        replace = xf - mf >= diff
    else:
        bright = xf - mf > diff
        dark = mf - xf > diff
        replace = {"bright": bright, "dark": dark, "both": bright | dark}[mode]
    return np.where(replace, med, x).astype(x.dtype)


coins = io.imread(os.path.join(DATA, "images", "coins.png"))
assert coins.dtype == np.uint8
COINS = "shared/data/images/coins.png"
for size, mode in [(3, "reflect"), (7, "nearest"), (4, "mirror"), (5, "wrap")]:
    case(f"coins_median{size}_{mode}", COINS, ndi.median_filter(coins, size=size, mode=mode),
         ["--size", str(size), "--mode", mode])
case("coins_median5x3_constant", COINS,
     ndi.median_filter(coins, size=(5, 3), mode="constant", cval=7),
     ["--size", "5,3", "--mode", "constant", "--cval", "7"])
# 9x9 = 81 elements: the bitwise-search kernel, not a sorting network.
case("coins_median9_reflect", COINS, ndi.median_filter(coins, size=9),
     ["--size", "9"])
cross = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=np.uint8)
save("footprint_cross.npy", cross)
case("coins_median_cross", COINS, ndi.median_filter(coins, footprint=cross.astype(bool)),
     ["--footprint", "golden:footprint_cross.npy"])

# float32 with NaN and infinities: a camera crop in [0, 1].
cam = io.imread(os.path.join(DATA, "images", "camera.png"))[100:228, 200:328]
camf = (cam / 255.0).astype(np.float32)
camf[::17, ::13] = np.nan
camf[5, 5] = np.inf
camf[60, 61] = -np.inf
save("camera_nan_f32.npy", camf)
for size, mode in [(3, "reflect"), (6, "constant")]:
    case(f"camera_nan_median{size}_{mode}", "golden:camera_nan_f32.npy",
         mantid_median(camf, size=size, mode=mode, cval=0.25),
         ["--size", str(size), "--mode", mode, "--cval", "0.25"])

# float64 values closer together than float32 resolution.
camd = 1.0 + cam.astype(np.float64) * 1e-12
save("camera_f64.npy", camd)
case("camera_f64_median5", "golden:camera_f64.npy", ndi.median_filter(camd, size=5),
     ["--size", "5"])

# The Eiger frame (int32 counts, -1/-2 in gaps): a crop around the beam.
eiger, _ = read_cbf(os.path.join(DATA, "diffraction", "dlsnxs2cbf_therm_0001.cbf.gz"))
crop = np.ascontiguousarray(eiger[2000:2160, 1950:2110]).astype(np.int32)
save("eiger_crop_i32.npy", crop)
case("eiger_median3", "golden:eiger_crop_i32.npy", ndi.median_filter(crop, size=3),
     ["--size", "3"])

# Small synthetic stacks of the other dtypes, 3-D footprints and per-slice.
rng = np.random.default_rng(3)
for dtype, lo, hi in [(np.uint16, 0, 65535), (np.int16, -32768, 32767),
                      (np.uint32, 0, 2**32 - 1), (np.int32, -2**31, 2**31 - 1)]:
    name = np.dtype(dtype).name
    v = rng.integers(lo, hi, size=(6, 20, 24), endpoint=True).astype(dtype)
    save(f"stack_{name}.npy", v)
    case(f"stack_{name}_median3_mirror", f"golden:stack_{name}.npy",
         ndi.median_filter(v, size=3, mode="mirror"), ["--size", "3", "--mode", "mirror"])
    case(f"stack_{name}_median1x5x5", f"golden:stack_{name}.npy",
         ndi.median_filter(v, size=(1, 5, 5)), ["--size", "1,5,5"])
vf = rng.normal(size=(5, 16, 18)).astype(np.float32)
save("stack_float32.npy", vf)
case("stack_float32_median3x3x3_wrap", "golden:stack_float32.npy",
     ndi.median_filter(vf, size=3, mode="wrap"), ["--size", "3", "--mode", "wrap"])

# Outlier removal: camera as float32 with hot and dead pixels, every mode.
hot = (cam / 255.0).astype(np.float32)
hot[rng.integers(0, 128, 40), rng.integers(0, 128, 40)] = 1.0
hot[rng.integers(0, 128, 40), rng.integers(0, 128, 40)] = 0.0
save("camera_hot_f32.npy", hot)
for mode in ["bright", "dark", "both", "tomopy"]:
    case(f"camera_outliers_{mode}", "golden:camera_hot_f32.npy",
         outliers(hot, 0.2, 3, mode), ["--diff", "0.2", "--mode", mode], command="outliers")
case("camera_outliers_size5", "golden:camera_hot_f32.npy", outliers(hot, 0.1, 5, "both"),
     ["--diff", "0.1", "--size", "5", "--mode", "both"], command="outliers")
# A uint16 stack: per-slice median, exact integer differences (no wrap-around).
st = (rng.random((4, 24, 20)) * 1000).astype(np.uint16)
st[rng.integers(0, 4, 30), rng.integers(0, 24, 30), rng.integers(0, 20, 30)] = 60000
st[rng.integers(0, 4, 30), rng.integers(0, 24, 30), rng.integers(0, 20, 30)] = 0
save("stack_hot_uint16.npy", st)
for mode in ["bright", "dark"]:
    case(f"stack_uint16_outliers_{mode}", "golden:stack_hot_uint16.npy",
         outliers(st, 500, 3, mode), ["--diff", "500", "--mode", mode], command="outliers")
case("eiger_outliers_both", "golden:eiger_crop_i32.npy", outliers(crop, 50, 3, "both"),
     ["--diff", "50", "--mode", "both"], command="outliers")

with open(os.path.join(HERE, "MANIFEST.json"), "w") as f:
    json.dump(cases, f, indent=1)
with open(os.path.join(HERE, "versions.txt"), "w") as f:
    f.write(f"numpy {np.__version__}\nscipy {scipy.__version__}\n"
            f"scikit-image {skimage.__version__}\npython {sys.version.split()[0]}\n")
print(f"{len(cases)} cases")
