"""Arrays kept on the GPU between operations, as CuPy users keep theirs.

``gpuscope.asarray(x)`` uploads a numpy array once; ``gaussian_filter``,
``convolve``, ``correlate``, ``median_filter``, ``tomo.remove_outliers``,
``x > t``, ``ndimage.label`` and ``measure.regionprops_table`` take device
arrays and leave their results on the device; ``.get()`` brings one back::

    x = gpuscope.asarray(image)                      # one upload
    smooth = gpuscope.ndimage.gaussian_filter(x, 2)
    labels, n = gpuscope.ndimage.label(smooth > 5.0)
    table = gpuscope.measure.regionprops_table(labels, smooth, properties=("label", "area"))
    labels.get()                                     # a numpy array, if wanted

Operations on device arrays queue their work and return before the GPU has
finished, as CuPy's do; ``.get()`` waits for what it reads, and
``gpuscope.synchronize()`` for everything (for timing). Device arrays hold
float32, int32 (labels) or bool, fit one GPU buffer, and need a GPU
adapter. Like CuPy, numpy's implicit conversion
(``np.asarray(x)``) is refused: ``.get()`` says where the bytes cross.
"""

import numpy as np

from . import _gpuscope

DeviceArray = _gpuscope.DeviceArray
synchronize = _gpuscope.synchronize

_KEPT = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.bool_))


def asarray(a):
    """``a`` on the GPU in use (a device array is returned as it is). Its
    dtype must be float32, int32 or bool: convert others first
    (``x.astype(np.float32)``), as the conversion is the caller's choice."""
    if isinstance(a, DeviceArray):
        return a
    x = np.asarray(a)
    native = x.dtype.newbyteorder("=") if x.dtype.byteorder not in "=|" else x.dtype
    if native not in _KEPT:
        raise TypeError(
            f"device arrays hold float32, int32 or bool, not {x.dtype}; convert first, "
            "e.g. x.astype(np.float32)"
        )
    return _gpuscope.to_device(np.require(x.astype(native, copy=False), requirements=["C_CONTIGUOUS", "ALIGNED"]))
