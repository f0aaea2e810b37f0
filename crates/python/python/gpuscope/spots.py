"""X-ray diffraction spot finding on the GPU: DIALS' strong-pixel
thresholds (``dispersion_extended``, DIALS' default, and ``dispersion``),
decided as DIALS decides them in double precision, and the spot table.

Differences from DIALS: frames are integer counts (uint16, uint32, int32;
other integer dtypes are converted when their values fit; negative counts
are masked, as DIALS masks gaps); float images are refused. Spots are
4-connected strong pixels of one frame, or 6-connected through the frames
with ``three_d=True``; centroids are of pixel centres weighted by counts,
variances DIALS' ``xyzobs.px.variance``.
"""

import numpy as np

from . import _gpuscope
from ._catalogue import CATALOGUE, options, signature

__all__ = ["COLUMNS", "find_spots", "strong_pixels"]

# The spot table's columns, as the command line's CSV names them: the
# bounding box (x = column, y = row, z = frame; ends exclusive, as DIALS'
# bbox), the pixel count, the summed counts, the centroid and its variance.
COLUMNS = ("id", "x0", "x1", "y0", "y1", "z0", "z1", "n_pixels", "intensity",
           "x", "y", "z", "variance_x", "variance_y", "variance_z")


def _counts(frames, name):
    a = np.asarray(frames)
    if a.dtype.kind == "c" or a.dtype.kind not in "biu":
        raise TypeError(f"{name}: spot finding takes integer counts (uint16, uint32 or int32), not {a.dtype}")
    if a.dtype.byteorder not in "=|":
        a = a.astype(a.dtype.newbyteorder("="))
    if a.dtype in (np.uint16, np.uint32, np.int32):
        return np.ascontiguousarray(a)
    if a.dtype.kind == "b" or a.dtype in (np.uint8, np.int8, np.int16):
        return np.ascontiguousarray(a, dtype=np.int32)
    # 64-bit integers: as int32 when every value fits.
    info = np.iinfo(np.int32)
    if a.size and (a.min() < info.min or a.max() > info.max):
        raise ValueError(f"{name}: counts outside the int32 range (give uint16, uint32 or int32 counts)")
    return np.ascontiguousarray(a, dtype=np.int32)


def _run(frames, name, opts, mask, gain, three_d, want_mask):
    x = _counts(frames, name)
    if x.ndim not in (2, 3):
        raise ValueError(f"{name} has {x.ndim} axes (give one 2-D frame or a 3-D series of frames)")
    if 0 in x.shape:
        raise ValueError(f"{name} has the shape {x.shape} (frames must be non-empty)")
    gain_map = None
    if gain is not CATALOGUE and gain is not None and np.ndim(gain) > 0:
        gain_map = np.ascontiguousarray(np.asarray(gain, dtype=np.float64))
        gain = CATALOGUE
    m = None if mask is None else np.ascontiguousarray(np.asarray(mask, dtype=bool))
    return _gpuscope.find_spots(x, options(gain=gain, **opts), m, gain_map, three_d, want_mask)


@signature("find_spots")
def strong_pixels(image, algorithm=CATALOGUE, kernel_size=CATALOGUE, sigma_background=CATALOGUE,
                  sigma_strong=CATALOGUE, min_local=CATALOGUE, global_threshold=CATALOGUE, gain=CATALOGUE,
                  mask=None):
    """DIALS' strong-pixel mask of one frame (bool, the image's shape), or of
    every frame of a 3-D series. ``kernel_size``: the window's half-widths
    (rows, columns); ``gain``: one number or a per-pixel map; ``mask``:
    true where a pixel may be used (DIALS' convention), one frame's shape."""
    opts = dict(algorithm=algorithm, kernel_size=kernel_size, sigma_background=sigma_background,
                sigma_strong=sigma_strong, min_local=min_local, global_threshold=global_threshold)
    strong, _ = _run(image, "image", opts, mask, gain, False, True)
    return strong.reshape(np.shape(image))


@signature("find_spots")
def find_spots(frames, algorithm=CATALOGUE, kernel_size=CATALOGUE, sigma_background=CATALOGUE,
               sigma_strong=CATALOGUE, min_local=CATALOGUE, global_threshold=CATALOGUE, gain=CATALOGUE,
               mask=None, min_spot_size=CATALOGUE, max_spot_size=CATALOGUE, *, three_d=False):
    """DIALS' spot finding on one 2-D frame or a 3-D series: the spot table
    as a dict of numpy columns (``COLUMNS``), spots numbered from 1 in the
    order of their first pixel. Spots are found frame by frame, or joined
    through the frames (6-connected) with ``three_d=True``; spots with fewer
    than ``min_spot_size`` or more than ``max_spot_size`` pixels are
    dropped."""
    opts = dict(algorithm=algorithm, kernel_size=kernel_size, sigma_background=sigma_background,
                sigma_strong=sigma_strong, min_local=min_local, global_threshold=global_threshold,
                min_spot_size=min_spot_size, max_spot_size=max_spot_size)
    _, table = _run(frames, "frames", opts, mask, gain, bool(three_d), False)
    return {c: table[c] for c in COLUMNS}
