"""gpuscope.spots against the committed reference masks of the three real
frames (tests/golden/spots: an independent numpy port of DIALS'
thresholds), the GPU against the core's CPU path on crops of them, and the
spot table against scipy's labelling and numpy sums of the same mask."""

import inspect
import pathlib

import numpy as np
import pytest
import scipy.ndimage as ndi

import gpuscope
from gpuscope import spots

from conftest import GOLDEN

DATA = GOLDEN.parents[1] / ".." / "shared" / "data" / "diffraction"
FRAMES = ["DLS_I03_smargon_0001", "DLS_I23_P12M_thau_00001", "dlsnxs2cbf_therm_0001"]
ALGORITHMS = ["dispersion_extended", "dispersion"]
# Crops across module gaps with spots in them (the command line's tests').
CROPS = [
    ("DLS_I03_smargon_0001", 1400, 850, 200, 230),
    ("DLS_I23_P12M_thau_00001", 3550, 1100, 220, 200),
    ("dlsnxs2cbf_therm_0001", 2400, 3250, 200, 210),
]

_frames = {}


def frame(stem):
    if stem not in _frames:
        path = DATA / f"{stem}.cbf.gz"
        assert path.exists(), f"{path} is missing: the tests read ../shared/data beside the repository"
        _frames[stem] = gpuscope.io.read(path)
    return _frames[stem]


def crop(stem, r0, c0, h, w):
    return np.ascontiguousarray(frame(stem)[r0:r0 + h, c0:c0 + w])


def golden_mask(stem, algorithm, shape):
    rc = np.load(GOLDEN / "spots" / f"{stem}_{algorithm}.npy")
    m = np.zeros(shape, bool)
    m[rc[:, 0], rc[:, 1]] = True
    return m


def test_frames_read_as_int32_counts():
    f = frame("DLS_I03_smargon_0001")
    assert f.dtype == np.int32 and f.ndim == 2
    assert (f < 0).any(), "module gaps are negative"


@pytest.mark.parametrize("stem", FRAMES)
def test_real_frames_match_the_reference_masks_on_the_cpu(stem):
    # Lavapipe needs about a minute for the three full frames: the crops
    # below cover the GPU path.
    gpuscope.set_device("cpu")
    try:
        f = frame(stem)
        for algorithm in ALGORITHMS:
            got = spots.strong_pixels(f, algorithm=algorithm)
            want = golden_mask(stem, algorithm, f.shape)
            assert got.dtype == np.bool_ and got.shape == f.shape
            assert want.any()
            assert np.count_nonzero(got != want) == 0, f"{stem} {algorithm}"
    finally:
        gpuscope.set_device(None)


def test_one_real_frame_matches_the_reference_mask_on_the_gpu():
    stem = "dlsnxs2cbf_therm_0001"
    f = frame(stem)
    got = spots.strong_pixels(f)
    np.testing.assert_array_equal(got, golden_mask(stem, "dispersion_extended", f.shape))


def table_of(mask, counts, structure):
    """The spot table from scipy's labels and numpy sums (z, row, col)."""
    labels, n = ndi.label(mask, structure=structure)
    rows = []
    for i in range(1, n + 1):
        idx = np.nonzero(labels == i)
        v = counts[idx].astype(np.float64)
        zyx = [a.astype(np.float64) + 0.5 for a in idx]
        w = v.sum()
        cen = [float((v * c).sum() / w) for c in zyx]
        rows.append(dict(
            first=np.ravel_multi_index([a[0] for a in idx], mask.shape),
            n_pixels=len(v), intensity=w,
            x0=idx[2].min(), x1=idx[2].max() + 1, y0=idx[1].min(), y1=idx[1].max() + 1,
            z0=idx[0].min(), z1=idx[0].max() + 1,
            x=cen[2], y=cen[1], z=cen[0]))
    return sorted(rows, key=lambda r: r["first"])


def assert_table(got, want, min_size):
    want = [r for r in want if r["n_pixels"] >= min_size]
    assert list(got) == list(spots.COLUMNS)
    assert len(got["id"]) == len(want) > 0
    np.testing.assert_array_equal(got["id"], np.arange(1, len(want) + 1))
    for k in ["x0", "x1", "y0", "y1", "z0", "z1", "n_pixels"]:
        np.testing.assert_array_equal(got[k], [r[k] for r in want], err_msg=k)
    np.testing.assert_array_equal(got["intensity"], [r["intensity"] for r in want])
    for k in ["x", "y", "z"]:
        np.testing.assert_allclose(got[k], [r[k] for r in want], rtol=1e-12, err_msg=k)
    assert (got["variance_x"] >= 0).all()


@pytest.mark.parametrize("stem,r0,c0,h,w", CROPS)
def test_gpu_equals_cpu_on_crops_and_the_table_is_scipys(engine, stem, r0, c0, h, w):
    x = crop(stem, r0, c0, h, w)
    for algorithm in ALGORITHMS:
        mask = spots.strong_pixels(x, algorithm=algorithm)
        gpuscope.set_device("cpu")
        want_mask = spots.strong_pixels(x, algorithm=algorithm)
        want_table = spots.find_spots(x, algorithm=algorithm, min_spot_size=1)
        gpuscope.set_device("cpu" if engine == "cpu" else None)
        np.testing.assert_array_equal(mask, want_mask)
        table = spots.find_spots(x, algorithm=algorithm, min_spot_size=1)
        for k in spots.COLUMNS:
            np.testing.assert_array_equal(table[k], want_table[k], err_msg=f"{algorithm} {k}")
        four = ndi.generate_binary_structure(3, 1) * [[[0]], [[1]], [[0]]]
        assert_table(table, table_of(mask[None], np.maximum(x, 0)[None], four), 1)


