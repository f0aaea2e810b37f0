"""Reference strong-pixel masks for `gpuscope spots` (DIALS' dispersion and
dispersion_extended thresholds, dials/algorithms/image/threshold/local.h).

An independent numpy port of DIALS' double-precision definition, written from
local.h and not from crates/core/src/spots/cpu.rs: window sums by integer
summed-area tables (int64 / Python ints: exact), then DIALS' formulas in
float64, operation by operation as local.h writes them. Run from the
repository root:

    python3 tests/golden/spots/make_goldens.py ../shared/data/diffraction

It writes, per frame, the strong-pixel coordinates (row, col; raster order)
of both algorithms with DIALS' defaults into <frame>_<algorithm>.npy
(N x 2 uint16: a few kB each). Versions in versions.txt.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../shared/tools"))

BIG = 1 << 24


def window_sums(valid, v, ky, kx, squares=True):
    """Exact sums over the (2ky+1)x(2kx+1) window clipped at the edges."""
    h, w = v.shape
    vv = np.where(valid, v, 0).astype(np.int64)
    parts = [valid.astype(np.int64), vv]
    if squares:
        # v < 2^24 so v*v < 2^48 and 2^48 * 121 < 2^63: int64 is exact.
        parts.append(vv * vv)
    out = []
    for p in parts:
        sat = np.zeros((h + 1, w + 1), dtype=object if p.dtype == object else np.int64)
        # int64 cumulative sums: the largest total is below 2^48 * 18e6 < 2^73
        # only in absurd cases; use Python ints (object) for the squares.
        if p is parts[-1] and squares:
            sat = np.zeros((h + 1, w + 1), dtype=object)
            sat[1:, 1:] = p.astype(object).cumsum(0).cumsum(1)
        else:
            sat[1:, 1:] = p.cumsum(0).cumsum(1)
        r = np.arange(h)
        c = np.arange(w)
        r0 = np.clip(r - ky, 0, h)
        r1 = np.clip(r + ky + 1, 0, h)
        c0 = np.clip(c - kx, 0, w)
        c1 = np.clip(c + kx + 1, 0, w)
        s = sat[r1][:, c1] - sat[r0][:, c1] - sat[r1][:, c0] + sat[r0][:, c0]
        out.append(s)
    return out


def to_f64(a):
    return np.array(a, dtype=object).astype(np.float64) if a.dtype == object else a.astype(np.float64)


def chebyshev_distance_ge(background, d):
    """True where no background pixel lies within Chebyshev distance < d
    (DIALS' chebyshev_distance(...) >= d; nothing outside the image)."""
    h, w = background.shape
    r = d - 1
    if r < 0:
        return np.ones_like(background)
    b = background.astype(np.int64)
    sat = np.zeros((h + 1, w + 1), dtype=np.int64)
    sat[1:, 1:] = b.cumsum(0).cumsum(1)
    rr = np.arange(h)
    cc = np.arange(w)
    r0 = np.clip(rr - r, 0, h)
    r1 = np.clip(rr + r + 1, 0, h)
    c0 = np.clip(cc - r, 0, w)
    c1 = np.clip(cc + r + 1, 0, w)
    n = sat[r1][:, c1] - sat[r0][:, c1] - sat[r1][:, c0] + sat[r0][:, c0]
    if not background.any():
        # chebyshev_distance gives h + w + 1 everywhere when nothing is background.
        return np.full(background.shape, h + w + 1 >= d)
    return n == 0


def dispersion(v, mask, ks=(3, 3), nsig_b=6.0, nsig_s=3.0, min_count=2, threshold=0.0, gain=None):
    mask = mask & (v >= 0)
    valid = mask & (v < BIG)
    m, x, y = window_sums(valid, v, ks[0], ks[1])
    m, x, y = to_f64(m), to_f64(x), to_f64(y)
    src = v.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        if gain is None:
            a = m * y - x * x - x * (m - 1)
            c = x * nsig_b * np.sqrt(2 * (m - 1))
            d = nsig_s * np.sqrt(x * m)
        else:
            a = m * y - x * x
            c = gain * x * (m - 1 + nsig_b * np.sqrt(2 * (m - 1)))
            d = nsig_s * np.sqrt(gain * x * m)
        b = m * src - x
    return mask & (m >= min_count) & (x >= 0) & (src > threshold) & (a > c) & (b > d)


def dispersion_extended(v, mask, ks=(3, 3), nsig_b=6.0, nsig_s=3.0, min_count=2, threshold=0.0, gain=None):
    mask = mask & (v >= 0)
    valid = mask & (v < BIG)
    m, x, y = window_sums(valid, v, ks[0], ks[1])
    m, x, y = to_f64(m), to_f64(x), to_f64(y)
    with np.errstate(invalid="ignore", divide="ignore"):
        if gain is None:
            a = m * y - x * x - x * (m - 1)
            c = x * nsig_b * np.sqrt(2 * (m - 1))
        else:
            a = m * y - x * x
            c = gain * x * (m - 1 + nsig_b * np.sqrt(2 * (m - 1)))
    # Non-background: masked pixels and those passing the dispersion test.
    nonbg = ~mask | ((m >= min_count) & (x >= 0) & (a > c))
    far = chebyshev_distance_ge(~nonbg, min(ks))
    candidate = mask & nonbg & far
    background = mask & ~candidate
    m2, x2 = window_sums(background & (v < BIG), v, ks[0] + 2, ks[1] + 2, squares=False)
    m2, x2 = to_f64(m2), to_f64(x2)
    src = v.astype(np.float64)
    g = 1.0 if gain is None else gain
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(m2 >= 2, x2 / np.where(m2 >= 2, m2, 1), 0.0)
        local = src >= mean + nsig_s * np.sqrt(g * mean)
    return mask & (m2 >= 0) & (x2 >= 0) & candidate & (src > threshold) & local


def coords(strong):
    return np.argwhere(strong).astype(np.uint16)


def main():
    from cbf import read_cbf

    data = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/diffraction"
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(data)):
        if not name.endswith(".cbf.gz"):
            continue
        img, _ = read_cbf(os.path.join(data, name))
        img = img.astype(np.int64)
        mask = np.ones(img.shape, dtype=bool)
        ext = dispersion_extended(img, mask)
        dis = dispersion(img, mask)
        stem = name[: -len(".cbf.gz")]
        np.save(os.path.join(here, stem + "_dispersion_extended.npy"), coords(ext))
        np.save(os.path.join(here, stem + "_dispersion.npy"), coords(dis))
        print(stem, img.shape, "min", img.min(), "max", img.max(),
              "masked", int((img < 0).sum()), "strong ext", int(ext.sum()), "disp", int(dis.sum()))
    with open(os.path.join(here, "versions.txt"), "w") as f:
        f.write(f"python {sys.version.split()[0]}\nnumpy {np.__version__}\n")


if __name__ == "__main__":
    main()
