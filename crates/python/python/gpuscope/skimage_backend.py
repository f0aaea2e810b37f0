"""gpuscope as a scikit-image backend (scikit-image's experimental
dispatching: entry points ``skimage_backends`` and ``skimage_backend_infos``
in pyproject.toml). With dispatching on (``SKIMAGE_BACKENDS=gpuscope`` in
the environment before scikit-image is imported, in the scikit-image
releases that dispatch), calls of the functions in ``SUPPORTED`` that
gpuscope can answer run on gpuscope; ``can_has`` turns the others down and
scikit-image runs them itself.

What gpuscope takes: ``filters.gaussian`` of float images without
``channel_axis`` or ``out`` (computed in float32 on the GPU);
``filters.median`` with ``behavior='ndimage'`` and no ``out``;
``measure.label`` of boolean images (skimage labels every value of an
integer image separately; gpuscope labels foreground against background);
``segmentation.slic`` with the arguments gpuscope's slic has.
"""

import inspect

import numpy as np

__all__ = ["SUPPORTED", "can_has", "get_implementation", "info"]

SUPPORTED = [
    "skimage.filters:gaussian",
    "skimage.filters:median",
    "skimage.measure:label",
    "skimage.segmentation:slic",
]


class _Info:
    def __init__(self, supported_functions):
        self.supported_functions = supported_functions


def info():
    """The ``skimage_backend_infos`` entry point: the functions gpuscope
    implements (cheap: nothing is computed)."""
    try:
        from skimage.util._backends import BackendInformation
    except ImportError:
        BackendInformation = _Info
    return BackendInformation(list(SUPPORTED))


def _bind(fn, args, kwargs):
    try:
        return inspect.signature(fn).bind(*args, **kwargs).arguments
    except TypeError:
        return None


def _array_ok(a, kinds):
    return isinstance(a, np.ndarray) and 1 <= a.ndim <= 3 and a.dtype.kind in kinds and a.size > 0


def _gaussian(image, sigma=1, *, mode="nearest", cval=0, preserve_range=False, truncate=4.0,
              channel_axis=None, out=None):
    from . import ndimage
    return ndimage.gaussian_filter(image, sigma, mode=mode, cval=cval, truncate=truncate)


def _median(image, footprint=None, out=None, mode="nearest", cval=0.0, behavior="ndimage"):
    from . import ndimage
    if footprint is None:
        footprint = np.ones((3,) * image.ndim, bool)
    return ndimage.median_filter(image, footprint=footprint, mode=mode, cval=cval)


def _label(label_image, background=None, return_num=False, connectivity=None):
    from . import ndimage
    from scipy.ndimage import generate_binary_structure

    c = label_image.ndim if connectivity is None else connectivity
    labels, n = ndimage.label(label_image, structure=generate_binary_structure(label_image.ndim, c))
    return (labels, n) if return_num else labels


def _slic(*args, **kwargs):
    from . import segmentation
    return segmentation.slic(*args, **kwargs)


def _slic_signature():
    from . import segmentation
    return segmentation.slic


_IMPLEMENTATIONS = {
    "skimage.filters:gaussian": _gaussian,
    "skimage.filters:median": _median,
    "skimage.measure:label": _label,
    "skimage.segmentation:slic": _slic,
}


def can_has(name, *args, **kwargs):
    """True where gpuscope answers this call as scikit-image would."""
    fn = _IMPLEMENTATIONS.get(name)
    if fn is None:
        return False
    a = _bind(_slic_signature() if fn is _slic else fn, args, kwargs)
    if a is None:
        return False
    if name == "skimage.filters:gaussian":
        return (_array_ok(a["image"], "f") and a.get("channel_axis") is None and a.get("out") is None
                and a.get("mode", "nearest") in ("reflect", "constant", "nearest", "mirror", "wrap"))
    if name == "skimage.filters:median":
        fp = a.get("footprint")
        return (_array_ok(a["image"], "biuf") and a.get("out") is None
                and a.get("behavior", "ndimage") == "ndimage"
                and (fp is None or np.ndim(fp) == a["image"].ndim))
    if name == "skimage.measure:label":
        c = a.get("connectivity")
        img = a["label_image"]
        return (_array_ok(img, "b") and a.get("background") in (None, 0, False)
                and (c is None or 1 <= c <= img.ndim))
    if name == "skimage.segmentation:slic":
        img = a.get("image")
        return isinstance(img, np.ndarray) and img.dtype.kind in "biuf" and img.size > 0
    return False


def get_implementation(name):
    """The ``skimage_backends`` entry point's implementation of ``name``."""
    return _IMPLEMENTATIONS[name]
