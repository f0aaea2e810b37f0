// The view modules wired to the page: diffraction frames, astronomy
// images, orthogonal views of stacks, the measuring tools, outlier counts,
// and the view state in the URL and in a file. The page calls the hooks
// this returns at a few points (image loaded, limits, readout, layer,
// redraw, hash, table rows); everything else lives here.
import { Astro } from './astro.js';
import { Diffraction, findSpotsOverSeries, stackFrames } from './diffraction.js';
import { Measure, drawProfile, profileTable } from './measure.js';
import { Ortho } from './ortho.js';
import { inputOf, replaced } from './outliers.js';
import { checkState, isFit, parseViewEntry, stateOf, viewEntry } from './state.js';
import { renderTable, saveBlob, toCsv } from '../table.js';
import { layout } from '../viewer.js';

const fmt = (v) => (typeof v !== 'number' ? String(v) : Number.isInteger(v) ? String(v) : v.toPrecision(6));

/** `ctx`: {viewer, state, OPS, refresh(), writeHash(), hashOf(),
 * showMessage(text, kind), run(where, id, input, params), where(),
 * decode(name, bytes), useImage(image), summaryOf(data)}. */
export function createViews(ctx) {
  const { viewer, state } = ctx;
  const $ = (id) => document.getElementById(id);
  const diffraction = new Diffraction();
  const astro = new Astro();
  const measure = new Measure(viewer, {
    onProfile: showProfile,
    onStats: showStats,
    context: () => ({ data: viewer.layer.data, masked: state.image?.format === 'cbf' }),
  });
  const ortho = new Ortho(viewer, $('ortho-xz'), $('ortho-yz'), (p) => {
    $('ortho-caption-xz').textContent = `XZ at y ${p.y}`;
    $('ortho-caption-yz').textContent = `YZ at x ${p.x}`;
    ctx.setSlice(p.z);
  });
  viewer.decorations.push(diffraction.decoration(), measure.decoration(), ortho.decoration());
  let pendingView = null; // a `view=` entry to apply once the image is shown
  let pinnedDisplay = false; // the link chose the display: no defaults
  let seriesSpots = null; // spot finding over a series: {columns, rows, markers}
  let diffOn = false;
  let outlierStep = -1;

  // ---- controls
  $('tool').addEventListener('change', (e) => {
    measure.setMode(e.target.value);
    $('measure').hidden = false;
  });
  $('clear-tools').addEventListener('click', () => measure.clear());
  $('markers-on').addEventListener('change', (e) => {
    viewer.markerStyle.show = e.target.checked;
    viewer.paint();
    ctx.writeHash();
  });
  $('marker-size').addEventListener('input', (e) => {
    viewer.markerStyle.scale = Number(e.target.value);
    $('marker-size-out').textContent = `${e.target.value}×`;
    viewer.paint();
    ctx.writeHash();
  });
  $('rings-on').addEventListener('change', (e) => {
    diffraction.rings.show = e.target.checked;
    viewer.paint();
    ctx.writeHash();
  });
  $('rings-d').addEventListener('change', (e) => {
    const text = e.target.value.trim();
    const ds = text ? text.split(/[\s,;]+/).map(Number) : null;
    if (ds && !ds.every((d) => d > 0)) {
      e.target.setAttribute('aria-invalid', 'true');
      ctx.showMessage(`invalid rings: '${text}' (give d-spacings in Å, e.g. 3.5, 2.5, 1.8; empty for automatic)`);
      return;
    }
    e.target.removeAttribute('aria-invalid');
    diffraction.rings.spacings = ds;
    viewer.paint();
    ctx.writeHash();
  });
  $('brightness').addEventListener('change', (e) => {
    const b = Number(e.target.value);
    if (!(b > 0)) return;
    diffraction.brightness = b;
    $('limits').value = 'dials';
    ctx.refresh();
    ctx.writeHash();
  });
  $('ortho-on').addEventListener('change', (e) => {
    ortho.on = e.target.checked;
    showOrtho();
    viewer.paint();
    ctx.writeHash();
  });
  $('outliers-diff').addEventListener('change', (e) => {
    diffOn = e.target.checked;
    ctx.refresh();
  });
  $('profile-csv').addEventListener('click', () => {
    if (!measure.profile) return;
    const { columns, rows } = profileTable(measure.profile);
    saveBlob(new Blob([toCsv(columns, rows)], { type: 'text/csv' }), `${stem()}-profile.csv`);
  });
  $('series-spots').addEventListener('click', () => spotsOverSeries());
  $('save-state').addEventListener('click', () => {
    const s = stateOf({ hash: ctx.hashOf(), image: state.image, sample: state.sample, measure, extras: {} });
    saveBlob(new Blob([`${JSON.stringify(s, null, 1)}\n`], { type: 'application/json' }), `${stem()}-view.json`);
  });
  $('load-state').addEventListener('click', () => $('state-file').click());
  $('state-file').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    e.target.value = '';
    if (file) await loadState(await file.text(), file.name);
  });
  viewer.onChange = () => {
    if (viewer.layer) ctx.writeHash();
  };

  const stem = () => (state.image?.name ?? 'image').replace(/(\.cbf)?\.[^.]*$/i, '');

  function showProfile(p) {
    $('profile-box').hidden = !p;
    if (!p) return;
    drawProfile($('profile-chart'), p);
    const vals = p.points.map((q) => q.value).filter((v) => typeof v === 'number');
    const [x0, y0, x1, y1] = p.line;
    $('profile-text').textContent =
      `Line (${x0}, ${y0}) → (${x1}, ${y1})${viewer.info.slices > 1 ? ` on slice ${p.slice}` : ''}: ${p.points.length} pixels` +
      (vals.length ? `, values ${fmt(Math.min(...vals))} … ${fmt(Math.max(...vals))}` : '') +
      '.';
  }

  function showStats(s) {
    $('roi-box').hidden = !s;
    if (!s) return;
    const [x0, y0, x1, y1] = s.rect;
    $('roi-text').textContent =
      `Rectangle x ${x0}…${x1}, y ${y0}…${y1} (${x1 - x0 + 1} × ${y1 - y0 + 1} pixels)${viewer.info.slices > 1 ? ` on slice ${s.slice}` : ''}` +
      `${s.masked ? '; masked (negative) detector pixels left out' : ''}; std over the pixels (ddof 0).`;
    const f = (v) => (Number.isFinite(v) ? fmt(v) : '—');
    renderTable($('roi-table'), {
      columns: ['channel', 'count', 'mean', 'std', 'min', 'max', 'sum'].map((key) => ({ key, label: key, format: key === 'channel' ? undefined : f })),
      rows: s.rows,
      name: `${stem()}-roi`,
    });
  }

  // ---- series of frames
  async function loadSeries(files) {
    const images = [];
    for (const f of files) {
      ctx.showMessage(`Decoding ${f.name} (${images.length + 1} of ${files.length})…`, 'info');
      try {
        images.push(await ctx.decode(f.name, new Uint8Array(await f.arrayBuffer())));
      } catch (e) {
        ctx.showMessage(`Cannot open ${f.name}: ${e instanceof Error ? e.message : e}`);
        return false;
      }
    }
    let image;
    try {
      image = stackFrames(images.sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true })));
    } catch (e) {
      ctx.showMessage(e.message);
      return false;
    }
    seriesSpots = null;
    return ctx.useImage(image);
  }

  async function spotsOverSeries() {
    const image = state.image;
    if (!image?.frames) return;
    const step = state.steps.find((s) => s.op === 'find_spots');
    const raw = step?.raw ?? ctx.defaults('find_spots');
    const where = ctx.where();
    $('series-spots').disabled = true;
    try {
      const frame0 = { shape: image.shape.slice(1) };
      const parsed = ctx.parseStep('find_spots', raw, frame0);
      if (parsed.error) throw new Error(`find_spots: ${parsed.error}`);
      const t0 = performance.now();
      seriesSpots = await findSpotsOverSeries(
        image,
        (frame) => ctx.run(where, 'find_spots', frame, parsed.params),
        (k, n) => ($('series-text').textContent = k < n ? `Finding spots on frame ${k + 1} of ${n} (${where === 'gpu' ? 'WebGPU' : 'CPU'})…` : ''),
      );
      const perFrame = image.frames.map((_, k) => seriesSpots.rows.filter((r) => r.frame === k).length);
      seriesSpots.perFrame = perFrame;
      $('series-text').textContent =
        `${seriesSpots.rows.length} spots on ${image.frames.length} frames (${perFrame.join(', ')}) in ${((performance.now() - t0) / 1000).toFixed(1)} s, ` +
        `each frame on its own (DIALS' per-image pass; spots are not merged across frames).`;
      state.layer = -1;
      ctx.refresh();
      showSeriesTable();
    } catch (e) {
      ctx.showMessage(e instanceof Error ? e.message : String(e));
    } finally {
      $('series-spots').disabled = false;
    }
  }

  function showSeriesTable() {
    if (!seriesSpots) return;
    $('results').hidden = false;
    $('results-summary').textContent = `${seriesSpots.rows.length} spots over the series (find_spots per frame).`;
    renderTable($('results-table'), {
      columns: seriesSpots.columns,
      rows: seriesSpots.rows,
      name: `${stem()}-series-spots`,
      onRow: (row) => focusOn({ x: row.x, y: row.y, z: row.frame + 0.5 }),
    });
  }

  /** Centres and zooms on a table row's position ({x, y, z?}, continuous). */
  function focusOn(m) {
    if (m.z !== undefined && viewer.info.slices > 1) ctx.setSlice(Math.floor(m.z));
    viewer.centreOn(m.x, m.y, Math.max(viewer.zoom, 8));
    focused = { x: m.x, y: m.y, until: performance.now() + 1500 };
    viewer.paint();
    // One more paint when the highlight ends, to clear it.
    setTimeout(() => viewer.paint(), 1520);
  }
  let focused = null;
  viewer.decorations.push((c, v) => {
    if (!focused || performance.now() > focused.until) return;
    const [x, y] = v.toCanvas(focused.x, focused.y);
    c.save();
    c.strokeStyle = '#ff3df2';
    c.lineWidth = 2 * (window.devicePixelRatio || 1);
    c.beginPath();
    c.arc(x, y, 12 * (window.devicePixelRatio || 1), 0, 2 * Math.PI);
    c.stroke();
    c.restore();
  });

  // ---- the view state file
  async function loadState(text, fileName) {
    let s;
    try {
      s = checkState(JSON.parse(text));
    } catch (e) {
      ctx.showMessage(`Cannot load ${fileName}: ${e.message}`);
      return false;
    }
    const fromFile = s.image && !s.image.sample;
    await ctx.applyHash(s.hash);
    measure.line = s.line ?? null;
    measure.rect = s.rect ?? null;
    measure.update();
    viewer.paint();
    if (fromFile) {
      ctx.showMessage(
        `This view was saved from your file ${s.image.name} (${s.image.shape.join('×')}), which is not in the state: ` +
          'load that file again to see it; the display settings, chain and tools are applied.',
        'info',
      );
    } else ctx.showMessage(`View loaded from ${fileName}.`, 'info');
    return true;
  }

  // ---- hooks the page calls
  return {
    diffraction,
    astro,
    measure,
    ortho,
    loadSeries,
    loadState,
    focusOn,
    series: () => seriesSpots,

    /** A new image is shown; `first` when it replaces another one. */
    onImage(image) {
      diffraction.setImage(image);
      astro.setImage(image);
      viewer.flipY = astro.fits;
      // Cyan vanishes on DIALS' white background: magenta markers on frames.
      viewer.markerStyle.colour = image.format === 'cbf' ? '#e6007e' : null;
      seriesSpots = null;
      $('rings-box').hidden = !diffraction.geometry;
      $('rings-on').disabled = !diffraction.ok;
      $('geometry-text').hidden = !diffraction.geometry && !astro.wcs;
      $('geometry-text').textContent = geometryText();
      $('series-box').hidden = !image.frames;
      $('series-text').textContent = image.frames ? `A series of ${image.frames.length} frames: ${image.frames.join(', ')}.` : '';
      if (image.format === 'cbf' && !pinnedDisplay) {
        // DIALS' default: dark spots on white, brightness 10.
        $('cmap').value = 'gray_r';
        $('stretch').value = 'linear';
        $('limits').value = 'dials';
      } else if (image.format === 'fits' && !pinnedDisplay) {
        $('limits').value = 'zscale';
      } else if (!pinnedDisplay && ['dials', 'zscale'].includes($('limits').value)) {
        $('limits').value = 'auto';
        if ($('cmap').value === 'gray_r') $('cmap').value = 'gray';
      }
      pinnedDisplay = false;
      measure.clear();
    },

    /** [lo, hi] of the modes this module adds, or null. */
    limits(mode, base, summary) {
      if (mode === 'zscale') {
        const { h, w, channels, slices } = layout(base.shape);
        const z = Math.min(viewer.slice, slices - 1);
        const n = h * w * channels;
        return astro.limits(base.data.subarray(z * n, (z + 1) * n));
      }
      if (mode === 'dials') return diffraction.limits(summary);
      return null;
    },

    /** display.special of the layer on view. */
    special: (base) => (diffraction.geometry && base.data === state.image?.data ? diffraction.special() : null),

    /** Whether zoomed-out views show each block's largest value (frames). */
    poolMax: (base) => !!diffraction.geometry && base.data === state.image?.data,

    /** Replaces the coordinates and adds text to the readout of probe `p`. */
    readout(p) {
      const extra = [diffraction.readout(p.x, p.y), astro.readout(p.x, p.y)].filter(Boolean);
      return { coords: astro.coords(p.x, p.y), extra: extra.join(', ') };
    },

    /** The layer to show for step k ({base, overlay, markers, result}). */
    adjustLayer(k, layer) {
      const out = { ...layer };
      const o = state.outputs[k];
      outlierStep = o?.op === 'remove_outliers' ? k : -1;
      $('outliers-box').hidden = outlierStep < 0;
      if (outlierStep >= 0) {
        const before = inputOf(state.outputs, k, state.image);
        const r = replaced(before.data, o.data);
        $('outliers-text').textContent =
          `remove_outliers replaced ${r.count} of ${o.data.length} pixels (${((100 * r.count) / o.data.length).toFixed(3)}%).`;
        out.replaced = r.count;
        if (diffOn) out.base = { data: r.diff, shape: o.shape, name: 'before − after' };
      }
      if (k < 0 && seriesSpots) out.markers = seriesSpots.markers;
      return out;
    },

    afterRefresh() {
      // A series of frames is not a volume: no side views.
      $('ortho-box').hidden = !Ortho.fits(viewer.info) || !!state.image?.frames;
      if (state.image?.frames) ortho.on = false;
      showOrtho();
      measure.update();
      if (pendingView && viewer.layer) {
        viewer.centreOn(pendingView.x, pendingView.y, pendingView.zoom);
        pendingView = null;
      }
      if (seriesSpots && state.layer < 0) showSeriesTable();
      frameText();
    },

    sliceChanged() {
      if (ortho.on) ortho.render();
      measure.update();
      frameText();
    },

    /** Adds this module's entries to a link. */
    hashWrite(q) {
      const v = viewEntry(viewer);
      if (v && !isFit(viewer)) q.set('view', v);
      if (!viewer.markerStyle.show) q.set('markers', 'off');
      if (viewer.markerStyle.scale !== 1) q.set('msize', String(viewer.markerStyle.scale));
      if (diffraction.geometry) {
        if (!diffraction.rings.show) q.set('rings', 'off');
        else if (diffraction.rings.spacings) q.set('rings', diffraction.rings.spacings.join(','));
        if (diffraction.brightness !== 10) q.set('brightness', String(diffraction.brightness));
      }
      if (ortho.on) q.set('ortho', ortho.point ? `${ortho.point.x},${ortho.point.y}` : '1');
    },

    /** Reads this module's entries of a link; returns errors. */
    hashRead(q) {
      const errors = [];
      pinnedDisplay = q.has('limits');
      if (q.has('view')) {
        pendingView = parseViewEntry(q.get('view'));
        if (!pendingView) errors.push(`the link's view=${q.get('view')} is not zoom,x,y`);
      }
      viewer.markerStyle.show = q.get('markers') !== 'off';
      $('markers-on').checked = viewer.markerStyle.show;
      const ms = Number(q.get('msize') ?? 1);
      viewer.markerStyle.scale = ms > 0 ? ms : 1;
      $('marker-size').value = String(viewer.markerStyle.scale);
      const rings = q.get('rings');
      diffraction.rings.show = rings !== 'off';
      diffraction.rings.spacings = rings && rings !== 'off' ? rings.split(',').map(Number).filter((d) => d > 0) : null;
      $('rings-on').checked = diffraction.rings.show;
      $('rings-d').value = diffraction.rings.spacings?.join(', ') ?? '';
      diffraction.brightness = Number(q.get('brightness')) > 0 ? Number(q.get('brightness')) : 10;
      $('brightness').value = String(diffraction.brightness);
      ortho.on = q.has('ortho');
      $('ortho-on').checked = ortho.on;
      const op = q.get('ortho')?.split(',').map(Number);
      if (op?.length === 2 && op.every(Number.isInteger)) ortho.point = { x: op[0], y: op[1], z: 0 };
      return errors;
    },

    /** A results-table row was picked: centre and zoom on it. */
    focusRow(result, row) {
      const m = ctx.OPS[result.op]?.markers?.({ ...result, table: { ...result.table, rows: [row] } })?.[0];
      if (m) focusOn(m);
    },
  };

  /** Shows or hides the side views; the main view gets shorter beside
   * them, so all three fit the window. */
  function showOrtho() {
    const on = ortho.on && Ortho.fits(viewer.info);
    $('ortho').hidden = !on;
    const panel = viewer.canvas.closest('.viewer-panel');
    if (panel && panel.classList.contains('ortho-on') !== on) {
      panel.classList.toggle('ortho-on', on);
      viewer.fitted = false;
    }
    ortho.render();
    viewer.paint();
  }

  function frameText() {
    const f = state.image?.frames;
    if (f && viewer.layer?.shape.length === 3) $('slice-out').textContent = `frame ${viewer.slice + 1} of ${f.length}: ${f[viewer.slice]}`;
  }

  function geometryText() {
    const g = diffraction.geometry;
    const parts = [];
    if (g?.why) parts.push(`No resolution rings: ${g.why}.`);
    else if (g) {
      parts.push(
        `Beam centre (${g.beamX}, ${g.beamY}) px, distance ${g.distanceMm.toFixed(2)} mm, λ ${g.wavelength} Å, pixel ${g.pixelMm[0] * 1000} µm` +
          (g.tilted ? ' — the detector is swung (Detector_2theta ≠ 0): rings and d assume it is not' : '') +
          '.',
      );
    }
    if (astro.wcs) parts.push(astro.wcs.ok ? `WCS: ${astro.wcs.ctype.join(', ')}.` : `WCS: ${astro.wcs.why}.`);
    return parts.join(' ');
  }
}
