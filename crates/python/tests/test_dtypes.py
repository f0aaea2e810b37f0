"""Every dtype through the paths that read numpy arrays in place and
convert on threads (arrays from 2**18 elements are converted on several
threads, smaller ones on one): answers equal to scipy, scikit-image and
astropy, the extremes of each integer dtype included."""

import numpy as np
import pytest
import scipy.ndimage as ndi
from skimage.measure import regionprops_table as sk_table

from gpuscope import measure, ndimage as gn
from gpuscope.stats import sigma_clipped_stats
from gpuscope.tomo import remove_outliers
from conftest import assert_integer_sums

INTS = [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64, np.int64]
DTYPES = INTS + [np.float32, np.float64]
# Below and above the size from which conversions use threads.
SHAPES = [(37, 41), (600, 520)]


def mantid(data, diff, size, mode):
    """Mantid Imaging's outlier removal, slice by slice, from its
    definition (differences in float64, exact for these inputs)."""
    out = data.copy()
    for i in range(data.shape[0]):
        s = data[i]
        if s.dtype.kind in "iu" and s.dtype.itemsize == 8:
            # scipy's median and float64 differences round 64-bit
            # integers; gpuscope's are exact.
            med = exact_median3(s, "reflect")
            d = s.astype(object) - med.astype(object)
        else:
            med = ndi.median_filter(s, size=size, mode="reflect")
            d = s.astype(np.float64) - med
        hit = {"bright": d > diff, "dark": -d > diff, "both": np.abs(d) > diff, "tomopy": d >= diff}[mode]
        out[i] = np.where(hit.astype(bool), med, s)
    return out


def sample(dtype, shape, seed=0):
    """Values spread over the dtype's range, its extremes included."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = rng.normal(0, 1000, shape).astype(dtype)
        flat = x.reshape(-1)
        flat[:6] = [np.finfo(dtype).max, np.finfo(dtype).min, np.inf, -np.inf, 0.0, -0.0]
        return x
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    flat = x.reshape(-1)
    flat[: 4] = [info.min, info.max, info.min, info.max]
    flat[7 * shape[-1] : 7 * shape[-1] + 5] = info.max
    flat[9 * shape[-1] : 9 * shape[-1] + 5] = info.min
    return x


def exact_median3(x, mode):
    """The 3x3 median from the sorted windows: exact for every dtype
    (scipy's rank filter rounds 64-bit integers beyond 2**53)."""
    pad = {"reflect": "symmetric", "nearest": "edge", "constant": "constant"}[mode]
    p = np.pad(x, 1, mode=pad)
    w = np.lib.stride_tricks.sliding_window_view(p, (3, 3)).reshape(x.shape + (9,))
    return np.sort(w, axis=-1)[..., 4]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_median_every_dtype(engine, dtype, shape):
    x = sample(dtype, shape)
    for mode in ("reflect", "constant", "nearest"):
        got = gn.median_filter(x, 3, mode=mode)
        if np.dtype(dtype).itemsize == 8 and np.dtype(dtype).kind in "iu":
            want = exact_median3(x, mode)
        else:
            want = ndi.median_filter(x, 3, mode=mode)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint16, np.int32, np.float64])
def test_median_stack_and_output_every_dtype(engine, dtype):
    x = sample(dtype, (3, 300, 310))
    want = ndi.median_filter(x, size=(1, 3, 3))
    np.testing.assert_array_equal(gn.median_filter(x, size=(1, 3, 3)), want)
    out = np.empty_like(x)
    assert gn.median_filter(x, size=(1, 3, 3), output=out) is out
    np.testing.assert_array_equal(out, want)
    # Another dtype of output: the result cast, as scipy.
    out64 = np.empty(x.shape, np.float64)
    assert gn.median_filter(x, size=(1, 3, 3), output=out64) is out64
    np.testing.assert_array_equal(out64, want.astype(np.float64))
    # The input as its own output: computed aside, then copied in.
    y = x.copy()
    assert gn.median_filter(y, size=(1, 3, 3), output=y) is y
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32,
                                   np.uint64, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("mode", ["bright", "dark", "both", "tomopy"])
