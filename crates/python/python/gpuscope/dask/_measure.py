"""``regionprops_table`` of a labelled dask array: per-block partial
moments (counts, coordinate sums, extremes, intensity sums), merged by label
in a tree, then the table as scikit-image writes it for the whole array.

The partial moments are numpy reductions over each block's labelled
elements (float64 sums, int64 coordinates): the labelling is the GPU's
part; these sums are exact and memory-bound on the host.
"""

import numpy as np

from ..measure import _NEEDS_INTENSITY, _OLD_NAMES, PROPERTIES
from .._catalogue import unsupported
from ._label import _tree

__all__ = ["regionprops_table"]

# Partial moments of one block (or a merge): columns by name, one row per
# label present, sorted by label.
_MIN, _MAX = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def _partial(labels, values, starts):
    nz = np.nonzero(labels)
    lab = labels[nz].astype(np.int64)
    if lab.size == 0:
        return _empty(labels.ndim)
    ids, inv = np.unique(lab, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    cuts = np.searchsorted(inv[order], np.arange(len(ids)))
    out = {"label": ids, "area": np.bincount(inv).astype(np.int64)}
    v = values[nz].astype(np.float64) if values is not None else None
    for k, c in enumerate(nz):
        g = c.astype(np.int64) + starts[k]
        out[f"sum{k}"] = np.bincount(inv, weights=g).astype(np.float64)
        out[f"min{k}"] = np.minimum.reduceat(g[order], cuts)
        out[f"max{k}"] = np.maximum.reduceat(g[order], cuts)
        if v is not None:
            out[f"wsum{k}"] = np.bincount(inv, weights=v * g)
    if v is not None:
        out["isum"] = np.bincount(inv, weights=v)
        out["imin"] = np.minimum.reduceat(v[order], cuts)
        out["imax"] = np.maximum.reduceat(v[order], cuts)
    return out


def _empty(ndim, intensity=True):
    out = {"label": np.zeros(0, np.int64), "area": np.zeros(0, np.int64)}
    for k in range(ndim):
        out[f"sum{k}"] = np.zeros(0)
        out[f"min{k}"] = np.zeros(0, np.int64)
        out[f"max{k}"] = np.zeros(0, np.int64)
        if intensity:
            out[f"wsum{k}"] = np.zeros(0)
    if intensity:
        out["isum"], out["imin"], out["imax"] = np.zeros(0), np.zeros(0), np.zeros(0)
    return out


def merge_by_label(parts, reducer):
    """Partial tables (dicts of columns with a sorted ``label`` column, or
    None) merged into one: rows of the same label reduced column by column
    with ``reducer(name)`` (``np.add``, ``np.minimum`` or ``np.maximum``;
    any dtype, Python integers in object columns included)."""
    parts = [p for p in parts if p is not None and len(p["label"])]
    if len(parts) <= 1:
        return parts[0] if parts else None
    ids, inv = np.unique(np.concatenate([p["label"] for p in parts]), return_inverse=True)
    order = np.argsort(inv, kind="stable")
    cuts = np.searchsorted(inv[order], np.arange(len(ids)))
    out = {"label": ids}
    for name in parts[0]:
        if name != "label":
            col = np.concatenate([p[name] for p in parts])[order]
            out[name] = reducer(name).reduceat(col, cuts)
    return out


def _reducer(name):
    if name.startswith("min") or name == "imin":
        return np.minimum
    if name.startswith("max") or name == "imax":
        return np.maximum
    return np.add


def _combine(*parts):
    return merge_by_label(parts, _reducer)


def regionprops_table(label_image, intensity_image=None, properties=("label", "bbox"), *,
                      cache=True, separator="-", extra_properties=None, spacing=None):
    """``gpuscope.measure.regionprops_table`` of dask arrays, computed: a
    dict of numpy columns equal to scikit-image's table of the whole array
    (float columns are summed in float64; scikit-image sums a float32 image
    in float32, so those agree to float32 rounding). The label image is
    typically the first result of ``gpuscope.dask.label``; chunks of the
    intensity image are aligned to it."""
    import dask
    import dask.array as da

    unsupported("regionprops_table", extra_properties=(extra_properties, None), spacing=(spacing, None))
    labels = label_image if isinstance(label_image, da.Array) else da.asarray(label_image)
    if labels.dtype.kind not in "iub":
        raise TypeError("label_image must be of an integer dtype (skimage: non-integer label images are an error)")
    names = [_OLD_NAMES.get(p, p) for p in properties]
    for given, name in zip(properties, names):
        if name not in PROPERTIES:
            raise AttributeError(
                f"'{given}' is not a property gpuscope measures (it measures {', '.join(PROPERTIES)})"
            )
        if name in _NEEDS_INTENSITY and intensity_image is None:
            raise AttributeError(f"Attribute '{given}' unavailable when `intensity_image` has not been specified.")
    values = None
    if intensity_image is not None:
        values = intensity_image if isinstance(intensity_image, da.Array) else da.asarray(intensity_image)
        if values.shape != labels.shape:
            raise ValueError(f"intensity_image's shape {values.shape} differs from label_image's {labels.shape}")
        values = values.rechunk(labels.chunks)
    lb = labels.to_delayed(optimize_graph=False)
    vb = values.to_delayed(optimize_graph=False) if values is not None else None
    starts = [np.concatenate([[0], np.cumsum(c)[:-1]]).astype(np.int64) for c in labels.chunks]
    parts = []
    for idx in np.ndindex(lb.shape):
        s = [int(starts[k][i]) for k, i in enumerate(idx)]
        parts.append(dask.delayed(_partial, pure=True)(lb[idx], vb[idx] if vb is not None else None, s))
    (m,) = dask.compute(_tree(parts, _combine))
    if m is None:
        m = _empty(labels.ndim, values is not None)
    return _table(m, properties, names, labels.ndim, separator)


def _table(m, properties, names, ndim, separator):
    area = m["area"].astype(np.float64)
    table = {}
    for given, name in zip(properties, names):
        if name == "label":
            table[given] = m["label"]
        elif name == "area":
            table[given] = m["area"].astype(np.float64)
        elif name == "bbox":
            cols = [m[f"min{k}"] for k in range(ndim)] + [m[f"max{k}"] + 1 for k in range(ndim)]
            for i, c in enumerate(cols):
                table[f"{given}{separator}{i}"] = c
        elif name == "centroid":
            for k in range(ndim):
                table[f"{given}{separator}{k}"] = m[f"sum{k}"] / area
        elif name == "centroid_weighted":
            for k in range(ndim):
                table[f"{given}{separator}{k}"] = m[f"wsum{k}"] / m["isum"]
        elif name == "intensity_mean":
            table[given] = m["isum"] / area
        elif name == "intensity_max":
            table[given] = m["imax"]
        elif name == "intensity_min":
            table[given] = m["imin"]
        elif name == "intensity_sum":
            table[given] = m["isum"]
    return table
