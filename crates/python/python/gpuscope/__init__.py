"""gpuscope: GPU image analysis (wgpu: Vulkan, Metal, DX12, GL) with the
reference libraries' names and answers.

Modules: ``gpuscope.ndimage`` (scipy.ndimage), ``gpuscope.measure`` and
``gpuscope.segmentation`` (scikit-image), ``gpuscope.stats``
(astropy.stats), ``gpuscope.tomo`` (Mantid Imaging / tomopy),
``gpuscope.spots`` (DIALS' spot finding), ``gpuscope.io`` (file readers);
``gpuscope.show`` shows arrays in Jupyter with the web page's viewer;
``gpuscope.asarray`` keeps an array on the GPU between operations
(``DeviceArray``).

One GPU context per process is opened on the first call and reused; when
the machine has no GPU adapter the CPU reference runs instead, with one
``RuntimeWarning``. ``set_device`` chooses another adapter or the CPU.
"""

from ._runtime_dir import ensure_runtime_dir as _ensure_runtime_dir

_ensure_runtime_dir()

from ._gpuscope import device, devices, set_device  # noqa: E402
from ._catalogue import OPERATIONS as catalogue  # noqa: E402
from ._device import DeviceArray, asarray, synchronize  # noqa: E402
from . import io, measure, ndimage, segmentation, spots, stats, tomo  # noqa: E402
from .pipeline import Pipeline, bus_bytes  # noqa: E402
from .widget import show  # noqa: E402

__all__ = [
    "DeviceArray",
    "Pipeline",
    "asarray",
    "bus_bytes",
    "catalogue",
    "device",
    "devices",
    "io",
    "measure",
    "ndimage",
    "segmentation",
    "set_device",
    "show",
    "spots",
    "stats",
    "synchronize",
    "tomo",
]
