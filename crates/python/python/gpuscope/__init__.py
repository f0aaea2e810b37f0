"""gpuscope: GPU image analysis (wgpu: Vulkan, Metal, DX12, GL) with the
reference libraries' names and answers.

Modules: ``gpuscope.ndimage`` (scipy.ndimage), ``gpuscope.measure`` and
``gpuscope.segmentation`` (scikit-image), ``gpuscope.stats``
(astropy.stats), ``gpuscope.tomo`` (Mantid Imaging / tomopy).

One GPU context per process is opened on the first call and reused; when
the machine has no GPU adapter the CPU reference runs instead, with one
``RuntimeWarning``. ``set_device`` chooses another adapter or the CPU.
"""

from ._gpuscope import device, devices, set_device
from ._catalogue import OPERATIONS as catalogue
from . import measure, ndimage, segmentation, stats, tomo

__all__ = [
    "catalogue",
    "device",
    "devices",
    "measure",
    "ndimage",
    "segmentation",
    "set_device",
    "stats",
    "tomo",
]
