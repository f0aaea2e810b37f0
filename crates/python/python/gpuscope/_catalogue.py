"""The core's operation catalogue, read from the extension at import time.

Python signatures take their defaults from it: a parameter whose default in
the source is ``CATALOGUE`` shows the catalogue's value in
``inspect.signature`` (and in the generated stubs), and is left out of the
options when the caller does not give it, so that the core's own default
applies. No default is written twice.
"""

import inspect
import json
import math
import numbers

import numpy as np

from . import _gpuscope

OPERATIONS = {op["name"]: op for op in json.loads(_gpuscope.catalogue_json())}


class _CatalogueDefault:
    def __repr__(self):
        return "<the catalogue's default>"

    def __reduce__(self):
        # One instance per process, also after pickling (Dask sends
        # arguments to worker processes): identity checks stay true.
        return "CATALOGUE"


CATALOGUE = _CatalogueDefault()


def default(op, name):
    """The catalogue's default of parameter `name` of operation `op`, as
    Python writes it (a one-element per-axis list as its value)."""
    for p in OPERATIONS[op]["params"]:
        if p["name"] == name:
            d = p["default"]
            if p["per_axis"] and isinstance(d, list) and len(d) == 1:
                return d[0]
            return d
    raise KeyError(f"the catalogue's {op} has no parameter {name}")


def signature(op):
    """Decorator: the function's signature with the catalogue's defaults of
    `op` in place of ``CATALOGUE``."""

    def wrap(fn):
        sig = inspect.signature(fn)
        params = [
            p.replace(default=default(op, p.name)) if p.default is CATALOGUE else p
            for p in sig.parameters.values()
        ]
        fn.__signature__ = sig.replace(parameters=params)
        fn.__gpuscope_operation__ = op
        return fn

    return wrap


def _plain(name, value):
    """A parameter value as JSON takes it (numpy scalars and tuples
    included); JSON has no NaN or infinity."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"invalid {name}: {v} (give a finite number)")
        return v
    if isinstance(value, (str, type(None))):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(name, v) for v in np.asarray(value).ravel().tolist()]
    raise TypeError(f"invalid type for {name}: {type(value).__name__}")


def options(**params):
    """The options JSON of an operation: the parameters given (those left
    at ``CATALOGUE`` are omitted)."""
    return json.dumps(
        {k: _plain(k, v) for k, v in params.items() if v is not CATALOGUE}
    )


def as_list(value):
    """One value or a sequence as a list (the core's per-axis parameters)."""
    if value is None or value is CATALOGUE:
        return value
    return np.atleast_1d(np.asarray(value)).ravel().tolist()


def array(x, name="input", device=False):
    """`x` as a C-contiguous numpy array in native byte order (copied only
    when it is not one already); a ``DeviceArray`` is returned as it is
    where the operation takes one (`device`), else refused."""
    if isinstance(x, _gpuscope.DeviceArray):
        if device:
            return x
        raise TypeError(
            f"{name}: this function takes numpy arrays, not a gpuscope.DeviceArray; "
            "bring it back with .get()"
        )
    a = np.asarray(x)
    if a.dtype.kind == "c":
        raise TypeError(f"{name}: complex arrays are not supported (give real values)")
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name}: arrays of dtype {a.dtype} are not supported")
    if a.dtype.byteorder not in "=|":
        a = a.astype(a.dtype.newbyteorder("="))
    if a.dtype == np.float16:
        a = a.astype(np.float32)
    # Unaligned buffers (from pickled or raw bytes, e.g. a Dask block) are
    # copied too: the extension reads aligned C-contiguous memory.
    return np.require(a, requirements=["C_CONTIGUOUS", "ALIGNED"])


def unsupported(fn_name, **given):
    """NotImplementedError for reference arguments gpuscope does not offer;
    `given` maps a name to (value, the only value supported)."""
    for name, (value, only) in given.items():
        same = value is only or (
            not isinstance(value, (list, tuple, np.ndarray)) and value == only
        )
        if not same:
            raise NotImplementedError(
                f"{fn_name}: {name}={value!r} is not supported by gpuscope (only {only!r})"
            )

