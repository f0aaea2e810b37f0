"""What the filter functions share: the call into the extension and scipy's
``output=`` argument."""

import numpy as np

from . import _gpuscope


def run(op, x, options, array=None, output=None, same_dtype=False):
    """Runs filter `op` on the prepared array `x`. `output`: None, a dtype,
    or an array to fill (then returned, as scipy does). `same_dtype`: the
    operation keeps the input's dtype (rank filters), and a requested output
    dtype is a cast of its result. A ``DeviceArray`` input gives a new
    device array."""
    if isinstance(x, _gpuscope.DeviceArray):
        if output is not None:
            raise TypeError("output= is not offered for device arrays (the result is a new device array)")
        return _gpuscope.device_filter(op, x, options, array)
    target = None
    if isinstance(output, np.ndarray):
        if output.shape != x.shape:
            raise RuntimeError(
                f"output shape {output.shape} does not match the input's {x.shape} (as scipy)"
            )
        target, dtype = output, output.dtype
    elif output is not None:
        dtype = np.dtype(output)
    else:
        dtype = x.dtype
    if x.dtype == np.bool_:
        # bool filters as 0/1 bytes; a median of 0/1 is 0/1.
        x = x.view(np.uint8)
        if dtype == np.bool_ and not same_dtype:
            raise TypeError("a boolean output is not supported for linear filters (give output=np.uint8)")
    # An output array of the result's dtype is written in place where the
    # extension can (it then returns the array itself); otherwise the
    # result is copied in.
    out = target
    if same_dtype or dtype == np.bool_:
        result = _gpuscope.filter(op, x, options, array, out=out)
        if x.dtype != dtype:
            result = result.astype(dtype)
    else:
        if dtype.kind not in "iuf":
            raise TypeError(f"output dtype {dtype} is not supported (give an integer dtype, float32 or float64)")
        result = _gpuscope.filter(op, x, options, array, np.dtype(dtype).newbyteorder("=").name, out=out)
    if target is not None:
        if result is not target:
            np.copyto(target, result, casting="unsafe")
        return target
    return result
