// Astronomy images as DS9 shows them: FITS with row 0 at the bottom and
// 1-based pixel coordinates (FITS pixel (1, 1) is the centre of the first
// element), world coordinates of TAN headers in the readout, zscale limits.
import { parseWcs, worldText } from './wcs.js';
import { zscale } from './zscale.js';

export class Astro {
  constructor() {
    this.fits = false;
    this.wcs = null;
  }

  setImage(image) {
    this.fits = image?.format === 'fits';
    this.wcs = this.fits ? parseWcs(image.header) : null;
  }

  /** Coordinates of data pixel (x, y) as the readout shows them. */
  coords(x, y) {
    return this.fits ? `x ${x + 1}, y ${y + 1} (FITS, 1-based)` : null;
  }

  readout(x, y) {
    return this.fits ? worldText(this.wcs, x, y) : '';
  }

  /** zscale limits of the values of `data` (the slice on view). */
  limits(data) {
    return zscale(data);
  }
}
