"""Running the checks: learner code in a child process that can fail any way it likes.

The checks run under pytest in a child Python, with pytest-timeout stopping a check that
runs too long and kata's pytest plugin streaming each verdict to an events file. The
parent reads that file as it grows, so whatever the learner's code does (a syntax error,
an endless loop, a segfault, `sys.exit`, `os._exit`, megabytes of output) the grader
still knows which check was running and answers with a verdict, never a hang.
"""

from __future__ import annotations

import json
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kata.course import Course, Exercise
from kata.processes import (
    ChecksProcess,
    ColdProcess,
    WarmProcess,
    WorkerUnavailable,
    connect_worker,
    grading_environment,
    worker_token,
)
from kata.sandbox import accelerator_installed

# Files pytest reads while looking for its configuration, in every folder above the checks.
PYTEST_CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

PASSED = "passed"
FAILED = "failed"
ERROR = "error"  # learner code raised while the check was being set up (an import failure)
SKIPPED = "skipped"
CRASHED = "crashed"  # the process died during this check
TIMED_OUT = "timed out"
NOT_RUN = "not run"

POLL_SECONDS = 0.02
# pytest's exit codes for an interrupted run, an internal error and a usage error.
PYTEST_SETUP_FAILURES = (2, 3, 4)


DEFAULT_MEMORY_BYTES = 6 * 2**30


def default_memory_limit() -> int:
    """6 GiB on a CPU backend; none where a GPU or TPU runtime is installed."""
    return 0 if accelerator_installed() else DEFAULT_MEMORY_BYTES


@dataclass(frozen=True)
class Limits:
    check_seconds: float = 60.0
    run_seconds: float = 900.0
    output_bytes: int = 64 * 1024
    # The address-space cap of a grading process (0: none).
    memory_bytes: int = field(default_factory=default_memory_limit)
    # How long past the per-check limit the parent waits before killing the child, for
    # code stuck where pytest-timeout's signal cannot interrupt it (inside a C call).
    grace_seconds: float = 10.0
    # Whether learner code runs confined (kata.confinement) where the system allows it.
    confined: bool = True


DEFAULT_LIMITS = Limits()


@dataclass
class CheckResult:
    id: str
    exercise: str
    name: str
    task: str | None = None
    speed: bool = False
    outcome: str = NOT_RUN
    message: str = ""
    exception: str | None = None
    location: dict[str, Any] | None = None
    diagnosis: dict[str, str] | None = None
    output: str = ""
    notes: list[str] = field(default_factory=list)
    duration: float = 0.0

    @property
    def passed(self) -> bool:
        return self.outcome == PASSED


@dataclass
class ExerciseResult:
    exercise: Exercise
    checks: list[CheckResult]
    problem: str | None = None  # a verdict on the whole file: it does not import, say

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

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)


def grade(
    course: Course,
    exercises: list[Exercise],
    source: Path,
    limits: Limits = DEFAULT_LIMITS,
    worker: Path | None = None,
    cancel: threading.Event | None = None,
) -> Grading:
    """Run the checks of `exercises` against the learner files in `source`.

    One child process grades them all (one JAX start-up); if learner code kills it, a
    new one grades the exercises it never reached. With `worker`, the socket of a warm
    worker, runs go to it while it answers, and fall back to cold processes otherwise.
    Setting `cancel` stops the run at once; what was not graded says so.
    """
    run = _Run(
        course=course,
        source=source.resolve(),
        limits=limits,
        deadline=time.monotonic() + limits.run_seconds,
        worker=worker,
        cancel=cancel or threading.Event(),
    )
    missing = {e.id: _missing_checks(course, e) for e in exercises}
    pending = [e for e in exercises if missing[e.id] is None]
    checks: dict[str, CheckResult] = {}
    problems: dict[str, str] = {}
    while pending:
        done = {id for id, check in checks.items() if check.outcome != NOT_RUN}
        child = _ChildRun(run, pending, skip=done)
        child.run()
        problems.update(child.collect_errors)
        checks.update({id: c for id, c in child.checks.items() if id not in done})
        progressed = any(c.outcome != NOT_RUN for c in child.checks.values() if c.id not in done)
        if child.finished_cleanly or child.out_of_time or not progressed:
            # Nothing ran this time (or the run is over): another child would fare no better.
            for exercise in pending:
                ran = any(
                    c.exercise == exercise.id and c.outcome != NOT_RUN for c in checks.values()
                )
                if child.death and not ran:
                    problems.setdefault(exercise.id, f"not graded: {child.death}")
            break
        # Learner code killed the process mid-check: grade the checks it never reached.
        pending = [e for e in pending if any(
            c.exercise == e.id and c.outcome == NOT_RUN for c in checks.values()
        )]  # fmt: skip
    results = [
        ExerciseResult(exercise, [], problem=missing[exercise.id])
        if missing[exercise.id]
        else _exercise_result(
            exercise, [c for c in checks.values() if c.exercise == exercise.id], problems
        )
        for exercise in exercises
    ]
    return Grading(source=run.source, results=results)


