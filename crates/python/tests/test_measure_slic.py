"""gpuscope.measure against scikit-image's regionprops_table and
gpuscope.segmentation against skimage.segmentation.slic."""

import numpy as np
import pytest
import scipy.ndimage as ndi
from skimage.measure import regionprops_table as sk_table
from skimage.segmentation import slic as sk_slic

import gpuscope
from gpuscope.measure import regionprops_table
from gpuscope.segmentation import slic
from conftest import golden

PROPS = ("label", "area", "bbox", "centroid", "centroid_weighted",
         "intensity_mean", "intensity_max", "intensity_min")


def test_regionprops_table(engine):
    image = golden("segment", "hubble_grey_f32.npy")
    labels = golden("segment", "hubble_label_workshop.npy")
    got = regionprops_table(labels, image, properties=PROPS)
    want = sk_table(labels, image, properties=PROPS)
    assert list(got) == list(want)
    for name, col in want.items():
        if name.startswith(("label", "bbox", "area")):
            np.testing.assert_array_equal(got[name], col, err_msg=name)
        else:
            # scikit-image averages a float32 image in float32 (numpy's
            # pairwise sums); the GPU sums in float32 too.
            tol = 1e-6 if engine == "cpu" else 1e-5
            np.testing.assert_allclose(got[name], col, rtol=tol, atol=tol, err_msg=name)


def test_regionprops_3d_and_old_names(engine):
    vol = golden("segment", "blobs3d_u8.npy")
    labels, _ = ndi.label(vol)
    got = regionprops_table(labels, vol.astype(np.float32), properties=("label", "bbox", "mean_intensity"))
    want = sk_table(labels, vol.astype(np.float32), properties=("label", "bbox", "mean_intensity"))
    assert list(got) == list(want)
    for name, col in want.items():
        np.testing.assert_allclose(got[name], col, rtol=1e-6, err_msg=name)
    with pytest.raises(AttributeError):
        regionprops_table(labels, properties=("intensity_mean",))
    with pytest.raises(AttributeError):
        regionprops_table(labels, properties=("perimeter",))


SLIC_CASES = [
    ("blobs32_f32.npy", dict(n_segments=262, compactness=1, max_num_iter=5, channel_axis=None)),
    ("blobs32_f32.npy", dict(n_segments=262, compactness=1, max_num_iter=5, channel_axis=None,
                             spacing=(2, 1, 1), start_label=0)),
    ("blobs96_2d_f32.npy", dict(n_segments=60, compactness=0.5, channel_axis=None, slic_zero=True)),
    ("astronaut_crop_u8.npy", dict(n_segments=40)),
]


@pytest.mark.parametrize("name, kw", SLIC_CASES)
def test_slic_exact(engine, name, kw):
    image = golden("slic", name)
    got = slic(image, **kw)
    want = sk_slic(image, **kw)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def masked_case():
    image = golden("slic", "blobs96_2d_f32.npy")
    mask = np.zeros(image.shape, bool)
    mask[10:80, 5:70] = True
    return image, mask, dict(n_segments=30, compactness=0.5, channel_axis=None, mask=mask)


def test_slic_mask(engine):
    """Masked pixels get label 0, every other one a superpixel; the GPU
    and the CPU reference agree."""
    image, mask, kw = masked_case()
    got = slic(image, **kw)
    assert (got[~mask] == 0).all() and (got[mask] > 0).all()
    gpuscope.set_device("cpu")
    np.testing.assert_array_equal(got, slic(image, **kw))


@pytest.mark.xfail(strict=True, reason="the core seeds a masked image on the regular grid inside the mask; "
                   "scikit-image places the seeds by k-means of the mask's coordinates (scipy kmeans2)")
def test_slic_mask_as_skimage():
    image, _, kw = masked_case()
    np.testing.assert_array_equal(slic(image, **kw), sk_slic(image, **kw))
