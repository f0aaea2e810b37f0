"""gpuscope.stats against astropy and gpuscope.tomo against Mantid
Imaging's definition (scipy's median) and tomopy's."""

import numpy as np
import pytest
import scipy.ndimage as ndi
from astropy.stats import sigma_clipped_stats as astropy_stats

from gpuscope.stats import sigma_clipped_stats
from gpuscope.tomo import remove_outliers
from conftest import golden

IMAGE = golden("segment", "hubble_grey_f32.npy")


@pytest.mark.parametrize(
    "kw",
    [{}, {"maxiters": None}, {"sigma": 2.5, "maxiters": None, "cenfunc": "mean"},
     {"sigma_lower": 2, "sigma_upper": 4}],
)
def test_sigma_clipped_stats(engine, kw):
    got = sigma_clipped_stats(IMAGE, **kw)
    want = astropy_stats(IMAGE, **kw)
    # The goldens' tolerance: 1e-6 relative (float32 data clipped in float32 on the GPU).
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_sigma_clipped_stats_masks(engine):
    data = IMAGE.copy()
    data[:5] = np.nan
    mask = np.zeros(data.shape, bool)
    mask[:, :7] = True
    got = sigma_clipped_stats(data, mask=mask, mask_value=0.0)
    want = astropy_stats(data, mask=mask, mask_value=0.0)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_sigma_clipped_stats_errors(engine):
    with pytest.raises(ValueError):
        sigma_clipped_stats(IMAGE, sigma=-1)
    with pytest.raises(ValueError):
        sigma_clipped_stats(IMAGE, cenfunc="mode")
    with pytest.raises(NotImplementedError):
        sigma_clipped_stats(IMAGE, axis=0)
    with pytest.raises(ValueError):
        sigma_clipped_stats(np.full(10, np.nan, np.float32))


def mantid(data, diff, size, mode):
    """Mantid Imaging's outlier removal, slice by slice, from its
    definition."""
    out = data.copy()
    for i in range(data.shape[0]):
        s = data[i]
        med = ndi.median_filter(s, size=size, mode="reflect")
        d = s.astype(np.float64) - med
        if mode == "bright":
            hit = d > diff
        elif mode == "dark":
            hit = -d > diff
        elif mode == "both":
            hit = np.abs(d) > diff
        else:
            hit = d >= diff
        out[i] = np.where(hit, med, s)
    return out


@pytest.mark.parametrize("mode", ["bright", "dark", "both", "tomopy"])
def test_remove_outliers(engine, mode):
    rng = np.random.default_rng(3)
    stack = rng.integers(900, 1100, (3, 20, 24)).astype(np.uint16)
    stack[rng.random(stack.shape) < 0.03] = 4000
    stack[rng.random(stack.shape) < 0.03] = 10
    got = remove_outliers(stack, 150, mode=mode)
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got, mantid(stack, 150, 3, mode))
    out = np.empty_like(stack)
    assert remove_outliers(stack, 150, size=5, mode=mode, output=out) is out
    np.testing.assert_array_equal(out, mantid(stack, 150, 5, mode))


def test_remove_outliers_errors(engine):
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError):
        remove_outliers(x, 0)
    with pytest.raises(ValueError):
        remove_outliers(x, 1, mode="grey")
