"""Goldens of `gpuscope slic` from skimage.segmentation.slic.

Small cases where gpuscope's labels equal scikit-image's exactly (checked
on the CPU twin and on lavapipe). On large images a few pixels differ
(skimage works in float64 on 8-bit and float64 input, gpuscope in float32:
distances within a few float32 ulps of each other can go the other way),
which bench/slic_quality.py measures with superpixel metrics instead. Labels stored as int32
(skimage returns intp). Run from this folder: python3 make_goldens.py
"""
import json, os
import numpy as np
import scipy, skimage
from skimage.data import binary_blobs
from skimage import io
from skimage.segmentation import slic

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES = os.path.join(HERE, "..", "..", "..", "..", "shared", "data", "images")
cases = []


def case(name, img_name, img, kw, args):
    path = os.path.join(HERE, img_name)
    if not os.path.exists(path):
        np.save(path, img)
    lab = slic(img, **kw).astype(np.int32)
    np.save(os.path.join(HERE, f"{name}.npy"), lab)
    cases.append(dict(name=name, command="slic", input=f"golden:{img_name}", output=f"{name}.npy",
                      args=args, exact=True, gpu_exact=True, crop=None))


b32 = binary_blobs(32, n_dim=3, rng=2).astype(np.float32)
n = 32 ** 3 // 125
base = ["--n-segments", str(n), "--compactness", "1", "--max-num-iter", "5", "--channel-axis", "none"]
kw = dict(n_segments=n, compactness=1, max_num_iter=5, channel_axis=None)
case("blobs32_slic", "blobs32_f32.npy", b32, kw, base)
case("blobs32_slic_noenforce", "blobs32_f32.npy", b32, dict(kw, enforce_connectivity=False),
     base + ["--no-enforce-connectivity"])
case("blobs32_slic_start0", "blobs32_f32.npy", b32, dict(kw, start_label=0), base + ["--start-label", "0"])
case("blobs32_slic_spacing", "blobs32_f32.npy", b32, dict(kw, spacing=[2, 1, 1]),
     base + ["--spacing", "2,1,1"])
b2 = binary_blobs(96, n_dim=2, rng=3).astype(np.float32)
case("blobs96_2d_slic", "blobs96_2d_f32.npy", b2, dict(n_segments=60, compactness=0.5, channel_axis=None),
     ["--n-segments", "60", "--compactness", "0.5", "--channel-axis", "none"])
case("blobs96_2d_slico", "blobs96_2d_f32.npy", b2,
     dict(n_segments=60, compactness=0.5, channel_axis=None, slic_zero=True),
     ["--n-segments", "60", "--compactness", "0.5", "--channel-axis", "none", "--slic-zero"])
coins = io.imread(os.path.join(IMAGES, "coins.png"))[100:196, 100:228].astype(np.float32)
case("coins_crop_slic", "coins_crop_f32.npy", coins, dict(n_segments=80, compactness=0.1, channel_axis=None),
     ["--n-segments", "80", "--compactness", "0.1", "--channel-axis", "none"])
ast = io.imread(os.path.join(IMAGES, "astronaut.png"))[50:146, 150:278]
case("astronaut_crop_slic", "astronaut_crop_u8.npy", ast, dict(n_segments=40, compactness=10),
     ["--n-segments", "40"])

# scikit-image's gallery example, full size: centres drift more than half
# a grid step (astronaut.png is skimage.data.astronaut()).
full = io.imread(os.path.join(IMAGES, "astronaut.png"))
lab = slic(full, n_segments=100, compactness=10).astype(np.int32)
np.save(os.path.join(HERE, "astronaut_slic_gallery.npy"), lab)
cases.append(dict(name="astronaut_slic_gallery", command="slic", input="shared/data/images/astronaut.png",
                  output="astronaut_slic_gallery.npy", args=["--n-segments", "100", "--compactness", "10"],
                  exact=True, gpu_exact=True, crop=None))

# Masks: seeds from skimage's _get_mask_centroids (numpy's RandomState(123),
# scipy's kmeans2), which gpuscope reproduces bit for bit.
m2 = np.zeros(b2.shape, np.uint8)
m2[10:80, 5:70] = 1
np.save(os.path.join(HERE, "blobs96_2d_mask.npy"), m2)
case("blobs96_2d_slic_mask", "blobs96_2d_f32.npy", b2,
     dict(n_segments=30, compactness=0.5, channel_axis=None, mask=m2.astype(bool)),
     ["--n-segments", "30", "--compactness", "0.5", "--channel-axis", "none",
      "--mask", "golden:blobs96_2d_mask.npy"])
g = np.indices(b32.shape) - 16.0
r2 = (g ** 2).sum(axis=0)
m3 = ((r2 < 256) & (r2 > 256 / 6)).astype(np.uint8)
np.save(os.path.join(HERE, "blobs32_mask.npy"), m3)
case("blobs32_slic_mask", "blobs32_f32.npy", b32, dict(kw, n_segments=80, mask=m3.astype(bool)),
     ["--n-segments", "80", "--compactness", "1", "--max-num-iter", "5", "--channel-axis", "none",
      "--mask", "golden:blobs32_mask.npy"])

with open(os.path.join(HERE, "MANIFEST.json"), "w") as f:
    json.dump(cases, f, indent=1)
with open(os.path.join(HERE, "versions.txt"), "w") as f:
    f.write(f"numpy {np.__version__}\nscipy {scipy.__version__}\nscikit-image {skimage.__version__}\n")
