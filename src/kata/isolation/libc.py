"""The C library, through ctypes, for the calls a run's container is built with: unshare,
mount, prctl and capset (kata.isolation.container, mounts and seccomp)."""

from __future__ import annotations

import ctypes
import os
import sys

# None off Linux: there is no kernel to build a container with.
LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def check(result: int, what: str) -> None:
    """Raise the OSError of the call just made through LIBC, where it returned other than 0."""
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")
