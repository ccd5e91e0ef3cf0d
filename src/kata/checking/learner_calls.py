"""The judge's side of the learner's process: calling learner code without importing it.

`LearnerModule` stands for the learner's module in the checks: `ex.set_first(x, 3.5)` sends
the call to the learner's process (kata.grading.learner_process) and returns its result as
NumPy arrays and plain containers. JAX transformations are asked for by name, applied
there: `ex.set_first.jit()(x, v)`, `ex.df.vmap()(xs)`, `ex.step.eagerly()(...)`. What the
learner's process saw during a call (XLA compilations, printed text) comes back with it:
`compilations()` counts them across the calls in a block, and printed text is printed
here, for pytest to capture.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kata.grading import wire


class LearnerError(Exception):
    """What learner code raised, as data: its class names, message and the learner's lines."""

    def __init__(self, types: list[str], message: str, frames: list[list[Any]]) -> None:
        super().__init__(f"{types[0]}: {message}")
        self.types, self.message = tuple(types), message
        self.frames = [(str(file), int(line), str(text)) for file, line, text in frames]


class GraderTampering(Exception):
    """The learner's process changed what kata's probes rely on: its observations are void."""

    def __init__(self, names: list[str]) -> None:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        super().__init__(f"the submission changed the grader's own modules: {shown}")


@dataclass
class Compilations:
    names: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.names)


_open_counts: list[Compilations] = []


@contextmanager
def compilations() -> Iterator[Compilations]:
    """The XLA compilations of the learner calls made in the block."""
    seen = Compilations()
    _open_counts.append(seen)
    try:
        yield seen
    finally:
        _open_counts.remove(seen)


# Set by the grading process that forked a learner's process before starting the judge.
LEARNER_SOCKET_VARIABLE = "KATA_LEARNER_FD"


class LearnerProcess:
    """The learner's process: the one the grading process forked beside the judge, or,
    when the checks run straight under pytest (an IDE), one started for this file."""

    def __init__(self, path: Path) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        inherited = os.environ.get(LEARNER_SOCKET_VARIABLE)
        if inherited is not None:
            self.connection = socket.socket(fileno=os.dup(int(inherited)))
            self.ask({"op": "load", "path": str(path)})
            return
        ours, theirs = socket.socketpair()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kata.grading.learner_process", str(theirs.fileno()), path],
            pass_fds=[theirs.fileno()],
        )
        theirs.close()
        self.connection = ours

    def ask(self, request: dict[str, Any], arrays: list[bytes] | None = None) -> dict[str, Any]:
        wire.send(self.connection, request, arrays or [])
        reply = wire.decode(*wire.receive(self.connection))
        if "error" in reply:
            error = reply["error"]
            raise LearnerError(error["types"], error["message"], error["frames"])
        return reply

    def close(self) -> None:
        self.connection.close()
        if self.process is not None:
            self.process.wait()


@dataclass(frozen=True)
class LearnerFunction:
    """A function of the learner's module (or one it returned), under transformations."""

    process: LearnerProcess
    target: dict[str, Any]
    under: tuple[tuple[str, dict[str, Any]], ...] = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        reply = self._ask("call", args, kwargs)
        if reply["tampered"]:
            raise GraderTampering(reply["tampered"])
        for seen in _open_counts:
            seen.names += reply["compilations"]
        if reply["printed"]:
            print(reply["printed"], end="")
        return reply["value"]

    def equation_count(self, *args: Any, **kwargs: Any) -> int:
        """How many operations the traced program of this call holds."""
        return int(self._ask("equations", args, kwargs)["value"])

    def _ask(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        # Arguments and keywords share one list of arrays, each referring to its own.
        document, arrays = wire.encode((args, kwargs))
        positional, named = document["tuple"]
        request = {"op": op, "target": self.target, "under": self.under}
        return self.process.ask(request | {"args": positional, "kwargs": named}, arrays)

    def _with(self, name: str, **options: Any) -> LearnerFunction:
        return replace(self, under=(*self.under, (name, options)))

    def jit(self, static_argnums: tuple[int, ...] = ()) -> LearnerFunction:
        return self._with("jit", static_argnums=list(static_argnums))

    def vmap(self, in_axes: Any = 0) -> LearnerFunction:
        return self._with("vmap", in_axes=in_axes)

    def grad(self, argnums: int | tuple[int, ...] = 0) -> LearnerFunction:
        return self._with("grad", argnums=argnums)

    def eagerly(self) -> LearnerFunction:
        return self._with("eager")


class LearnerModule:
    """The learner's module, as the judge sees it: names that lead to the learner's process."""

    def __init__(self, path: Path) -> None:
        self._process = LearnerProcess(path)

    def __getattr__(self, name: str) -> LearnerFunction:
        if name.startswith("_"):
            raise AttributeError(name)
        found = self._process.ask({"op": "attribute", "name": name})
        if not found["found"]:
            raise AttributeError(f"the learner's module has no {name}")
        return LearnerFunction(self._process, {"name": name})

    def close(self) -> None:
        self._process.close()
