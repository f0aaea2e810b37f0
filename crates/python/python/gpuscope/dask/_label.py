"""Connected components of a dask array in scipy's numbering, with the
merge across chunk borders done in a tree, not on the driver.

1. Each block is labelled on its own (``gpuscope.ndimage.label``). A
   provisional id names a component of a block: the block's index times
   2**32 plus its label there, so no counts need to be known in advance.
   The block task also records, for each of its labels, the C-order index
   (in the whole array) of its first element.
2. Each block, with a one-element halo of its neighbours' provisional ids,
   lists the pairs of different ids that the structure connects, and the
   first elements of its own ids among them. These reports are merged in a
   tree (union-find: each component keeps its smallest id as root and the
   smallest first element reported); the tree's root holds one row per id
   on a chunk border.
3. A component is named by the C-order index of its first element (unique,
   and what scipy's numbering sorts by). The indices of all components'
   first elements, gathered in one task (8 bytes per component), sorted,
   give every component its rank: its label.
4. Each block maps its labels to ranks.

The driver's graph has a fixed number of tasks per block; what grows with
the data is step 3's one sorted array of first elements.
"""

import sys

import numpy as np

from .. import ndimage as _nd
from ._filters import _dask_array

__all__ = ["label"]

_SHIFT = np.int64(1) << np.int64(32)


def _structure(structure, ndim):
    if structure is None:
        # scipy's default: faces only.
        from scipy.ndimage import generate_binary_structure

        return generate_binary_structure(ndim, 1)
    s = np.asarray(structure).astype(bool)
    if s.ndim != ndim or any(n != 3 for n in s.shape):
        raise RuntimeError("structure and input must have equal rank and extent 3 on each axis (as scipy)")
    return s


def _label_block(block, structure, index, shape, starts):
    """Labels one block: (provisional ids, int64; the first element of each
    local label as a C-order index in the whole array, by label)."""
    labels, n = _nd.label(block, structure=structure)
    flat = labels.ravel()
    # scipy's numbering: label k first appears after label k - 1, so the
    # running maximum steps up by one at each label's first element (no
    # sort of the block).
    if n:
        top = np.maximum.accumulate(flat)
        first_local = np.flatnonzero(top[1:] != top[:-1]) + 1
        if flat[0] > 0:
            first_local = np.concatenate([[0], first_local])
        local = np.unravel_index(first_local, block.shape)
        coords = [c + s for c, s in zip(local, starts)]
        firsts = np.ravel_multi_index(coords, shape)
    else:
        firsts = np.zeros(0, np.int64)
    firsts_by_label = np.zeros(n + 1, np.int64)
    firsts_by_label[1:] = firsts
    prov = labels.astype(np.int64)
    prov[labels > 0] += np.int64(index) * _SHIFT
    return prov, firsts_by_label


def _offsets(structure):
    """The structure's offsets with a positive first non-zero component:
    each neighbour relation once."""
    c = np.array(structure.shape) // 2
    out = []
    for idx in zip(*np.nonzero(structure)):
        d = tuple(int(i - j) for i, j in zip(idx, c))
        nz = [v for v in d if v != 0]
        if nz and nz[0] > 0:
            out.append(d)
    return out


def _shifted_pairs(h, d):
    """Pairs of different non-zero ids at offset `d` within array `h`."""
    a_sl, b_sl = [], []
    for k in d:
        if k > 0:
            a_sl.append(slice(0, -k))
            b_sl.append(slice(k, None))
        elif k < 0:
            a_sl.append(slice(-k, None))
            b_sl.append(slice(0, k))
        else:
            a_sl.append(slice(None))
            b_sl.append(slice(None))
    a = h[tuple(a_sl)].ravel()
    b = h[tuple(b_sl)].ravel()
    m = (a != b) & (a > 0) & (b > 0)
    return np.stack([a[m], b[m]], axis=1) if m.any() else None


