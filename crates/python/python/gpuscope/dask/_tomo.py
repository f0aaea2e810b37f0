"""Flat/dark normalisation on dask arrays: the fields are averaged once on
the client, then every block of projections is divided by its part of
them (no halo: the formula is per pixel)."""

import numpy as np

from .. import tomo as _tomo
from .._catalogue import CATALOGUE, default

__all__ = ["normalize"]


def _field(frames, averaging, name, plane):
    """The per-pixel field of `frames` (2-D, or 3-D frames along axis 0) as
    ``gpuscope.tomo.normalize`` averages it: float32 values, numpy's
    float32 mean along axis 0, or the median."""
    f = np.asarray(frames.compute() if hasattr(frames, "compute") else frames)
    if f.ndim == 2:
        f = f[None]
    if f.ndim != 3 or f.shape[1:] != plane:
        raise ValueError(
            f"{name} has shape {f.shape}; give frames of the projections' "
            f"{plane[0]}x{plane[1]} pixels, as a 2-D array or a 3-D stack (frame, row, column)"
        )
    f = f.astype(np.float32)
    if averaging == "median":
        return np.median(f, axis=0).astype(np.float32)
    return np.mean(f, axis=0, dtype=np.float32)


def normalize(arr, flat, dark, cutoff=CATALOGUE, ncore=None, out=None, *, averaging=CATALOGUE):
    """``gpuscope.tomo.normalize`` on a dask array of projections (2-D, or
    3-D with projections along axis 0, chunked any way): the same float32
    result block by block. ``flat`` and ``dark`` are numpy or dask arrays
    of frames; they are averaged once, on the client. ``ncore`` is ignored;
    ``out`` is not supported (the result is a new dask array)."""
    import dask.array as da

    del ncore
    if out is not None:
        raise TypeError("out= is not supported on dask arrays (the result is a new dask array)")
    x = arr if isinstance(arr, da.Array) else da.asarray(arr)
    if x.ndim not in (2, 3):
        raise ValueError(f"arr has shape {x.shape}; give a 2-D projection or a 3-D stack (projection, row, column)")
    how = default("normalize", "averaging") if averaging is CATALOGUE else averaging
    if how not in ("mean", "median"):
        raise ValueError(f"invalid averaging: '{how}' (give mean or median)")
    plane = tuple(x.shape[-2:])
    # One averaged frame each: the blocks' own averaging of a single frame
    # leaves it as it is, so every block sees the whole stack's fields.
    fields = [
        da.from_array(_field(f, how, name, plane)[None] if x.ndim == 3 else _field(f, how, name, plane),
                      chunks=((1,) if x.ndim == 3 else ()) + x.chunks[-2:])
        for f, name in ((flat, "flat"), (dark, "dark"))
    ]
    kw = {} if cutoff is CATALOGUE else {"cutoff": cutoff}
    # Bad parameters raise here, when the graph is built.
    probe = np.zeros((1,) * x.ndim, np.float32)
    _tomo.normalize(probe, probe[..., :1, :1] + 1, probe[..., :1, :1], **kw)

    def block(b, f, d):
        return _tomo.normalize(b, f, d, **kw)

    return da.map_blocks(block, x, *fields, dtype=np.float32)
