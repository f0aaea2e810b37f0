"""gpuscope.ndimage against scipy.ndimage."""

import tracemalloc

import numpy as np
import pytest
import scipy.ndimage as ndi

import gpuscope
import gpuscope.ndimage as gn
from conftest import assert_float, assert_integer_sums, golden

MODES = ["reflect", "mirror", "nearest", "wrap", "constant"]
rng = np.random.default_rng(7)
F32 = rng.normal(100, 20, (24, 31)).astype(np.float32)
U16 = rng.integers(0, 4000, (5, 17, 13)).astype(np.uint16)


@pytest.mark.parametrize("mode", MODES)
def test_gaussian_modes(engine, mode):
    got = gn.gaussian_filter(F32, 1.5, mode=mode, cval=3.0)
    want = ndi.gaussian_filter(F32, 1.5, mode=mode, cval=3.0)
    assert got.dtype == want.dtype == np.float32
    assert_float(got, want, engine == "cpu")


def test_gaussian_real_image(engine):
    x = golden("camera_crop_f32.npy")
    got = gn.gaussian_filter(x, (1, 3), truncate=3)
    assert_float(got, ndi.gaussian_filter(x, (1, 3), truncate=3), engine == "cpu")


def test_gaussian_float64_and_3d(engine):
    x = U16.astype(np.float64)
    got = gn.gaussian_filter(x, (0, 1, 2), mode="nearest")
    want = ndi.gaussian_filter(x, (0, 1, 2), mode="nearest")
    assert got.dtype == np.float64
    assert_float(got, want, engine == "cpu")


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint16])
def test_gaussian_integers_keep_dtype(engine, dtype):
    x = (U16 % 200).astype(dtype)
    got = gn.gaussian_filter(x, 1.2)
    want = ndi.gaussian_filter(x, 1.2)
    assert_integer_sums(got, want, engine == "cpu")


def test_gaussian_output_dtype_and_array(engine):
    got = gn.gaussian_filter(U16, 1.0, output=np.float32)
    want = ndi.gaussian_filter(U16, 1.0, output=np.float32)
    assert got.dtype == np.float32
    assert_float(got, want, engine == "cpu")
    out = np.empty(U16.shape, np.float64)
    r = gn.gaussian_filter(U16, 1.0, output=out)
    assert r is out
    assert_float(out, ndi.gaussian_filter(U16, 1.0, output=np.float64), engine == "cpu")


@pytest.mark.parametrize("op", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", MODES)
def test_convolve_correlate(engine, op, mode):
    w = rng.normal(0, 1, (4, 6))
    got = getattr(gn, op)(F32, w, mode=mode, cval=-2.0)
    want = getattr(ndi, op)(F32, w, mode=mode, cval=-2.0)
    assert got.dtype == np.float32
    assert_float(got, want, engine == "cpu")


def test_convolve_3d_integer(engine):
    w = rng.uniform(0, 0.1, (3, 3, 3))
    got = gn.convolve(U16, w, mode="constant")
    sums = ndi.convolve(U16.astype(np.float64), w, mode="constant")
    assert_integer_sums(got, ndi.convolve(U16, w, mode="constant"), engine == "cpu", sums)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint16, np.int32, np.float32, np.float64, np.int64])
@pytest.mark.parametrize("mode", MODES)
def test_median_exact(engine, dtype, mode):
    x = rng.uniform(0, 200, (19, 23)).astype(dtype)
    got = gn.median_filter(x, 3, mode=mode, cval=1)
    want = ndi.median_filter(x, 3, mode=mode, cval=1)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_median_stack_and_footprint(engine):
    got = gn.median_filter(U16, size=(1, 5, 3))
    np.testing.assert_array_equal(got, ndi.median_filter(U16, size=(1, 5, 3)))
    fp = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], bool)
    x = U16[0]
    np.testing.assert_array_equal(gn.median_filter(x, footprint=fp), ndi.median_filter(x, footprint=fp))
    out = np.zeros(x.shape, np.float32)
    assert gn.median_filter(x, 3, output=out) is out
    np.testing.assert_array_equal(out, ndi.median_filter(x, 3).astype(np.float32))


