"""gpuscope as a scikit-image backend: scikit-image finds its entry points,
and what ``can_has`` accepts, ``get_implementation`` answers as
scikit-image does. (scikit-image 0.26 dispatches only a few metrics
functions, none of these four: the dispatch itself is exercised only
where the installed scikit-image wraps them.)"""

import warnings

import numpy as np
import pytest
import skimage
from skimage import filters, measure, segmentation
from skimage.util import _backends

from gpuscope import skimage_backend as backend


def call(name, *args, **kwargs):
    assert backend.can_has(name, *args, **kwargs), name
    return backend.get_implementation(name)(*args, **kwargs)


def test_scikit_image_finds_the_backend():
    found = _backends.all_backends()
    assert "gpuscope" in found
    assert sorted(found["gpuscope"]["info"].supported_functions) == sorted(backend.SUPPORTED)
    assert found["gpuscope"]["implementation"].load() is backend


def test_answers_are_scikit_images(engine):
    rng = np.random.default_rng(4)
    x = rng.random((64, 80)).astype(np.float32)
    got = call("skimage.filters:gaussian", x, sigma=2)
    want = filters.gaussian(x, sigma=2)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, atol=1e-5)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(call("skimage.filters:gaussian", x64, 1.5, mode="reflect"),
                               filters.gaussian(x64, 1.5, mode="reflect"), atol=1e-5)
    u8 = (x * 255).astype(np.uint8)
    np.testing.assert_array_equal(call("skimage.filters:median", u8), filters.median(u8))
    fp = np.ones((5, 3), bool)
    np.testing.assert_array_equal(call("skimage.filters:median", x, fp, mode="reflect"),
                                  filters.median(x, fp, mode="reflect"))
    mask = x > 0.6
    for c in (None, 1, 2):
        got = call("skimage.measure:label", mask, connectivity=c)
        want = measure.label(mask, connectivity=c)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    labels, n = call("skimage.measure:label", mask, return_num=True)
    assert n == measure.label(mask, return_num=True)[1]
    rgb = rng.random((48, 64, 3))
    np.testing.assert_array_equal(call("skimage.segmentation:slic", rgb, n_segments=20),
                                  segmentation.slic(rgb, n_segments=20))


def test_calls_it_cannot_answer_are_turned_down():
    x = np.zeros((8, 8), np.float32)
    assert not backend.can_has("skimage.filters:sobel", x)
    assert not backend.can_has("skimage.filters:gaussian", np.zeros((8, 8), np.uint8))
    assert not backend.can_has("skimage.filters:gaussian", np.zeros((8, 8, 3)), channel_axis=-1)
    assert not backend.can_has("skimage.filters:gaussian", x, out=x)
    assert not backend.can_has("skimage.filters:gaussian", x, 1, 2, 3, 4)
    assert not backend.can_has("skimage.filters:median", x, behavior="rank")
    assert not backend.can_has("skimage.measure:label", np.array([[0, 1, 2]]))
    assert not backend.can_has("skimage.measure:label", x > 0, background=1)
    assert not backend.can_has("skimage.segmentation:slic", x, no_such_argument=1)
    assert not backend.can_has("skimage.filters:gaussian", np.zeros((2, 2, 2, 2), np.float32))


def test_dispatch_where_scikit_image_offers_it():
    if not hasattr(filters.gaussian, "__wrapped__"):
        pytest.skip(f"scikit-image {skimage.__version__} does not dispatch filters.gaussian")
    x = np.random.default_rng(1).random((32, 32)).astype(np.float32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = filters.gaussian(x, sigma=1)
    assert any("gpuscope" in str(m.message) for m in w)
    np.testing.assert_allclose(got, filters.gaussian.__wrapped__(x, sigma=1), atol=1e-5)
