"""gpuscope on Dask arrays: the same names and parameters as
``gpuscope.ndimage``, ``gpuscope.measure`` and ``gpuscope.tomo``, taking and
returning dask arrays, with the whole-array function's answers.

- Filters (``gaussian_filter``, ``convolve``, ``correlate``,
  ``median_filter``, ``remove_outliers``): each block with a halo as deep as
  the filter reaches (``map_overlap``, ``boundary='none'``, the filter's own
  mode at the array's edges); chunks smaller than the halo are merged by
  dask first.
- ``normalize``: flat/dark correction as ``gpuscope.tomo.normalize``, the
  fields averaged once and each block divided by its part.
- ``label``: scipy's numbering across chunks, the border merge in a tree.
- ``regionprops_table``: per-block partial moments reduced in a tree.
- ``strong_pixels``, ``find_spots``: DIALS' spot finding on blocks of
  whole frames, the tables joined in frame order.
- ``use_gpus(client)`` / ``DevicePlugin``: one device per worker process.

See docs/dask.md.
"""

from ._filters import convolve, correlate, gaussian_filter, median_filter, remove_outliers
from ._label import label
from ._measure import regionprops_table
from ._spots import find_spots, strong_pixels
from ._tomo import normalize
from ._workers import DevicePlugin, use_gpus

__all__ = [
    "DevicePlugin",
    "convolve",
    "correlate",
    "find_spots",
    "gaussian_filter",
    "label",
    "median_filter",
    "normalize",
    "regionprops_table",
    "remove_outliers",
    "strong_pixels",
    "use_gpus",
]
