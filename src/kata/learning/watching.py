"""Noticing saves and keypresses for `kata watch`.

File events come from Linux's inotify (through ctypes, no extra dependency). Where there
is no inotify, or where events never arrive (some network and container mounts), it polls
modification times instead and says so. A slow poll runs beside inotify to notice that.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

IN_MODIFY = 0x002
IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
EVENT_HEADER = struct.Struct("iIII")
POLL_SECONDS = 0.5
# With inotify working, the backup poll runs this rarely; it only detects missing events.
CROSS_CHECK_SECONDS = 2.0


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    found = {}
    for path in folder.glob("*.py"):
        try:
            stat = path.stat()
        except OSError:
            continue
        found[path.name] = (stat.st_mtime_ns, stat.st_size)
    return found


def _inotify_fd(folder: Path) -> int | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if fd < 0:
            return None
        mask = IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE
        if libc.inotify_add_watch(fd, str(folder).encode(), mask) < 0:
            os.close(fd)
            return None
        return fd
    except (OSError, AttributeError):
        return None


@dataclass(frozen=True)
class Saved:
    """A `.py` file in the watched folder was written."""

    name: str


@dataclass(frozen=True)
class Key:
    """A key typed in the terminal, lower-cased (`h`, `l`, `q`)."""

    char: str


WatchEvent = Saved | Key


class SaveWatcher:
    """Waits for a `.py` file in a folder to change; also reports keys typed on stdin."""

    def __init__(self, folder: Path, keys: bool = False) -> None:
        self.folder = folder
        self.keys = keys
        self.fd = _inotify_fd(folder)
        self.seen = _snapshot(folder)
        self.last_cross_check = time.monotonic()
        self.note: str | None = None  # set when it had to fall back to polling

    @property
    def method(self) -> str:
        if self.fd is not None:
            return "file events (inotify)"
        return f"polling every {POLL_SECONDS:g} s (no file events on this system)"

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def wait(self) -> WatchEvent:
        """Block until a save or a key."""
        while True:
            watched = [self.fd] if self.fd is not None else []
            if self.keys:
                watched.append(sys.stdin.fileno())
            timeout = CROSS_CHECK_SECONDS if self.fd is not None else POLL_SECONDS
            ready, _, _ = select.select(watched, [], [], timeout) if watched else ([], [], [])
            if not watched:
                time.sleep(timeout)
            if self.keys and sys.stdin.fileno() in ready:
                key = os.read(sys.stdin.fileno(), 1).decode(errors="ignore")
                if key:
                    return Key(key.lower())
            if self.fd is not None and self.fd in ready:
                names = self._drain_events()
                self.seen = _snapshot(self.folder)
                if names:
                    return Saved(sorted(names)[0])
                continue
            changed = self._changed_by_poll()
            if changed and self.fd is not None:
                self.close()
                self.note = (
                    "file events are not arriving here (a network or container mount?); "
                    f"polling every {POLL_SECONDS:g} s instead"
                )
            if changed:
                return Saved(changed)

    def _drain_events(self) -> set[str]:
        names = set()
        assert self.fd is not None
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return names
        offset = 0
        while offset + EVENT_HEADER.size <= len(data):
            _, _, _, length = EVENT_HEADER.unpack_from(data, offset)
            raw = data[offset + EVENT_HEADER.size : offset + EVENT_HEADER.size + length]
            name = raw.rstrip(b"\0").decode(errors="replace")
            if name.endswith(".py"):
                names.add(name)
            offset += EVENT_HEADER.size + length
        return names

    def _changed_by_poll(self) -> str | None:
        now = _snapshot(self.folder)
        changed = sorted(name for name, stamp in now.items() if self.seen.get(name) != stamp)
        self.seen = now
        return changed[0] if changed else None


@contextmanager
def keys_without_enter() -> Iterator[bool]:
    """Let single keypresses through without Enter, where stdin is a terminal."""
    if not sys.stdin.isatty():
        yield False
        return
    try:
        import termios
        import tty
    except ImportError:  # Windows
        yield False
        return
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
