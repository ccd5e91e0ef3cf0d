"""The judge's events on a pipe: the runner holds the read end, the judge alone the write end.

A file in the run's scratch folder could be written by learner code, and a run's scratch
is its own tmpfs that the runner does not even see (kata.isolation.container). The write end
goes to the judge (inherited by a cold run, passed over the warm grader's socket to a warm
one) and nowhere else: the learner's process is forked with every descriptor closed. The
runner reads lines of at most `LINE_LIMIT` bytes: a longer one ends the run as its loss,
and never grows the grader's memory.
"""

from __future__ import annotations

import os

# The pytest option that names the judge's descriptor: `--kata-events=fd:N`.
OPTION_PREFIX = "--kata-events=fd:"
# The longest event the judge writes is a check list or a failure's message and output
# (clipped to a few thousand characters each): far below this.
LINE_LIMIT = 4 * 2**20


class LineTooLong(Exception):
    """An event line passed LINE_LIMIT: the run that wrote it is stopped."""


def option(fd: int) -> str:
    return f"{OPTION_PREFIX}{fd}"


def with_descriptor(args: list[str], fd: int) -> list[str]:
    """`args` naming `fd` as the events' descriptor (a warm run gets it under a new number)."""
    return [option(fd) if arg.startswith(OPTION_PREFIX) else arg for arg in args]


class EventsPipe:
    """The runner's end: complete lines as they come, never more than LINE_LIMIT held."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.pending = b""

    def close_write_end(self) -> None:
        """Once the judge holds its copy (or none was handed over)."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def lines(self) -> list[str]:
        """Every complete line written so far. Raises LineTooLong past the limit."""
        lines: list[str] = []
        while True:
            try:
                chunk = os.read(self.read_fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            *complete, self.pending = (self.pending + chunk).split(b"\n")
            lines += [line.decode("utf-8", errors="replace") + "\n" for line in complete]
            if len(self.pending) > LINE_LIMIT:
                self.pending = b""
                raise LineTooLong(f"a grading event passed {LINE_LIMIT // 2**20} MiB")
            if any(len(line) > LINE_LIMIT for line in complete):
                raise LineTooLong(f"a grading event passed {LINE_LIMIT // 2**20} MiB")
        return lines

    def close(self) -> None:
        self.close_write_end()
        os.close(self.read_fd)
