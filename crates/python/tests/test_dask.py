"""gpuscope.dask on a LocalCluster of worker processes (each opens its own
device: lavapipe in CI) against the whole-array reference: scipy for the
filters and labels, scikit-image for the region table, gpuscope's numpy
function where it is the reference (outlier removal)."""

import numpy as np
import pytest
import scipy.ndimage as ndi

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import gpuscope  # noqa: E402
import gpuscope.dask as gd  # noqa: E402
from conftest import assert_float, assert_integer_sums  # noqa: E402

MODES = ["reflect", "mirror", "wrap", "nearest", "constant"]


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def volume():
    rng = np.random.default_rng(7)
    return rng.random((7, 15, 13)).astype(np.float32)


def test_every_worker_opens_a_device(client):
    devices = gd.use_gpus(client, memory_budget=64 << 20)
    assert len(devices) == 2
    for d in devices.values():
        assert d["name"] and d["backend"]
        if d["backend"] != "cpu":
            assert d["memory_budget"] == 64 << 20


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("chunks", [(3, 4, 5), ((2, 5), (1, 12, 2), (13,))])
def test_gaussian_equals_whole_array(client, volume, mode, chunks):
    d = da.from_array(volume, chunks=chunks)
    got = gd.gaussian_filter(d, sigma=(1.0, 2.0, 1.5), mode=mode, cval=0.5).compute()
    assert_float(got, ndi.gaussian_filter(volume, (1.0, 2.0, 1.5), mode=mode, cval=0.5), cpu=False)


def test_gaussian_of_integers_follows_scipy(client):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 60000, (30, 27)).astype(np.uint16)
    got = gd.gaussian_filter(da.from_array(x, chunks=(7, 9)), 2).compute()
    assert got.dtype == np.uint16
    assert_integer_sums(got, ndi.gaussian_filter(x, 2), cpu=False)


@pytest.mark.parametrize("mode", MODES)
def test_median_exact_with_chunks_smaller_than_the_window(client, volume, mode):
    x = (volume * 1000).astype(np.int16)
    d = da.from_array(x, chunks=(2, 4, 5))
    got = gd.median_filter(d, size=(3, 5, 7), mode=mode, cval=7).compute()
    np.testing.assert_array_equal(got, ndi.median_filter(x, size=(3, 5, 7), mode=mode, cval=7))


@pytest.mark.parametrize("fn", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["reflect", "wrap", "constant"])
def test_convolve_correlate_even_weights(client, fn, mode):
    rng = np.random.default_rng(3)
    x = rng.random((20, 23)).astype(np.float32)
    w = rng.random((4, 3))
    got = getattr(gd, fn)(da.from_array(x, chunks=(6, 5)), w, mode=mode).compute()
    assert_float(got, getattr(ndi, fn)(x, w, mode=mode), cpu=False)


def test_wrap_reaching_across_the_axis(client):
    x = np.arange(5 * 40, dtype=np.float32).reshape(5, 40)
    got = gd.gaussian_filter(da.from_array(x, chunks=(2, 10)), 4, mode="wrap").compute()
    assert_float(got, ndi.gaussian_filter(x, 4, mode="wrap"), cpu=False)


def test_remove_outliers_equals_the_numpy_function(client, volume):
    x = (volume * 100).astype(np.float32)
    x[3, 10, 10] = 1000
    got = gd.remove_outliers(da.from_array(x, chunks=(4, 8, 7)), diff=20, size=5).compute()
    want = gpuscope.tomo.remove_outliers(x, diff=20, size=5)
    np.testing.assert_array_equal(got, want)


def _blobs(shape, fraction, seed):
    rng = np.random.default_rng(seed)
    x = ndi.gaussian_filter(rng.random(shape), 1.2)
    return x > np.quantile(x, 1 - fraction)


@pytest.mark.parametrize("connectivity", [1, 2, 3])
@pytest.mark.parametrize("chunks", [(3, 5, 4), (1, 5, 7), ((3, 1, 4), (5, 9), (14,))])
def test_label_in_scipys_numbering(client, connectivity, chunks):
    mask = _blobs((8, 14, 14), 0.4, connectivity)
    s = ndi.generate_binary_structure(3, connectivity)
    labels, num = gd.label(da.from_array(mask, chunks=chunks), structure=s)
    want, n = ndi.label(mask, structure=s)
    assert int(num.compute()) == n
    got = labels.compute()
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_label_components_spanning_three_chunks_on_every_axis(client):
    # a 3-D cross and a diagonal staircase, each across three chunks per
    # axis, and single voxels touching only at corners
    mask = np.zeros((9, 9, 9), bool)
    mask[4, 4, :] = mask[4, :, 4] = mask[:, 4, 4] = True
    for i in range(9):
        mask[i, i, (8 - i)] = True
    mask[0, 0, 0] = mask[1, 1, 1] = True
    for c in (1, 3):
        s = ndi.generate_binary_structure(3, c)
        labels, num = gd.label(da.from_array(mask, chunks=3), structure=s)
        want, n = ndi.label(mask, structure=s)
        assert int(num.compute()) == n
        np.testing.assert_array_equal(labels.compute(), want)


