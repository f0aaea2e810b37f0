"""Shared fixtures: every comparison runs on the GPU (lavapipe in CI) and on
the CPU reference path; tolerances are the command line's goldens'
(crates/cli/tests/goldens.rs)."""

import pathlib
import warnings

import numpy as np
import pytest

import gpuscope

GOLDEN = pathlib.Path(__file__).resolve().parents[3] / "tests" / "golden"


@pytest.fixture(params=["gpu", "cpu"])
def engine(request):
    """The engine a test runs on; restores the default GPU afterwards."""
    with warnings.catch_warnings():
        # Without an adapter the "gpu" case runs on the CPU with a warning.
        warnings.simplefilter("ignore", RuntimeWarning)
        gpuscope.set_device("cpu" if request.param == "cpu" else None)
    yield request.param
    gpuscope.set_device(None)


def golden(*parts):
    return np.load(GOLDEN.joinpath(*parts))


def assert_float(got, want, cpu):
    """Float outputs: within 1e-5 (GPU, float32 sums) or 1e-6 (CPU) of the
    largest reference magnitude."""
    assert got.shape == want.shape
    scale = max(float(np.nanmax(np.abs(want))), 1e-30) if want.size else 1.0
    tol = (1e-6 if cpu else 1e-5) * scale
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    worst = float(np.nanmax(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    assert worst <= tol, f"max difference {worst} > {tol}"


def assert_integer_sums(got, want, cpu, sums=None):
    """Integer outputs of sums: exact on the CPU; on the GPU a float32 sum
    can fall on the other side of an integer, so elements may differ by
    one: at most 0.1% of them (the goldens' rule), or, given `sums` (the
    reference's float64 sums of a one-pass filter), only where that sum
    lies within float32 error (1e-5 of the largest) of an integer."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if cpu:
        np.testing.assert_array_equal(got, want)
        return
    d = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert d.max(initial=0) <= 1
    if sums is None:
        assert np.count_nonzero(d) * 1000 <= want.size
    else:
        tol = 1e-5 * float(np.abs(sums).max(initial=1.0))
        near = np.abs(sums - np.round(sums)) <= tol
        assert near[d > 0].all(), "an element differs where the sum is not near an integer"
