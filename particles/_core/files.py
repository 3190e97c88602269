"""The one writability check of the library (a store's folder, the command line's output folder)."""

from __future__ import annotations

import os
import tempfile

__all__ = ["unwritable"]


def unwritable(folder) -> OSError | None:
    """Why a new file cannot be created in ``folder`` (a probe file is made and removed), or None."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".headflow-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return exc
    return None
