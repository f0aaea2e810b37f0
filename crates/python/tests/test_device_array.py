"""Device arrays (gpuscope.asarray): each operation gives what it gives on
numpy arrays, bit for bit (the same kernels), and agrees with scipy and
scikit-image as the numpy path does; a chain crosses the bus once up and
only its answers come down; misuse is refused with a message."""

import numpy as np
import pytest
import scipy.ndimage as ndi
from skimage.measure import regionprops_table as sk_table

import gpuscope
from gpuscope import measure, ndimage, tomo


def sky(shape=(300, 280), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.0, shape).astype(np.float32)
    yy, xx = np.indices(shape[-2:])
    for k in range(12):
        cy, cx = rng.uniform(0, shape[-2]), rng.uniform(0, shape[-1])
        x += (8.0 * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 8.0)).astype(np.float32)
    return x


@pytest.fixture
def gpu():
    gpuscope.set_device(None)
    if gpuscope.device()["name"] == "cpu":
        pytest.skip("no GPU adapter")
    yield
    gpuscope.set_device(None)


def test_upload_and_get_keep_values_dtype_and_shape(gpu):
    for a in [sky((17, 23)), np.arange(-50, 70, dtype=np.int32).reshape(2, 3, 20),
              (sky((5, 7, 9)) > 0.5)]:
        d = gpuscope.asarray(a)
        assert isinstance(d, gpuscope.DeviceArray)
        assert (d.shape, d.ndim, d.size, d.dtype) == (a.shape, a.ndim, a.size, a.dtype)
        back = d.get()
        assert back.dtype == a.dtype
        np.testing.assert_array_equal(back, a)
        assert "DeviceArray(shape=" in repr(d)
    # Big-endian and non-contiguous inputs are converted on the way up.
    a = sky((20, 30))
    np.testing.assert_array_equal(gpuscope.asarray(a.astype(">f4")).get(), a)
    np.testing.assert_array_equal(gpuscope.asarray(a[:, ::2]).get(), a[:, ::2])
    assert gpuscope.asarray(d) is d


@pytest.mark.parametrize("shape", [(300, 280), (12, 40, 50)])
def test_filters_equal_the_numpy_path(gpu, shape):
    a = sky(shape, 1)
    d = gpuscope.asarray(a)
    w = np.random.default_rng(2).normal(size=(3,) * len(shape))
    cases = [
        (ndimage.gaussian_filter, (2.0,), {}),
        (ndimage.gaussian_filter, (1.0,), {"mode": "constant", "cval": 0.5}),
        (ndimage.correlate, (w,), {"mode": "wrap"}),
        (ndimage.convolve, (w,), {}),
        (ndimage.median_filter, (), {"size": 3}),
        (ndimage.median_filter, (), {"size": 5, "mode": "nearest"}),
    ]
    for f, args, kw in cases:
        want = f(a, *args, **kw)
        got = f(d, *args, **kw)
        assert isinstance(got, gpuscope.DeviceArray)
        np.testing.assert_array_equal(got.get(), want, err_msg=f"{f.__name__} {kw}")
    np.testing.assert_array_equal(d.get(), a)  # the input is kept
    np.testing.assert_array_equal(ndimage.median_filter(d, size=3).get(), ndi.median_filter(a, size=3))
    np.testing.assert_allclose(ndimage.gaussian_filter(d, 2.0).get(), ndi.gaussian_filter(a, 2.0),
                               atol=1e-5 * float(np.abs(a).max()))


def test_a_long_queue_of_operations_reads_back_right(gpu):
    """Operations return before the GPU is done; reads and synchronize
    wait for them, and results fed from one to the next are right."""
    a = sky((256, 256), 6)
    d = gpuscope.asarray(a)
    want = a
    for _ in range(20):
        d = ndimage.gaussian_filter(d, 1.0)
        want = ndimage.gaussian_filter(want, 1.0)
    assert gpuscope.synchronize() is None
    np.testing.assert_array_equal(d.get(), want)


def test_remove_outliers_equals_the_numpy_path(gpu):
    a = sky((100, 120), 3)
    a[10, 10] = 60.0
    for mode in ("bright", "dark"):
        want = tomo.remove_outliers(a, 3.0, size=3, mode=mode)
        got = tomo.remove_outliers(gpuscope.asarray(a), 3.0, size=3, mode=mode)
        np.testing.assert_array_equal(got.get(), want)


