"""Tomography corrections on the GPU: flat/dark normalisation (tomopy's
``normalize``, Mantid Imaging's flat-fielding) and Mantid Imaging's outlier
removal (tomopy's as ``mode='tomopy'``)."""

import math

import numpy as np

from . import _filters, _gpuscope
from ._catalogue import CATALOGUE, array, options, signature

__all__ = ["normalize", "remove_outliers"]


@signature("normalize")
def normalize(arr, flat, dark, cutoff=CATALOGUE, ncore=None, out=None, *, averaging=CATALOGUE):
    """Flat/dark correction as ``tomopy.normalize``: ``(arr - dark) /
    (flat - dark)`` in float32, with ``flat`` and ``dark`` averaged along
    axis 0 (``averaging='mean'`` as numpy's float32 mean, or ``'median'``),
    the denominator floored at 1e-6, and values above ``cutoff`` set to it.
    ``arr``: one 2-D projection or a 3-D stack (projection, row, column);
    ``flat``/``dark``: 2-D frames or 3-D stacks of them. Returns float32.

    Differs from tomopy: ``ncore`` is accepted and ignored (the GPU does the
    work); on the GPU, WGSL's float32 division may differ from the
    correctly rounded quotient by up to 2.5 ULP (the CPU path,
    ``set_device('cpu')``, gives tomopy's bits). ``out``: an array of
    ``arr``'s shape to fill (tomopy's in-place ``out=arr`` included)."""
    del ncore
    if cutoff is not CATALOGUE and cutoff is not None and cutoff == math.inf:
        cutoff = None  # no limit, as tomopy's where(out > inf, ...)
    x = array(arr, "arr")
    result = _gpuscope.normalize(
        x, array(flat, "flat"), array(dark, "dark"), options(cutoff=cutoff, averaging=averaging)
    )
    if out is not None:
        if not isinstance(out, np.ndarray) or out.shape != result.shape:
            raise ValueError(f"out must be an array of shape {result.shape}")
        np.copyto(out, result, casting="unsafe")
        return out
    return result


@signature("remove_outliers")
def remove_outliers(data, diff, size=CATALOGUE, mode=CATALOGUE, *, output=None):
    """Replaces an element by the median of its ``size x size`` window in
    its 2-D slice (mode reflect) where it is an outlier: 'bright'
    (``x - median > diff``), 'dark' (``median - x > diff``), 'both', or
    'tomopy' (``tomopy.misc.corr.remove_outlier``: bright, ``>=``). Keeps
    the input's dtype; ``output``: an array to fill, or a dtype."""
    x = array(data, "data", device=True)
    opts = options(diff=diff, size=size, mode=mode)
    return _filters.run("remove_outliers", x, opts, output=output, same_dtype=True)
