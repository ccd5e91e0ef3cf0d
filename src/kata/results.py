"""What grading produces: outcomes, results, limits, and the events a grading child sends.

The child process (kata.judge.pytest_plugin) writes one JSON line per event; the parent
(kata.supervisor.runner) reads them back with `read_event`, which refuses a line that does not
fit the schema, so a stray or mistyped field is an error rather than a silent attribute.
Everything that renders or scores results imports this module, not the process machinery.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from kata.accelerators import accelerator_installed
from kata.course import Exercise
from kata.grading_platform import GradingPlatform, grading_platform


class Outcome(str, Enum):
    """A check's outcome; prints and formats as its value (enum.StrEnum is Python 3.11+)."""

    __str__ = str.__str__
    __format__ = str.__format__

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # learner code raised while the check was set up (an import failure)
    SKIPPED = "skipped"
    CRASHED = "crashed"  # the process died during this check
    TIMED_OUT = "timed out"
    NOT_RUN = "not run"


DEFAULT_MEMORY_BYTES = 6 * 2**30


def default_memory_limit() -> int:
    """6 GiB on a CPU backend; none where a GPU or TPU runtime is installed."""
    return 0 if accelerator_installed() else DEFAULT_MEMORY_BYTES


# A run's time when none is given, per exercise graded: a solved exercise's checks take at
# most ~7 s warm on a quiet 2-core machine (05's all ~65 s cold at load ~20), and a check's
# own limit is at most half its exercise's share, so 60 s as before.
SECONDS_PER_EXERCISE = 120.0


@dataclass(frozen=True)
class Limits:
    check_seconds: float = 60.0
    # The whole run's time, shared out among its exercises; None: SECONDS_PER_EXERCISE each
    # (a fixed total shrank each exercise's share as the course grew).
    run_seconds: float | None = None
    output_bytes: int = 64 * 1024
    # The address-space cap of a grading process (0: none).
    memory_bytes: int = field(default_factory=default_memory_limit)
    # What a run's processes may hold in memory of their own, measured by the parent as
    # the run goes (0: not measured; kata.supervisor.memory). Set under a container's memory
    # limit, it stops the run with a message before the container's OOM killer would.
    resident_bytes: int = 0
    # How long past the per-check limit the parent waits before killing the child, for
    # code stuck where pytest-timeout's signal cannot interrupt it (inside a C call).
    grace_seconds: float = 10.0
    # What a run may hold in its scratch folder, measured by the parent as the run goes:
    # no unprivileged kernel cap exists for a folder, and RLIMIT_FSIZE caps files one by one.
    scratch_bytes: int = 2**30
    # Whether learner code runs confined (kata.isolation.confinement) where the system allows.
    confined: bool = True

    def budget_for(self, exercises: int) -> float:
        """The seconds a run of `exercises` exercises may take in all."""
        if self.run_seconds is not None:
            return self.run_seconds
        return SECONDS_PER_EXERCISE * max(1, exercises)


DEFAULT_LIMITS = Limits()


@dataclass
class CheckResult:
    id: str
    exercise: str
    name: str
    task: str | None = None
    speed: bool = False
    outcome: Outcome = Outcome.NOT_RUN
    message: str = ""
    exception: str | None = None
    location: dict[str, Any] | None = None
    diagnosis: dict[str, str] | None = None
    # What the check's own assertion found (kata.findings); None for an error
    # the learner's code raised.
    finding: str | None = None
    output: str = ""
    notes: list[str] = field(default_factory=list)
    # Named numbers the check measured (`MEASURES`): a timed check's "speedup", the
    # "compilations" its count blocks saw.
    measurements: dict[str, float] = field(default_factory=dict)
    duration: float = 0.0
    # It rests on the learner's process's word alone (kata.supervisor.evidence): it decides
    # the verdict, and earns no points (kata.reporting.scoring). Set by the grader, which
    # reads the check file's source, never by the judge's events.
    feedback_only: bool = False

    @property
    def passed(self) -> bool:
        return self.outcome == Outcome.PASSED

    @property
    def ran(self) -> bool:
        return self.outcome != Outcome.NOT_RUN

    @property
    def settled(self) -> bool:
        """Judged, or known never to be: a check not reached carries the reason why."""
        return self.ran or bool(self.message)


@dataclass
class ExerciseResult:
    exercise: Exercise
    checks: list[CheckResult]
    problem: str | None = None  # a verdict on the whole file: it does not import, say
    # The problem is the course's or the installation's, not the graded file's: the checks
    # themselves could not be loaded (a name this JAX lacks, say), so nothing was judged.
    checks_not_loaded: bool = False
    # The file is the exercise's stub as the course gives it (kata.reporting.intake's
    # `is_stub`): graded as any file, it earns nothing (kata.reporting.scoring).
    as_given: bool = False

    @property
    def passed(self) -> bool:
        return bool(self.checks) and self.problem is None and all(c.passed for c in self.checks)

    @property
    def passed_count(self) -> int:
        return sum(c.passed for c in self.checks)


@dataclass
class Grading:
    """One grading run: a result per exercise of the folder graded."""

    source: Path
    results: list[ExerciseResult]
    # Where it ran: the run's one decision (kata.grading_platform), which every
    # process it started was given, so every Grading made from it says the same.
    platform: GradingPlatform = field(default_factory=grading_platform)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)


