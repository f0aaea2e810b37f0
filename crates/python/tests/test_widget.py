"""gpuscope.show: what the widget sends to the browser (bytes, shape, dtype,
overlays, markers), the checks on its arguments, and that the viewer modules
it ships are web/'s. The drawing itself is checked in the browser
(web/tests/widget.test.mjs)."""

import pathlib
import sys
import warnings

import numpy as np
import pytest

import gpuscope
from gpuscope import widget

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import bundle_widget  # noqa: E402

WEB = pathlib.Path(__file__).resolve().parents[3] / "web"


def decode(w, name="_data", dtype=None, shape=None):
    return np.frombuffer(getattr(w, name), dtype=np.dtype(dtype or w._dtype).newbyteorder("<")).reshape(shape or w._shape)


def test_shipped_viewer_modules_are_the_pages():
    # A change of web/viewer.js (or of what it imports) needs
    # `python crates/python/bundle_widget.py`.
    assert bundle_widget.main(check=True) == []
    mods = widget._modules()
    assert set(mods) == set(bundle_widget.closure()) >= {"viewer.js", "colormaps.js"}
    for name, text in mods.items():
        assert text == (WEB / name).read_text(encoding="utf-8")


def test_bundle_check_sees_a_difference(tmp_path, monkeypatch):
    shipped = tmp_path / "web"
    shipped.mkdir()
    for name in bundle_widget.closure():
        (shipped / name).parent.mkdir(parents=True, exist_ok=True)
        (shipped / name).write_bytes((WEB / name).read_bytes())
    (shipped / "colormaps.js").write_text("// an older copy\n")
    (shipped / "gone.js").write_text("")
    monkeypatch.setattr(bundle_widget, "SHIPPED", shipped)
    assert sorted(bundle_widget.main(check=True)) == [
        "colormaps.js differs from web/colormaps.js",
        "gone.js (no longer imported by viewer.js)",
    ]
    bundle_widget.main()
    assert bundle_widget.main(check=True) == []


def test_choices_are_the_pages():
    text = (WEB / "colormaps.js").read_text().replace('"', "'")
    assert f"COLORMAPS = {list(widget.COLORMAPS)!r}" in text
    assert f"STRETCHES = {list(widget.SCALES)!r}" in text
    assert {"gray", "viridis", "magma", "inferno"} <= set(widget.COLORMAPS)
    assert widget.SCALES == ("linear", "log", "sqrt", "asinh")


def test_2d_image_travels_as_bytes():
    img = np.arange(12 * 7, dtype=np.float32).reshape(12, 7) * 1.5
    w = gpuscope.show(img, colormap="viridis", scale="asinh", limits=(2, 50))
    assert isinstance(w._data, bytes) and len(w._data) == img.nbytes
    assert (w._shape, w._dtype, w._source_shape, w._step) == ([12, 7], "float32", [12, 7], [1, 1])
    np.testing.assert_array_equal(decode(w), img)
    assert (w.colormap, w.scale, w.limits, w.message) == ("viridis", "asinh", [2.0, 50.0], "")
    assert w._labels == b"" and w._markers == b""
    # The ESM is the shipped widget.js, and the viewer modules travel with it.
    assert "loadModules" in w._esm and set(w._modules) >= {"viewer.js", "colormaps.js"}


def test_widget_state_has_binary_buffers():
    # What a kernel sends on the comm: the arrays as binary buffers, not JSON.
    from ipywidgets.widgets.widget import _remove_buffers

    img = np.arange(64, dtype=np.uint16).reshape(8, 8)
    w = gpuscope.show(img, labels=img > 30, markers=np.array([[1, 2]]))
    state, paths, buffers = _remove_buffers(w.get_state())
    assert ["_data"] in paths and ["_labels"] in paths and ["_markers"] in paths
    assert bytes(buffers[paths.index(["_data"])]) == img.tobytes()
    assert state["_shape"] == [8, 8] and state["_dtype"] == "uint16"
    bundle = w._repr_mimebundle_()
    assert bundle is None or "application/vnd.jupyter.widget-view+json" in bundle[0]


