"""gpuscope.stats against astropy and gpuscope.tomo against Mantid
Imaging's definition (scipy's median) and tomopy's."""

import numpy as np
import pytest
import scipy.ndimage as ndi
from astropy.stats import sigma_clipped_stats as astropy_stats

from gpuscope.stats import sigma_clipped_stats
from gpuscope.tomo import remove_outliers
from conftest import GOLDEN, golden

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
    with pytest.raises(TypeError):
        sigma_clipped_stats(IMAGE, std_ddof=1.5)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", ["all nan", "empty", "nan where unmasked", "all masked",
                                  "all mask_value", "masked array", "ddof 1", "ddof 2 of 2",
                                  "ddof 3 of 2", "ddof with mask_value"])
def test_sigma_clipped_stats_edges_as_astropy(engine, case):
    x = IMAGE[:40, :50].astype(np.float64)
    args, kw = {
        "all nan": ((np.full(10, np.nan, np.float32),), {}),
        "empty": ((np.array([], np.float32),), {}),
        "nan where unmasked": ((np.array([np.nan, 1.0]),), {"mask": np.array([False, True])}),
        "all masked": ((x,), {"mask": np.ones(x.shape, bool)}),
        "all mask_value": ((np.full(7, 5.0),), {"mask_value": 5.0}),
        "masked array": ((np.ma.MaskedArray([1.0, 2.0, 3.0], [True, True, True]),), {}),
        "ddof 1": ((x,), {"std_ddof": 1}),
        "ddof 2 of 2": ((np.array([1.0, 2.0]),), {"std_ddof": 2}),
        "ddof 3 of 2": ((np.array([1.0, 2.0]),), {"std_ddof": 3}),
        "ddof with mask_value": ((np.array([1.0, 2.0, 3.0, 7.0]),),
                                 {"mask_value": 1.0, "std_ddof": 1}),
    }[case]
    got = sigma_clipped_stats(*args, **kw)
    want = astropy_stats(*args, **kw)
    assert len(got) == 3
    for g, w in zip(got, want):
        if w is np.ma.masked:
            assert g is np.ma.masked, (case, got, want)
        elif np.isnan(w):
            assert np.isnan(g), (case, got, want)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=case)


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


def tomopy_normalize(arr, flat, dark, cutoff=None, averaging="mean"):
    """tomopy.prep.normalize.normalize written out (its numexpr steps are
    float32 numpy here): fields averaged along axis 0 in float32, the
    denominator floored at 1e-6, the cutoff as a minimum."""
    arr = arr.astype(np.float32)
    if averaging == "mean":
        flat = np.mean(flat, axis=0, dtype=np.float32)
        dark = np.mean(dark, axis=0, dtype=np.float32)
    else:
        flat = np.median(flat, axis=0).astype(np.float32)
        dark = np.median(dark, axis=0).astype(np.float32)
    l = np.float32(1e-6)
    denom = flat - dark
    denom = np.where(denom < l, l, denom)
    out = (arr - dark) / denom
    if cutoff is not None:
        out = np.where(out > np.float32(cutoff), np.float32(cutoff), out)
    return out


def _nxtomo():
    fixtures = GOLDEN.parents[1] / "crates" / "io" / "tests" / "fixtures" / "hdf5"
    data = np.load(fixtures / "nxtomo.npy")
    key = np.load(fixtures / "nxtomo_image_key.npy")
    return data[key == 0], data[key == 1], data[key == 2]


@pytest.mark.parametrize("kw", [{}, {"cutoff": 1.2}, {"averaging": "median"}])
def test_normalize_is_tomopys(engine, kw):
    from gpuscope.tomo import normalize

    proj, flat, dark = _nxtomo()
    want = tomopy_normalize(proj, flat, dark, **kw)
    got = normalize(proj, flat, dark, **kw)
    assert got.dtype == np.float32 and got.shape == want.shape
    if engine == "cpu":
        np.testing.assert_array_equal(got, want)
    else:
        # WGSL's float32 division: within 2.5 ULP of the exact quotient.
        np.testing.assert_array_max_ulp(got, want, maxulp=3)


def test_normalize_edge_cases(engine):
    from gpuscope.tomo import normalize

    proj, flat, dark = _nxtomo()
    # Dark above flat: the floored denominator; NaN flats give NaN; one 2-D
    # projection and 2-D fields; int and float64 inputs; inf cutoff = none.
    flat = flat.astype(np.float64)
    flat[:, 0, 0] = int(dark[0, 0, 0]) - 5
    flat[1, 2, 3] = np.nan
    want = tomopy_normalize(proj, flat, dark)
    got = normalize(proj, flat, dark, cutoff=np.inf)
    assert np.isnan(got[:, 2, 3]).all()
    np.testing.assert_array_max_ulp(np.nan_to_num(got), np.nan_to_num(want), maxulp=3)
    one = normalize(proj[0], flat[0], dark[0])
    np.testing.assert_array_max_ulp(
        np.nan_to_num(one), np.nan_to_num(tomopy_normalize(proj[0][None], flat[:1], dark[:1])[0]), maxulp=3
    )
    out = np.empty(proj.shape, np.float32)
    assert normalize(proj, flat, dark, out=out) is out


def test_normalize_errors(engine):
    from gpuscope.tomo import normalize

    proj, flat, dark = _nxtomo()
    with pytest.raises(ValueError, match="pixels"):
        normalize(proj, flat[:, :3], dark)
    with pytest.raises(ValueError, match="2-D projection"):
        normalize(proj[0, 0], flat, dark)
    with pytest.raises(ValueError, match="averaging"):
        normalize(proj, flat, dark, averaging="mode")
    with pytest.raises(ValueError):
        normalize(proj, flat, dark, cutoff=np.nan)
    with pytest.raises(TypeError):
        normalize(proj.astype(np.complex64), flat, dark)


def test_quantities_keep_their_unit():
    import astropy.units as u
    for data, kw in [([1, 1] * u.kpc, {}), (np.array([1.0, 2, 3, 100]) * u.m, {"mask_value": 3 * u.m}),
                     (np.array([1.0, 2, 3, 100, 2.5]) * u.s, {"sigma": 2})]:
        got = sigma_clipped_stats(data, **kw)
        want = astropy_stats(data, **kw)
        for g, w in zip(got, want):
            assert isinstance(g, u.Quantity) and g.unit == w.unit
            np.testing.assert_allclose(g.value, w.value, rtol=1e-6)
