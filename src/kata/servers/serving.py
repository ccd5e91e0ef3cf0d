"""What kata's long-lived servers share, the warm worker (kata.servers.worker) and the chip
holder (kata.servers.chip_holder): one lock that makes a server the only one, a token a
client must show, and a listening socket replaced without a gap."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from kata.servers.warm import token_file

LIVENESS_CHECK_SECONDS = 1.0
# How long a new server waits for the one it replaces to finish its work and go.
TAKE_OVER_SECONDS = 30.0


def claim(
    lock_path: Path,
    socket_path: Path,
    running: Callable[[Path], bool],
    stop: Callable[[Path], object],
) -> IO[str] | None:
    """The lock at `lock_path`, which makes this process its only server; None if it is
    not needed.

    The holder writes its socket into the lock file. A server under another identity (older
    kata code, other JAX settings) is asked to `stop` and its lock taken over; one `running`
    under this same identity makes this one unnecessary, unless it is on its way out.
    """
    deadline = time.monotonic() + TAKE_OVER_SECONDS
    while time.monotonic() < deadline:
        # Held open for the server's life; the kernel releases it however the worker ends.
        lock = open(lock_path, "a+")  # noqa: SIM115
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip()
            lock.close()
            if holder == str(socket_path):
                if running(socket_path):
                    return None
                # Still starting, or already ending: see which, shortly.
            elif holder:
                stop(Path(holder))
            time.sleep(0.05)
            continue
        # A server deletes its lock file as it ends: a lock on a file already deleted
        # (opened just before) locks nothing anyone else can see, so try again.
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock_path).st_ino == os.fstat(lock.fileno()).st_ino:
                lock.truncate(0)
                lock.write(str(socket_path))
                lock.flush()
                return lock
        lock.close()
    return None


def write_token(path: Path) -> str:
    token = secrets.token_hex(16)
    descriptor = os.open(token_file(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        stream.write(token)
    return token


def listen(path: Path) -> socket.socket:
    """A new listening socket at `path`, put in the place of any there (one left by a server
    that died, or this one's last): a client never finds `path` missing meanwhile."""
    fresh = path.with_name(path.name + ".new")
    fresh.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(fresh))
    os.chmod(fresh, 0o600)
    server.listen(8)
    os.rename(fresh, path)
    server.settimeout(LIVENESS_CHECK_SECONDS)
    return server
