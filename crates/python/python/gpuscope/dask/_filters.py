"""The filters on dask arrays: each block with a halo of its neighbours'
data as deep as the filter reaches, the filter's own boundary mode at the
array's edges (dask-image's recipe), so that the result equals the filter
on the whole array, for every mode."""

import functools

import numpy as np

from .. import ndimage as _nd
from .. import tomo as _tomo
from .._catalogue import CATALOGUE, default

__all__ = ["convolve", "correlate", "gaussian_filter", "median_filter", "remove_outliers"]


def _dask_array(x):
    import dask.array as da

    if not isinstance(x, da.Array):
        x = da.asarray(x)
    if x.ndim < 1 or x.ndim > 3:
        raise ValueError(f"input must have 1 to 3 axes (got {x.ndim})")
    return x


def _per_axis(value, ndim, name):
    v = np.atleast_1d(np.asarray(value, dtype=np.float64)).ravel()
    if v.size == 1:
        v = np.repeat(v, ndim)
    if v.size != ndim:
        raise RuntimeError(f"{name} must have one value or one per axis ({ndim}), as scipy")
    return v


def _window_depth(extent):
    """How far a window of `extent` elements centred as scipy (origin 0)
    reaches on either side: extent // 2 before, extent - 1 - extent // 2
    after; the larger of the two, since convolve flips the window."""
    return int(extent) // 2


def _check(fn, x, *args, **kwargs):
    """Runs `fn` on a one-element array of `x`'s dtype and number of axes:
    bad parameters raise here, when the graph is built, with the same
    exception and message as the numpy function, not later on a worker.
    Returns the output dtype."""
    probe = np.zeros((1,) * x.ndim, dtype=x.dtype)
    return fn(probe, *args, **kwargs).dtype


def _apply(x, fn, depth, dtype, **kwargs):
    depth = list(depth)
    whole = [k for k, d in enumerate(depth) if d > 0 and (len(x.chunks[k]) == 1 or d >= x.shape[k])]
    if whole:
        # An axis the filter reaches across (or one chunk already): one
        # chunk along it, so the filter's own mode sees the whole axis.
        x = x.rechunk({k: -1 for k in whole})
        for k in whole:
            depth[k] = 0
    # 'wrap' needs the opposite edge's data at the array's edges; the other
    # modes make their edge values from the edge block itself.
    wrap = kwargs.get("mode") in ("wrap", "grid-wrap")
    # The arguments ride in a partial: some names (output) are dask's own.
    # Those left at the catalogue's default stay out (the function's own
    # default applies on the worker).
    kwargs = {k: v for k, v in kwargs.items() if v is not CATALOGUE}
    return x.map_overlap(
        functools.partial(fn, **kwargs),
        depth=dict(enumerate(depth)),
        boundary="periodic" if wrap else "none",
        trim=True,
        dtype=dtype,
        meta=np.empty((0,) * x.ndim, dtype=dtype),
    )


def _output_dtype(output):
    if output is None:
        return None
    if isinstance(output, np.ndarray):
        raise TypeError("output: give a dtype (a dask result cannot fill a numpy array in place)")
    return np.dtype(output)


def gaussian_filter(input, sigma, order=0, output=None, mode=CATALOGUE, cval=CATALOGUE,
                    truncate=CATALOGUE, *, radius=None, axes=None):
    """``gpuscope.ndimage.gaussian_filter`` on a dask array: the halo is the
    kernel's radius ``int(truncate * sigma + 0.5)`` on each axis."""
    x = _dask_array(input)
    out = _output_dtype(output)
    kw = dict(sigma=sigma, order=order, output=out, mode=mode, cval=cval, truncate=truncate,
              radius=radius, axes=axes)
    dtype = _check(_nd.gaussian_filter, x, **kw)
    t = default("gaussian_filter", "truncate") if truncate is CATALOGUE else truncate
    sig = _per_axis(sigma, x.ndim, "sigma")
    depth = [int(t * s + 0.5) for s in sig]
    return _apply(x, _nd.gaussian_filter, depth, dtype, **kw)


def _linear(fn, input, weights, output, mode, cval, origin, axes):
    x = _dask_array(input)
    w = np.asarray(weights)
    out = _output_dtype(output)
    kw = dict(weights=w, output=out, mode=mode, cval=cval, origin=origin, axes=axes)
    dtype = _check(fn, x, **kw)
    depth = [_window_depth(n) for n in w.shape]
    return _apply(x, fn, depth, dtype, **kw)


def convolve(input, weights, output=None, mode=CATALOGUE, cval=CATALOGUE, origin=0, *, axes=None):
    """``gpuscope.ndimage.convolve`` on a dask array (halo: half the weights'
    extent on each axis)."""
    return _linear(_nd.convolve, input, weights, output, mode, cval, origin, axes)


def correlate(input, weights, output=None, mode=CATALOGUE, cval=CATALOGUE, origin=0, *, axes=None):
    """``gpuscope.ndimage.correlate`` on a dask array (halo: half the
    weights' extent on each axis)."""
    return _linear(_nd.correlate, input, weights, output, mode, cval, origin, axes)


def median_filter(input, size=None, footprint=None, output=None, mode=CATALOGUE, cval=CATALOGUE,
                  origin=0, *, axes=None):
    """``gpuscope.ndimage.median_filter`` on a dask array (halo: half the
    window on each axis)."""
    x = _dask_array(input)
    out = _output_dtype(output)
    kw = dict(size=size, footprint=footprint, output=out, mode=mode, cval=cval, origin=origin,
              axes=axes)
    dtype = _check(_nd.median_filter, x, **kw)
    if footprint is not None:
        extents = np.asarray(footprint).shape
    else:
        s = default("median_filter", "size") if size is None else size
        extents = _per_axis(s, x.ndim, "size").astype(int)
    return _apply(x, _nd.median_filter, [_window_depth(n) for n in extents], dtype, **kw)


def remove_outliers(data, diff, size=CATALOGUE, mode=CATALOGUE, *, output=None):
    """``gpuscope.tomo.remove_outliers`` on a dask array: 2-D slices (the
    last two axes), so the halo spans those axes only."""
    x = _dask_array(data)
    if x.ndim < 2:
        raise ValueError(f"data must have 2 or 3 axes (got {x.ndim})")
    out = _output_dtype(output)
    kw = dict(diff=diff, size=size, mode=mode, output=out)
    dtype = _check(_tomo.remove_outliers, x, **kw)
    s = default("remove_outliers", "size") if size is CATALOGUE else size
    depth = [0] * (x.ndim - 2) + [_window_depth(s)] * 2
    return _apply(x, _tomo.remove_outliers, depth, dtype, **kw)
