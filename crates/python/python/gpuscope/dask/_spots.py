"""Spot finding over a dask array of frames: every frame is independent
(the dispersion filter is 2-D), so each block of whole frames runs
``gpuscope.spots`` on its worker's device and the tables are joined in
frame order."""

import functools

import numpy as np

from .. import spots as _spots
from .._catalogue import CATALOGUE

__all__ = ["find_spots", "strong_pixels"]

_PARAMS = ("algorithm", "kernel_size", "sigma_background", "sigma_strong", "min_local",
           "global_threshold", "gain")


def _frames(frames):
    import dask.array as da

    x = frames if isinstance(frames, da.Array) else da.asarray(frames)
    if x.ndim != 3:
        raise ValueError(f"frames has {x.ndim} axes (give a 3-D series: frames, rows, columns)")
    # whole frames per block: the filter's window spans the frame
    return x.rechunk({1: -1, 2: -1})


def _given(**kw):
    return {k: v for k, v in kw.items() if v is not CATALOGUE}


def strong_pixels(frames, algorithm=CATALOGUE, kernel_size=CATALOGUE, sigma_background=CATALOGUE,
                  sigma_strong=CATALOGUE, min_local=CATALOGUE, global_threshold=CATALOGUE,
                  gain=CATALOGUE, mask=None):
    """``gpuscope.spots.strong_pixels`` of every frame of a dask array of
    frames (chunked along the frames): a lazy bool array."""
    x = _frames(frames)
    kw = _given(algorithm=algorithm, kernel_size=kernel_size, sigma_background=sigma_background,
                sigma_strong=sigma_strong, min_local=min_local, global_threshold=global_threshold,
                gain=gain)
    # bad arguments raise now, as the numpy function would
    _spots.strong_pixels(np.zeros((1,) + x.shape[1:], x.dtype), mask=mask, **kw)
    fn = functools.partial(_spots.strong_pixels, mask=mask, **kw)
    return x.map_blocks(fn, dtype=bool, meta=np.empty((0, 0, 0), bool))


def _block_table(block, z0, kw):
    table = _spots.find_spots(block, **kw)
    for c in ("z0", "z1", "z"):
        table[c] = table[c] + z0
    return table


def _join(*tables):
    out = {c: np.concatenate([t[c] for t in tables]) for c in _spots.COLUMNS}
    out["id"] = np.arange(1, len(out["id"]) + 1, dtype=out["id"].dtype)
    return out


def find_spots(frames, algorithm=CATALOGUE, kernel_size=CATALOGUE, sigma_background=CATALOGUE,
               sigma_strong=CATALOGUE, min_local=CATALOGUE, global_threshold=CATALOGUE,
               gain=CATALOGUE, mask=None, min_spot_size=CATALOGUE, max_spot_size=CATALOGUE, *,
               three_d=False):
    """``gpuscope.spots.find_spots`` frame by frame over a dask array of
    frames, computed: the spot table (a dict of numpy columns) equal to the
    whole series' per-frame table, spots numbered from 1 in frame order.
    Spots joined through the frames (``three_d=True``) are not offered on
    dask arrays yet (NotImplementedError): compute them per series with
    ``gpuscope.spots.find_spots``."""
    import dask

    if three_d:
        raise NotImplementedError(
            "gpuscope.dask.find_spots finds spots frame by frame; for spots joined through the "
            "frames call gpuscope.spots.find_spots(frames, three_d=True) on the series"
        )
    x = _frames(frames)
    kw = _given(algorithm=algorithm, kernel_size=kernel_size, sigma_background=sigma_background,
                sigma_strong=sigma_strong, min_local=min_local, global_threshold=global_threshold,
                gain=gain, min_spot_size=min_spot_size, max_spot_size=max_spot_size)
    kw["mask"] = mask
    _spots.find_spots(np.zeros((1,) + x.shape[1:], x.dtype), **kw)
    starts = np.concatenate([[0], np.cumsum(x.chunks[0])[:-1]]).astype(int)
    parts = [
        dask.delayed(_block_table, pure=True)(b, int(z0), kw)
        for b, z0 in zip(x.to_delayed().ravel(), starts)
    ]
    (table,) = dask.compute(dask.delayed(_join, pure=True)(*parts))
    return table
