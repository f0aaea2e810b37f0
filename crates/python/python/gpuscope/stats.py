"""astropy.stats' sigma-clipped statistics on the GPU.

Differences from astropy: ``cenfunc`` is 'median' or 'mean' (no
callables), ``stdfunc`` 'std' with ``std_ddof=0``, ``axis=None`` and
``grow=False`` only (NotImplementedError otherwise); the GPU path clips in
float32 (float64 data agree to float32 rounding); infinite sigmas are
refused. An astropy Quantity keeps its unit, as in astropy.
``workshop=True`` is gpuscope's own: the GPU workshop's loop
(strict comparisons until nothing changes).
"""

import sys

import numpy as np

from . import _gpuscope
from ._catalogue import CATALOGUE, array, options, signature, unsupported

__all__ = ["sigma_clipped_stats"]


@signature("sigma_clipped_stats")
def sigma_clipped_stats(data, mask=None, mask_value=None, sigma=CATALOGUE, sigma_lower=CATALOGUE,
                        sigma_upper=CATALOGUE, maxiters=CATALOGUE, cenfunc=CATALOGUE, stdfunc="std",
                        std_ddof=0, axis=None, grow=False, *, workshop=CATALOGUE):
    """``(mean, median, std)`` of the values kept by iterative kappa-sigma
    clipping, as ``astropy.stats.sigma_clipped_stats``; NaN and inf are
    left out, ``mask`` (true = excluded) and a masked array's mask too.
    As astropy: ``std_ddof`` divides the final standard deviation's sum by
    ``N - std_ddof`` (NaN where that is not positive); everything masked
    gives ``(np.ma.masked,) * 3``, and no finite unmasked value (empty or
    all NaN/inf) gives NaNs."""
    unsupported("sigma_clipped_stats", stdfunc=(stdfunc, "std"), axis=(axis, None),
                grow=(grow, False))
    if isinstance(std_ddof, (bool, np.bool_)) or not isinstance(std_ddof, (int, np.integer)):
        raise TypeError(f"std_ddof must be an integer, not {std_ddof!r}")
    unit = _unit(data)
    if unit is not None:
        # An astropy Quantity: the statistics of its values, in its unit (as
        # astropy returns them); a mask_value given with a unit is compared
        # in the data's unit.
        if _unit(mask_value) is not None:
            mask_value = mask_value.to_value(unit)
        data = data.value
        stats = sigma_clipped_stats(data, mask, mask_value, sigma, sigma_lower, sigma_upper,
                                    maxiters, cenfunc, stdfunc, std_ddof, axis, grow,
                                    workshop=workshop)
        return tuple(v * unit for v in stats)
    excluded = None
    if isinstance(data, np.ma.MaskedArray):
        excluded = np.ma.getmaskarray(data)
        data = data.data
    x = array(data, "data")
    if x.dtype == np.bool_:
        x = x.view(np.uint8)
    if mask is not None:
        m = np.asarray(mask, dtype=bool)
        excluded = m if excluded is None else excluded | m
    if mask_value is not None:
        m = x == mask_value
        excluded = m if excluded is None else excluded | m
    if excluded is not None:
        excluded = np.ascontiguousarray(np.broadcast_to(excluded, x.shape))
        if excluded.all():
            # astropy: a wholly masked input has masked statistics.
            return np.ma.masked, np.ma.masked, np.ma.masked
    opts = options(sigma=sigma, sigma_lower=sigma_lower, sigma_upper=sigma_upper,
                   maxiters=maxiters, cenfunc=cenfunc, workshop=workshop)
    try:
        mean, median, std, kept = _gpuscope.sigma_clipped_stats(
            x.ravel(), opts, None if excluded is None else excluded.ravel())
    except ValueError:
        # astropy answers NaN where no finite unmasked value is left; any
        # other error stands.
        if not _any_finite(x, excluded):
            return np.nan, np.nan, np.nan
        raise
    if std_ddof:
        std = std * np.sqrt(kept / (kept - std_ddof)) if kept > std_ddof else np.nan
    return mean, median, std


def _any_finite(x, excluded):
    """Whether a finite value is left unmasked."""
    ok = np.isfinite(x) if x.dtype.kind in "fc" else np.ones(x.shape, bool)
    if excluded is not None:
        ok &= ~excluded
    return bool(ok.any())


def _unit(value):
    """The unit of an astropy Quantity, else None (astropy is not imported
    here: a Quantity exists only where the caller imported it)."""
    units = sys.modules.get("astropy.units")
    if units is not None and isinstance(value, units.Quantity):
        return value.unit
    return None
