"""What the judge asks the learner's starter (kata.learner_side.learner_process.Starter),
typed and defined once: the judge's side (kata.checking.learner_connection, kata.judge.start)
sends these, the starter reads them; `Prepare` goes on from the starter to the learner's
process it forked before the run's settings were known. Each travels as one document of
kata.handoffs.wire, its kind under "op"."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from kata.handoffs.request_kinds import RequestKinds


@dataclass(frozen=True)
class Prepare:
    """A warm run's settings, for a process forked before they were known: its folder,
    environment, memory cap (bytes; None for none) and Landlock paths (None: unconfined).
    Replied to with {"pid": P}."""

    cwd: str
    env: dict[str, str]
    memory: int | None
    confine: dict[str, list[str]] | None


@dataclass(frozen=True)
class Fresh:
    """A new learner's process, none of whose code has run yet, with `host_devices` CPU
    devices (0: the default, started ahead). Replied to with {"pid": P} and then its socket
    (SCM_RIGHTS)."""

    host_devices: int = 0


@dataclass(frozen=True)
class Pause:
    """Stop every process of the learner's code while the judge times its own baseline.
    Replied to with {"stopped": N}."""


@dataclass(frozen=True)
class Resume:
    """Continue them. Replied to with {"ran": [...]}: those that ran while held."""


@dataclass(frozen=True)
class BytesMoved:
    """The bytes process `pid` (one the starter started) read and wrote: {"moved": N}."""

    pid: int


@dataclass(frozen=True)
class End:
    """End process `pid` (after `wait` seconds for it to end of itself) and reap it:
    {"status": S}."""

    pid: int
    wait: float = 0.0


StarterRequest = Prepare | Fresh | Pause | Resume | BytesMoved | End
KINDS = RequestKinds(
    prepare=Prepare, fresh=Fresh, pause=Pause, resume=Resume, bytes_moved=BytesMoved, end=End
)


def send(connection: socket.socket, request: StarterRequest) -> None:
    from kata.handoffs import wire  # NumPy: not in the judge's start before it forks

    wire.send(connection, KINDS.document(request), [])


def read(document: dict[str, Any]) -> StarterRequest | None:
    """The request `document` holds; None for one that is none of these."""
    return KINDS.read(document)
