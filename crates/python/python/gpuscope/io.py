"""Files as numpy arrays, read by gpuscope's own readers (the command
line's): npy, TIFF (pages as a 3-D stack), PNG, JPEG, CBF (``.cbf.gz``
too; int32 counts, negative for gaps and bad pixels) and FITS."""

from . import _gpuscope

__all__ = ["read"]


def read(path, *, allow_links_outside=False):
    """The array of the file at ``path``, in its stored dtype and shape
    (the format from the file name's extension). Links in the file (HDF5
    external links and virtual-dataset sources, Zarr symlinks) are
    followed only inside the input's folder unless
    ``allow_links_outside`` is true."""
    return _gpuscope.read(path, allow_links_outside=allow_links_outside)