def test_chain_crosses_the_bus_once_up_and_the_answers_down(gpu):
    a = sky((512, 512), 4)
    props = ("label", "area", "bbox", "centroid", "intensity_mean", "intensity_max")

    def chain():
        d = gpuscope.asarray(a)
        s = ndimage.gaussian_filter(d, 1.5)
        labels, n = ndimage.label(s > 3.0)
        return labels, n, measure.regionprops_table(labels, s, properties=props)

    chain()  # pipelines compiled, buffers pooled
    up0, down0 = gpuscope.bus_bytes()
    labels, n, table = chain()
    up1, down1 = gpuscope.bus_bytes()
    assert a.nbytes <= up1 - up0 < a.nbytes * 1.05, (up1 - up0, a.nbytes)
    assert down1 - down0 < a.nbytes / 20, down1 - down0
    # The same answers as numpy in, and as scipy and scikit-image.
    s = ndimage.gaussian_filter(a, 1.5)
    want_labels, want_n = ndi.label(s > 3.0)
    assert n == want_n >= 5
    np.testing.assert_array_equal(labels.get(), want_labels)
    want = sk_table(want_labels, s, properties=props)
    assert list(table) == list(want)
    for k in want:
        np.testing.assert_allclose(table[k], want[k], rtol=1e-5, err_msg=k)
    # Full connectivity, as scipy's structure.
    st = ndi.generate_binary_structure(2, 2)
    got, m = ndimage.label(gpuscope.asarray(s) > 3.0, structure=st)
    want_labels, want_m = ndi.label(s > 3.0, structure=st)
    assert m == want_m
    np.testing.assert_array_equal(got.get(), want_labels)


def test_regionprops_of_uploaded_labels_and_without_intensity(gpu):
    labels = np.zeros((40, 50), np.int32)
    labels[2:9, 3:7] = 1
    labels[20:31, 10:45] = 4  # labels 2 and 3 absent, as skimage skips them
    v = sky((40, 50), 5)
    got = measure.regionprops_table(gpuscope.asarray(labels), gpuscope.asarray(v),
                                    properties=("label", "area", "intensity_sum", "centroid_weighted"))
    want = measure.regionprops_table(labels, v, properties=("label", "area", "intensity_sum",
                                                            "centroid_weighted"))
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    got = measure.regionprops_table(gpuscope.asarray(labels), properties=("label", "bbox"))
    want = sk_table(labels, properties=("label", "bbox"))
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    with pytest.raises(AttributeError, match="intensity_image"):
        measure.regionprops_table(gpuscope.asarray(labels), properties=("intensity_mean",))


def test_misuse_is_refused_with_a_message(gpu):
    a = sky((30, 40))
    d = gpuscope.asarray(a)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        np.asarray(d)
    with pytest.raises(TypeError, match="float32, int32 or bool"):
        gpuscope.asarray(a.astype(np.float64))
    with pytest.raises(TypeError, match="bool mask"):
        ndimage.label(d)
    with pytest.raises(TypeError, match="output="):
        ndimage.gaussian_filter(d, 1.0, output=np.float32)
    with pytest.raises(TypeError, match="x > value only"):
        d < 1.0
    with pytest.raises(TypeError, match="takes numpy arrays"):
        gpuscope.segmentation.slic(d)
    with pytest.raises(TypeError, match="device array too"):
        measure.regionprops_table(ndimage.label(d > 1.0)[0], a, properties=("label",))
    with pytest.raises(TypeError, match="int32 labels and float32"):
        measure.regionprops_table(d, d, properties=("label",))
    neg = gpuscope.asarray(np.full((30, 40), -3, np.int32))
    with pytest.raises(ValueError, match="negative"):
        measure.regionprops_table(neg, d, properties=("label",))
    # Parameters are checked as on numpy arrays.
    with pytest.raises(ValueError, match="sigma"):
        ndimage.gaussian_filter(d, -1.0)
    assert d == d and d != gpuscope.asarray(a)  # identity, as any object


def test_device_arrays_stay_with_their_device():
    gpuscope.set_device(None)
    try:
        if gpuscope.device()["name"] == "cpu":
            pytest.skip("no GPU adapter")
        d = gpuscope.asarray(sky((10, 10)))
        gpuscope.set_device("cpu")
        with pytest.raises(RuntimeError, match="need a GPU adapter"):
            gpuscope.asarray(sky((10, 10)))
        with pytest.raises(ValueError, match="another device"):
            ndimage.gaussian_filter(d, 1.0)
    finally:
        gpuscope.set_device(None)


def test_empty_and_single_element_arrays(gpu):
    for shape in [(0, 5), (1, 1)]:
        a = np.ones(shape, np.float32)
        d = gpuscope.asarray(a)
        np.testing.assert_array_equal(ndimage.median_filter(d, size=3).get(), ndi.median_filter(a, size=3))
        np.testing.assert_array_equal(ndimage.gaussian_filter(d, 1.0).get(), ndimage.gaussian_filter(a, 1.0))
        labels, n = ndimage.label(d > 0.5)
        want, m = ndi.label(a > 0.5)
        assert n == m
        np.testing.assert_array_equal(labels.get(), want)