# The events a grading child streams to its parent ------------------------------------

# What a check records with pytest's `record_property` (kata.checking), read back from each
# check's report in the grading child: a line shown to the learner, and a measurement as a
# (name, number) pair, so that nothing downstream parses it out of the line.
NOTE_PROPERTY = "kata_note"
MEASUREMENT_PROPERTY = "kata_measurement"


@dataclass(frozen=True)
class Measure:
    """A kind of number a check measures: what it is called where it is shown, and which
    of two is the better (the recap and the class keep the best)."""

    name: str
    title: str  # as a heading or a leaderboard's name: "jit speedup"
    label: str  # before the number, in the learner's text: "XLA compilations seen"
    higher_is_better: bool
    # Whether the learner's text adds a line for it: a speed check's note already gives
    # its speedup with both sides' times.
    in_text: bool = True

    def best(self, first: float, second: float) -> float:
        return max(first, second) if self.higher_is_better else min(first, second)

    def shown(self, value: float) -> str:
        return f"{self.label}: {value:g}"


# Every measurement a check may record. One recorded twice under one check adds up (two
# count blocks' compilations); Gradescope's leaderboard and the class report show speedups.
MEASURES = {
    measure.name: measure
    for measure in (
        Measure("speedup", "jit speedup", "× faster than eager", True, in_text=False),
        Measure("compilations", "compilations", "XLA compilations seen", False),
        # 13's remat_mlp: what its backward pass keeps, read from the arrays the judge's
        # own run of its exported forward half returned; the check's note compares it.
        Measure("kept_kib", "memory kept for backward", "KiB kept", False, in_text=False),
    )
}


@dataclass(frozen=True)
class Collected:
    """The checks pytest will run, in order (CheckResult's identifying fields)."""

    checks: list[dict[str, Any]]


@dataclass(frozen=True)
class CollectError:
    """A check file that could not be imported (the course's fault, not the learner's)."""

    path: str
    message: str


@dataclass(frozen=True)
class Started:
    id: str


@dataclass(frozen=True)
class Verdict:
    """One check's result; the fields update the CheckResult collected for `id`."""

    id: str
    outcome: Outcome
    duration: float = 0.0
    output: str = ""
    notes: list[str] = field(default_factory=list)
    measurements: dict[str, float] = field(default_factory=dict)
    message: str = ""
    exception: str | None = None
    location: dict[str, Any] | None = None
    diagnosis: dict[str, str] | None = None
    finding: str | None = None

    def apply_to(self, check: CheckResult) -> None:
        for name in VERDICT_FIELDS:
            setattr(check, name, getattr(self, name))


Event = Collected | CollectError | Started | Verdict
EVENT_KINDS: dict[str, type[Event]] = {
    "collected": Collected,
    "collect_error": CollectError,
    "start": Started,
    "result": Verdict,
}
VERDICT_FIELDS = tuple(f.name for f in dataclasses.fields(Verdict) if f.name != "id")
COLLECTED_FIELDS = frozenset({"id", "exercise", "task", "name", "speed"})


def event_line(event: Event) -> str:
    """The JSON line that carries `event`."""
    kind = next(name for name, cls in EVENT_KINDS.items() if isinstance(event, cls))
    return json.dumps({"event": kind, **dataclasses.asdict(event)}) + "\n"


# Characters that steer a terminal or a page instead of showing as themselves: C0 and C1
# controls (ANSI and OSC sequences start with ESC, U+009B is a CSI alone, a carriage return
# overwrites the line), Unicode's line and paragraph separators, its direction marks and
# overrides, and its invisible ones (zero-width spaces and joiners, the byte-order mark).
_STEERING = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


def printable(text: str) -> str:
    """`text` with every character that would steer a terminal or reorder a line written
    as its escape (`\\x1b`), newlines and tabs kept: a learner's message and printed text
    reach the instructor's terminal, the gradebook and Gradescope as they read, never as a
    cleared screen, a forged verdict or a clipboard write."""
    return _STEERING.sub(lambda found: ascii(found.group())[1:-1], text)


def _printable_strings(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [_printable_strings(item) for item in value]
    if isinstance(value, dict):
        return {key: _printable_strings(item) for key, item in value.items()}
    return value


def read_event(line: str) -> Event:
    """The event on one line, its text `printable`; ValueError for anything that does not
    fit the schema."""
    fields = _printable_strings(json.loads(line))
    if not isinstance(fields, dict):
        raise ValueError(f"an event is a JSON object, not {line!r}")
    kind = EVENT_KINDS.get(fields.pop("event", None))
    if kind is None:
        raise ValueError(f"not a grading event: {line!r}")
    known = {f.name for f in dataclasses.fields(kind)}
    unknown = set(fields) - known
    if unknown:
        raise ValueError(f"{kind.__name__} event with unknown fields {sorted(unknown)}")
    if kind is Verdict:
        fields["outcome"] = Outcome(fields["outcome"])
    if kind is Collected and any(set(c) - COLLECTED_FIELDS for c in fields["checks"]):
        raise ValueError(f"collected checks with unknown fields: {line!r}")
    return kind(**fields)