def test_remove_outliers_every_dtype(engine, dtype, mode):
    rng = np.random.default_rng(5)
    x = sample(dtype, (2, 300, 440), seed=1)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        diff = max(1, int(info.max // 4 - info.min // 4) // 3)
    else:
        # Integral values: float32 differences are exact, as the
        # reference's float64 ones.
        x[~np.isfinite(x)] = 0
        x[...] = np.round(x)
        diff = 1500.0
    x[rng.random(x.shape) < 0.01] = x.max()
    got = remove_outliers(x, diff, mode=mode)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, mantid(x, diff, 3, mode))
    out = np.empty_like(x)
    assert remove_outliers(x, diff, mode=mode, output=out) is out
    np.testing.assert_array_equal(out, mantid(x, diff, 3, mode))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.int32, np.float64])
def test_gaussian_every_dtype(engine, dtype):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 100, (600, 520)).astype(dtype)
    got = gn.gaussian_filter(x, 1.5)
    want = ndi.gaussian_filter(x, 1.5)
    assert got.dtype == want.dtype
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, want, atol=1e-4 * float(np.abs(want).max()))
    else:
        assert_integer_sums(got, want, engine == "cpu")
    # Into a float32 array and as float64, from any dtype.
    f32 = np.empty(x.shape, np.float32)
    assert gn.gaussian_filter(x, 1.5, output=f32) is f32
    want32 = ndi.gaussian_filter(x.astype(np.float64), 1.5)
    np.testing.assert_allclose(f32, want32, atol=1e-4 * float(np.abs(want32).max()))
    got64 = gn.gaussian_filter(x, 1.5, output=np.float64)
    assert got64.dtype == np.float64
    np.testing.assert_allclose(got64, want32, atol=1e-4 * float(np.abs(want32).max()))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint16, np.int32, np.float32, np.float64])
def test_integer_outputs_saturate_and_truncate(engine, dtype):
    x = sample(dtype, (600, 520)).astype(np.float64)
    x = np.clip(x, -1e6, 1e6)
    w = np.array([[0, 0, 0], [0, 1.0, 0], [0, 0, 0]])
    # Integer outputs are exact on every engine: float64 samples that
    # float32 cannot hold take the float64 host path.
    for out_dtype in (np.uint8, np.int16, np.int32):
        got = gn.correlate(x, w, output=out_dtype)
        # The identity kernel: scipy's cast of the values.
        want = ndi.correlate(x, w, output=out_dtype)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_sigma_clipped_stats_every_dtype(engine, dtype, shape):
    astropy_stats = pytest.importorskip("astropy.stats").sigma_clipped_stats
    rng = np.random.default_rng(4)
    x = rng.normal(100, 10, shape)
    x[rng.random(shape) < 0.01] = 120
    x = x.astype(dtype)
    mask = rng.random(shape) < 0.1
    got = sigma_clipped_stats(x)
    want = astropy_stats(x.astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=1e-5)
    got = sigma_clipped_stats(x, mask=mask)
    want = astropy_stats(x.astype(np.float32), mask=mask)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES + [np.bool_])
def test_label_every_dtype(engine, dtype):
    rng = np.random.default_rng(6)
    x = (rng.random((600, 520)) < 0.3).astype(dtype)
    if np.dtype(dtype).kind in "iu":
        x *= np.iinfo(dtype).max
    got, n = gn.label(x)
    want, m = ndi.label(x)
    assert n == m
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.int32, np.float32, np.float64])
def test_regionprops_every_intensity_dtype(engine, dtype):
    rng = np.random.default_rng(7)
    # Blobs of up to some 1,800 pixels and single pixels, about 1,100
    # regions (scikit-image's table takes a second per 3,000 regions).
    smooth = ndi.gaussian_filter(rng.random((600, 520)), 3)
    labels, _ = ndi.label((smooth > np.quantile(smooth, 0.7)) | (rng.random(smooth.shape) < 0.003))
    values = rng.integers(0, 200, labels.shape).astype(dtype)
    props = ("label", "area", "bbox", "centroid", "centroid_weighted", "intensity_mean",
             "intensity_min", "intensity_max")
    got = measure.regionprops_table(labels, values, properties=props)
    want = sk_table(labels, values, properties=props)
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_regionprops_refuses_bad_labels_and_values(engine):
    labels = np.zeros((600, 520), np.int32)
    labels[300, 7] = 3
    labels[400, 9] = -2
    values = np.ones(labels.shape, np.float32)
    with pytest.raises(ValueError, match="label -2 is negative"):
        measure.regionprops_table(labels, values, properties=("label",))
    labels[400, 9] = 0
    values[300, 7] = np.nan
    with pytest.raises(ValueError, match="region 3 is NaN"):
        measure.regionprops_table(labels, values, properties=("label", "intensity_mean"))
