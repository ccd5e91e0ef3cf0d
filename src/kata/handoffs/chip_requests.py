"""What a judge, or the front-end that started it, asks the chip holder
(kata.servers.chip_holder), typed and defined once: the judge's side
(kata.handoffs.chip_connection) and the front-end (kata.servers.chip_holder's `reach_at`,
`stop_holder`) send these, the holder answers them. Each travels as one document of
kata.handoffs.wire (its arrays beside it), its kind under "op"; any failure is answered
{"error": "..."}, on which the judge keeps its CPU figures."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from kata.handoffs.request_kinds import RequestKinds


@dataclass(frozen=True)
class Hello:
    """A connection's first request, with the token that shows it comes from this user:
    {"device": "TPU v5 lite", "platform": "tpu"} once the chip is open."""

    token: str


@dataclass(frozen=True)
class TimeProgram:
    """The exported `program` (its bytes, as a uint8 array) called `calls` times in a row
    on the chip, on `words` (its leaves), each call fed leaves `carried` (start, stop) of
    the one before's result at `path`: {"seconds": per call, "links": {i: part}} for the
    calls in `links`. Each call is waited for before the next is sent (a speed check's
    latency, timed as the CPU's calls are), or, not `each_waited`, the chain is sent ahead
    and only its last call waited for (a throughput: the chip never idles between calls)."""

    program: Any
    words: list[Any]
    carried: list[int]
    path: list[int | str]
    calls: int
    links: list[int]
    each_waited: bool = True


@dataclass(frozen=True)
class TimeEager:
    """The judge's function `name` in `file` (kata's or a course's checks: named, never sent
    as code) called `calls` times on `args` under `jax.disable_jit()`: {"seconds": per
    call}."""

    file: str
    name: str
    args: list[Any]
    calls: int


@dataclass(frozen=True)
class Stop:
    """End the holder: {"stopped": true}, and it exits."""


ChipRequest = Hello | TimeProgram | TimeEager | Stop
KINDS = RequestKinds(hello=Hello, program=TimeProgram, eager=TimeEager, stop=Stop)


def send(connection: socket.socket, request: ChipRequest) -> None:
    from kata.handoffs import wire

    wire.send(connection, *wire.encode(KINDS.document(request)))


def read(document: Any) -> ChipRequest | None:
    """The request a decoded `document` holds; None for one that is none of these."""
    return KINDS.read(document)
