"""A judge's connection to the chip holder (kata.servers.chip_holder): the socket its run was
handed, through which it asks the holder to time a learner's program and its own baseline on
the chip. Any failure is a ChipError, on which the judge keeps its CPU figures."""

from __future__ import annotations

import os
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


class ChipError(Exception):
    """The holder could not do what was asked (or is gone): the judge keeps its CPU figures."""


@dataclass
class Chip:
    """The holder as a judge reaches it: the connection its run was handed."""

    connection: socket.socket
    device: str = ""
    platform: str = ""

    def greeted(self) -> Chip:
        """Once the holder has opened the chip: its device and platform."""
        if not self.device:
            reply = self._reply(OPEN_SECONDS)
            self.device, self.platform = str(reply["device"]), str(reply["platform"])
        return self

    def time_program(
        self,
        program: bytes,
        words: list[Any],
        carried: tuple[int, int],
        path: tuple[int | str, ...],
        calls: int,
        links: set[int],
    ) -> tuple[float, dict[int, Any]]:
        """Seconds per call of `program` called `calls` times in a row on the chip, each call
        fed leaves `carried` of the one before's result at `path`; and what those calls in
        `links` returned there."""
        import numpy as np

        bytes_ = np.frombuffer(program, np.uint8)
        request = TimeProgram(bytes_, list(words), list(carried), list(path), calls, sorted(links))
        reply = self._ask(request)
        kept = {int(link): part for link, part in reply["links"].items()}
        return float(reply["seconds"]), kept

    def time_eager(self, function: Callable[..., Any], args: tuple[Any, ...], calls: int) -> float:
        """Seconds per call of the module-level `function` on `args`, run eagerly on the chip."""
        source = str(sys.modules[function.__module__].__file__)
        request = TimeEager(source, function.__qualname__, list(args), calls)
        return float(self._ask(request)["seconds"])

    def _ask(self, request: ChipRequest) -> dict[str, Any]:
        self.greeted()
        try:
            chip_requests.send(self.connection, request)
        except OSError as error:
            raise ChipError(f"the chip holder is gone ({error})") from None
        return self._reply(None)

    def _reply(self, seconds: float | None) -> dict[str, Any]:
        from kata.handoffs import wire

        self.connection.settimeout(seconds)
        try:
            document, arrays = wire.receive(self.connection)
        except (OSError, EOFError, ValueError, wire.WireError) as error:
            why = str(error) or type(error).__name__
            raise ChipError(f"the chip holder did not answer ({why})") from None
        reply = wire.decode(document, arrays)
        if not isinstance(reply, dict):
            raise ChipError(f"the chip holder answered {reply!r}")
        if "error" in reply:
            raise ChipError(str(reply["error"]))
        return reply


_chip: list[Chip | None] = []


def judges_chip() -> Chip | None:
    """The chip this judge's run was handed (its connection to the holder), or None."""
    if not _chip:
        descriptor = os.environ.pop(CHIP_FD_VARIABLE, "")
        _chip.append(Chip(socket.socket(fileno=int(descriptor))) if descriptor.isdigit() else None)
    return _chip[0]
