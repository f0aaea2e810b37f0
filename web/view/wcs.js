// World coordinates of FITS pixels for the gnomonic (TAN) projection of
// the FITS WCS standard (Greisen & Calabretta 2002, paper II): pixel →
// intermediate world coordinates through CD, or PC scaled by CDELT (or
// CROTA2), then the TAN deprojection and the spherical rotation to
// (CRVAL1, CRVAL2) with LONPOLE 180° (the default for zenithal projections).
// Other projections and distortion terms (-SIP, TPV) are reported as not
// supported rather than approximated.

const D2R = Math.PI / 180;

/** The WCS of a header (`[[key, value], ...]` as the decoder gives it):
 * `{ok: true, toWorld(x, y), ctype, ...}` for a TAN header, `{ok: false,
 * why}` when the header has no celestial WCS or another projection, or
 * null when it has no WCS keywords at all. (x, y) are 0-based array
 * indices: column and row (FITS pixel = index + 1). */
export function parseWcs(header) {
  const h = new Map();
  for (const [k, v] of header) if (!h.has(k)) h.set(k.trim().toUpperCase(), String(v).trim());
  const ct1 = h.get('CTYPE1');
  const ct2 = h.get('CTYPE2');
  if (!ct1 && !ct2 && !h.has('CRVAL1')) return null;
  if (!ct1 || !ct2) return { ok: false, why: 'the header has no CTYPE1/CTYPE2 pair: no celestial WCS' };
  const proj1 = ct1.slice(5);
  const proj2 = ct2.slice(5);
  if (proj1 !== 'TAN' || proj2 !== 'TAN') {
    const p = proj1 === proj2 ? proj1 : `${proj1}/${proj2}`;
    return { ok: false, why: `projection ${p || ct1} is not supported (only TAN without distortion terms)` };
  }
  const num = (k, d) => {
    if (!h.has(k)) return d;
    const v = Number(h.get(k).replace(/D/i, 'E'));
    return Number.isFinite(v) ? v : NaN;
  };
  const crpix = [num('CRPIX1', 0), num('CRPIX2', 0)];
  const crval = [num('CRVAL1', 0), num('CRVAL2', 0)];
  let cd;
  if (['CD1_1', 'CD1_2', 'CD2_1', 'CD2_2'].some((k) => h.has(k))) {
    cd = [num('CD1_1', 0), num('CD1_2', 0), num('CD2_1', 0), num('CD2_2', 0)];
  } else {
    const cdelt = [num('CDELT1', 1), num('CDELT2', 1)];
    let pc;
    if (['PC1_1', 'PC1_2', 'PC2_1', 'PC2_2'].some((k) => h.has(k))) {
      pc = [num('PC1_1', 1), num('PC1_2', 0), num('PC2_1', 0), num('PC2_2', 1)];
    } else {
      // The older CROTA2 convention (rotation of the second axis).
      const r = num('CROTA2', 0) * D2R;
      const rho = cdelt[1] !== 0 ? cdelt[0] / cdelt[1] : 1;
      pc = [Math.cos(r), -Math.sin(r) * (rho ? 1 / rho : 0), Math.sin(r) * rho, Math.cos(r)];
    }
    cd = [cdelt[0] * pc[0], cdelt[0] * pc[1], cdelt[1] * pc[2], cdelt[1] * pc[3]];
  }
  if ([...crpix, ...crval, ...cd].some((v) => !Number.isFinite(v))) {
    return { ok: false, why: 'a WCS keyword (CRPIX, CRVAL, CD, PC or CDELT) is not a number' };
  }
  // Longitude first unless the header says otherwise (DEC--TAN as axis 1).
  const lat1 = /^(DEC|[A-Z]LAT|[A-Z]{2}LT)/.test(ct1);
  const lonpole = num('LONPOLE', crval[lat1 ? 0 : 1] >= 90 ? 0 : 180);
  const [a0, d0] = lat1 ? [crval[1], crval[0]] : crval;
  const sd0 = Math.sin(d0 * D2R);
  const cdd0 = Math.cos(d0 * D2R);
  const toWorld = (x, y) => {
    const px = x + 1 - crpix[0];
    const py = y + 1 - crpix[1];
    let u = cd[0] * px + cd[1] * py;
    let v = cd[2] * px + cd[3] * py;
    if (lat1) [u, v] = [v, u];
    // TAN: R_theta = (180/pi) cot(theta).
    const r = Math.hypot(u, v);
    const phi = r === 0 ? 0 : Math.atan2(u, -v);
    const theta = Math.atan2(180 / Math.PI, r);
    const st = Math.sin(theta);
    const ctt = Math.cos(theta);
    const dphi = phi - lonpole * D2R;
    const alpha = a0 * D2R + Math.atan2(-ctt * Math.sin(dphi), st * cdd0 - ctt * sd0 * Math.cos(dphi));
    const delta = Math.asin(Math.max(-1, Math.min(1, st * sd0 + ctt * cdd0 * Math.cos(dphi))));
    let lon = (alpha / D2R) % 360;
    if (lon < 0) lon += 360;
    const lat = delta / D2R;
    return lat1 ? [lat, lon] : [lon, lat];
  };
  return {
    ok: true,
    ctype: [ct1, ct2],
    equatorial: /^RA/.test(lat1 ? ct2 : ct1),
    toWorld,
  };
}

/** Degrees as sexagesimal text: RA in hours (h:m:s), Dec in degrees. */
export function sexagesimal(deg, hours) {
  const sign = deg < 0 ? '-' : hours ? '' : '+';
  let v = Math.abs(deg) / (hours ? 15 : 1);
  const a = Math.floor(v);
  v = (v - a) * 60;
  const b = Math.floor(v);
  const c = (v - b) * 60;
  const pad = (n) => String(n).padStart(2, '0');
  return `${sign}${pad(a)}:${pad(b)}:${c.toFixed(hours ? 3 : 2).padStart(hours ? 6 : 5, '0')}`;
}

/** The readout text of pixel (x, y) (0-based indices). */
export function worldText(wcs, x, y) {
  if (!wcs) return '';
  if (!wcs.ok) return `WCS: ${wcs.why}`;
  const [lon, lat] = wcs.toWorld(x, y);
  const names = wcs.ctype.map((c) => c.slice(0, 4).replace(/-+$/, ''));
  if (wcs.equatorial) {
    return `RA ${sexagesimal(lon, true)} Dec ${sexagesimal(lat, false)} (${lon.toFixed(6)}°, ${lat.toFixed(6)}°)`;
  }
  return `${names[0]} ${lon.toFixed(6)}°, ${names[1]} ${lat.toFixed(6)}°`;
}
