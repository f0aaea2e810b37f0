"""Writes blobs3d.tif: a 64x64x64 uint16 synthetic volume (z-first TIFF stack).

scikit-image's binary_blobs (3-D, seeded) smoothed with scipy's
gaussian_filter, scaled to 100..3100 counts, plus Poisson noise from a
seeded numpy generator. Pages are written uncompressed by hand (no tifffile
needed). Re-run: python3 web/samples/make_blobs3d.py (versions in PROVENANCE.md).
"""
import struct
from pathlib import Path

import numpy as np
from scipy import ndimage
from skimage.data import binary_blobs

blobs = binary_blobs(length=64, blob_size_fraction=0.15, n_dim=3, volume_fraction=0.25, rng=7)
smooth = ndimage.gaussian_filter(blobs.astype(np.float64), 1.5)
counts = 100 + 3000 * smooth
vol = np.random.default_rng(7).poisson(counts).clip(0, 65535).astype('<u2')

def tiff_stack(pages):
    d, h, w = pages.shape
    out = bytearray(b'II*\x00' + struct.pack('<I', 8))
    for z in range(d):
        data = pages[z].tobytes()
        ifd_at = len(out)
        n = 9
        data_at = ifd_at + 2 + 12 * n + 4
        next_ifd = 0 if z == d - 1 else data_at + len(data)
        entries = [
            (256, 4, 1, w), (257, 4, 1, h), (258, 3, 1, 16), (259, 3, 1, 1),
            (262, 3, 1, 1), (273, 4, 1, data_at), (277, 3, 1, 1),
            (278, 4, 1, h), (279, 4, 1, len(data)),
        ]
        out += struct.pack('<H', n)
        for tag, typ, count, value in entries:
            if typ == 3:
                out += struct.pack('<HHIHH', tag, typ, count, value, 0)
            else:
                out += struct.pack('<HHII', tag, typ, count, value)
        out += struct.pack('<I', next_ifd)
        out += data
    return bytes(out)

path = Path(__file__).with_name('blobs3d.tif')
path.write_bytes(tiff_stack(vol))
print(path, vol.shape, vol.dtype, vol.min(), vol.max(), round(vol.mean(), 3))
