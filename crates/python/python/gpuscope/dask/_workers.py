"""One device per Dask worker process, chosen by the worker's index."""

import os
import warnings

try:
    from distributed import WorkerPlugin as _Base
except ImportError:  # dask without distributed: the plugin is not usable
    _Base = object

__all__ = ["DevicePlugin", "use_gpus"]


def _worker_index(name):
    """LocalCluster and dask-jobqueue name workers 0, 1, ... or
    'prefix-N'; the trailing number is the index."""
    text = str(name).rsplit("-", 1)[-1]
    return int(text) if text.isdigit() else None


def choose_adapter(index, adapters):
    """The adapter a worker uses: GPUSCOPE_ADAPTER if set (an index, part of
    a name, or 'cpu'), else the worker's index modulo the number of GPU
    adapters (software adapters only when there is nothing else), else
    None (the default device). A GPU that both Vulkan and GL list counts
    once (GL is used only where no other backend reaches the GPUs)."""
    env = os.environ.get("GPUSCOPE_ADAPTER")
    if env:
        return int(env) if env.isdigit() else env
    if adapters is None:
        from .. import devices

        all_ = devices()
        hardware = [d for d in all_ if not d["software"]]
        # A GPU listed through Vulkan (or Metal, DX12) and again through GL
        # counts once: GL only where nothing else reaches the GPUs.
        native = [d for d in hardware if d["backend"].lower() != "gl"]
        adapters = [d["index"] for d in (native or hardware or all_)]
    if not adapters or index is None:
        return None
    return adapters[index % len(adapters)]


class DevicePlugin(_Base):
    """A ``distributed`` worker plugin: each worker opens its own device
    (one GPU per worker process) when it starts. ``adapters``: the adapters
    to spread the workers over (indices or names as ``gpuscope.set_device``
    takes); default: every GPU adapter of the worker's host. A worker
    without a GPU runs the CPU reference and logs gpuscope's warning.
    ``memory_budget``: bytes of device memory each worker's operations may
    use at once (``gpuscope.set_device``'s)."""

    name = "gpuscope-device"

    def __init__(self, adapters=None, memory_budget=None):
        self.adapters = list(adapters) if adapters is not None else None
        self.memory_budget = memory_budget

    def setup(self, worker):
        from .. import device, set_device

        spec = choose_adapter(_worker_index(worker.name), self.adapters)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            set_device(spec, memory_budget=self.memory_budget)
            info = device()
        for w in caught:
            worker.log_event("gpuscope", {"warning": str(w.message)})
        worker.log_event("gpuscope", {"device": info.get("name"), "backend": info.get("backend")})

    def teardown(self, worker):
        pass


def use_gpus(client, adapters=None, memory_budget=None):
    """Registers :class:`DevicePlugin` on every worker of `client` (and on
    workers that join later); returns each worker's device as
    ``{address: {'name': ..., 'backend': ..., 'memory_budget': ...}}``."""
    client.register_plugin(DevicePlugin(adapters, memory_budget))
    return client.run(_device_summary)


def _device_summary():
    from .. import device

    keep = ("name", "backend", "memory_budget")
    return {k: v for k, v in device().items() if k in keep}
