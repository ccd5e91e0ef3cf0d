"""Running the checks: learner code in a child process that can fail any way it likes.

The checks run under pytest in a child Python, with pytest-timeout stopping a check that
runs too long and kata's pytest plugin streaming each verdict on the events pipe
(kata.handoffs.events_pipe). The parent reads it as it comes, so whatever the learner's
code does (a syntax error, an endless loop, a segfault, `sys.exit`, `os._exit`, megabytes
of output) the grader still knows which check was running and answers with a verdict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from kata.course import Course, CourseError, Exercise, check_file_name, exercise_of_check_file
from kata.course_files import answer_folders
from kata.grading_platform import grading_platform
from kata.handoffs import events_pipe
from kata.handoffs.environment import SOURCE_VARIABLE
from kata.handoffs.events_pipe import EventsPipe, LineTooLong
from kata.handoffs.run_request import RunRequest
from kata.handoffs.seal import Seal, new_key
from kata.isolation import confinement, container
from kata.isolation.caches import (
    CACHE_VARIABLE,
    RUN_CACHE_BYTES,
    RunCaches,
    caches_of_run,
    trim,
)
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
    printable,
    read_event,
)
from kata.servers import chip_holder
from kata.servers.warm import (
    SPARE_FAILED,
    WarmGrader,
    WarmProcess,
    WorkerUnavailable,
    ends_with_this_process,
    worker_token,
)
from kata.supervisor.evidence import feedback_only
from kata.supervisor.judge_process import ChecksProcess, ColdProcess, grading_environment
from kata.supervisor.memory import OomWitness, mebibytes, tree_held_bytes

# Files pytest reads its configuration from, in the order it prefers them.
PYTEST_CONFIG_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


def pytest_config_file(course: Course) -> Path:
    """The one file a run's pytest reads its configuration from (`-c`): the course's own, or
    kata's empty one (pytest's defaults). Left to search, pytest walked up from the checks
    to `/`, where a /tmp/pytest.ini any local user can write could add `pythonpath` or
    plugins to the judge."""
    for name in PYTEST_CONFIG_FILES:
        if (course.root / name).is_file():
            return course.root / name
    return Path(__file__).parents[1] / "judge" / "default_pytest.ini"


POLL_SECONDS = 0.02
# What a folder holds, for its cap, where the grader cannot list all of it: more than any
# cap, since a run could hide what it wrote below a folder it made unreadable.
UNMEASURED_BYTES = 2**62
# How often the parent measures what a run holds in its scratch folder (a walk of a few
# files: well under a millisecond).
SCRATCH_CHECK_SECONDS = 0.5
# How often it measures the compilation caches the run may add to: a walk of each (443
# entries: 11 ms at load average 16, median of 21), so less often than its scratch folder.
CACHE_CHECK_SECONDS = 2.0
# How often it measures the memory a run holds, where Limits.resident_bytes asks it to.
MEMORY_CHECK_SECONDS = 0.1
# What a death by signal most likely means, for the signals learner code meets. SIGKILL
# comes from outside: an out-of-memory kill that no cgroup counted (kata.supervisor.memory).
CRASH = " (a crash in native code)"
SIGNAL_CAUSES = {
    "SIGSEGV": CRASH,
    "SIGBUS": CRASH,
    "SIGILL": CRASH,
    "SIGFPE": CRASH,
    "SIGABRT": " (native code aborted)",
    "SIGKILL": " (stopped from outside it: out of memory, or a kill)",
}
# How pytest (`E   ImportError: cannot import name ...` after `path/expect.py:16: in
# <module>`) or Python's own traceback (`File "path/expect.py", line 16, in <module>`, then
# `ImportError: ...`) shows an exception and where it was raised, in the output of a run
# that could not start.
ERROR_LINE = re.compile(r"^(?:E\s+)?((?:\w+\.)*\w+(?:Error|Exception|Exit)\b.*)$", re.MULTILINE)
WHERE_LINE = re.compile(r'^(\S+\.py):(\d+): in |^\s*File "([^"]+)", line (\d+), in ', re.MULTILINE)


def grade(
    course: Course,
    exercises: list[Exercise],
    source: Path,
    limits: Limits = DEFAULT_LIMITS,
    warm: WarmGrader | None = None,
    cancel: threading.Event | None = None,
    only: Collection[str] = (),
    on_check: Callable[[CheckResult], None] | None = None,
) -> Grading:
    """Run the checks of `exercises` against the learner files in `source`.

    One child process grades them all (one JAX start-up); if learner code kills it, a
    new one grades the exercises it never reached. With `warm`, the course's warm grader,
    runs go to it while it answers, and fall back to cold processes otherwise.
    Setting `cancel` stops the run at once; what was not graded says so. `only` names the
    checks to run (as their ids end: `test_name` or `test_name[param]`); empty runs all. `on_check`
    is called with each check as it starts (its outcome NOT_RUN) and as its verdict comes.
    """
    source = source.resolve()
    missing = {
        e.id: _missing_checks(course, e) or _missing_file(course, e, source) for e in exercises
    }
    pending = [e for e in exercises if missing[e.id] is None]
    run = _run_of(course, source, pending, limits, warm, cancel, only, on_check)
    checks, problems, not_loaded = _graded_checks(run, pending)
    results = [
        ExerciseResult(exercise, [], problem=missing[exercise.id])
        if missing[exercise.id]
        else _exercise_result(
            exercise,
            [c for c in checks.values() if c.exercise == exercise.id],
            problems,
            checks_not_loaded=exercise.id in not_loaded,
        )
        for exercise in exercises
    ]
    return Grading(source=run.source, results=results)


def _run_of(
    course: Course,
    source: Path,
    pending: list[Exercise],
    limits: Limits,
    warm: WarmGrader | None,
    cancel: threading.Event | None,
    only: Collection[str],
    on_check: Callable[[CheckResult], None] | None,
) -> _Run:
    """What every child process grading `pending` from `source` shares."""
    env = warm.env if warm else grading_environment(course.state_dir)
    caches = caches_of_run(
        env.get(CACHE_VARIABLE),
        own_exercises=source == course.exercises_dir.resolve(),
        reference=_grades_the_reference(course, source),
    )
    # The run's learner's processes are told their own cache alone, or none.
    env = {name: value for name, value in env.items() if name != CACHE_VARIABLE}
    if caches.learner:
        env[CACHE_VARIABLE] = caches.learner
    budget = limits.budget_for(len(pending))
    return _Run(
        course=course,
        source=source,
        env=env | {SOURCE_VARIABLE: str(source)},
        limits=limits,
        budget_seconds=budget,
        deadline=time.monotonic() + budget,
        warm=warm,
        cancel=cancel or threading.Event(),
        only=tuple(sorted(only)),
        # No check may take more than half its exercise's equal share of the run: a loop
        # ends its task at most halfway, and the exercise's other tasks get the rest.
        check_seconds=min(limits.check_seconds, budget / max(1, 2 * len(pending))),
        exercise_ids=[e.id for e in pending],
        on_check=on_check or (lambda _: None),
        caches=caches,
        on_chip=grading_platform().chip is not None,
    )


def _graded_checks(
    run: _Run, pending: list[Exercise]
) -> tuple[dict[str, CheckResult], dict[str, str], set[str]]:
    """Every check of `pending`, by id, graded in as many child processes as it takes; the
    problems that kept an exercise from its checks; the exercises whose checks never loaded."""
    checks: dict[str, CheckResult] = {}
    problems: dict[str, str] = {}
    not_loaded: set[str] = set()
    while pending:
        done = {id for id, check in checks.items() if check.settled}
        child = _ChildRun(run, pending, skip=done)
        child.run()
        if child.spare_failed:
            # The warm grader's machinery failed before any check (its traceback is in the
            # output), not the learner's code: grade cold instead.
            run = dataclasses.replace(run, warm=None)
            continue
        problems.update(child.collect_errors)
        not_loaded |= child.checks_not_loaded
        checks.update({id: c for id, c in child.checks.items() if id not in done})
        progressed = any(c.settled for c in child.checks.values() if c.id not in done)
        if child.finished_cleanly or child.out_of_time or not progressed:
            # Nothing ran this time (or the run is over): another child would fare no better.
            for exercise in pending:
                ran = any(c.exercise == exercise.id and c.ran for c in checks.values())
                if child.death and not ran:
                    problems.setdefault(exercise.id, f"not graded: {child.death}")
            if child.out_of_time:
                for check in checks.values():
                    if not check.settled:
                        check.message = f"not reached: {child.death}"
            break
        # Learner code killed the process mid-check, or an exercise ran out of its share of
        # the time: grade the checks not yet settled in a new one.
        pending = [e for e in pending if any(
            c.exercise == e.id and not c.settled for c in checks.values()
        )]  # fmt: skip
    return checks, problems, not_loaded


def _grades_the_reference(course: Course, source: Path) -> bool:
    with contextlib.suppress(CourseError):  # a bundle for graders ships none
        return source == course.solutions_dir.resolve()
    return False


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
    """Bytes the files below `folder` occupy on disk (a sparse file only what it uses), or
    UNMEASURED_BYTES where a folder below it cannot be listed. Walked without recursion:
    `os.walk` raised RecursionError on folders 1,200 deep, which a run can make."""
    total, pending = 0, [str(folder)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    with contextlib.suppress(FileNotFoundError):  # deleted meanwhile
                        status = entry.stat(follow_symlinks=False)
                        if stat.S_ISDIR(status.st_mode):
                            pending.append(entry.path)
                        else:
                            total += status.st_blocks * 512
        except FileNotFoundError:  # deleted meanwhile
            continue
        except OSError:  # made unreadable, or nested past the longest path
            return UNMEASURED_BYTES
    return total


def first_error(output: str) -> str:
    """The one line that says why a run that could not start failed: the exception pytest
    printed, with the place it was raised; else the output's last line."""
    errors = list(ERROR_LINE.finditer(output))
    if not errors:
        lines = output.strip().splitlines()
        return lines[-1].strip() if lines else "it printed nothing"
    error = errors[-1]
    places = list(WHERE_LINE.finditer(output, 0, error.start()))
    if not places:
        return error[1]
    path, line = (places[-1][1], places[-1][2]) if places[-1][1] else places[-1].group(3, 4)
    return f"{path}:{line}: {error[1]}"


