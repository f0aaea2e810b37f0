"""scikit-image's SLIC superpixels on the GPU, skimage's full signature.

Differences from scikit-image: 2-D and 3-D images (with or without a
channel axis); the k-means runs in float32 with exact integer sums, so
labels can differ from scikit-image's float64 run at exact ties of
distance.
"""

import numpy as np

from . import _gpuscope
from ._catalogue import CATALOGUE, array, as_list, options, signature

__all__ = ["slic"]


@signature("slic")
def slic(image, n_segments=CATALOGUE, compactness=CATALOGUE, max_num_iter=CATALOGUE, sigma=CATALOGUE,
         spacing=CATALOGUE, convert2lab=CATALOGUE, enforce_connectivity=CATALOGUE,
         min_size_factor=CATALOGUE, max_size_factor=CATALOGUE, slic_zero=CATALOGUE,
         start_label=CATALOGUE, mask=None, *, channel_axis=CATALOGUE):
    """Superpixels as ``skimage.segmentation.slic``: int64 labels of the
    image's spatial shape, numbered from ``start_label``."""
    x = array(image, "image")
    if x.dtype == np.bool_:
        x = x.view(np.uint8)
    m = None if mask is None else np.ascontiguousarray(np.asarray(mask, dtype=bool))
    opts = options(
        n_segments=n_segments, compactness=compactness, max_num_iter=max_num_iter,
        sigma=as_list(sigma), spacing=as_list(spacing), convert2lab=convert2lab,
        enforce_connectivity=enforce_connectivity, min_size_factor=min_size_factor,
        max_size_factor=max_size_factor, slic_zero=slic_zero, start_label=start_label,
        channel_axis=channel_axis,
    )
    return _gpuscope.slic(x, opts, m)