@pytest.mark.parametrize(
    "dtype, sent",
    [
        (np.uint8, "uint8"), (np.int8, "int8"), (np.uint16, "uint16"), (np.int16, "int16"),
        (np.uint32, "uint32"), (np.int32, "int32"), (np.float32, "float32"), (np.float64, "float64"),
        (np.bool_, "uint8"), (np.float16, "float32"), (np.int64, "float64"), (np.uint64, "float64"),
        (np.dtype(">f4"), "float32"), (np.dtype(">u2"), "uint16"),
    ],
)
def test_dtypes(dtype, sent):
    img = (np.arange(30).reshape(5, 6) % 7).astype(dtype)
    w = gpuscope.show(img)
    assert w._dtype == sent
    np.testing.assert_array_equal(decode(w), img.astype(np.float64))


def test_non_contiguous_input():
    img = np.arange(200, dtype=np.int32).reshape(10, 20)
    w = gpuscope.show(img[::2, 5:].T)
    assert w._shape == [15, 5]
    np.testing.assert_array_equal(decode(w), img[::2, 5:].T)


@pytest.mark.parametrize("shape", [(4, 9, 11), (9, 11, 3), (9, 11, 4), (2, 9, 11, 3)])
def test_stacks_and_colour(shape):
    a = np.random.default_rng(0).random(shape).astype(np.float32)
    w = gpuscope.show(a)
    assert w._shape == list(shape)
    np.testing.assert_array_equal(decode(w), a)


@pytest.mark.parametrize(
    "array, error, words",
    [
        (np.zeros(5), ValueError, "shape (5,)"),
        (np.zeros((2, 3, 4, 5)), ValueError, "stack of colour images"),
        (np.zeros((2, 2, 2, 2, 3)), ValueError, "expected (rows, columns)"),
        (np.zeros((0, 4)), ValueError, "empty"),
        (np.zeros((4, 4), complex), TypeError, "np.abs"),
        (np.array([["a", "b"]]), TypeError, "dtype <U1"),
        (np.zeros((3, 3), dtype=object), TypeError, "dtype object"),
        ("coins.png", TypeError, "not str"),
        (None, TypeError, "not NoneType"),
    ],
)
def test_bad_arrays(array, error, words):
    with pytest.raises(error, match=None) as e:
        gpuscope.show(array)
    assert words in str(e.value)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(colormap="jet"), ValueError, "choose one of gray, "),
        (dict(scale="power"), ValueError, "linear, log, sqrt, asinh"),
        (dict(limits=(5, 1)), ValueError, "low < high"),
        (dict(limits=(1, 2, 3)), ValueError, "two finite numbers"),
        (dict(limits=(0, np.inf)), ValueError, "two finite numbers"),
        (dict(limits=5), TypeError, "two numbers"),
        (dict(limits=("a", "b")), TypeError, "two numbers"),
        (dict(labels=np.zeros((4, 5), int)), ValueError, "do not match the image's (4, 4)"),
        (dict(labels=np.zeros((4, 4))), TypeError, "labels must be integers"),
        (dict(labels=np.full((4, 4), 2**40)), ValueError, "do not fit int32"),
        (dict(markers=np.zeros((3, 4))), ValueError, "(N, 2)"),
        (dict(markers=np.zeros(3)), ValueError, "(N, 2)"),
        (dict(markers=[["a", "b"]]), TypeError, "markers must be"),
        (dict(markers={"row": [1]}), ValueError, "'x' and 'y'"),
        (dict(markers={"x": [1, 2], "y": [1]}), ValueError, "different lengths"),
        (dict(markers=np.array([[np.nan, 1.0]])), ValueError, "finite"),
        (dict(max_bytes=10), ValueError, "max_bytes"),
    ],
)
def test_bad_arguments(kwargs, error, words):
    with pytest.raises(error) as e:
        gpuscope.show(np.zeros((4, 4), np.float32), **kwargs)
    assert words in str(e.value)


