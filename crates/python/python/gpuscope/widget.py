"""The page's image viewer in Jupyter: ``gpuscope.show(array)`` returns an
anywidget that draws a 2-D image, an RGB(A) image or a stack (with a slice
slider) with the page's own viewer modules (web/viewer.js, web/colormaps.js,
shipped in ``gpuscope/_widget/web``): the same colormaps, scalings,
auto-contrast, label and mask overlays, markers and value readout.

Arrays travel to the browser as raw bytes with their shape and dtype, not
as JSON lists. Arrays larger than ``max_bytes`` are shown downsampled (every
k-th row and column, then every k-th slice), with a warning and a line in
the widget saying so; the readout gives the original coordinates.

Needs the optional dependency anywidget: ``pip install 'gpuscope[widget]'``.
"""

import math
import pathlib
import re
import warnings

import numpy as np

__all__ = ["show", "COLORMAPS", "SCALES", "MAX_BYTES"]

HERE = pathlib.Path(__file__).resolve().parent / "_widget"


def _choices(name):
    """A list of names exported by the shipped colormaps.js (`export const
    NAME = ['a', 'b'];`): the page's choices, whatever they are today."""
    text = (HERE / "web" / "colormaps.js").read_text(encoding="utf-8")
    m = re.search(rf"export const {name} = \[([^\]]*)\]", text)
    if not m:
        raise ImportError(f"gpuscope: the shipped web/colormaps.js has no {name} list; run crates/python/bundle_widget.py")
    return tuple(re.findall(r"""['"]([^'"]+)['"]""", m.group(1)))


COLORMAPS = _choices("COLORMAPS")
SCALES = _choices("STRETCHES")
# What one widget sends at most: a notebook keeps every widget's data in the
# browser tab (and in the saved notebook when widget state is saved).
MAX_BYTES = 64 << 20

# dtypes the browser holds as typed arrays, as they are.
_NATIVE = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "float64"}


def _modules():
    """The shipped viewer modules: {path relative to web/: source}."""
    root = HERE / "web"
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.js"))}


def _image(array):
    """The array as the browser gets it: little-endian, C order, a dtype of
    _NATIVE (bool as uint8, float16 as float32, 64-bit integers as float64)."""
    if isinstance(array, (str, bytes)) or array is None:
        raise TypeError(f"gpuscope.show: expected a numpy array (2-D image, RGB(A) image or 3-D stack), not {type(array).__name__}")
    a = np.asarray(array)
    if a.dtype.kind == "b":
        a = a.astype(np.uint8)
    elif a.dtype == np.float16:
        a = a.astype(np.float32)
    elif a.dtype.kind in "iu" and a.dtype.itemsize == 8:
        # Exact up to 2**53; the readout would lose digits beyond anyway.
        a = a.astype(np.float64)
    if a.dtype.name not in _NATIVE:
        raise TypeError(
            f"gpuscope.show: cannot show an array of dtype {a.dtype}; "
            "pass integers, floats or bools (for complex data, show np.abs(x) or x.real)")
    if a.ndim < 2 or a.ndim > 4:
        raise ValueError(
            f"gpuscope.show: the array has shape {a.shape}; expected (rows, columns), "
            "(rows, columns, 3 or 4) for colour, (slices, rows, columns) or (slices, rows, columns, 3 or 4)")
    if a.ndim == 4 and a.shape[-1] not in (3, 4):
        raise ValueError(
            f"gpuscope.show: a 4-D array must be a stack of colour images (slices, rows, columns, 3 or 4), not {a.shape}")
    if a.size == 0:
        raise ValueError(f"gpuscope.show: the array of shape {a.shape} is empty")
    return a


def _rgb(shape):
    """Whether the last axis is colour: the viewer's rule (web/viewer.js
    layout: a last axis of 3 or 4 on 3-D and 4-D arrays)."""
    return len(shape) >= 3 and shape[-1] in (3, 4)


