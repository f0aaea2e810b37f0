"""Typing stubs of gpuscope's device arrays (see gpuscope._device)."""

import numpy

class DeviceArray:
    """An array kept on the GPU between operations (float32, int32 or bool)."""

    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def dtype(self) -> numpy.dtype: ...
    @property
    def dtype_name(self) -> str: ...
    def get(self) -> numpy.ndarray:
        """The values as a numpy array (one download)."""
    def __gt__(self, value: float) -> DeviceArray:
        """``x > value`` on the device: a bool device array."""

def asarray(a: numpy.ndarray | DeviceArray) -> DeviceArray:
    """``a`` on the GPU in use (float32, int32 or bool; a device array is
    returned as it is)."""

def synchronize() -> None:
    """Waits until the GPU has finished the work queued so far."""