def _pairs(halo_block, offsets):
    """Pairs of different non-zero ids that an offset connects across the
    block's border: only the two layers at each end of each axis (the halo
    and the block's own edge) can hold them, since elements of one block
    that are connected share an id already."""
    found = []
    for k, n in enumerate(halo_block.shape):
        for lo in sorted({0, max(n - 2, 0)}):
            sl = [slice(None)] * halo_block.ndim
            sl[k] = slice(lo, lo + 2)
            slab = halo_block[tuple(sl)]
            for d in offsets:
                if d[k] != 0:
                    p = _shifted_pairs(slab, d)
                    if p is not None:
                        found.append(p)
    if not found:
        return np.zeros((0, 2), np.int64)
    return np.unique(np.concatenate(found), axis=0)


def _block_equivalences(index, firsts_by_label, halo_block, offsets):
    """This block's pairs and its report: (id, id, first element) for each
    of its own ids in a pair (a halo's ids are reported by their blocks)."""
    pairs = _pairs(halo_block, offsets)
    ids = np.unique(pairs) if pairs.size else np.zeros(0, np.int64)
    ids = ids[ids // _SHIFT == index]
    firsts = firsts_by_label[(ids % _SHIFT).astype(np.intp)]
    return pairs, np.stack([ids, ids, firsts], axis=1).reshape(-1, 3)


_NONE = np.iinfo(np.int64).max


def _merge(*parts):
    """Union-find of several blocks' (or merges') reports: the pairs, and
    rows (id, root id, first element). Each id's component gets the
    smallest id in it as its root and the smallest first element reported
    in it (``_NONE`` until the block that holds it reports). Returns (no
    pairs, one row per id seen)."""
    pairs = [p for p, _ in parts if p.size]
    rows = [r for _, r in parts if r.size]
    pairs = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
    rows = np.concatenate(rows) if rows else np.zeros((0, 3), np.int64)
    nodes = np.unique(np.concatenate([rows[:, 0], rows[:, 1], pairs.ravel()]))
    if nodes.size == 0:
        return pairs, rows
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    a = np.searchsorted(nodes, np.concatenate([rows[:, 0], pairs[:, 0]]))
    b = np.searchsorted(nodes, np.concatenate([rows[:, 1], pairs[:, 1]]))
    g = coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(len(nodes), len(nodes)))
    _, comp = connected_components(g, directed=False)
    # nodes are sorted: a component's first node is its smallest id
    root = np.full(comp.max() + 1, _NONE, np.int64)
    np.minimum.at(root, comp, nodes)
    value = np.full(comp.max() + 1, _NONE, np.int64)
    np.minimum.at(value, comp[np.searchsorted(nodes, rows[:, 0])], rows[:, 2])
    return np.zeros((0, 2), np.int64), np.stack([nodes, root[comp], value[comp]], axis=1)


def _tree(items, combine, width=8):
    """Pairwise-style reduction of a list of delayed values in a tree of
    fan-in `width`."""
    import dask

    items = list(items)
    while len(items) > 1:
        items = [
            dask.delayed(combine, pure=True)(*items[i:i + width])
            for i in range(0, len(items), width)
        ]
    return items[0] if items else dask.delayed(combine)()


def _starts(firsts_by_label, index, merged):
    """The first elements of the components whose first element lies in
    this block (each component is counted by exactly one block)."""
    n = len(firsts_by_label) - 1
    if n == 0:
        return np.zeros(0, np.int64)
    ids = np.arange(1, n + 1, dtype=np.int64) + np.int64(index) * _SHIFT
    own = firsts_by_label[1:]
    comp = _component_first(ids, own, merged)
    return np.sort(own[comp == own])


def _component_first(ids, own, merged):
    """The first element of the component of each id: from the merged table
    for ids on chunk borders, the id's own otherwise."""
    table = merged[1]
    if table.size == 0:
        return own
    pos = np.minimum(np.searchsorted(table[:, 0], ids), len(table) - 1)
    hit = table[pos, 0] == ids
    return np.where(hit, np.minimum(table[pos, 2], own), own)


def _gather(*starts):
    return np.sort(np.concatenate(starts)) if starts else np.zeros(0, np.int64)