def test_labels_and_masks():
    img = np.zeros((6, 8, 3), np.uint8)  # colour: labels without the colour axis
    lab = np.arange(48, dtype=np.int64).reshape(6, 8)
    w = gpuscope.show(img, labels=lab)
    assert (w._labels_kind, w._labels_dtype) == ("labels", "int32")
    np.testing.assert_array_equal(decode(w, "_labels", "int32", (6, 8)), lab)
    w = gpuscope.show(img[..., 0], labels=lab.astype(np.uint16))
    assert w._labels_dtype == "uint16"
    w = gpuscope.show(img[..., 0], labels=lab % 3 == 0)
    assert (w._labels_kind, w._labels_dtype) == ("mask", "uint8")
    np.testing.assert_array_equal(decode(w, "_labels", "uint8", (6, 8)), lab % 3 == 0)


def markers_of(w):
    return np.frombuffer(w._markers, "<f8").reshape(-1, 4)


def test_markers_from_a_find_spots_table():
    # find_spots' dict of columns (centroids with pixel centres at +0.5)
    # on a 2-D frame: drawn where the table says, on the frame.
    frame = np.zeros((40, 50), np.int32)
    for y, x in [(10, 12), (30, 40)]:
        frame[y - 1:y + 2, x - 1:x + 2] = [[5, 10, 5], [10, 60, 10], [5, 10, 5]]
    table = gpuscope.spots.find_spots(frame, algorithm="dispersion", sigma_strong=1, min_spot_size=1)
    assert len(table["x"]) == 2
    w = gpuscope.show(frame, markers=table)
    m = markers_of(w)
    np.testing.assert_allclose(m[:, 0], table["y"])
    np.testing.assert_allclose(m[:, 1], table["x"])
    np.testing.assert_allclose(sorted(zip(m[:, 0], m[:, 1])), [(10.5, 12.5), (30.5, 40.5)])
    assert np.isnan(m[:, 2:]).all()  # a 2-D frame: no slice, default radius


def test_markers_from_arrays_and_regionprops():
    stack = np.zeros((3, 10, 10), np.float32)
    m = markers_of(gpuscope.show(stack, markers=np.array([[1, 2, 3], [2, 4, 5]])))
    np.testing.assert_array_equal(m[:, :3], [[2.5, 3.5, 1.5], [4.5, 5.5, 2.5]])
    # (N, 2) on a stack: on every slice.
    m = markers_of(gpuscope.show(stack, markers=[(1, 2)]))
    assert m[0, :2].tolist() == [1.5, 2.5] and np.isnan(m[0, 2])
    props = {"label": np.array([1]), "centroid-0": np.array([4.0]), "centroid-1": np.array([7.0]), "r": np.array([6.0])}
    m = markers_of(gpuscope.show(stack[0], markers=props))
    assert m[0, [0, 1, 3]].tolist() == [4.5, 7.5, 6.0] and np.isnan(m[0, 2])
    table = {"x": [1.5], "y": [2.5], "z": [2.5]}
    m = markers_of(gpuscope.show(stack, markers=table))
    assert m[0, :3].tolist() == [2.5, 1.5, 2.5]


def test_markers_from_a_dataframe():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"y": [3.5, 7.25], "x": [1.5, 2.0], "r": [4.0, 5.0]})
    m = markers_of(gpuscope.show(np.zeros((10, 10)), markers=df))
    assert m[:, [0, 1, 3]].tolist() == [[3.5, 1.5, 4.0], [7.25, 2.0, 5.0]]


