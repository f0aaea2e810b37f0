// The results table: sortable columns (click or Enter on a header), a CSV
// download, plain DOM. Used for regions, sources and spots, and for the
// workshop's timings.

/** Renders `{columns: [{key, label, format?}], rows: [{...}]}` into
 * `container` with a caption and a CSV button; `name` names the CSV file.
 * `onRow(row)`, when given, is called when a row is clicked (or Enter on it). */
export function renderTable(container, { columns, rows, caption = '', name = 'results', onRow = null }) {
  container.replaceChildren();
  const state = { key: null, dir: 1 };
  const wrap = document.createElement('div');
  wrap.className = 'table-wrap';
  const table = document.createElement('table');
  table.className = 'results';
  if (caption) table.createCaption().textContent = caption;
  const head = table.createTHead().insertRow();
  const body = table.createTBody();
  const fmt = (col, v) => {
    if (col.format) return col.format(v);
    if (typeof v === 'number') return Number.isInteger(v) ? String(v) : v.toPrecision(5);
    return v ?? '';
  };
  const fill = () => {
    const sorted = [...rows];
    if (state.key !== null) {
      sorted.sort((a, b) => {
        const x = a[state.key];
        const y = b[state.key];
        if (typeof x === 'number' && typeof y === 'number') return (x - y) * state.dir;
        return String(x).localeCompare(String(y)) * state.dir;
      });
    }
    body.replaceChildren();
    for (const r of sorted) {
      const tr = body.insertRow();
      if (onRow) {
        tr.tabIndex = 0;
        tr.className = 'pick';
        tr.title = 'centre the view on this row';
        tr.addEventListener('click', () => onRow(r));
        tr.addEventListener('keydown', (e) => {
          if (e.key === 'Enter') onRow(r);
        });
      }
      for (const col of columns) {
        const td = tr.insertCell();
        td.textContent = fmt(col, r[col.key]);
        if (typeof r[col.key] === 'number') td.className = 'num';
      }
    }
    for (const th of head.cells) {
      const key = th.dataset.key;
      th.setAttribute('aria-sort', key === state.key ? (state.dir > 0 ? 'ascending' : 'descending') : 'none');
    }
  };
  for (const col of columns) {
    const th = document.createElement('th');
    th.dataset.key = col.key;
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = col.label ?? col.key;
    b.title = `sort by ${col.label ?? col.key}`;
    b.addEventListener('click', () => {
      state.dir = state.key === col.key ? -state.dir : 1;
      state.key = col.key;
      fill();
    });
    th.append(b);
    head.append(th);
  }
  fill();
  wrap.append(table);
  const csv = document.createElement('button');
  csv.type = 'button';
  csv.className = 'csv';
  csv.textContent = 'Download CSV';
  csv.addEventListener('click', () => saveBlob(new Blob([toCsv(columns, rows)], { type: 'text/csv' }), `${name}.csv`));
  container.append(wrap, csv);
  return { table, csv };
}

/** RFC 4180 CSV, full precision numbers. */
export function toCsv(columns, rows) {
  const cell = (v) => {
    const s = v === null || v === undefined ? '' : String(v);
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  const lines = [columns.map((c) => cell(c.key)).join(',')];
  for (const r of rows) lines.push(columns.map((c) => cell(r[c.key])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}

/** Offers a blob as a download. */
export function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
