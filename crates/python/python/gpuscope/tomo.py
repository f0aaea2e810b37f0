"""Tomography corrections on the GPU: Mantid Imaging's outlier removal
(tomopy's as ``mode='tomopy'``)."""

from . import _filters
from ._catalogue import CATALOGUE, array, options, signature

__all__ = ["remove_outliers"]


@signature("remove_outliers")
def remove_outliers(data, diff, size=CATALOGUE, mode=CATALOGUE, *, output=None):
    """Replaces an element by the median of its ``size x size`` window in
    its 2-D slice (mode reflect) where it is an outlier: 'bright'
    (``x - median > diff``), 'dark' (``median - x > diff``), 'both', or
    'tomopy' (``tomopy.misc.corr.remove_outlier``: bright, ``>=``). Keeps
    the input's dtype; ``output``: an array to fill, or a dtype."""
    x = array(data, "data")
    opts = options(diff=diff, size=size, mode=mode)
    return _filters.run("remove_outliers", x, opts, output=output, same_dtype=True)