def test_float32_output_arrays_in_place_views_aliases_and_read_only(engine):
    """A float32 ``output=`` array is filled in place (from 12 MiB in chunks
    whose rows go straight into it); views, the input itself and other
    layouts get the same values through a copy; a read-only one is refused
    as scipy refuses it, and the input is left as it was."""
    big = rng.normal(0, 1, (1800, 1800)).astype(np.float32)  # 13 MB
    for x in (F32, big):
        for op, args, ref in (
            (gn.median_filter, (3,), ndi.median_filter),
            (gn.gaussian_filter, (1.5,), ndi.gaussian_filter),
        ):
            want = ref(x, *args)
            out = np.full(x.shape, np.nan, np.float32)
            tracemalloc.start()
            assert op(x, *args, output=out) is out
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert_float(out, want, engine == "cpu")
            if gpuscope.device()["backend"] != "cpu":
                assert peak < x.nbytes // 2, f"{peak} bytes allocated: no result array expected"
            wide = np.full((x.shape[0], 2 * x.shape[1]), np.nan, np.float32)
            view = wide[:, ::2]
            assert op(x, *args, output=view) is view
            assert_float(view, want, engine == "cpu")
            assert np.isnan(wide[:, 1::2]).all()
            alias = x.copy()
            assert op(alias, *args, output=alias) is alias
            assert_float(alias, want, engine == "cpu")
            frozen = np.zeros(x.shape, np.float32)
            frozen.flags.writeable = False
            before = x.copy()
            with pytest.raises(ValueError, match="read-only"):
                op(x, *args, output=frozen)
            assert not frozen.any()
            np.testing.assert_array_equal(x, before)


def test_median_bool(engine):
    x = rng.random((16, 16)) > 0.5
    got = gn.median_filter(x, 3)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, ndi.median_filter(x, 3))


def test_layouts_are_accepted(engine):
    """Non-contiguous, Fortran-ordered, big-endian and read-only arrays."""
    want = ndi.median_filter(F32, 3)
    fortran = np.asfortranarray(F32)
    big = F32.astype(">f4")
    ro = F32.copy()
    ro.flags.writeable = False
    for x in (fortran, big, ro):
        np.testing.assert_array_equal(gn.median_filter(x, 3), want)
    strided = np.zeros((24, 62), np.float32)
    strided[:, ::2] = F32
    np.testing.assert_array_equal(gn.median_filter(strided[:, ::2], 3), want)


def test_empty_arrays(engine):
    x = np.zeros((0, 5), np.float32)
    assert gn.median_filter(x, 3).shape == (0, 5)
    got = gn.gaussian_filter(x, 1.0)
    assert got.shape == (0, 5) and got.dtype == np.float32


def test_label_exact(engine):
    mask = golden("segment", "coins_mask.npy")
    for structure in (None, np.ones((3, 3))):
        got, n = gn.label(mask, structure)
        want, wn = ndi.label(mask, structure)
        assert n == wn
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)


def test_label_3d_and_output(engine):
    vol = golden("segment", "blobs3d_u8.npy")
    for c in (1, 2, 3):
        s = ndi.generate_binary_structure(3, c)
        got, n = gn.label(vol, s)
        want, wn = ndi.label(vol, s)
        assert n == wn
        np.testing.assert_array_equal(got, want)
    out = np.zeros(vol.shape, np.int32)
    assert gn.label(vol, output=out) == ndi.label(vol)[1]
    np.testing.assert_array_equal(out, ndi.label(vol)[0])


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: gn.median_filter(np.zeros((2, 2, 2, 2), np.float32), 3), ValueError),
        (lambda: gn.median_filter(np.zeros((4, 4), np.complex64), 3), TypeError),
        (lambda: gn.gaussian_filter(F32, float("nan")), ValueError),
        (lambda: gn.gaussian_filter(F32, -1.0), ValueError),
        (lambda: gn.median_filter(F32, -3), ValueError),
        (lambda: gn.median_filter(F32, 3, mode="bogus"), ValueError),
        (lambda: gn.median_filter(F32), ValueError),
        (lambda: gn.gaussian_filter(F32, 1.0, order=1), NotImplementedError),
        (lambda: gn.gaussian_filter(F32, "a"), TypeError),
        (lambda: gn.label(F32, np.ones((3, 3, 3))), RuntimeError),
    ],
)
def test_bad_arguments(engine, call, error):
    with pytest.raises(error):
        call()


# Integers near the top of their range (Eiger gaps and dead pixels are
# 2^32 - 1, or 2^16 - 1 for 16-bit data): scipy's float64 sums, truncated.
# The 64-bit values keep scipy's sums in range (its cast of an
# out-of-range double is undefined in C).
TOPS = [
    (np.uint16, 2**16 - 1, 2**16 - 100),
    (np.uint32, 2**32 - 1, 2**32 - 100),
    (np.int32, 2**31 - 1, 2**31 - 100),
    (np.int32, -(2**31), -(2**31) + 100),
    (np.int64, 2**62 + 2**40, 2**62),
    (np.uint64, 2**63 + 2**41, 2**63),
]