def _labels(labels, shape):
    """Labels or a mask with the image's shape without its colour axis:
    (kind, array)."""
    m = np.asarray(labels)
    spatial = tuple(shape[:-1]) if _rgb(shape) else tuple(shape)
    if m.shape != spatial:
        raise ValueError(
            f"gpuscope.show: labels of shape {m.shape} do not match the image's {spatial}; "
            "pass one label (or mask value) per pixel")
    if m.dtype.kind == "b":
        return "mask", m.astype(np.uint8)
    if m.dtype.kind not in "iu":
        raise TypeError(
            f"gpuscope.show: labels must be integers (label numbers, 0 = background) or bools (a mask), not {m.dtype}")
    if m.dtype.name not in _NATIVE:
        lo, hi = (int(m.min()), int(m.max())) if m.size else (0, 0)
        if lo < -(2**31) or hi >= 2**31:
            raise ValueError(f"gpuscope.show: label numbers {lo} … {hi} do not fit int32; relabel them (e.g. skimage.segmentation.relabel_sequential)")
        m = m.astype(np.int32)
    return "labels", m


def _markers(markers, ndim_spatial):
    """Markers as an (N, 4) float64 array of (y, x, z, r) in the viewer's
    coordinates (pixel centres at +0.5); NaN for no z or default radius.

    A mapping of columns (a spot table): ``x``, ``y`` (and ``z``) taken as
    find_spots gives them, pixel centres at +0.5 already; ``centroid-0``,
    ``centroid-1`` (and ``centroid-2``) as regionprops_table gives them,
    pixel centres at integers; an optional ``r`` column (radius in pixels).
    An (N, 2) array: (row, column) indices, as peak_local_max gives them;
    (N, 3): (slice, row, column)."""
    if hasattr(markers, "keys"):
        keys = set(markers.keys())
        if {"x", "y"} <= keys:
            y, x = (np.asarray(markers[k], dtype=np.float64) for k in ("y", "x"))
            z = np.asarray(markers["z"], dtype=np.float64) if "z" in keys else None
        elif {"centroid-0", "centroid-1"} <= keys:
            cols = [np.asarray(markers[f"centroid-{i}"], dtype=np.float64) + 0.5
                    for i in range(3) if f"centroid-{i}" in keys]
            z, y, x = cols if len(cols) == 3 else (None, *cols)
        else:
            raise ValueError(
                "gpuscope.show: markers as a table need columns 'x' and 'y' (find_spots) or "
                f"'centroid-0' and 'centroid-1' (regionprops_table); got {sorted(map(str, keys))}")
        r = np.asarray(markers["r"], dtype=np.float64) if "r" in keys else None
    else:
        try:
            m = np.asarray(markers, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise TypeError(f"gpuscope.show: markers must be an (N, 2) or (N, 3) array of coordinates or a table of columns: {e}") from None
        if m.ndim != 2 or m.shape[1] not in (2, 3):
            raise ValueError(
                f"gpuscope.show: markers of shape {m.shape}; expected (N, 2) (row, column) "
                "or (N, 3) (slice, row, column) coordinates")
        m = m + 0.5
        z = m[:, 0] if m.shape[1] == 3 else None
        y, x = m[:, -2], m[:, -1]
        r = None
    n = len(x)
    if len(y) != n or (z is not None and len(z) != n) or (r is not None and len(r) != n):
        raise ValueError("gpuscope.show: the markers' columns have different lengths")
    if ndim_spatial == 2:
        z = None  # a 2-D image: every marker is on it (find_spots gives z = 0.5)
    out = np.full((n, 4), np.nan)
    out[:, 0], out[:, 1] = y, x
    if z is not None:
        out[:, 2] = z
    if r is not None:
        out[:, 3] = r
    if not np.isfinite(out[:, :2]).all():
        raise ValueError("gpuscope.show: marker coordinates must be finite numbers")
    return out


def _steps(shape, itemsize, max_bytes):
    """(slice step, row and column step) that bring the array under
    max_bytes: rows and columns first (down to what one slice needs), then
    slices."""
    rgb = _rgb(shape)
    spatial = shape[-3:-1] if rgb else shape[-2:]
    slices = shape[0] if len(shape) - rgb == 3 else 1
    px = itemsize * (shape[-1] if rgb else 1)
    k = 1
    while math.ceil(spatial[0] / k) * math.ceil(spatial[1] / k) * px > max_bytes:
        k += 1
    per = math.ceil(spatial[0] / k) * math.ceil(spatial[1] / k) * px
    kz = math.ceil(slices / (max_bytes // per))
    return kz, k


def _size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.3g} {unit}"
    return f"{n} bytes"


def _nth(k):
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def _shrink(a, kz, k, stack):
    if stack:
        return a[::kz, ::k, ::k]
    return a[::k, ::k]


def payload(array, labels=None, markers=None, *, colormap="gray", scale="linear", limits=None, max_bytes=MAX_BYTES):
    """The widget's synchronised values for these arguments (checked):
    a dict of trait names to values. Raises ValueError or TypeError."""
    a = _image(array)
    if colormap not in COLORMAPS:
        raise ValueError(f"gpuscope.show: unknown colormap {colormap!r}; choose one of {', '.join(COLORMAPS)}")
    if scale not in SCALES:
        raise ValueError(f"gpuscope.show: unknown scale {scale!r}; choose one of {', '.join(SCALES)}")
    if limits is None:
        lims = []
    else:
        try:
            lims = [float(v) for v in limits]
        except (TypeError, ValueError):
            raise TypeError(f"gpuscope.show: limits must be two numbers (low, high), not {limits!r}") from None
        if len(lims) != 2 or not all(map(math.isfinite, lims)) or lims[0] >= lims[1]:
            raise ValueError(f"gpuscope.show: limits must be two finite numbers, low < high, not {limits!r}")
    if not isinstance(max_bytes, int) or max_bytes < 1024:
        raise ValueError(f"gpuscope.show: max_bytes must be an integer of at least 1024, not {max_bytes!r}")
    stack = a.ndim - _rgb(a.shape) == 3
    kz, k = _steps(a.shape, a.dtype.itemsize, max_bytes)
    note = ""
    if (kz, k) != (1, 1):
        what = []
        if k > 1:
            what.append(f"every {_nth(k)} row and column")
        if kz > 1:
            what.append(f"every {_nth(kz)} slice")
        note = (f"The {' × '.join(map(str, a.shape))} {a.dtype} array ({_size(a.nbytes)}) is shown "
                f"downsampled ({' and '.join(what)}) to stay under {_size(max_bytes)}; "
                "pass max_bytes= to send more, or a crop.")
        warnings.warn(f"gpuscope.show: {note}", UserWarning, stacklevel=3)
    shown = np.ascontiguousarray(_shrink(a, kz, k, stack), dtype=a.dtype.newbyteorder("<"))
    out = {
        "_data": shown.tobytes(),
        "_shape": list(shown.shape),
        "_dtype": shown.dtype.name,
        "_source_shape": list(a.shape),
        "_step": [kz, k],
        "_labels": b"",
        "_labels_dtype": "",
        "_labels_kind": "",
        "_markers": b"",
        "colormap": colormap,
        "scale": scale,
        "limits": lims,
        "message": note,
    }
    if labels is not None:
        kind, m = _labels(labels, a.shape)
        m = np.ascontiguousarray(_shrink(m, kz, k, stack), dtype=m.dtype.newbyteorder("<"))
        out.update(_labels=m.tobytes(), _labels_dtype=m.dtype.name, _labels_kind=kind)
    if markers is not None:
        mk = _markers(markers, 3 if stack else 2)
        # Into the shown array's coordinates (the readout maps back).
        mk[:, :2] /= k
        mk[:, 2] /= kz
        mk[:, 3] /= k
        out["_markers"] = np.ascontiguousarray(mk, dtype="<f8").tobytes()
    return out


_WIDGET = None


def _widget_class():
    """The anywidget class, made on first use so that ``import gpuscope``
    does not need anywidget."""
    global _WIDGET
    if _WIDGET is not None:
        return _WIDGET
    try:
        import anywidget
        import traitlets as t
    except ImportError:
        raise ImportError(
            "gpuscope.show needs anywidget: pip install 'gpuscope[widget]' (or pip install anywidget)") from None

    class Viewer(anywidget.AnyWidget):
        """gpuscope's image viewer in a notebook. ``colormap``, ``scale``,
        ``limits`` (empty: 0.5–99.5 percentiles), ``slice`` and ``opacity``
        follow the widget's controls and may be set from Python;
        ``update(array, labels, markers)`` shows new data."""

        _esm = (HERE / "widget.js").read_text(encoding="utf-8")
        _modules = t.Dict().tag(sync=True)
        _data = t.Bytes().tag(sync=True)
        _shape = t.List(t.Int()).tag(sync=True)
        _dtype = t.Unicode().tag(sync=True)
        _source_shape = t.List(t.Int()).tag(sync=True)
        _step = t.List(t.Int(), default_value=[1, 1]).tag(sync=True)
        _labels = t.Bytes().tag(sync=True)
        _labels_dtype = t.Unicode().tag(sync=True)
        _labels_kind = t.Unicode().tag(sync=True)
        _markers = t.Bytes().tag(sync=True)
        colormap = t.Enum(COLORMAPS, default_value="gray").tag(sync=True)
        scale = t.Enum(SCALES, default_value="linear").tag(sync=True)
        limits = t.List(t.Float(), default_value=[], minlen=0, maxlen=2).tag(sync=True)
        slice = t.Int(-1).tag(sync=True)
        opacity = t.Float(0.5, min=0.0, max=1.0).tag(sync=True)
        message = t.Unicode().tag(sync=True)

        def update(self, array, labels=None, markers=None, *, limits=None, max_bytes=MAX_BYTES):
            """Shows another array (with its labels and markers), keeping
            the colormap and scale."""
            values = payload(array, labels, markers, colormap=self.colormap, scale=self.scale,
                             limits=limits, max_bytes=max_bytes)
            with self.hold_sync():
                for name, value in values.items():
                    setattr(self, name, value)

    _WIDGET = Viewer
    return Viewer


def show(array, labels=None, markers=None, *, colormap="gray", scale="linear", limits=None, max_bytes=MAX_BYTES):
    """Shows an image in a Jupyter notebook with the page's viewer: a
    widget with zoom (wheel), pan (drag), the value under the cursor,
    colormap and scale choices, a histogram, a slice slider for stacks,
    and overlays.

    ``array``: (rows, columns), (rows, columns, 3|4) colour, (slices, rows,
    columns) or (slices, rows, columns, 3|4). ``labels``: label numbers
    (integers, 0 = background) or a mask (bools) of the image's shape
    without its colour axis. ``markers``: a spot table (find_spots' dict:
    ``x``, ``y``, ``z``; or regionprops_table's ``centroid-*``), or an
    (N, 2) array of (row, column) / (N, 3) of (slice, row, column).
    ``colormap``: one of ``gpuscope.widget.COLORMAPS`` (the page's: gray,
    viridis, magma, inferno, ...); ``scale``: linear, log, sqrt, asinh
    (DS9's); ``limits``: (low, high), or None for the 0.5 and
    99.5 percentiles. Arrays over ``max_bytes`` are downsampled with a
    warning. Raises ValueError or TypeError for arguments it cannot show."""
    values = payload(array, labels, markers, colormap=colormap, scale=scale, limits=limits, max_bytes=max_bytes)
    return _widget_class()(_modules=_modules(), **values)
