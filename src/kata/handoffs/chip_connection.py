"""A judge's connection to the chip holder (kata.servers.chip_holder): the socket its run was
handed, through which it asks the holder to time a learner's program and its own baseline on
the chip. Any failure is a ChipError, on which the judge keeps its CPU figures."""

from __future__ import annotations

import os
import select
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kata.handoffs import chip_requests
from kata.handoffs.chip_requests import ChipRequest, TimeEager, TimeProgram
from kata.handoffs.environment import CHIP_FD_VARIABLE

# Import and open: 6.7 s on a TPU v5e; a loaded machine, several times that.
OPEN_SECONDS = 120.0
# A request's reply, owed ones too: the holder ends itself once one request has run 20 s
# (kata.servers.chip_holder.REQUEST_RUN_SECONDS), so a judge hears it go first; this bounds a
# holder that cannot (a check's own limit is 60 s, and the CPU's figure then stands).
REPLY_SECONDS = 25.0
# What `jax.export` names a platform that a device reports by JAX's alias: a holder of an
# earlier kata greeted with `device.platform`, "gpu" for a CUDA device (ROCm's holder names
# itself "rocm"); a CPU-only process refuses to export for "gpu".
EXPORT_NAMES = {"gpu": "cuda"}


class ChipError(Exception):
    """The holder could not do what was asked (or is gone): the judge keeps its CPU figures."""


@dataclass
class Chip:
    """The holder as a judge reaches it: the connection its run was handed."""

    connection: socket.socket
    device: str = ""
    platform: str = ""
    # Replies still owed for requests sent ahead (`send_ahead`), read before the next request's.
    owed: int = 0
    # Why the holder's greeting failed, told again to whoever asks after.
    refused: str = ""

    def greeted(self) -> Chip:
        """Once the holder has opened the chip: its device and platform."""
        if self.refused:
            raise ChipError(self.refused)
        if not self.device:
            try:
                reply = self._reply(OPEN_SECONDS)
            except ChipError as error:
                self.refused = str(error)
                raise
            platform = str(reply["platform"])
            self.device, self.platform = str(reply["device"]), EXPORT_NAMES.get(platform, platform)
        return self

    def opened(self) -> bool:
        """Whether the holder has opened the chip already, asked without waiting (a
        greeting that came and failed raises ChipError)."""
        if not self.device:
            ready, _, _ = select.select([self.connection], [], [], 0)
            if not ready:
                return False
            self.greeted()
        return True

    def send_ahead(self, *requests: ChipRequest) -> None:
        """Send `requests` now, to be answered while the judge goes on; their replies are
        read before the next request's, and one that failed fails that request. A speed
        check sends its program and a first eager run of its baseline ahead: the holder
        compiles them on the chip (each operation of an eager run is compiled once) while
        the CPU's side is timed, so what it times afterwards runs warm. On a TPU v5e the
        first speed check of a holder spent 3.9 s on them (0.7 s the program, 3.2 s the
        baseline's first eager run)."""
        for request in requests:
            self._send(request)
            self.owed += 1

    def time_program(self, request: TimeProgram) -> tuple[float, dict[int, Any]]:
        """Seconds per call of the chain `request` asks for (`program_request`), and what
        the calls in its links returned."""
        reply = self._ask(request)
        kept = {int(link): part for link, part in reply["links"].items()}
        return float(reply["seconds"]), kept

    def time_eager(self, request: TimeEager) -> float:
        """Seconds per call of the baseline `request` names (`eager_request`), run eagerly on
        the chip."""
        return float(self._ask(request)["seconds"])

    def _ask(self, request: ChipRequest) -> dict[str, Any]:
        self.greeted()
        while self.owed:  # a request sent ahead that failed fails this one
            self.owed -= 1
            self._reply(REPLY_SECONDS)
        self._send(request)
        return self._reply(REPLY_SECONDS)

    def _send(self, request: ChipRequest) -> None:
        try:
            chip_requests.send(self.connection, request)
        except OSError as error:
            raise ChipError(f"the chip holder is gone ({error})") from None

    def _reply(self, seconds: float | None) -> dict[str, Any]:
        from kata.handoffs import wire

        self.connection.settimeout(seconds)
        try:
            document, arrays = wire.receive(self.connection)
        except (OSError, EOFError, ValueError, wire.WireError) as error:
            why = str(error) or type(error).__name__
            # The stream may stop mid-reply: nothing more is read from it in this run.
            self.refused = f"the chip holder did not answer ({why})"
            raise ChipError(self.refused) from None
        reply = wire.decode(document, arrays)
        if not isinstance(reply, dict):
            raise ChipError(f"the chip holder answered {reply!r}")
        if "error" in reply:
            raise ChipError(str(reply["error"]))
        return reply


def program_request(
    program: bytes,
    words: list[Any],
    carried: tuple[int, int],
    path: tuple[int | str, ...],
    calls: int,
    links: set[int],
    each_waited: bool = True,
) -> TimeProgram:
    """`program` called `calls` times in a row on the chip, on `words` (its leaves), each call
    fed leaves `carried` (start, stop) of the one before's result at `path`; what the calls
    in `links` returned there comes back. Not `each_waited`: only the last call is waited
    for (kata.handoffs.chip_requests.TimeProgram)."""
    import numpy as np

    bytes_ = np.frombuffer(program, np.uint8)
    return TimeProgram(
        bytes_, list(words), list(carried), list(path), calls, sorted(links), each_waited
    )


def eager_request(function: Callable[..., Any], args: tuple[Any, ...], calls: int) -> TimeEager:
    """The module-level `function` (named by its file, never sent) called `calls` times on
    `args` under `jax.disable_jit()`."""
    source = str(sys.modules[function.__module__].__file__)
    return TimeEager(source, function.__qualname__, list(args), calls)


_chip: list[Chip | None] = []


def judges_chip() -> Chip | None:
    """The chip this judge's run was handed (its connection to the holder), or None."""
    if not _chip:
        descriptor = os.environ.pop(CHIP_FD_VARIABLE, "")
        _chip.append(Chip(socket.socket(fileno=int(descriptor))) if descriptor.isdigit() else None)
    return _chip[0]