def _missing_checks(course: Course, exercise: Exercise) -> str | None:
    if course.check_file(exercise).is_file():
        return None
    return f"the course has no checks for it: {course.check_file(exercise)} is missing"


def _exercise_result(
    exercise: Exercise, checks: list[CheckResult], problems: dict[str, str]
) -> ExerciseResult:
    if exercise.id in problems:
        return ExerciseResult(exercise, checks, problem=problems[exercise.id])
    if not checks:
        return ExerciseResult(exercise, [], problem="no checks ran")
    if all(c.outcome == ERROR for c in checks) and len({c.message for c in checks}) == 1:
        # Every check failed the same way before it began: the file itself does not load.
        return ExerciseResult(exercise, checks, problem=checks[0].message)
    return ExerciseResult(exercise, checks)


@dataclass(frozen=True)
class _Run:
    """What every child process of one grading run shares."""

    course: Course
    source: Path
    limits: Limits
    deadline: float
    worker: Path | None
    cancel: threading.Event


class _ChildRun:
    """One pytest child over some exercises, watched until it ends or must be stopped."""

    def __init__(self, run: _Run, exercises: list[Exercise], skip: set[str]) -> None:
        self.run_settings, self.exercises, self.skip = run, exercises, skip
        self.course, self.source, self.limits = run.course, run.source, run.limits
        self.checks: dict[str, CheckResult] = {}
        self.collect_errors: dict[str, str] = {}
        self.running: tuple[str, float] | None = None
        self.finished_cleanly = False
        self.out_of_time = False
        self.stopped = False
        self.death = ""
        self.output = ""

    def pytest_arguments(self, events: Path) -> list[str]:
        check_files = [str(self.course.check_file(e)) for e in self.exercises]
        plugins = ["-p", "pytest_timeout", "-p", "kata.pytest_plugin", "-p", "no:cacheprovider"]
        # These two collect garbage twice over the whole heap as pytest ends, to report
        # exceptions nobody could catch; a verdict never needs them.
        unused = ["-p", "no:unraisableexception", "-p", "no:threadexception"]
        # The course's own configuration, never one found beside a learner's files.
        config = ["--rootdir", str(self.course.root), f"--confcutdir={self.course.checks_dir}"]
        ignore_ini = ["-o", "addopts=", "-o", "testpaths="]
        quiet = ["-q", "--no-header", "-rN", "--tb=no", "--assert=plain"]
        robust = ["--continue-on-collection-errors", f"--timeout={self.limits.check_seconds:g}"]
        # Checks an earlier child already judged, before learner code killed it.
        skipped = [f"--deselect={node}" for node in sorted(self.skip)]
        return [
            *check_files,
            f"--kata-events={events}",
            *plugins,
            *unused,
            *config,
            *ignore_ini,
            *quiet,
            *robust,
            *skipped,
        ]

    def confined_paths(self, env: dict[str, str], scratch: str) -> dict[str, list[str]]:
        """What the run may read and write besides Python and the system's files.

        JAX's compilation cache is shared by every run of the course; only runs of the
        learner's own exercises may add to it, so no submission graded from elsewhere can
        plant a compiled program that another one runs. (Without it, a cold check of 01
        took 9.4 s instead of 5.6 s here: median of 3, on a busy 2-core machine.)
        """
        checks = self.course.checks_dir
        config = [str(folder / name) for folder in checks.parents for name in PYTEST_CONFIG_FILES]
        read = [str(self.source), str(checks), str(self.course.root / "course.toml"), *config]
        write = [scratch]
        cache = env.get("JAX_COMPILATION_CACHE_DIR")
        if cache:
            if self.source == self.course.exercises_dir.resolve():
                Path(cache).mkdir(parents=True, exist_ok=True)
                write.append(cache)
            else:
                read.append(cache)
        return {"read": read, "write": write}

    def launch(self, events: Path, scratch: str) -> ChecksProcess:
        env = grading_environment(self.course.state_dir) | {"KATA_SOURCE": str(self.source)}
        # Temporary files (pytest's tmp_path too) go where the run may write.
        env["TMPDIR"] = scratch
        args = self.pytest_arguments(events)
        limits = {
            "output_limit": self.limits.output_bytes,
            "memory": self.limits.memory_bytes,
            "confine": self.confined_paths(env, scratch) if self.limits.confined else None,
        }
        worker = self.run_settings.worker
        connection = connect_worker(worker) if worker else None
        if worker is not None and connection is not None:
            seconds = self.run_settings.deadline - time.monotonic() + self.limits.grace_seconds
            token = worker_token(worker)
            try:
                return WarmProcess(
                    connection, args, scratch, env, seconds=seconds, token=token, **limits
                )
            except WorkerUnavailable:
                pass
        return ColdProcess(args, scratch, env, **limits)

    def run(self) -> None:
        with tempfile.TemporaryDirectory(prefix="kata-") as scratch:
            events_path = Path(scratch) / "events.jsonl"
            events_path.touch()
            process = self.launch(events_path, scratch)
            with events_path.open(encoding="utf-8") as events:
                self._watch(process, events)
                self._read_events(events)
            code = process.finish()
            self.output = process.output_text()
            self._judge_exit(code)

    def _watch(self, process: ChecksProcess, events: IO[str]) -> None:
        while process.wait(POLL_SECONDS) is None:
            self._read_events(events)
            now = time.monotonic()
            if now > self.run_settings.deadline or self.run_settings.cancel.is_set():
                self.out_of_time = True
                self.death = (
                    "grading was interrupted"
                    if self.run_settings.cancel.is_set()
                    else f"the grading run's {self.limits.run_seconds:g} s limit ran out"
                )
                self._stop(process, TIMED_OUT, self.death)
                return
            if (
                self.running
                and now - self.running[1] > self.limits.check_seconds + self.limits.grace_seconds
            ):
                self._stop(
                    process,
                    TIMED_OUT,
                    f"it ran past the {self.limits.check_seconds:g} s limit and was stopped",
                )
                return

    def _stop(self, process: ChecksProcess, outcome: str, why: str) -> None:
        process.kill()
        self.stopped = True
        self._fail_running(outcome, why)

    def _fail_running(self, outcome: str, why: str) -> None:
        if self.running is None:
            return
        check = self.checks[self.running[0]]
        check.outcome, check.message = outcome, why
        self.running = None

    def _read_events(self, events: IO[str]) -> None:
        while line := events.readline():
            if not line.endswith("\n"):  # half-written: read it whole next time
                events.seek(events.tell() - len(line.encode("utf-8")))
                return
            self._apply(json.loads(line))

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.pop("event")
        if kind == "collected":
            for entry in event["checks"]:
                self.checks[entry["id"]] = CheckResult(**entry)
        elif kind == "collect_error":
            exercise = Path(event["path"]).stem.removeprefix("test_")
            self.collect_errors[exercise] = f"its checks could not be loaded: {event['message']}"
        elif kind == "start":
            self.running = (event["id"], time.monotonic())
        elif kind == "result":
            check = self.checks[event.pop("id")]
            for key, value in event.items():
                setattr(check, key, value)
            self.running = None

    def _judge_exit(self, code: int | None) -> None:
        if self.stopped or code is None:
            return
        if self.running is None and code in (0, 1):
            self.finished_cleanly = True
            return
        if code < 0:
            number = -code
            name = signal.Signals(number).name if number in set(signal.Signals) else str(number)
            self.death = (
                f"the grading process was killed by {name} "
                "(a crash in native code, or out of memory)"
            )
        elif not self.checks and code in PYTEST_SETUP_FAILURES:
            tail = self.output.strip().splitlines()[-3:]
            self.death = f"pytest could not start the checks (exit {code}): {' / '.join(tail)}"
        else:
            self.death = (
                f"the grading process exited with code {code} in the middle of a check "
                "(does the code call `os._exit()` or `sys.exit()`?)"
            )
        if self.running is None and not self.checks:
            self.collect_errors.update({e.id: f"not graded: {self.death}" for e in self.exercises})
        self._fail_running(CRASHED, self.death)
