"""Spot finding over a dask array of frames: every frame is independent
(the dispersion filter is 2-D), so each block of whole frames runs
``gpuscope.spots`` on its worker's device and the tables are joined in
frame order."""

import functools

import numpy as np

from .. import spots as _spots
from .._catalogue import CATALOGUE
from ._measure import merge_by_label

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


def _spot_partials(labels, counts, starts):
    """Exact integer sums of one block's labelled strong pixels, per label:
    as the core's SpotSums (Python integers: no overflow)."""
    nz = np.nonzero(labels)
    lab = labels[nz].astype(np.int64)
    if lab.size == 0:
        return None
    ids, inv = np.unique(lab, return_inverse=True)
    v = np.maximum(counts[nz].astype(np.int64), 0).astype(object)
    out = {"label": ids, "n": np.bincount(inv, minlength=len(ids)).astype(object)}

    def add(values):
        acc = np.zeros(len(ids), dtype=object)
        np.add.at(acc, inv, values)
        return acc

    out["sum_v"] = add(v)
    out["sum_v2"] = add(v * v)
    for a, c in enumerate(nz):
        coord = c.astype(np.int64) + starts[a]
        lo = np.full(len(ids), np.iinfo(np.int64).max, np.int64)
        hi = np.full(len(ids), -1, np.int64)
        np.minimum.at(lo, inv, coord)
        np.maximum.at(hi, inv, coord)
        out[f"lo{a}"], out[f"hi{a}"] = lo, hi
        g = coord.astype(object)
        out[f"vc{a}"] = add(v * g)
        out[f"vc2{a}"] = add(v * g * g)
    return out


def _spot_reducer(name):
    return {"lo": np.minimum, "hi": np.maximum}.get(name[:2], np.add)


def _merge_spots(*parts):
    return merge_by_label(parts, _spot_reducer)


def _table_3d(m, min_size, max_size):
    """The spot table from the merged sums, as the core's Spot::from_sums."""
    rows = {c: [] for c in _spots.COLUMNS}
    if m is not None:
        for i in range(len(m["label"])):
            n = int(m["n"][i])
            if n < min_size or n > max_size:
                continue
            w, w2 = float(m["sum_v"][i]), float(m["sum_v2"][i])
            rows["id"].append(len(rows["id"]) + 1)
            for name, a in (("x", 2), ("y", 1), ("z", 0)):
                lo, hi = int(m[f"lo{a}"][i]), int(m[f"hi{a}"][i])
                rows[f"{name}0"].append(lo)
                rows[f"{name}1"].append(hi + 1)
                if m["sum_v"][i] == 0:
                    rows[name].append((lo + hi) / 2.0 + 0.5)
                    rows[f"variance_{name}"].append(0.0)
                    continue
                vc, vc2 = m[f"vc{a}"][i], m[f"vc2{a}"][i]
                s1 = float(vc) + 0.5 * w
                s2 = float(vc2) + float(vc) + 0.25 * w
                mean = s1 / w
                delta_sq = max(s2 - s1 * mean, 0.0)
                denom = w * w - w2
                rows[name].append(mean)
                rows[f"variance_{name}"].append(delta_sq * w / denom / w if denom > 0.0 else 0.0)
            rows["n_pixels"].append(n)
            rows["intensity"].append(w)
    ints = {"id", "x0", "x1", "y0", "y1", "z0", "z1", "n_pixels"}
    return {c: np.asarray(rows[c], dtype=np.int64 if c in ints else np.float64) for c in _spots.COLUMNS}


def _find_spots_3d(x, kw, mask):
    """Spots joined through the frames: the strong pixels per block of
    frames, ``gpuscope.dask.label`` (6-connected, scipy's numbering: the
    order of the first pixel) across chunk borders, then exact integer sums
    per spot merged in a tree, as the core's table."""
    import dask
    from scipy.ndimage import generate_binary_structure

    from ._label import _tree, label

    thresholds = {k: v for k, v in kw.items() if k not in ("min_spot_size", "max_spot_size")}
    strong = x.map_blocks(
        functools.partial(_spots.strong_pixels, mask=mask, **thresholds),
        dtype=bool, meta=np.empty((0, 0, 0), bool),
    )
    labels, _ = label(strong, structure=generate_binary_structure(3, 1))
    starts = [np.concatenate([[0], np.cumsum(c)[:-1]]).astype(np.int64) for c in x.chunks]
    lb, cb = labels.to_delayed(optimize_graph=False), x.to_delayed(optimize_graph=False)
    parts = [
        dask.delayed(_spot_partials, pure=True)(lb[idx], cb[idx], [int(starts[k][i]) for k, i in enumerate(idx)])
        for idx in np.ndindex(lb.shape)
    ]
    (m,) = dask.compute(_tree(parts, _merge_spots))
    opts = {p["name"]: p["default"] for p in _catalogue_params()}
    min_size = kw.get("min_spot_size", opts["min_spot_size"])
    max_size = kw.get("max_spot_size", opts["max_spot_size"])
    return _table_3d(m, min_size, max_size)


def _catalogue_params():
    from .._catalogue import OPERATIONS

    return OPERATIONS["find_spots"]["params"]


def find_spots(frames, algorithm=CATALOGUE, kernel_size=CATALOGUE, sigma_background=CATALOGUE,
               sigma_strong=CATALOGUE, min_local=CATALOGUE, global_threshold=CATALOGUE,
               gain=CATALOGUE, mask=None, min_spot_size=CATALOGUE, max_spot_size=CATALOGUE, *,
               three_d=False):
    """``gpuscope.spots.find_spots`` over a dask array of frames, computed:
    the spot table (a dict of numpy columns) equal to the whole series'.
    Frame by frame, each block's table is found on its worker and the
    tables are joined in frame order; with ``three_d=True`` spots are
    joined through the frames across chunk borders (strong pixels per
    block, ``gpuscope.dask.label``, exact sums per spot merged in a tree).
    Spots are numbered from 1 in the order of their first pixel."""
    import dask

    x = _frames(frames)
    kw = _given(algorithm=algorithm, kernel_size=kernel_size, sigma_background=sigma_background,
                sigma_strong=sigma_strong, min_local=min_local, global_threshold=global_threshold,
                gain=gain, min_spot_size=min_spot_size, max_spot_size=max_spot_size)
    # bad arguments raise now, as the numpy function would
    _spots.find_spots(np.zeros((1,) + x.shape[1:], x.dtype), mask=mask, **kw)
    if three_d:
        return _find_spots_3d(x, kw, mask)
    kw["mask"] = mask
    starts = np.concatenate([[0], np.cumsum(x.chunks[0])[:-1]]).astype(int)
    parts = [
        dask.delayed(_block_table, pure=True)(b, int(z0), kw)
        for b, z0 in zip(x.to_delayed().ravel(), starts)
    ]
    (table,) = dask.compute(dask.delayed(_join, pure=True)(*parts))
    return table