def test_label_2d_and_empty(client):
    mask = _blobs((30, 41), 0.5, 11)
    labels, num = gd.label(da.from_array(mask, chunks=(7, 13)))
    want, n = ndi.label(mask)
    assert int(num.compute()) == n
    np.testing.assert_array_equal(labels.compute(), want)
    labels, num = gd.label(da.zeros((10, 10), bool, chunks=4))
    assert int(num.compute()) == 0 and not labels.compute().any()


def test_regionprops_table_equals_skimage(client):
    measure = pytest.importorskip("skimage.measure")
    mask = _blobs((8, 20, 21), 0.4, 5)
    rng = np.random.default_rng(2)
    values = rng.random(mask.shape).astype(np.float32)
    labels, _ = gd.label(da.from_array(mask, chunks=(4, 7, 8)))
    props = ["label", "area", "bbox", "centroid", "centroid_weighted", "intensity_mean",
             "intensity_max", "intensity_min"]
    got = gd.regionprops_table(labels, da.from_array(values, chunks=(3, 9, 9)), properties=props)
    want = measure.regionprops_table(ndi.label(mask)[0], values, properties=props)
    assert set(got) == set(want)
    for k in want:
        if want[k].dtype.kind in "iu":
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        else:
            # scikit-image sums a float32 image in float32, gpuscope.dask in
            # float64: equal to float32 rounding
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, err_msg=k)


def test_bad_arguments_raise_when_the_graph_is_built(client, volume):
    d = da.from_array(volume, chunks=4)
    with pytest.raises(ValueError):
        gd.gaussian_filter(d, sigma=-1)
    with pytest.raises(TypeError):
        gd.median_filter(d, size=3, output=np.empty(volume.shape))
    with pytest.raises(ValueError):
        gd.median_filter(da.zeros((2, 2, 2, 2), chunks=1), size=3)


def test_a_failing_worker_task_raises_gpuscopes_error(client):
    # a block that is not what the graph promised: the worker's error
    # reaches the caller with gpuscope's message
    bad = da.from_array(np.zeros((8, 8), np.float32), chunks=4).map_blocks(
        lambda b: b.astype(np.complex64), dtype=np.float32
    )
    with pytest.raises(TypeError, match="complex arrays are not supported"):
        gd.median_filter(bad, size=3).compute()


def test_spots_frame_by_frame_equal_the_whole_series(client):
    from test_spots import crop

    at = [(1400, 850), (1400, 850), (1401, 850), (1460, 900), (1400, 850)]
    stack = np.stack([crop("DLS_I03_smargon_0001", r, c, 60, 64) for r, c in at])
    frames = da.from_array(stack, chunks=(2, 30, 64))  # split rows too: rechunked to whole frames
    np.testing.assert_array_equal(gd.strong_pixels(frames).compute(), gpuscope.spots.strong_pixels(stack))
    got = gd.find_spots(frames, min_spot_size=2)
    want = gpuscope.spots.find_spots(stack, min_spot_size=2)
    assert len(want["id"]) > 0
    for k in gpuscope.spots.COLUMNS:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    # joined through the frames, across the chunk borders after frames 2 and 4
    got = gd.find_spots(frames, min_spot_size=2, three_d=True)
    want = gpuscope.spots.find_spots(stack, min_spot_size=2, three_d=True)
    assert (want["z1"] - want["z0"] >= 3).any()
    for k in gpuscope.spots.COLUMNS:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_normalize_equals_the_numpy_function(client):
    rng = np.random.default_rng(3)
    proj = rng.integers(0, 4000, (9, 21, 17)).astype(np.uint16)
    flat = (rng.integers(3000, 5000, (4, 21, 17))).astype(np.uint16)
    dark = rng.integers(0, 200, (3, 21, 17)).astype(np.uint16)
    dark[:, 0, :5] = 6000  # dark above flat: the floored denominator
    for kw in [{}, {"cutoff": 1.1}, {"averaging": "median"}]:
        want = gpuscope.tomo.normalize(proj, flat, dark, **kw)
        got = gd.normalize(da.from_array(proj, chunks=(4, 8, 7)), da.from_array(flat, chunks=2), dark, **kw)
        got = got.compute()
        assert got.dtype == np.float32
        # The blocks run on the workers' GPUs: within WGSL's float32
        # division accuracy of the whole-array result.
        np.testing.assert_array_max_ulp(got, want, maxulp=3)
    with pytest.raises(ValueError, match="pixels"):
        gd.normalize(da.from_array(proj), flat[:, :3], dark)
    with pytest.raises(ValueError, match="averaging"):
        gd.normalize(da.from_array(proj), flat, dark, averaging="mode")
