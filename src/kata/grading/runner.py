"""Running the checks: learner code in a child process that can fail any way it likes.

The checks run under pytest in a child Python, with pytest-timeout stopping a check that
runs too long and kata's pytest plugin streaming each verdict on the events pipe
(kata.grading.events_pipe). The parent reads it as it comes, so whatever the learner's
code does (a syntax error, an endless loop, a segfault, `sys.exit`, `os._exit`, megabytes
of output) the grader still knows which check was running and answers with a verdict.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kata.course import Course, Exercise, exercise_of_check_file
from kata.course_files import answer_folders
from kata.grading import confinement, container, events_pipe
from kata.grading.events_pipe import EventsPipe, LineTooLong
from kata.grading.learner import SOURCE_VARIABLE
from kata.grading.processes import ChecksProcess, ColdProcess, grading_environment
from kata.grading.seal import Seal, new_key
from kata.grading.warm import WarmGrader, WarmProcess, WorkerUnavailable, worker_token
from kata.results import (
    DEFAULT_LIMITS,
    CheckResult,
    Collected,
    CollectError,
    Event,
    ExerciseResult,
    Grading,
    Limits,
    Outcome,
    Started,
    Verdict,
    read_event,
)

# Files pytest reads while looking for its configuration, in every folder above the checks.
PYTEST_CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

POLL_SECONDS = 0.02
# How often the parent measures what a run holds in its scratch folder (a walk of a few
# files: well under a millisecond).
SCRATCH_CHECK_SECONDS = 0.5
PLUGIN = "kata.grading.pytest_plugin"
# pytest's exit codes for an interrupted run, an internal error and a usage error.
PYTEST_SETUP_FAILURES = (2, 3, 4)


def grade(
    course: Course,
    exercises: list[Exercise],
    source: Path,
    limits: Limits = DEFAULT_LIMITS,
    warm: WarmGrader | None = None,
    cancel: threading.Event | None = None,
) -> Grading:
    """Run the checks of `exercises` against the learner files in `source`.

    One child process grades them all (one JAX start-up); if learner code kills it, a
    new one grades the exercises it never reached. With `warm`, the course's warm grader,
    runs go to it while it answers, and fall back to cold processes otherwise.
    Setting `cancel` stops the run at once; what was not graded says so.
    """
    source = source.resolve()
    env = warm.env if warm else grading_environment(course.state_dir)
    run = _Run(
        course=course,
        source=source,
        env=env | {SOURCE_VARIABLE: str(source)},
        limits=limits,
        deadline=time.monotonic() + limits.run_seconds,
        warm=warm,
        cancel=cancel or threading.Event(),
    )
    missing = {e.id: _missing_checks(course, e) for e in exercises}
    pending = [e for e in exercises if missing[e.id] is None]
    checks: dict[str, CheckResult] = {}
    problems: dict[str, str] = {}
    while pending:
        done = {id for id, check in checks.items() if check.ran}
        child = _ChildRun(run, pending, skip=done)
        child.run()
        problems.update(child.collect_errors)
        checks.update({id: c for id, c in child.checks.items() if id not in done})
        progressed = any(c.ran for c in child.checks.values() if c.id not in done)
        if child.finished_cleanly or child.out_of_time or not progressed:
            # Nothing ran this time (or the run is over): another child would fare no better.
            for exercise in pending:
                ran = any(c.exercise == exercise.id and c.ran for c in checks.values())
                if child.death and not ran:
                    problems.setdefault(exercise.id, f"not graded: {child.death}")
            break
        # Learner code killed the process mid-check: grade the checks it never reached.
        pending = [e for e in pending if any(
            c.exercise == e.id and not c.ran for c in checks.values()
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


def exposed_answers(course: Course, confined: bool) -> list[Path]:
    """The reference solutions a run grading a submission could read here: none where its
    mount namespace covers them or Landlock leaves them out of what it may read."""
    answers = answer_folders(course, None)
    if not answers or "mount" in container.available_layers():
        return []
    if confined and confinement.abi_version() > 0:
        readable = [str(course.checks_dir), str(course.root / "course.toml")]
        hidden = tuple(str(a) for a in answers)
        policy = confinement.grading_policy(readable, [], hidden=hidden)
        return [a for a in answers if confinement.readable_under(policy, str(a))]
    return answers


def disk_usage(folder: Path) -> int:
    """Bytes the files below `folder` occupy on disk (a sparse file only what it uses)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # deleted meanwhile
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


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
    if all(c.outcome == Outcome.ERROR for c in checks) and len({c.message for c in checks}) == 1:
        # Every check failed the same way before it began: the file itself does not load.
        return ExerciseResult(exercise, checks, problem=checks[0].message)
    return ExerciseResult(exercise, checks)