def _relabel(prov, firsts_by_label, index, merged, all_starts):
    n = len(firsts_by_label) - 1
    lut = np.zeros(n + 1, np.int32)
    if n:
        ids = np.arange(1, n + 1, dtype=np.int64) + np.int64(index) * _SHIFT
        comp = _component_first(ids, firsts_by_label[1:], merged)
        lut[1:] = (np.searchsorted(all_starts, comp) + 1).astype(np.int32)
    if sys.byteorder == "little" and prov.flags.c_contiguous:
        # the low 32 bits of an id are its local label: a view, no copy
        local = prov.view(np.uint32)[..., ::2] if prov.size else prov.astype(np.uint32)
    else:
        local = (prov % _SHIFT).astype(np.uint32)
    return lut[local]


def label(input, structure=None, output=None):
    """``gpuscope.ndimage.label`` on a dask array: returns ``(labels,
    num_features)`` as dask objects (an int32 array, a 0-d int array),
    numbered as scipy numbers the whole array (a component's label ranks
    its first element in C order). Chunks of any size, including one
    element. ``output``: None or a dtype."""
    import dask
    import dask.array as da

    x = _dask_array(input)
    s = _structure(structure, x.ndim)
    # bad arguments raise now, as the numpy function would
    _nd.label(np.zeros((1,) * x.ndim, dtype=x.dtype), structure=s)
    if isinstance(output, np.ndarray):
        raise TypeError("output: give a dtype (a dask result cannot fill a numpy array in place)")
    offsets = _offsets(s)

    blocks = x.to_delayed()
    grid = blocks.shape
    chunk_starts = [np.concatenate([[0], np.cumsum(c)[:-1]]).astype(int) for c in x.chunks]
    results = np.empty(grid, dtype=object)
    for idx in np.ndindex(grid):
        index = int(np.ravel_multi_index(idx, grid))
        starts = [int(chunk_starts[k][i]) for k, i in enumerate(idx)]
        results[idx] = dask.delayed(_label_block, nout=2, pure=True)(
            blocks[idx], s, index, x.shape, starts
        )

    def part(i, dtype, idx):
        shape = tuple(x.chunks[k][j] for k, j in enumerate(idx))
        return da.from_delayed(results[idx][i], shape=shape, dtype=dtype)

    prov = da.block(
        _nested(grid, lambda idx: part(0, np.int64, idx))
    ) if x.size else da.zeros(x.shape, dtype=np.int64, chunks=x.chunks)
    halo = da.overlap.overlap(prov, depth={k: 1 for k in range(x.ndim)}, boundary="none")
    # Not optimised: dask would fuse each block's labelling into every task
    # that reads it (the block itself, its neighbours' halos) and label it
    # again there.
    halo_blocks = halo.to_delayed(optimize_graph=False)
    prov_blocks = prov.to_delayed(optimize_graph=False)
    equiv = [
        dask.delayed(_block_equivalences, pure=True)(
            int(np.ravel_multi_index(idx, grid)), results[idx][1], halo_blocks[idx], offsets
        )
        for idx in np.ndindex(grid)
    ]
    merged = _tree(equiv, _merge)
    starts = [
        dask.delayed(_starts, pure=True)(
            results[idx][1], int(np.ravel_multi_index(idx, grid)), merged
        )
        for idx in np.ndindex(grid)
    ]
    all_starts = dask.delayed(_gather, pure=True)(*starts)
    num = da.from_delayed(dask.delayed(len)(all_starts), shape=(), dtype=int)

    def relabel(idx):
        index = int(np.ravel_multi_index(idx, grid))
        shape = tuple(x.chunks[k][j] for k, j in enumerate(idx))
        d = dask.delayed(_relabel, pure=True)(
            prov_blocks[idx], results[idx][1], index, merged, all_starts
        )
        return da.from_delayed(d, shape=shape, dtype=np.int32)

    labels = da.block(_nested(grid, relabel)) if x.size else da.zeros(x.shape, np.int32, chunks=x.chunks)
    if output is not None:
        labels = labels.astype(np.dtype(output))
    return labels, num


def _nested(grid, make, prefix=()):
    """Nested lists of `make(index)` over `grid`, as ``da.block`` takes."""
    k = len(prefix)
    if k == len(grid):
        return make(prefix)
    return [_nested(grid, make, prefix + (i,)) for i in range(grid[k])]