@pytest.mark.parametrize("dtype,top,other", TOPS)
def test_gaussian_of_integers_near_their_top(engine, dtype, top, other):
    x = np.full((9, 12), top, dtype=dtype)
    x[2, 3] = x[6, 9] = other
    x[4:, :2] = rng.integers(0, 50, (5, 2))
    for sigma in (2, [1, 0.7]):
        got = gn.gaussian_filter(x, sigma)
        want = ndi.gaussian_filter(x, sigma)
        assert got.dtype == want.dtype == dtype
        np.testing.assert_array_equal(got, want)
    got = gn.correlate(x, [[0.25, 0.5], [0.125, 0.125]], mode="constant")
    np.testing.assert_array_equal(got, ndi.correlate(x, [[0.25, 0.5], [0.125, 0.125]], mode="constant"))


@pytest.mark.parametrize("tag", ["u32", "u16"])
def test_eiger_gaps_golden(engine, tag):
    # tests/golden/eiger_gaps/make_goldens.py: scipy's answers, exactly.
    x = golden("eiger_gaps", f"eiger_gaps_{tag}.npy")
    want = golden("eiger_gaps", f"eiger_gaps_{tag}_gauss1_5.npy")
    np.testing.assert_array_equal(gn.gaussian_filter(x, 1.5), want)
    want = golden("eiger_gaps", f"eiger_gaps_{tag}_gauss3_nearest.npy")
    np.testing.assert_array_equal(gn.gaussian_filter(x, 3.0, mode="nearest"), want)
    if tag == "u32":
        x = golden("eiger_gaps", "eiger_gaps_u32_corner.npy")
        want = golden("eiger_gaps", "eiger_gaps_u32_corner_median51.npy")
        np.testing.assert_array_equal(gn.median_filter(x, size=51), want)


def test_gaussian_float32_sum_as_scipy_test_gauss03(engine):
    # scipy's test_gauss03: the sum within 1.5 of the input's (float32).
    x = np.arange(100 * 100, dtype=np.float32).reshape(100, 100)
    got = gn.gaussian_filter(x, [1.0, 1.0])
    assert got.dtype == np.float32
    np.testing.assert_almost_equal(got.sum(dtype="d"), x.sum(dtype="d"), decimal=0)
    assert_float(got, ndi.gaussian_filter(x, [1.0, 1.0]), engine == "cpu")


@pytest.mark.parametrize("size", [47, 63])
def test_median_of_large_windows_equals_scipy(engine, size):
    # Small: lavapipe in CI selects from thousands of elements slowly.
    x = (np.random.default_rng(0).random((12, 14)) * 100).astype(np.float32)
    np.testing.assert_array_equal(gn.median_filter(x, size=size), ndi.median_filter(x, size=size))
    if engine == "cpu":
        return  # device arrays need the GPU
    d = gpuscope.asarray(x)
    np.testing.assert_array_equal(gn.median_filter(d, size=size).get(), ndi.median_filter(x, size=size))


def test_what_scipy_refuses_is_refused():
    x = np.arange(20.0).reshape(4, 5)
    for bad in (x.astype(np.float16), x.astype(object)):
        with pytest.raises(RuntimeError, match="not supported"):
            gn.gaussian_filter(bad, 1)
        with pytest.raises(RuntimeError):
            ndi.gaussian_filter(bad, 1)
        with pytest.raises(RuntimeError, match="not supported"):
            gn.median_filter(bad, 3)
    # Complex weights: scipy gives a complex result; never the real part.
    with pytest.raises(NotImplementedError, match="complex"):
        gn.correlate(x, np.array([[1 + 1j, 1]]))
    with pytest.raises(NotImplementedError, match="complex"):
        gn.convolve(x, [[1, 2j]])


def test_label_output_too_small_raises_as_scipy():
    lab = np.zeros((3, 600), np.uint8)
    lab[:, ::2] = 1
    for output in (np.int8, np.zeros(lab.shape, np.uint8)):
        with pytest.raises(RuntimeError, match="insufficient bit-depth"):
            ndi.label(lab, output=output)
        with pytest.raises(RuntimeError, match="insufficient bit-depth"):
            gn.label(lab, output=output)
    labels, n = gn.label(lab, output=np.int16)
    want, m = ndi.label(lab, output=np.int16)
    assert n == m == 300
    np.testing.assert_array_equal(labels, want)


def test_none_in_an_object_footprint_is_false():
    x = np.arange(20.0).reshape(4, 5)
    fp = np.array([[1, None, 1]], dtype=object)
    np.testing.assert_array_equal(gn.median_filter(x, footprint=fp), ndi.median_filter(x, footprint=fp))