def test_series_per_frame_and_three_d(engine):
    # Repeated crops: spots that run through several frames.
    at = [(1400, 850), (1400, 850), (1401, 850), (1460, 900), (1400, 850)]
    stack = np.stack([crop("DLS_I03_smargon_0001", r, c, 60, 64) for r, c in at])
    mask = spots.strong_pixels(stack)
    for z in range(len(at)):
        np.testing.assert_array_equal(mask[z], spots.strong_pixels(stack[z]))
    counts = np.maximum(stack, 0)
    per_frame = np.zeros((3, 3, 3), bool)
    per_frame[1] = ndi.generate_binary_structure(2, 1)
    assert_table(spots.find_spots(stack, min_spot_size=2), table_of(mask, counts, per_frame), 2)
    joined = spots.find_spots(stack, min_spot_size=2, three_d=True)
    assert_table(joined, table_of(mask, counts, ndi.generate_binary_structure(3, 1)), 2)
    assert (joined["z1"] - joined["z0"] >= 3).any(), "spots joined through three frames"


def test_dtypes_gain_and_mask(engine):
    x = crop("DLS_I03_smargon_0001", 1400, 850, 80, 90)
    u16 = np.maximum(x, 0).astype(np.uint16)
    want = spots.strong_pixels(u16)
    for dtype in [np.uint32, np.int32, np.int64, np.uint8]:
        y = np.minimum(u16, 255) if dtype == np.uint8 else u16
        ref = spots.strong_pixels(y.astype(np.uint16)) if dtype == np.uint8 else want
        np.testing.assert_array_equal(spots.strong_pixels(y.astype(dtype)), ref, err_msg=str(dtype))
    # Big-endian, Fortran-ordered and read-only arrays.
    be = u16.astype(">u2")
    np.testing.assert_array_equal(spots.strong_pixels(be), want)
    np.testing.assert_array_equal(spots.strong_pixels(np.asfortranarray(u16)), want)
    ro = u16.copy()
    ro.flags.writeable = False
    np.testing.assert_array_equal(spots.strong_pixels(ro), want)
    # A gain map of one value is that scalar gain.
    g = spots.strong_pixels(u16, gain=2.0)
    np.testing.assert_array_equal(spots.strong_pixels(u16, gain=np.full(u16.shape, 2.0)), g)
    assert not np.array_equal(g, want)
    # A masked-out half holds no strong pixel; the other half as the CPU
    # reference gives it.
    m = np.ones(u16.shape, bool)
    m[:, :45] = False
    got = spots.strong_pixels(u16, mask=m)
    assert not got[:, :45].any() and got.any()
    gpuscope.set_device("cpu")
    np.testing.assert_array_equal(spots.strong_pixels(u16, mask=m), got)


def test_signature_defaults_are_the_catalogues():
    op = {p["name"]: p["default"] for p in gpuscope.catalogue["find_spots"]["params"]}
    for fn in (spots.strong_pixels, spots.find_spots):
        sig = inspect.signature(fn).parameters
        for name in ["algorithm", "kernel_size", "sigma_background", "sigma_strong", "min_local",
                     "global_threshold", "gain"]:
            assert sig[name].default == op[name], name
    assert inspect.signature(spots.strong_pixels).parameters["kernel_size"].default == [3, 3]
    assert op["algorithm"] == "dispersion_extended" and op["sigma_background"] == 6


@pytest.mark.parametrize("kwargs,error,says", [
    (dict(algorithm="niblack"), ValueError, "algorithm"),
    (dict(kernel_size=(0, 3)), ValueError, "invalid kernel_size"),
    (dict(min_local=1), ValueError, "invalid min_local"),
    (dict(sigma_strong=float("nan")), ValueError, "sigma_strong"),
    (dict(gain=-1), ValueError, "gain"),
    (dict(gain=np.ones((3, 3))), ValueError, "gain map"),
    (dict(mask=np.ones((3, 3), bool)), ValueError, "mask"),
    (dict(kernel_size="big"), TypeError, "kernel_size"),
])
def test_bad_arguments(engine, kwargs, error, says):
    x = np.ones((20, 30), np.int32)
    with pytest.raises(error, match=says):
        spots.strong_pixels(x, **kwargs)


def test_bad_inputs(engine):
    with pytest.raises(TypeError, match="integer counts"):
        spots.strong_pixels(np.ones((4, 4), np.float32))
    with pytest.raises(TypeError, match="integer counts"):
        spots.find_spots(np.ones((4, 4), np.complex64))
    with pytest.raises(ValueError, match="axes"):
        spots.find_spots(np.ones((1, 2, 2, 2), np.int32))
    with pytest.raises(ValueError, match="non-empty"):
        spots.find_spots(np.ones((0, 4), np.int32))
    with pytest.raises(ValueError, match="min_spot_size.* exceeds max_spot_size"):
        spots.find_spots(np.ones((4, 4), np.int32), min_spot_size=5, max_spot_size=4)
    with pytest.raises(ValueError, match="int32 range"):
        spots.find_spots(np.full((4, 4), 2**40, np.int64))


def test_io_read_errors_name_the_file(tmp_path):
    bad = tmp_path / "x.cbf"
    bad.write_bytes(b"not a cbf")
    with pytest.raises(ValueError, match="x.cbf"):
        gpuscope.io.read(bad)
    a = np.arange(12, dtype=np.uint16).reshape(3, 4)
    np.save(tmp_path / "a.npy", a)
    np.testing.assert_array_equal(gpuscope.io.read(str(tmp_path / "a.npy")), a)
