"""One run as the supervisor asks for it (kata.supervisor.runner), typed and defined once:
of a cold judge (kata.supervisor.judge_process.ColdProcess, on its command line) or of the
warm worker (kata.servers.worker), whose client (kata.servers.warm) sends it as one JSON line
carrying the token that shows it comes from this user; the worker checks it and hands it to
a spare, which reads it again. The worker's other request, to stop, is here too."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


class MalformedRequest(ValueError):
    """A request that is not one of these, said in one line."""


@dataclass(frozen=True)
class RunRequest:
    """One run: pytest's arguments for its judge, where and under which limits it runs."""

    args: list[str]  # pytest's arguments
    cwd: str  # the run's scratch folder, its working folder
    env: dict[str, str]
    output_limit: int  # bytes of the run's output kept
    memory: int | None  # the run's memory cap in bytes; None for none
    confine: dict[str, list[str]] | None  # the run's Landlock paths; None runs unconfined
    container: dict[str, Any]  # kata.isolation.container.Spec.settings()
    seconds: float  # how long a warm run may take before the worker kills it
    events_key: str  # seals the judge's events (kata.handoffs.seal)

    def line(self, token: str) -> bytes:
        return json.dumps({**asdict(self), "token": token}).encode() + b"\n"

    @classmethod
    def read(cls, document: dict[str, Any]) -> RunRequest:
        """The request `document` holds; MalformedRequest, naming what is wrong, otherwise."""
        try:
            request = cls(
                args=[str(arg) for arg in document["args"]],
                cwd=str(document["cwd"]),
                env={str(name): str(value) for name, value in document["env"].items()},
                output_limit=int(document["output_limit"]),
                memory=int(document["memory"] or 0) or None,
                confine=document.get("confine"),
                container=dict(document["container"]),
                seconds=float(document["seconds"]),
                events_key=str(document["events_key"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise MalformedRequest(f"not a grading request: {error!r}") from None
        if request.confine is not None and not isinstance(request.confine, dict):
            raise MalformedRequest("not a grading request: its confine is no set of paths")
        return request


def stop_line(token: str) -> bytes:
    """The request that ends the worker: it replies {"stopped": true, "runs": N} and exits."""
    return json.dumps({"stop": True, "token": token}).encode() + b"\n"


def asks_to_stop(document: dict[str, Any]) -> bool:
    return bool(document.get("stop"))
