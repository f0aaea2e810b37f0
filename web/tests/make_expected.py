"""Expected values of the view tests, from astropy (the reference).

Writes web/tests/fixtures/expected_views.json and the small FITS fixtures
with TAN headers. Run from the repository root with a Python that has
astropy, numpy and Pillow:

    python web/tests/make_expected.py
"""

import json
from pathlib import Path

import numpy as np
from astropy.io import fits
from astropy.visualization import ZScaleInterval
from astropy.wcs import WCS
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "web" / "tests" / "fixtures"


def synthetic(n=50000):
    """The same deterministic values as views-unit.test.mjs builds."""
    i = np.arange(n, dtype=np.int64)
    v = 100.0 + ((i * 7919) % 1000) / 10.0 + np.where(i % 97 == 0, 5000.0, 0.0) - np.where(i % 89 == 0, 5000.0, 0.0)
    return v


def wcs_fixture(name, cards, shape=(30, 40)):
    """A float32 image whose value is its flat index, with WCS `cards`."""
    data = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)
    hdu = fits.PrimaryHDU(data)
    for k, v in cards.items():
        hdu.header[k] = v
    hdu.writeto(OUT / name, overwrite=True)
    w = WCS(hdu.header)
    # 0-based (column, row) pixels: corners, the centre and CRPIX - 1.
    pixels = [[0, 0], [39, 0], [0, 29], [39, 29], [20, 15], [7.0, 11.0]]
    world = w.all_pix2world(np.array(pixels, dtype=float), 0).tolist()
    return {"file": name, "pixels": pixels, "world": world}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    z = ZScaleInterval()
    hubble = np.asarray(Image.open(ROOT / "web" / "samples" / "hubble_deep_field.jpg"))
    expected = {
        "zscale": {
            "hubble_deep_field": {"shape": list(hubble.shape), "limits": [float(v) for v in z.get_limits(hubble)]},
            "synthetic": {"n": 50000, "limits": [float(v) for v in z.get_limits(synthetic())]},
        },
        "wcs": [
            wcs_fixture(
                "wcs_tan_cd.fits",
                {
                    "CTYPE1": "RA---TAN",
                    "CTYPE2": "DEC--TAN",
                    "CRPIX1": 8.0,
                    "CRPIX2": 12.0,
                    "CRVAL1": 189.2,
                    "CRVAL2": 62.2,
                    # 0.4 arcsec pixels rotated by 30 degrees, RA increasing to the left.
                    "CD1_1": -0.4 / 3600 * np.cos(np.radians(30)),
                    "CD1_2": 0.4 / 3600 * np.sin(np.radians(30)),
                    "CD2_1": 0.4 / 3600 * np.sin(np.radians(30)),
                    "CD2_2": 0.4 / 3600 * np.cos(np.radians(30)),
                    "RADESYS": "ICRS",
                },
            ),
            wcs_fixture(
                "wcs_tan_pc.fits",
                {
                    "CTYPE1": "RA---TAN",
                    "CTYPE2": "DEC--TAN",
                    "CRPIX1": 20.5,
                    "CRPIX2": 15.5,
                    "CRVAL1": 10.68,
                    "CRVAL2": -41.27,
                    "CDELT1": -0.01,
                    "CDELT2": 0.01,
                    "PC1_1": 0.9,
                    "PC1_2": -0.2,
                    "PC2_1": 0.3,
                    "PC2_2": 1.1,
                    "RADESYS": "ICRS",
                },
            ),
        ],
    }
    # A projection the page does not support: it must say so.
    sin = fits.PrimaryHDU(np.zeros((8, 8), dtype=np.float32))
    cards = {"CTYPE1": "RA---SIN", "CTYPE2": "DEC--SIN", "CRPIX1": 4, "CRPIX2": 4}
    cards |= {"CRVAL1": 0, "CRVAL2": 0, "CDELT1": -1e-3, "CDELT2": 1e-3}
    for k, v in cards.items():
        sin.header[k] = v
    sin.writeto(OUT / "wcs_sin.fits", overwrite=True)
    (OUT / "expected_views.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(json.dumps(expected["zscale"]))


if __name__ == "__main__":
    main()