@dataclass(frozen=True)
class _Run:
    """What every child process of one grading run shares."""

    course: Course
    source: Path
    env: dict[str, str]
    limits: Limits
    deadline: float
    warm: WarmGrader | None
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
        # Each child's own, known to it and to this process only (kata.grading.seal).
        self.events_key = new_key()
        self.seal = Seal(self.events_key)

    def pytest_arguments(self, events_option: str) -> list[str]:
        check_files = [str(self.course.check_file(e)) for e in self.exercises]
        plugins = [
            "-p",
            "pytest_timeout",
            "-p",
            "kata.grading.pytest_plugin",
            "-p",
            "no:cacheprovider",
        ]
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
            events_option,
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
        hidden = [str(f) for f in answer_folders(self.course, self.source)]
        return {"read": read, "write": write, "hidden": hidden}

    def container_spec(self, scratch: str, paths: dict[str, list[str]]) -> container.Spec:
        """The run's container (kata.grading.container): its caps, a tmpfs scratch, the
        submission and checks read-only, and every reference solution out of sight (but
        the ones being graded, under `kata check --solutions` or `kata verify`)."""
        return container.Spec(
            memory_bytes=self.limits.memory_bytes or None,
            scratch=scratch,
            scratch_bytes=self.limits.scratch_bytes,
            read_only=(str(self.source), str(self.course.checks_dir)),
            hidden=tuple(paths["hidden"]),
            visible=(*paths["read"], *paths["write"]),
        )

    def launch(self, events: EventsPipe, scratch: str) -> ChecksProcess:
        # Temporary files (pytest's tmp_path too) go where the run may write.
        env = self.run_settings.env | {"TMPDIR": scratch}
        args = self.pytest_arguments(events_pipe.option(events.write_fd))
        paths = self.confined_paths(env, scratch)
        limits = {
            "output_limit": self.limits.output_bytes,
            "memory": self.limits.memory_bytes,
            "confine": paths if self.limits.confined else None,
            "container": self.container_spec(scratch, paths).settings(),
            "events_fd": events.write_fd,
        }
        warm = self.run_settings.warm
        connection = warm.connect() if warm else None
        if warm is not None and connection is not None:
            token = worker_token(warm.socket)
            seconds = self.run_settings.deadline - time.monotonic() + self.limits.grace_seconds
            try:
                return WarmProcess(
                    connection,
                    args,
                    scratch,
                    env,
                    seconds=seconds,
                    token=token,
                    events_key=self.events_key,
                    **limits,
                )
            except WorkerUnavailable:
                pass
        return ColdProcess(args, scratch, env, self.events_key, **limits)

    def run(self) -> None:
        with tempfile.TemporaryDirectory(prefix="kata-") as scratch:
            events = EventsPipe()
            try:
                process = self.launch(events, scratch)
                events.close_write_end()  # the judge alone holds it now
                self._watch(process, events, Path(scratch))
                try:
                    self._read_events(events)
                except LineTooLong as error:
                    self._fail_running(Outcome.FAILED, f"{error}: the run's loss")
                code = process.finish()
            finally:
                events.close()
            self.output = process.output_text()
            self._judge_exit(code)

    def _watch(self, process: ChecksProcess, events: EventsPipe, scratch: Path) -> None:
        next_scratch_check = time.monotonic()
        while process.wait(POLL_SECONDS) is None:
            try:
                self._read_events(events)
            except LineTooLong as error:
                self._stop(process, Outcome.FAILED, f"{error} and was stopped")
                return
            now = time.monotonic()
            if now >= next_scratch_check:
                next_scratch_check = now + SCRATCH_CHECK_SECONDS
                if disk_usage(scratch) > self.limits.scratch_bytes:
                    cap = self.limits.scratch_bytes / 2**20
                    why = f"it wrote more than {cap:g} MiB into its working folder and was stopped"
                    self._stop(process, Outcome.FAILED, why)
                    return
            if now > self.run_settings.deadline or self.run_settings.cancel.is_set():
                self.out_of_time = True
                self.death = (
                    "grading was interrupted"
                    if self.run_settings.cancel.is_set()
                    else f"the grading run's {self.limits.run_seconds:g} s limit ran out"
                )
                self._stop(process, Outcome.TIMED_OUT, self.death)
                return
            if (
                self.running
                and now - self.running[1] > self.limits.check_seconds + self.limits.grace_seconds
            ):
                self._stop(
                    process,
                    Outcome.TIMED_OUT,
                    f"it ran past the {self.limits.check_seconds:g} s limit and was stopped",
                )
                return

    def _stop(self, process: ChecksProcess, outcome: Outcome, why: str) -> None:
        process.kill()
        self.stopped = True
        self._fail_running(outcome, why)

    def _fail_running(self, outcome: Outcome, why: str) -> None:
        if self.running is None:
            return
        check = self.checks[self.running[0]]
        check.outcome, check.message = outcome, why
        self.running = None

    def _read_events(self, events: EventsPipe) -> None:
        for line in events.lines():
            text = self.seal.open(line)
            if text is not None:  # else learner code wrote it: it never counts
                self._apply(read_event(text))

    def _apply(self, event: Event) -> None:
        match event:
            case Collected(checks=entries):
                for entry in entries:
                    self.checks[entry["id"]] = CheckResult(**entry)
            case CollectError(path=path, message=message):
                exercise = exercise_of_check_file(Path(path))
                self.collect_errors[exercise] = f"its checks could not be loaded: {message}"
            case Started(id=check_id):
                self.running = (check_id, time.monotonic())
            case Verdict():
                event.apply_to(self.checks[event.id])
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
        self._fail_running(Outcome.CRASHED, self.death)
