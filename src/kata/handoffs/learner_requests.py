"""What the judge asks a learner's process (kata.learner_side.learner_process), typed and
defined once: the judge's side (kata.checking.learner_connection, kata.checking.learner_calls)
sends these, the learner's process answers them. Each travels as one document of
kata.handoffs.wire, its kind under "op", its arguments as wire documents beside their
arrays, and "counted" where the judge counts what the request costs the process
(kata.learner_side.compile_counts). The starter's requests, a warm run's settings among them,
are kata.handoffs.starter_requests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kata.handoffs.request_kinds import RequestKinds


@dataclass(frozen=True)
class Load:
    """Import the check file `checks` ("" for none) and the learner's module `exercise`: a
    process's first request, and it serves that exercise alone. Replied to with {"pid": P},
    or with the error the import raised."""

    exercise: str
    checks: str = ""


@dataclass(frozen=True)
class Attribute:
    """Whether the learner's module has `name`, raising as the module would: {"found": true}."""

    name: str


@dataclass(frozen=True)
class Call:
    """One call of the function `target` names ({"name": N} in the learner's module, or
    {"opaque": H}: an object the process kept) under the transformations `under`, on
    `args` and `kwargs` (wire documents). Replied to with its value, the compilations it
    made, what it printed and whether anything changed the grader's code."""

    target: dict[str, Any]
    under: list[Any]
    args: Any
    kwargs: Any


@dataclass(frozen=True)
class Chain(Call):
    """`calls` calls in a row, each given as its argument number `carry["arg"]` the part at
    `carry["path"]` of what the call before returned: their results, stacked."""

    calls: int = 1
    carry: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Each(Call):
    """A call for each tuple of arguments in `args`: their results."""


@dataclass(frozen=True)
class Export(Call):
    """`jax.export` of `jax.jit` of the function for `args`' shapes, laid out as `layout`,
    for `platforms` (None: the process's own): the serialized program."""

    layout: dict[str, Any] | None = None
    platforms: list[str] | None = None


@dataclass(frozen=True)
class Run:
    """The check file's `@in_learner_process` helper `name`, called with the learner's
    module, `args` and `kwargs`."""

    name: str
    args: Any
    kwargs: Any


LearnerRequest = Load | Attribute | Call | Chain | Each | Export | Run
KINDS = RequestKinds(
    load=Load, attribute=Attribute, call=Call, chain=Chain, each=Each, export=Export, run=Run
)


def document(request: LearnerRequest, counted: bool = False) -> dict[str, Any]:
    """`request` as it travels (a call's arguments are already wire documents)."""
    return KINDS.document(request, counted=counted)


def read(document: dict[str, Any]) -> LearnerRequest | None:
    """The request `document` holds; None for one that is none of these."""
    return KINDS.read(document, extra=("counted",))
