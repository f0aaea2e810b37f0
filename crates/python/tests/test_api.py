"""The package's surface: signatures with the catalogue's defaults equal to
the reference libraries', the device, threads."""

import inspect
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
import scipy.ndimage
import skimage.segmentation
import astropy.stats

import gpuscope
from gpuscope import measure, ndimage, segmentation, stats, tomo
from gpuscope._catalogue import OPERATIONS

REFERENCES = [
    (ndimage.gaussian_filter, scipy.ndimage.gaussian_filter),
    (ndimage.convolve, scipy.ndimage.convolve),
    (ndimage.correlate, scipy.ndimage.correlate),
    (ndimage.median_filter, scipy.ndimage.median_filter),
    (ndimage.label, scipy.ndimage.label),
    (segmentation.slic, skimage.segmentation.slic),
    (stats.sigma_clipped_stats, astropy.stats.sigma_clipped_stats),
]


@pytest.mark.parametrize("ours, theirs", REFERENCES, ids=lambda f: getattr(f, "__name__", ""))
def test_signature_matches_reference(ours, theirs):
    """Same parameter names, kinds and defaults as the reference (gpuscope
    may add keyword-only parameters of its own)."""
    mine = inspect.signature(ours).parameters
    ref = inspect.signature(theirs).parameters
    for name, p in ref.items():
        assert name in mine, name
        assert mine[name].kind == p.kind, name
        if p.default is not inspect.Parameter.empty:
            assert mine[name].default == p.default, (name, mine[name].default, p.default)
    extra = [n for n in mine if n not in ref]
    assert all(mine[n].kind == inspect.Parameter.KEYWORD_ONLY for n in extra), extra


def test_defaults_come_from_the_catalogue():
    sig = inspect.signature(tomo.remove_outliers).parameters
    cat = {p["name"]: p["default"] for p in OPERATIONS["remove_outliers"]["params"]}
    assert sig["size"].default == cat["size"] and sig["mode"].default == cat["mode"]
    assert gpuscope.catalogue["slic"]["reference"] == "skimage.segmentation.slic"


def test_device_choice():
    assert isinstance(gpuscope.devices(), list)
    assert gpuscope.set_device("cpu")["name"] == "cpu"
    assert gpuscope.device()["name"] == "cpu"
    with pytest.raises(RuntimeError):
        gpuscope.set_device("no adapter has this name")
    with pytest.raises(TypeError):
        gpuscope.set_device(1.5)
    gpuscope.set_device(None)


def test_threads_get_right_answers():
    """The GIL is released during GPU work: threads at once, each with its
    own right answer. The large images run on gpuscope's kept worker
    threads, more at once than it keeps idle."""
    rng = np.random.default_rng(11)
    images = [rng.normal(0, 1, (64, 64)).astype(np.float32) for _ in range(4)]
    images += [rng.normal(0, 1, (520, 520)).astype(np.float32) for _ in range(6)]
    want = [scipy.ndimage.median_filter(x, 3) for x in images]
    got = [None] * len(images)

    def work(i):
        for _ in range(3):
            got[i] = ndimage.median_filter(images[i], 3)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(images))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_measure_signature():
    from skimage.measure import regionprops_table

    assert list(inspect.signature(measure.regionprops_table).parameters) == list(
        inspect.signature(regionprops_table).parameters
    )


def test_no_adapter_runs_on_the_cpu_with_one_warning():
    """Without an adapter (WGPU_BACKEND names one this build lacks) the CPU
    reference runs, with one RuntimeWarning for the process."""
    code = (
        "import warnings, numpy as np, scipy.ndimage as ndi, gpuscope.ndimage as gn\n"
        "x = np.random.default_rng(1).random((9, 7)).astype(np.float32)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(2):\n"
        "        assert (gn.median_filter(x, 3) == ndi.median_filter(x, 3)).all()\n"
        "print(len(w), w[0].category.__name__, w[0].message)\n"
    )
    env = dict(os.environ, WGPU_BACKEND="dx12")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("1 RuntimeWarning no GPU adapter"), out.stdout


@pytest.mark.parametrize("call,says", [
    (lambda: gpuscope.ndimage.median_filter(np.zeros((8, 8), np.float32), size=500), "use a smaller size"),
    (lambda: gpuscope.segmentation.slic(np.zeros((16, 16), np.float32)), "pass channel_axis=None"),
    (lambda: gpuscope.spots.find_spots(np.ones((4, 4), np.int32), min_spot_size=5, max_spot_size=4),
     "invalid min_spot_size: 5 exceeds max_spot_size 4"),
    (lambda: gpuscope.spots.strong_pixels(np.ones((4, 4), np.int32), sigma_background=-1),
     "invalid sigma_background"),
    (lambda: gpuscope.ndimage.median_filter(np.zeros((8, 8), np.float32), size=-1), "^size: "),
])
def test_errors_name_python_arguments_not_flags(call, says):
    with pytest.raises(ValueError, match=says) as e:
        call()
    # Neither the command line's flags nor the page's controls.
    for other in ("--", "gpuscope devices", "Run on", "CPU (wasm)"):
        assert other not in str(e.value)


def test_unaligned_arrays_are_read_not_crashed_on():
    """numpy allows unaligned buffers (pickled Dask blocks, raw bytes); the
    functions copy them, and the extension refuses them with a TypeError
    rather than reading them in place."""
    buf = np.zeros(64 * 64 * 4 + 1, np.uint8)
    u = np.frombuffer(buf.data, dtype=np.float32, offset=1, count=64 * 64).reshape(64, 64)
    assert not u.flags["ALIGNED"]
    aligned = np.ascontiguousarray(u.copy())
    np.testing.assert_array_equal(ndimage.median_filter(u, 3), ndimage.median_filter(aligned, 3))
    np.testing.assert_array_equal(ndimage.gaussian_filter(u, 2), ndimage.gaussian_filter(aligned, 2))
    np.testing.assert_array_equal(tomo.normalize(u, u + 1, u), tomo.normalize(aligned, aligned + 1, aligned))
    from gpuscope import _gpuscope

    with pytest.raises(TypeError, match="aligned"):
        _gpuscope.filter("median_filter", u, '{"size": [3]}')


@pytest.mark.parametrize("backend", [None, "gl"])
def test_a_call_without_xdg_runtime_dir_prints_nothing(backend):
    """Mesa's device-select layer prints `error: XDG_RUNTIME_DIR is invalid`
    without the variable; the package gives the drivers a private one."""
    code = (
        "import numpy as np, gpuscope\n"
        "x = np.arange(600, dtype=np.float32).reshape(20, 30)\n"
        "gpuscope.ndimage.median_filter(x, 3)\n"
        "print(gpuscope.device()['name'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", "NODEVICE_SELECT")}
    if backend:
        env["WGPU_BACKEND"] = backend
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stderr == "", out.stderr
