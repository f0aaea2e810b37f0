"""Chains of operations that stay on the GPU: the image crosses the bus
once to the device and the answers once back.

The core keeps one chain resident today, the radio-astronomy workshop's
source finding: sigma-clipped statistics, a threshold at ``median + nsigma
* std``, connected-component labels and their measurements. A
``Pipeline`` names its steps explicitly, in that order::

    p = (gpuscope.Pipeline()
         .sigma_clip(sigma=3)
         .threshold(nsigma=5)
         .label()
         .regionprops_table(properties=("label", "area", "centroid")))
    found = p.run(image)   # mean, median, std, threshold, labels, num_features, table

Every other combination runs its operations one by one through the
modules (``gpuscope.ndimage``, ``gpuscope.measure``, ...), each crossing
the bus; ``Pipeline`` refuses it (NotImplementedError) rather than hide the
transfers. ``gpuscope.bus_bytes()`` counts the bytes that crossed.
"""

import numpy as np

from . import _gpuscope, measure, ndimage
from ._catalogue import CATALOGUE, array, options, signature

__all__ = ["Pipeline", "bus_bytes"]

_CHAIN = ("sigma_clip", "threshold", "label", "regionprops_table")


def bus_bytes():
    """``(to_device, to_host)``: bytes the GPU in use has copied in each
    direction since it was opened (``(0, 0)`` on the CPU path)."""
    return _gpuscope.bus_bytes()


class Pipeline:
    """An explicit chain of steps run on one upload (see the module's
    documentation for the chains the core keeps on the GPU)."""

    def __init__(self):
        self._steps = []
        self._options = {}
        self._structure = None
        self._properties = None
        self._separator = "-"

    def _add(self, step):
        if len(self._steps) >= len(_CHAIN) or _CHAIN[len(self._steps)] != step:
            done = " -> ".join(self._steps) or "nothing"
            raise NotImplementedError(
                f"{step} after {done}: the GPU keeps only the chain {' -> '.join(_CHAIN)} resident; "
                "run other operations one by one (gpuscope.ndimage, gpuscope.measure, ...)"
            )
        self._steps.append(step)
        return self

    @signature("sources")
    def sigma_clip(self, sigma=CATALOGUE, sigma_lower=CATALOGUE, sigma_upper=CATALOGUE,
                   maxiters=CATALOGUE, cenfunc=CATALOGUE, *, workshop=CATALOGUE):
        """The background's statistics as ``gpuscope.stats.sigma_clipped_stats``
        (astropy's parameters)."""
        self._options.update(sigma=sigma, sigma_lower=sigma_lower, sigma_upper=sigma_upper,
                             maxiters=maxiters, cenfunc=cenfunc, workshop=workshop)
        return self._add("sigma_clip")

    @signature("sources")
    def threshold(self, nsigma=CATALOGUE):
        """The foreground: ``image > median + nsigma * std`` (with
        ``sigma_clip(workshop=True)``: the workshop's ``image > nsigma * std``)."""
        self._options.update(nsigma=nsigma)
        return self._add("threshold")

    def label(self, structure=None):
        """Connected components of the foreground as ``gpuscope.ndimage.label``
        (``structure``: scipy's, ``generate_binary_structure(ndim, c)``);
        the result's ``labels`` and ``num_features``."""
        self._structure = structure
        return self._add("label")

    def regionprops_table(self, properties=("label", "bbox"), *, separator="-"):
        """Measurements of the labels, with the image as the intensity
        image, as ``gpuscope.measure.regionprops_table``; the result's
        ``table``."""
        measure._check(properties, True)
        self._properties, self._separator = tuple(properties), separator
        return self._add("regionprops_table")

    def __repr__(self):
        return f"Pipeline({' -> '.join(self._steps) or 'empty'})"

    def run(self, image):
        """Runs the chain on ``image`` (1 to 3 axes, measured as float32):
        a dict of ``mean``, ``median``, ``std`` (the clipped statistics),
        ``threshold``, ``labels`` (int32), ``num_features`` and, with a
        ``regionprops_table`` step, ``table``."""
        if len(self._steps) < 3:
            raise NotImplementedError(
                f"{self!r}: a chain runs sigma_clip -> threshold -> label (-> regionprops_table); "
                "for fewer steps call the functions themselves"
            )
        x = array(image, "image")
        if x.dtype == np.bool_:
            x = x.view(np.uint8)
        opts = dict(self._options)
        if self._structure is not None:
            opts["connectivity"] = ndimage._connectivity(self._structure, x.ndim)
        found = _gpuscope.sources_chain(x, options(**opts))
        regions = found.pop("regions")
        if self._properties is not None:
            found["table"] = measure._table(regions, self._properties, self._separator)
        return found
