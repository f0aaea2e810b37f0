"""scikit-image's region measurements on the GPU: ``regionprops_table``
with the properties the core measures and scikit-image's column names.

Differences from scikit-image: only the properties in ``PROPERTIES`` (plus
the older names ``mean_intensity``, ``max_intensity``, ``min_intensity``,
``weighted_centroid``); ``intensity_sum`` is gpuscope's own; one intensity
channel; sums in float32 on the GPU (float64 on the CPU path);
``extra_properties`` and ``spacing`` are not offered.
"""

import numpy as np

from . import _gpuscope
from ._catalogue import array, unsupported

__all__ = ["PROPERTIES", "regionprops_table"]

# skimage name -> (the core's column, per-axis).
PROPERTIES = {
    "label": ("label", False),
    "area": ("area", False),
    "bbox": ("bbox", True),
    "centroid": ("centroid", True),
    "centroid_weighted": ("centroid_weighted", True),
    "intensity_mean": ("intensity_mean", False),
    "intensity_max": ("intensity_max", False),
    "intensity_min": ("intensity_min", False),
    "intensity_sum": ("intensity_sum", False),
}
_OLD_NAMES = {
    "mean_intensity": "intensity_mean",
    "max_intensity": "intensity_max",
    "min_intensity": "intensity_min",
    "weighted_centroid": "centroid_weighted",
}
_NEEDS_INTENSITY = {"centroid_weighted", "intensity_mean", "intensity_max", "intensity_min", "intensity_sum"}


def regionprops_table(label_image, intensity_image=None, properties=("label", "bbox"), *,
                      cache=True, separator="-", extra_properties=None, spacing=None):
    """Region properties as ``skimage.measure.regionprops_table``: a dict of
    numpy columns, one row per label present, per-axis properties as
    ``name-0``, ``name-1``... (``bbox``: the minima then one past the
    maxima)."""
    unsupported("regionprops_table", extra_properties=(extra_properties, None), spacing=(spacing, None))
    if isinstance(label_image, _gpuscope.DeviceArray):
        return _device_table(label_image, intensity_image, properties, separator)
    labels = array(label_image, "label_image")
    if labels.dtype.kind not in "iub":
        raise TypeError("label_image must be of an integer dtype (skimage: non-integer label images are an error)")
    if labels.dtype != np.int32 and labels.size and labels.max() > np.iinfo(np.int32).max:
        raise ValueError("labels above 2**31 - 1 are not supported")
    labels = labels.astype(np.int32, copy=False)
    if intensity_image is None:
        values = np.zeros(labels.shape, np.float32)
    else:
        # Any numeric dtype: the extension converts to float32 on threads.
        values = array(intensity_image, "intensity_image")
        if values.dtype == np.bool_:
            values = values.view(np.uint8)
    _check(properties, intensity_image is not None)
    return _table(_gpuscope.regionprops(labels, values), properties, separator)


def _device_table(labels, intensity, properties, separator):
    """The table of int32 labels and float32 intensities on the device: only
    the measurements come back."""
    _check(properties, intensity is not None)
    if intensity is None:
        from ._device import asarray

        intensity = asarray(np.zeros(labels.shape, np.float32))
    elif not isinstance(intensity, _gpuscope.DeviceArray):
        raise TypeError(
            "intensity_image must be a device array too when label_image is one "
            "(upload it with gpuscope.asarray)"
        )
    return _table(_gpuscope.device_regionprops(labels, intensity), properties, separator)


def _check(properties, has_intensity):
    """AttributeError, as skimage's, for a property not measured."""
    for given in properties:
        name = _OLD_NAMES.get(given, given)
        if name not in PROPERTIES:
            raise AttributeError(
                f"'{given}' is not a property gpuscope measures (it measures {', '.join(PROPERTIES)})"
            )
        if name in _NEEDS_INTENSITY and not has_intensity:
            raise AttributeError(f"Attribute '{given}' unavailable when `intensity_image` has not been specified.")


def _table(measured, properties, separator):
    """skimage's table of `properties` from the extension's measurements."""
    names = [_OLD_NAMES.get(p, p) for p in properties]
    out = {}
    for given, name in zip(properties, names):
        if name == "bbox":
            both = np.concatenate([measured["bbox_min"], measured["bbox_max"]], axis=1)
            for i in range(both.shape[1]):
                out[f"{given}{separator}{i}"] = both[:, i]
        elif PROPERTIES[name][1]:
            col = measured[name]
            for i in range(col.shape[1]):
                out[f"{given}{separator}{i}"] = col[:, i]
        else:
            out[given] = measured[name]
    return out