def test_huge_arrays_are_downsampled_with_a_message():
    img = np.arange(300 * 200, dtype=np.float64).reshape(300, 200)  # 480,000 bytes
    lab = (img % 5).astype(np.int32)
    with pytest.warns(UserWarning, match=r"\(469 KiB\) is shown downsampled \(every 3rd row and column\) to stay under 58.6 KiB") as rec:
        w = gpuscope.show(img, labels=lab, markers=[(150, 99)], max_bytes=60_000)
    assert "max_bytes=" in str(rec[0].message) and w.message in str(rec[0].message)
    assert w._step == [1, 3] and w._shape == [100, 67] and w._source_shape == [300, 200]
    assert len(w._data) <= 60_000
    np.testing.assert_array_equal(decode(w), img[::3, ::3])
    np.testing.assert_array_equal(decode(w, "_labels", "int32", (100, 67)), lab[::3, ::3])
    np.testing.assert_allclose(markers_of(w)[0, :2], [150.5 / 3, 99.5 / 3])
    # A stack: rows and columns while one slice does not fit, then slices.
    stack = np.zeros((40, 64, 64), np.uint8)  # 4096 bytes a slice
    with pytest.warns(UserWarning, match="every 4th slice"):
        w = gpuscope.show(stack, max_bytes=41_000)
    assert w._step == [4, 1] and w._shape == [10, 64, 64]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gpuscope.show(stack)._step == [1, 1]


def test_update_and_traits():
    w = gpuscope.show(np.zeros((4, 4), np.uint8), colormap="magma")
    w.update(np.ones((2, 3, 5), np.float32), markers=[(0, 0)])
    assert (w._shape, w._dtype, w.colormap) == ([2, 3, 5], "float32", "magma")
    assert len(w._markers) == 32
    w.scale = "log"
    with pytest.raises(Exception, match="jet"):
        w.colormap = "jet"


def test_shows_in_a_notebook_kernel():
    # A real IPython kernel, as a notebook runs it: the cell's result is a
    # widget view, and the widget's comm carries the array as a binary buffer.
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=120)
    try:
        msg_id = kc.execute(
            "import numpy as np, gpuscope\n"
            "w = gpuscope.show(np.arange(12, dtype=np.uint16).reshape(3, 4), labels=np.eye(3, 4, dtype=int), markers=[(1, 2)])\n"
            "w")
        msgs = []
        while True:
            m = kc.get_iopub_msg(timeout=120)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            msgs.append(m)
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                break
        reply = kc.get_shell_msg(timeout=120)
        assert reply["content"]["status"] == "ok", reply["content"]
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    opens = [m for m in msgs if m["msg_type"] == "comm_open" and m["content"]["data"]["state"].get("_dtype") == "uint16"]
    assert len(opens) == 1, [m["msg_type"] for m in msgs]
    data = opens[0]["content"]["data"]
    assert data["state"]["_shape"] == [3, 4] and data["state"]["_labels_kind"] == "labels"
    buffers = dict(zip(map(tuple, data["buffer_paths"]), opens[0]["buffers"]))
    assert bytes(buffers[("_data",)]) == np.arange(12, dtype="<u2").tobytes()
    assert bytes(buffers[("_labels",)]) == np.eye(3, 4, dtype="<i4").tobytes()
    assert np.frombuffer(bytes(buffers[("_markers",)]), "<f8")[:2].tolist() == [1.5, 2.5]
    views = [m["content"]["data"]["application/vnd.jupyter.widget-view+json"] for m in msgs
             if m["msg_type"] == "execute_result"]
    assert [v["model_id"] for v in views] == [opens[0]["content"]["comm_id"]]


def test_without_anywidget_says_how_to_install(monkeypatch):
    monkeypatch.setattr(widget, "_WIDGET", None)
    monkeypatch.setitem(sys.modules, "anywidget", None)
    with pytest.raises(ImportError, match=r"pip install 'gpuscope\[widget\]'"):
        gpuscope.show(np.zeros((2, 2)))
    # The arguments are checked first all the same.
    with pytest.raises(ValueError):
        gpuscope.show(np.zeros(2))