def _installed(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version  # slow; only needed here

    try:
        return version(package)
    except PackageNotFoundError:
        return "(not installed)"


def _missing_checks(course: Course, exercise: Exercise) -> str | None:
    if course.check_file(exercise).is_file():
        return None
    return f"the course has no checks for it: {course.check_file(exercise)} is missing"


def _missing_file(course: Course, exercise: Exercise, source: Path) -> str | None:
    """Why a file is not there, in words for whoever graded it: the learner's own course
    can restore the stub; an upload graded elsewhere just lacks it (no command, no path)."""
    if (source / exercise.filename).is_file():
        return None
    if source == course.exercises_dir.resolve():
        return (
            f"there is no exercises/{exercise.filename}; "
            f"`kata reset {exercise.id}` restores the stub"
        )
    return f"missing: there is no {exercise.filename} in the folder graded"


def _exercise_result(
    exercise: Exercise,
    checks: list[CheckResult],
    problems: dict[str, str],
    checks_not_loaded: bool = False,
) -> ExerciseResult:
    if exercise.id in problems:
        return ExerciseResult(
            exercise, checks, problem=problems[exercise.id], checks_not_loaded=checks_not_loaded
        )
    if not checks:
        return ExerciseResult(exercise, [], problem="no checks ran")
    if all(c.outcome == Outcome.ERROR for c in checks) and len({c.message for c in checks}) == 1:
        # Every check failed the same way before it began: the file itself does not load.
        return ExerciseResult(exercise, checks, problem=checks[0].message)
    return ExerciseResult(exercise, checks)


def _selected_checks(check_files: list[str], only: Collection[str]) -> list[str]:
    """`only`'s checks as pytest's node ids, each under the check files that define it: a run
    of several exercises names checks of each, and pytest refuses the whole run (exit 4) for
    one id it cannot find. A name no file defines goes under every file, for pytest to
    refuse as before."""
    defined = {file: _check_functions(Path(file)) for file in check_files}
    anywhere = set().union(*defined.values())
    return [
        f"{file}::{name}"
        for file in check_files
        for name in only
        if name.split("[")[0] in defined[file] or name.split("[")[0] not in anywhere
    ]


def _check_functions(check_file: Path) -> set[str]:
    """The names of the functions a check file defines at its top level (its checks). Read
    by a pattern, not `ast.parse`, which fails in two threads at once on CPython 3.11 (a
    class's gradings run in threads)."""
    try:
        text = check_file.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return set()  # pytest says why it cannot collect the file
    return set(_TOP_LEVEL_FUNCTION.findall(text))


_TOP_LEVEL_FUNCTION = re.compile(r"^(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)


@dataclass(frozen=True)
class _Run:
    """What every child process of one grading run shares."""

    course: Course
    source: Path
    env: dict[str, str]
    limits: Limits
    budget_seconds: float
    deadline: float
    warm: WarmGrader | None
    cancel: threading.Event
    only: tuple[str, ...]
    check_seconds: float
    exercise_ids: list[str]
    on_check: Callable[[CheckResult], None]
    # Each exercise's (deadline, share in seconds), fixed when its first check starts.
    shares: dict[str, tuple[float, float]] = field(default_factory=dict)
    caches: RunCaches = RunCaches(None, False, None, ())
    # Whether its speed checks are timed on the machine's chip too
    # (kata.grading_platform).
    on_chip: bool = False

    def begin(self, exercise_id: str, now: float) -> None:
        """Give an exercise an equal share of the time left to those not yet begun, so that
        a loop in one costs only its share and every later exercise still gets a verdict
        (one that finishes early leaves its time to the rest)."""
        if exercise_id in self.shares:
            return
        unbegun = [e for e in self.exercise_ids if e not in self.shares]
        share = max(0.0, self.deadline - now) / max(1, len(unbegun))
        self.shares[exercise_id] = (now + share, share)


class _ChildRun:
    """One pytest child over some exercises, watched until it ends or must be stopped."""

    def __init__(self, run: _Run, exercises: list[Exercise], skip: set[str]) -> None:
        self.run_settings, self.exercises, self.skip = run, exercises, skip
        self.course, self.source, self.limits = run.course, run.source, run.limits
        self.checks: dict[str, CheckResult] = {}
        self.collect_errors: dict[str, str] = {}
        # Exercises whose checks could not be loaded: the course's fault, not the file's.
        self.checks_not_loaded: set[str] = set()
        # Whether pytest listed the checks: before that, only the course's code has run.
        self.collected = False
        self.running: tuple[str, float] | None = None
        self.finished_cleanly = False
        self.out_of_time = False
        self.stopped = False
        self.death = ""
        self.output = ""
        # A warm run whose spare failed before pytest began (kata.servers.worker).
        self.spare_failed = False
        # Each child's own, known to it and to this process only (kata.handoffs.seal).
        self.events_key = new_key()
        self.seal = Seal(self.events_key)

    def pytest_arguments(self, events_option: str) -> list[str]:
        check_files = [str(self.course.check_file(e)) for e in self.exercises]
        if self.run_settings.only:
            check_files = _selected_checks(check_files, self.run_settings.only)
        plugins = [
            "-p",
            "pytest_timeout",
            "-p",
            "kata.judge.pytest_plugin",
            "-p",
            "no:cacheprovider",
        ]
        # These two collect garbage twice over the whole heap as pytest ends, to report
        # exceptions nobody could catch; a verdict never needs them.
        unused = ["-p", "no:unraisableexception", "-p", "no:threadexception"]
        # The course's own configuration, never one found beside a learner's files or above
        # the course.
        config = ["-c", str(pytest_config_file(self.course)), "--rootdir", str(self.course.root)]
        config.append(f"--confcutdir={self.course.checks_dir}")
        ignore_ini = ["-o", "addopts=", "-o", "testpaths="]
        quiet = ["-q", "--no-header", "-rN", "--tb=no", "--assert=plain"]
        timeout = f"--timeout={self.run_settings.check_seconds:g}"
        robust = ["--continue-on-collection-errors", timeout]
        # Checks an earlier child already settled, before learner code killed it.
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

    def confined_paths(self, scratch: str) -> dict[str, list[str]]:
        """What the run may read and write besides Python and the system's files: its
        compilation caches are kata.isolation.caches.caches_of_run's: its learner's processes
        may write theirs where the run owns it; the judge's, beside it, only the judge
        writes (kata.learner_side.learner_process.confine_learner)."""
        checks, config = self.course.checks_dir, pytest_config_file(self.course)
        read = [str(self.source), str(checks), str(self.course.root / "course.toml"), str(config)]
        write = [scratch]
        hidden = [str(f) for f in answer_folders(self.course, self.source)]
        caches = self.run_settings.caches
        for cache in (caches.learner, caches.judge):
            if cache:
                Path(cache).mkdir(parents=True, exist_ok=True)
        if caches.learner:
            (write if caches.learner_writes else read).append(caches.learner)
        if caches.judge:
            write.append(caches.judge)
        return {"read": read, "write": write, "hidden": hidden + list(caches.hidden)}

    def container_spec(self, scratch: str, paths: dict[str, list[str]]) -> container.Spec:
        """The run's container (kata.isolation.container): its caps, a tmpfs scratch, the
        submission and checks read-only, and every reference solution out of sight (but
        the ones being graded, under `kata check --solutions` or `kata verify`)."""
        return container.Spec(
            memory_bytes=self.limits.memory_bytes or None,
            scratch=scratch,
            scratch_bytes=self.limits.scratch_bytes,
            read_only=(str(self.source), str(self.course.checks_dir)),
            hidden=tuple(paths["hidden"]),
            visible=(*paths["read"], *paths["write"]),
            writable=tuple(paths["write"]),
        )

    def launch(self, events: EventsPipe, scratch: str) -> ChecksProcess:
        # Temporary files (pytest's tmp_path too) go where the run may write.
        paths = self.confined_paths(scratch)
        request = RunRequest(
            args=self.pytest_arguments(events_pipe.option(events.write_fd)),
            cwd=scratch,
            env=self.run_settings.env | {"TMPDIR": scratch},
            output_limit=self.limits.output_bytes,
            memory=self.limits.memory_bytes,
            confine=paths if self.limits.confined else None,
            container=self.container_spec(scratch, paths).settings(),
            seconds=self.run_settings.deadline - time.monotonic() + self.limits.grace_seconds,
            events_key=self.events_key,
        )
        chip = self._chip_connection()
        try:
            return self._launched(request, events.write_fd, chip)
        finally:
            if chip is not None:  # the judge has its own copy
                chip.close()

    def _chip_connection(self) -> socket.socket | None:
        """The run's connection to the chip holder, where its speed checks are timed on the
        chip: started here if none runs, but never from a notebook, whose kernel may want
        the chip for the learner's own programs."""
        if not self.run_settings.on_chip:
            return None
        return chip_holder.reach(self.run_settings.env, start=not ends_with_this_process())

    def _launched(
        self, request: RunRequest, events_fd: int, chip: socket.socket | None
    ) -> ChecksProcess:
        chip_fd = None if chip is None else chip.fileno()
        warm = self.run_settings.warm
        connection = warm.connect() if warm else None
        if warm is not None and connection is not None:
            token = worker_token(warm.socket)
            try:
                return WarmProcess(connection, request, token, events_fd, chip_fd)
            except WorkerUnavailable:
                pass
        return ColdProcess(request, events_fd, self.course.host_devices, chip_fd)

    def run(self) -> None:
        with tempfile.TemporaryDirectory(prefix="kata-") as scratch:
            events = EventsPipe()
            self.oom_witness = OomWitness()
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
                # Whatever the run left in the caches it may write, they keep a bounded size.
                for cache in self.run_settings.caches.written():
                    trim(cache)
            self.output = printable(process.output_text())
            self._judge_exit(code)

    def _watch(self, process: ChecksProcess, events: EventsPipe, scratch: Path) -> None:
        next_scratch_check = next_memory_check = time.monotonic()
        next_cache_check = next_scratch_check + CACHE_CHECK_SECONDS
        while process.wait(POLL_SECONDS) is None:
            try:
                self._read_events(events)
            except LineTooLong as error:
                self._stop(process, Outcome.FAILED, f"{error} and was stopped")
                return
            now = time.monotonic()
            if self.limits.resident_bytes and now >= next_memory_check:
                next_memory_check = now + MEMORY_CHECK_SECONDS
                held = tree_held_bytes(process.pid, self.limits.resident_bytes)
                if held > self.limits.resident_bytes:
                    limit = mebibytes(self.limits.resident_bytes)
                    why = f"out of memory (limit {limit}): your code held more, and was stopped"
                    self._stop(process, Outcome.CRASHED, why)
                    return
            if now >= next_scratch_check:
                next_scratch_check = now + SCRATCH_CHECK_SECONDS
                if disk_usage(scratch) > self.limits.scratch_bytes:
                    cap = self.limits.scratch_bytes / 2**20
                    why = f"it wrote more than {cap:g} MiB into its working folder and was stopped"
                    self._stop(process, Outcome.FAILED, why)
                    return
            if now >= next_cache_check:
                next_cache_check = now + CACHE_CHECK_SECONDS
                if self._caches_overfilled():
                    cap = RUN_CACHE_BYTES / 2**20
                    why = f"it made the grader keep over {cap:g} MiB of compiled programs"
                    self._stop(process, Outcome.FAILED, f"{why} and was stopped")
                    return
            if now > self.run_settings.deadline or self.run_settings.cancel.is_set():
                self.out_of_time = True
                self.death = (
                    "grading was interrupted"
                    if self.run_settings.cancel.is_set()
                    else f"the grading run's {self.run_settings.budget_seconds:g} s limit ran out"
                )
                self._stop(process, Outcome.TIMED_OUT, self.death)
                return
            if self.running:
                self._stop_overrun(process, now)
                if self.stopped:
                    return

    def _caches_overfilled(self) -> bool:
        """Whether a cache the run may add to holds more than a run may leave in it before
        the grader trims it (kata.isolation.caches)."""
        return any(
            disk_usage(Path(c)) > RUN_CACHE_BYTES for c in self.run_settings.caches.written()
        )

    def _stop_overrun(self, process: ChecksProcess, now: float) -> None:
        """Stop the running check when it, or its exercise, ran past its time; the checks
        it cuts off say they were not reached, and why."""
        assert self.running is not None
        check = self.checks[self.running[0]]
        deadline, share = self.run_settings.shares.get(check.exercise, (float("inf"), 0.0))
        seconds = self.run_settings.check_seconds
        if now > deadline:
            why = (
                f"this exercise's share of the {self.run_settings.budget_seconds:g} s budget "
                f"({share:.0f} s) ran out"
            )
            self._stop(process, Outcome.TIMED_OUT, f"it was stopped: {why}")
            self._not_reach(lambda c: c.exercise == check.exercise, f"not reached: {why}")
        elif now - self.running[1] > seconds + self.limits.grace_seconds:
            self._stop(
                process,
                Outcome.TIMED_OUT,
                f"it ran past the {seconds:g} s limit and was stopped",
            )
            self._not_reach(
                lambda c: c.exercise == check.exercise and c.task == check.task,
                f"not reached: “{check.name}” ran out of time",
            )

    def _not_reach(self, cut_off: Callable[[CheckResult], bool], why: str) -> None:
        for check in self.checks.values():
            if cut_off(check) and not check.settled:
                check.message = why

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

    def _rests_on_the_learners_word(self, check: CheckResult) -> bool:
        check_file = self.course.checks_dir / check_file_name(check.exercise)
        return check.id.split("::")[-1].split("[")[0] in feedback_only(check_file)

    def _read_events(self, events: EventsPipe) -> None:
        for line in events.lines():
            text = self.seal.open(line)
            if text is not None:  # else learner code wrote it: it never counts
                self._apply(read_event(text))

    def _apply(self, event: Event) -> None:
        match event:
            case Collected(checks=entries):
                self.collected = True
                for entry in entries:
                    check = self.checks[entry["id"]] = CheckResult(**entry)
                    check.feedback_only = self._rests_on_the_learners_word(check)
            case CollectError(path=path, message=message):
                exercise = exercise_of_check_file(Path(path))
                self.collect_errors[exercise] = f"its checks could not be loaded: {message}"
                self.checks_not_loaded.add(exercise)
            case Started(id=check_id):
                self.running = (check_id, time.monotonic())
                self.run_settings.begin(self.checks[check_id].exercise, self.running[1])
                self.run_settings.on_check(self.checks[check_id])
            case Verdict():
                event.apply_to(self.checks[event.id])
                self.running = None
                self.run_settings.on_check(self.checks[event.id])

    def _judge_exit(self, code: int | None) -> None:
        if self.stopped or code is None:
            return
        if self.running is None and code in (0, 1) and self.collected:
            self.finished_cleanly = True
            return
        oom_limit = self.oom_witness.limit_met() if code == -signal.SIGKILL else None
        if oom_limit is not None:
            limit = f" (limit {mebibytes(oom_limit)})" if oom_limit else ""
            self.death = (
                f"out of memory{limit}: the machine ran out of memory while your code ran, "
                "and stopped it"
            )
        elif code < 0:
            number = -code
            name = signal.Signals(number).name if number in set(signal.Signals) else str(number)
            self.death = f"the grading process was killed by {name}" + SIGNAL_CAUSES.get(name, "")
        elif not self.collected and code == SPARE_FAILED and self.run_settings.warm:
            self.spare_failed = True
        elif not self.collected:
            # Before pytest lists the checks only the course's code runs (kata's plugin, the
            # conftest, the check files): the course cannot load here, whatever is graded.
            self.death = (
                f"the checks could not start on jax {_installed('jax')} (pytest exit {code}): "
                + first_error(self.output)
            )
            self.checks_not_loaded.update(e.id for e in self.exercises)
        else:
            self.death = (
                f"the grading process exited with code {code} in the middle of a check "
                "(does the code call `os._exit()` or `sys.exit()`?)"
            )
        if self.running is None and not self.checks:
            self.collect_errors.update({e.id: f"not graded: {self.death}" for e in self.exercises})
        self._fail_running(Outcome.CRASHED, self.death)
