"""Goldens for gpuscope's clip / threshold / label / sources from astropy,
scipy and scikit-image.

Run from the repository root with the shared data beside it:
    python3 tests/golden/segment/make_goldens.py
Writes small .npy inputs and outputs here, MANIFEST.json (array outputs,
run by crates/cli/tests/goldens.rs), expected.json (clip statistics and
catalogues, checked by crates/cli/tests/segment.rs) and versions.txt.
"""
import json
import os

import astropy
import numpy as np
import scipy
import scipy.ndimage as ndi
import skimage
from astropy.stats import sigma_clipped_stats
from skimage import color, data as skdata, io, measure

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "..", "..", "..", "shared", "data", "images")

cases = []
expected = {}


def save(name, array):
    np.save(os.path.join(HERE, name), array)
    return name


def case(name, command, input_spec, out, args):
    assert out.dtype in (np.int32, np.bool_), out.dtype
    cases.append({"name": name, "command": command, "input": input_spec,
                  "output": save(name + ".npy", out), "args": args,
                  "exact": True, "gpu_exact": True, "crop": None})


def scipy_label(mask, connectivity):
    structure = ndi.generate_binary_structure(mask.ndim, connectivity)
    labels, n = ndi.label(mask, structure=structure)
    assert labels.dtype == np.int32
    return labels, n


# --- the workshop image: Hubble deep field, grey, float32 crop ---------------
rgb = io.imread(os.path.join(DATA, "hubble_deep_field.jpg"))
grey = color.rgb2gray(rgb).astype(np.float32)[300:556, 400:720]
save("hubble_grey_f32.npy", grey)

clip_cases = {
    "astropy_default": dict(kw=dict(sigma=3.0, maxiters=5), args=[]),
    "until_convergence": dict(kw=dict(sigma=3.0, maxiters=None), args=["--maxiters", "none"]),
    "mean_2_5": dict(kw=dict(sigma=2.5, maxiters=None, cenfunc="mean"),
                     args=["--sigma", "2.5", "--maxiters", "none", "--cenfunc", "mean"]),
    "asymmetric": dict(kw=dict(sigma_lower=4.0, sigma_upper=2.0, maxiters=10),
                       args=["--sigma-lower", "4", "--sigma-upper", "2", "--maxiters", "10"]),
}
expected["clip"] = []
for name, c in clip_cases.items():
    from astropy.stats import SigmaClip
    sc = SigmaClip(**c["kw"])
    clipped = sc(grey, masked=True, return_bounds=False)
    n_kept = int((~clipped.mask).sum())
    mean, median, std = sigma_clipped_stats(grey, **c["kw"])
    expected["clip"].append({"name": name, "input": "hubble_grey_f32.npy", "args": c["args"],
                             "mean": float(mean), "median": float(median), "std": float(std),
                             "n_kept": n_kept})


def workshop_clip(d, sigma=3.0):
    """The workshop's CuPy loop, in numpy: strict comparisons until stable."""
    d = d[np.isfinite(d)].ravel()
    iterations = 0
    while True:
        m = np.median(d)
        s = np.std(d)
        keep = (d > m - sigma * s) & (d < m + sigma * s)
        if keep.sum() == d.size:
            break
        d = d[keep]
        iterations += 1
    return d


w = workshop_clip(grey)
expected["clip"].append({"name": "workshop", "input": "hubble_grey_f32.npy", "args": ["--workshop"],
                         "mean": float(np.mean(w, dtype=np.float64)), "median": float(np.median(w)),
                         "std": float(np.std(w, dtype=np.float64)), "n_kept": int(w.size)})

# threshold --nsigma 5: median + 5 std (astropy's defaults); --workshop: > 5 std.
mean, median, std = sigma_clipped_stats(grey, sigma=3.0, maxiters=5)
case("hubble_threshold_nsigma5", "threshold", "golden:hubble_grey_f32.npy",
     grey > np.float64(median) + 5 * np.float64(std), ["--nsigma", "5"])
ws = np.std(w)
mask_w = grey > 5 * np.float64(ws)
case("hubble_threshold_workshop5", "threshold", "golden:hubble_grey_f32.npy", mask_w,
     ["--nsigma", "5", "--workshop"])

# sources: the workshop chain, catalogue from skimage.regionprops.
labels_w, n_w = scipy_label(mask_w, 1)
case("hubble_label_workshop", "label", "golden:hubble_threshold_workshop5.npy", labels_w, [])
props = measure.regionprops(labels_w, intensity_image=grey)
expected["sources_workshop"] = {
    "input": "hubble_grey_f32.npy", "args": ["--nsigma", "5", "--workshop"],
    "n_sources": int(n_w),
    "regions": [{"label": int(p.label), "area": int(p.area), "bbox": [int(v) for v in p.bbox],
                 "centroid": [float(v) for v in p.centroid],
                 "centroid_weighted": [float(v) for v in p.centroid_weighted],
                 "intensity_mean": float(p.intensity_mean), "intensity_max": float(p.intensity_max),
                 "intensity_min": float(p.intensity_min)}
                for p in props],
}

# --- coins and cell (microscopy), thresholded, half / third resolution -------
coins = io.imread(os.path.join(DATA, "coins.png"))[::2, ::2]
coins_mask = coins > 100
save("coins_mask.npy", coins_mask)
for c in (1, 2):
    labels, n = scipy_label(coins_mask, c)
    sk = measure.label(coins_mask, connectivity=c)
    assert np.array_equal(sk, labels), "skimage and scipy number alike"
    case(f"coins_label_c{c}", "label", "golden:coins_mask.npy", labels,
         ["--connectivity", str(c)])
# scikit-image's background option: the zeros are the objects.
sk = measure.label(coins_mask.astype(np.uint8), background=1, connectivity=2).astype(np.int32)
case("coins_label_background1", "label", "golden:coins_mask.npy", sk,
     ["--connectivity", "2", "--background", "1"])

cell = io.imread(os.path.join(DATA, "cell.png"))[::3, ::3]
cell_mask = (cell > 120).astype(np.uint8)
save("cell_mask_u8.npy", cell_mask)
labels, _ = scipy_label(cell_mask, 2)
case("cell_label_c2", "label", "golden:cell_mask_u8.npy", labels, ["--connectivity", "2"])

# --- 3-D: binary blobs 32^3, every connectivity ------------------------------
blobs = skimage.data.binary_blobs(32, blob_size_fraction=0.2, n_dim=3, volume_fraction=0.3, rng=2)
save("blobs3d_u8.npy", blobs.astype(np.uint8))
for c in (1, 2, 3):
    labels, _ = scipy_label(blobs, c)
    case(f"blobs3d_label_c{c}", "label", "golden:blobs3d_u8.npy", labels, ["--connectivity", str(c)])

with open(os.path.join(HERE, "MANIFEST.json"), "w") as f:
    json.dump(cases, f, indent=1)
with open(os.path.join(HERE, "expected.json"), "w") as f:
    json.dump(expected, f, indent=1)
with open(os.path.join(HERE, "versions.txt"), "w") as f:
    f.write(f"numpy {np.__version__}\nscipy {scipy.__version__}\n"
            f"scikit-image {skimage.__version__}\nastropy {astropy.__version__}\n")
