"""scipy.ndimage's filters and labelling on the GPU, with scipy's names,
signatures and answers.

Differences from scipy: ``order`` (Gaussian derivatives), ``radius``,
``origin`` other than 0, ``axes`` and per-axis ``mode`` sequences are not
offered (NotImplementedError). Linear filters compute in float32 on the GPU
(scipy: float64), so float64 results agree to float32 rounding. The median
treats NaN as smaller than every number (Mantid Imaging's rule; scipy's
result with NaN is undefined). Arrays have 1 to 3 axes.
"""

import numpy as np

from . import _filters, _gpuscope
from ._catalogue import CATALOGUE, array, as_list, options, signature, unsupported

__all__ = ["convolve", "correlate", "gaussian_filter", "label", "median_filter"]


def _filter_input(input):
    """The input as the filters take it; float16 and object arrays raise
    scipy's RuntimeError (the shared conversion would otherwise widen
    float16 to float32)."""
    if not isinstance(input, _gpuscope.DeviceArray):
        dtype = np.asarray(input).dtype
        if dtype == np.float16 or dtype.kind == "O":
            raise RuntimeError(f"array type {dtype!r} not supported (as scipy.ndimage)")
    return array(input, device=True)


@signature("gaussian_filter")
def gaussian_filter(input, sigma, order=0, output=None, mode=CATALOGUE, cval=CATALOGUE,
                    truncate=CATALOGUE, *, radius=None, axes=None):
    """Gaussian smoothing as ``scipy.ndimage.gaussian_filter``: one pass per
    axis, radius ``int(truncate * sigma + 0.5)``; integer inputs give the
    input's dtype, truncated after every pass, as scipy."""
    unsupported("gaussian_filter", order=(order, 0), radius=(radius, None), axes=(axes, None))
    x = _filter_input(input)
    opts = options(sigma=as_list(sigma), mode=mode, cval=cval, truncate=truncate)
    return _filters.run("gaussian_filter", x, opts, output=output)


def _linear(op, input, weights, output, mode, cval, origin, axes):
    unsupported(op, origin=(origin, 0), axes=(axes, None))
    x = _filter_input(input)
    if np.iscomplexobj(weights):
        # scipy returns a complex result; taking the real part would be a
        # silent wrong answer.
        raise NotImplementedError(f"{op}: complex weights are not supported by gpuscope (give real weights)")
    w = np.ascontiguousarray(np.asarray(weights, dtype=np.float64))
    return _filters.run(op, x, options(mode=mode, cval=cval), array=w, output=output)


@signature("convolve")
def convolve(input, weights, output=None, mode=CATALOGUE, cval=CATALOGUE, origin=0, *, axes=None):
    """True convolution as ``scipy.ndimage.convolve`` (weights flipped; even
    extents centred as scipy)."""
    return _linear("convolve", input, weights, output, mode, cval, origin, axes)


@signature("correlate")
def correlate(input, weights, output=None, mode=CATALOGUE, cval=CATALOGUE, origin=0, *, axes=None):
    """Correlation as ``scipy.ndimage.correlate`` (weights not flipped)."""
    return _linear("correlate", input, weights, output, mode, cval, origin, axes)


@signature("median_filter")
def median_filter(input, size=None, footprint=None, output=None, mode=CATALOGUE, cval=CATALOGUE,
                  origin=0, *, axes=None):
    """Median as ``scipy.ndimage.median_filter``: element n//2 of the sorted
    window, exact for every dtype, in the input's dtype. NaN counts as
    smaller than every number (Mantid Imaging)."""
    unsupported("median_filter", origin=(origin, 0), axes=(axes, None))
    x = _filter_input(input)
    fp = None
    if footprint is not None:
        # As scipy, a footprint makes size irrelevant; its elements are
        # taken as bool (None in an object array is False, as in scipy).
        size = None
        fp = np.ascontiguousarray(np.asarray(footprint).astype(bool).astype(np.float64))
    opts = options(size=as_list(size) if size is not None else CATALOGUE, mode=mode, cval=cval)
    return _filters.run("median_filter", x, opts, array=fp, output=output, same_dtype=True)


def _connectivity(structure, ndim):
    """scipy's structure as the core's connectivity: the elements within
    city-block distance c of the centre, for c in 1..ndim."""
    s = np.asarray(structure).astype(bool)
    if s.ndim != ndim or any(n != 3 for n in s.shape):
        raise RuntimeError("structure and input must have equal rank and extent 3 on each axis (as scipy)")
    dist = sum(np.abs(g - 1) for g in np.indices(s.shape))
    for c in range(1, ndim + 1):
        if np.array_equal(s, dist <= c):
            return c
    raise NotImplementedError(
        "gpuscope labels with the structures scipy.ndimage.generate_binary_structure(ndim, c) "
        "gives (c = 1 to ndim); this structure is not one of them"
    )


@signature("label")
def label(input, structure=None, output=None):
    """Connected components as ``scipy.ndimage.label``: non-zero elements,
    numbered 1..n in raster order of their first element; returns
    ``(labels, num_features)``, or ``num_features`` when ``output`` is an
    array (filled in place), as scipy. A boolean ``DeviceArray`` (such as
    ``x > t`` of a device array) gives int32 labels on the device."""
    x = array(input, device=True)
    if isinstance(x, _gpuscope.DeviceArray):
        return _device_label(x, structure, output)
    if x.dtype == np.bool_:
        x = x.view(np.uint8)
    opts = {} if structure is None else {"connectivity": _connectivity(structure, x.ndim)}
    labels, n = _gpuscope.label(x, options(**opts))
    if isinstance(output, np.ndarray):
        np.copyto(output, labels, casting="unsafe")
        _check_bit_depth(output, labels)
        return n
    if output is not None:
        wide = labels
        labels = labels.astype(output)
        _check_bit_depth(labels, wide)
    return labels, n


def _check_bit_depth(output, labels):
    """scipy's refusal of an output dtype whose values cannot hold the
    labels (they would wrap)."""
    if not np.array_equal(output, labels):
        raise RuntimeError("insufficient bit-depth in requested output type")


def _device_label(x, structure, output):
    if x.dtype != np.bool_:
        raise TypeError(
            f"label of a device array takes a bool mask (e.g. x > t), not {x.dtype}"
        )
    if output is not None:
        raise TypeError("output= is not offered for device arrays (the labels are a new device array)")
    opts = {} if structure is None else {"connectivity": _connectivity(structure, x.ndim)}
    return _gpuscope.device_label(x, options(**opts))
