"""A private XDG_RUNTIME_DIR for the GPU drivers when the environment has
none (cron, batch jobs, containers): Mesa's device-select Vulkan layer
connects to the Wayland display while adapters are enumerated, and the
Wayland client library otherwise prints ``error: XDG_RUNTIME_DIR is invalid
or not set in the environment.`` on calls that succeed. The command line
does the same (docs/files.md)."""

import os
import stat
import tempfile


def ensure_runtime_dir():
    """Sets XDG_RUNTIME_DIR to ``$TMPDIR/gpuscope-runtime-UID`` (mode 0700,
    ours) when it is unset or empty, before any driver is loaded."""
    if os.name != "posix" or os.environ.get("XDG_RUNTIME_DIR"):
        return
    uid = os.geteuid()
    path = os.path.join(tempfile.gettempdir(), f"gpuscope-runtime-{uid}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return
    # Used only if it is a real directory of ours that nobody else can write
    # to (someone may have made the name first, in a shared /tmp).
    try:
        st = os.lstat(path)
    except OSError:
        return
    if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and stat.S_IMODE(st.st_mode) == 0o700:
        os.environ["XDG_RUNTIME_DIR"] = path
