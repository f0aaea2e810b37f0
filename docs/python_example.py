# %% [markdown]
# # gpuscope from Python: two worked examples
#
# A notebook in plain Python (cells marked `# %%`: Jupyter, VS Code and
# jupytext open it as a notebook); the Python tests run it from top to
# bottom (crates/python/tests/test_docs_example.py). It reads the shared
# sample data beside the repository (`../shared/data`), or the path in the
# environment variable `GPUSCOPE_DATA`.
#
# 1. The radio-astronomy workshop's source finding on the Hubble eXtreme
#    Deep Field: background by sigma clipping, sources above it, labelled
#    and measured, first step by step, then as one GPU-resident chain.
# 2. Tomography: bright outliers (zingers, dead-pixel spikes) removed from a
#    stack of projections, as Mantid Imaging does.

# %%
import os
import pathlib

import numpy as np

import gpuscope
from gpuscope import measure, ndimage, stats, tomo

here = pathlib.Path(__file__).resolve().parent if "__file__" in globals() else pathlib.Path.cwd()
data = pathlib.Path(os.environ.get("GPUSCOPE_DATA", here.parent.parent / "shared" / "data"))
print(gpuscope.device()["name"])

# %% [markdown]
# ## 1. Source finding
#
# The image: the deep field's luminance (Rec. 601 weights) as float32.

# %%
rgb = gpuscope.io.read(data / "images" / "hubble_deep_field.jpg")
sky = (rgb.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32))
print(sky.shape, sky.dtype)

# %% [markdown]
# The background's level and noise by kappa-sigma clipping (astropy's
# `sigma_clipped_stats`), then everything 5 standard deviations above
# the median, its connected regions and their measurements.

# %%
mean, median, std = stats.sigma_clipped_stats(sky, sigma=3, maxiters=10)
labels, n = ndimage.label(sky > median + 5 * std)
table = measure.regionprops_table(labels, sky, properties=("label", "area", "centroid", "intensity_sum"))
brightest = np.argsort(table["intensity_sum"])[::-1][:5]
print(f"background {median:.2f} ± {std:.2f}; {n} sources")
for i in brightest:
    print(f"  source {table['label'][i]}: {table['area'][i]} pixels at "
          f"({table['centroid-0'][i]:.1f}, {table['centroid-1'][i]:.1f}), flux {table['intensity_sum'][i]:.0f}")

# %% [markdown]
# The same chain on one upload: the image crosses the bus once to the GPU,
# the labels and the measurements once back (`gpuscope.bus_bytes()` counts
# the bytes).

# %%
chain = (gpuscope.Pipeline().sigma_clip(sigma=3, maxiters=10).threshold(nsigma=5)
         .label().regionprops_table(properties=("label", "area", "centroid", "intensity_sum")))
before = gpuscope.bus_bytes()
found = chain.run(sky)
after = gpuscope.bus_bytes()
print(f"{found['num_features']} sources; {after[0] - before[0]} bytes up, {after[1] - before[1]} down "
      f"(the image is {sky.nbytes})")
assert found["num_features"] == n
assert np.array_equal(found["labels"], labels)
assert np.array_equal(found["table"]["area"], table["area"])

# %% [markdown]
# Any other chain keeps its arrays on the GPU with device arrays (as CuPy
# users do): here the image is smoothed before the threshold, and only the
# table comes back. Without a GPU adapter, device arrays are not offered.

# %%
if gpuscope.device()["name"] != "cpu":
    d = gpuscope.asarray(sky)
    smooth = ndimage.gaussian_filter(d, 1.0)
    d_labels, d_n = ndimage.label(smooth > median + 5 * std)
    d_table = measure.regionprops_table(d_labels, smooth, properties=("label", "area"))
    print(f"{d_n} smoothed sources, the largest {d_table['area'].max()} pixels")
    want, want_n = ndimage.label(ndimage.gaussian_filter(sky, 1.0) > median + 5 * std)
    assert d_n == want_n and np.array_equal(d_labels.get(), want)

# %% [markdown]
# ## 2. Tomography: outliers of a projection stack
#
# A synthetic stack of 8 uint16 projections (a smooth object over a flat
# field, Poisson noise) with 200 zingers: single pixels far brighter than
# their neighbours.

# %%
rng = np.random.default_rng(7)
yy, xx = np.mgrid[:256, :256]
obj = 3000 * np.exp(-((yy - 128) ** 2 + (xx - 128) ** 2) / (2 * 60.0 ** 2))
stack = rng.poisson(1000 + obj, (8, 256, 256)).astype(np.uint16)
z, r, c = (rng.integers(0, s, 200) for s in stack.shape)
stack[z, r, c] += 20000

# %% [markdown]
# `remove_outliers` replaces a pixel by the median of its 3x3 neighbourhood
# (in its own projection) where it exceeds that median by more than `diff`
# ('bright'; 'dark' and 'both' too, and tomopy's rule as 'tomopy').

# %%
clean = tomo.remove_outliers(stack, diff=1000, size=3, mode="bright")
changed = clean != stack
print(f"{np.count_nonzero(changed)} pixels replaced; the zingers' largest value now {clean[z, r, c].max()}")
assert changed[z, r, c].all()
assert clean.dtype == np.uint16 and clean.max() < 6000
