"""The learner's session: one object that owns the course, the progress and how to grade.

Like rustlings' AppState, every learner command (`list`, `next`, `check`, `hint`, `reset`,
`solution`, `watch`) opens a Session, calls a method or two and prints what comes back;
a notebook or any other front-end does the same without copying the loop's rules:
- verdicts are recorded against the file content that was graded (its digest taken before
  the run), so a save made while the checks run is never credited with their verdict;
- any exercise file edited since its last verdict is re-graded before the learner is told
  where they stand;
- grading goes to the course's warm grader unless the session is cold.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kata.course import Course, Exercise, find_course, original_stub
from kata.isolation import confinement
from kata.learning import hints, progress, recap
from kata.learning.progress import Progress
from kata.results import DEFAULT_LIMITS, CheckResult, ExerciseResult, Grading, Limits
from kata.servers.warm import cold_requested, warm_grader
from kata.supervisor.judge_process import grading_environment
from kata.supervisor.runner import grade


def unsolved_tasks(result: ExerciseResult) -> list[str]:
    """The tasks with a check that did not pass, in check order."""
    return list(dict.fromkeys(c.task for c in result.checks if c.task and not c.passed))


def first_failures(result: ExerciseResult) -> dict[str, dict[str, Any]]:
    """What each unsolved task's first failing check failed on, by task ("" for checks of
    no task): the check, what its own assertion found or the learner's code raised, and
    the diagnosis when its error had one."""
    found: dict[str, dict[str, Any]] = {}
    for check in result.checks:
        if not check.passed and (check.task or "") not in found:
            found[check.task or ""] = {
                "check": check.id.split("::")[-1],
                "name": check.name,
                "finding": check.finding,
                "exception": check.exception,
                "diagnosis": check.diagnosis,
            }
    return found


def passing_measurements(result: ExerciseResult) -> dict[str, dict[str, float]]:
    """What each passing check measured, by check name."""
    return {c.name: c.measurements for c in result.checks if c.passed and c.measurements}


UNCONFINED_NOTED = "unconfined-noted"


@dataclass(frozen=True)
class Checked:
    """The learner's own files graded and recorded."""

    grading: Grading
    newly_solved: list[Exercise]
    upcoming: Exercise | None  # the first unsolved exercise now

    @property
    def passed(self) -> bool:
        return self.grading.passed


@dataclass(frozen=True)
class GradedExercise:
    """An exercise a grading has moved past, as its checks' verdicts said while it ran:
    how many of the checks that started passed. The grading's result is the full account
    (a file that is missing, or whose checks could not load, started none)."""

    exercise: Exercise
    passed: int
    started: int

    @property
    def all_passed(self) -> bool:
        return 0 < self.started == self.passed


class GradingProgress:
    """Where a grading of `exercises` stands, folded from the runner's `on_check` calls
    (each check as it starts, its outcome NOT_RUN, and as its verdict comes): the check
    and exercise being graded, the checks done and failed so far, and each exercise once
    the grading has moved past it. Only then is an exercise over: where learner code
    kills the judge, a new one grades that exercise's unsettled checks again
    (kata.supervisor.runner.grade), and the check that was running when it died gets its
    verdict (crashed, timed out) without a call, on the object the call had shown."""

    def __init__(self, exercises: list[Exercise]) -> None:
        self.exercises = exercises
        self._index = {exercise.id: i for i, exercise in enumerate(exercises)}
        self._checks: dict[str, CheckResult] = {}  # by id: its latest run's
        self._moved_past = 0  # the exercises before this index are over
        self.current: CheckResult | None = None

    def seen(self, check: CheckResult) -> list[GradedExercise]:
        """Take in one `on_check` call; the exercises it shows are over, in order."""
        self._checks[check.id] = check
        self.current = check
        return self._over_before(self._index[check.exercise])

    def finished(self) -> list[GradedExercise]:
        """Once the grading has returned: the exercises not yet over, in order."""
        return self._over_before(len(self.exercises))

    @property
    def position(self) -> int:
        """The current exercise's place in the grading, from 1 (0 before any check)."""
        return 0 if self.current is None else self._index[self.current.exercise] + 1

    @property
    def done(self) -> int:
        return sum(check.ran for check in self._checks.values())

    @property
    def failed(self) -> int:
        return sum(check.ran and not check.passed for check in self._checks.values())

    def _over_before(self, index: int) -> list[GradedExercise]:
        over = [self._tally(e) for e in self.exercises[self._moved_past : index]]
        self._moved_past = max(self._moved_past, index)
        return over

    def _tally(self, exercise: Exercise) -> GradedExercise:
        checks = [c for c in self._checks.values() if c.exercise == exercise.id]
        return GradedExercise(exercise, sum(c.passed for c in checks), len(checks))


class NoOriginal(Exception):
    """The original stub cannot be found: neither git nor the installed kata has it."""


@dataclass
class Session:
    course: Course
    progress: Progress
    cold: bool = False  # grade every run in a new process and start no warm grader
    # Why the last grading was cold where the session is not (the warm grader was still
    # starting, or one was started for the checks after it), in a line; None otherwise.
    cold_notice: str | None = field(default=None, init=False)

    @classmethod
    def open(cls, course_path: Path | None = None, *, cold: bool = False) -> Session:
        """The session of the course at `course_path`, or of the one around the working
        folder; cold also when KATA_COLD asks for it."""
        course = find_course(course_path)
        return cls(course, progress.load_progress(course), cold=cold or cold_requested())

    # Where the learner stands ------------------------------------------------------

    def states(self) -> list[tuple[Exercise, str]]:
        return progress.states(self.course, self.progress)

    def current(self) -> Exercise | None:
        return progress.current_exercise(self.course, self.progress)

    def is_done(self, exercise: Exercise) -> bool:
        return progress.is_done(self.course, self.progress, exercise)

    def exercise_file(self, exercise: Exercise) -> Path:
        return self.course.exercises_dir / exercise.filename

    def changed_since_graded(self, exercise: Exercise) -> bool:
        """Whether the file differs from the one last graded (editors save in steps)."""
        return progress.needs_grading(self.course, self.progress, [exercise]) == [exercise]

    # Grading -----------------------------------------------------------------------

    def grade(
        self,
        exercises: list[Exercise],
        source: Path,
        limits: Limits = DEFAULT_LIMITS,
        on_check: Callable[[CheckResult], None] | None = None,
    ) -> Grading:
        """Grade `source`'s files, on the warm grader unless the session is cold (the first
        run without one starts it, for the runs after; `cold_notice` then says why this one
        was cold); `on_check` sees each check start and end."""
        self.cold_notice = None
        if self.cold:
            return grade(self.course, exercises, source, limits, on_check=on_check)
        env = grading_environment(self.course.state_dir)
        with warm_grader(self.course.root, env) as warm:
            grading = grade(self.course, exercises, source, limits, warm=warm, on_check=on_check)
        self.cold_notice = warm.cold_notice() if warm else None
        return grading

    def check_own(
        self,
        exercises: list[Exercise],
        limits: Limits = DEFAULT_LIMITS,
        on_check: Callable[[CheckResult], None] | None = None,
    ) -> Checked:
        """Grade the learner's own files and record each verdict against what was graded."""
        solved_before = {e.id for e in exercises if self.is_done(e)}
        graded_content = progress.digests(self.course, exercises)
        grading = self.grade(exercises, self.course.exercises_dir, limits, on_check)
        for result in grading.results:
            exercise = result.exercise
            progress.record_result(
                self.progress,
                exercise,
                result.passed,
                graded_content[exercise.id],
                unsolved=unsolved_tasks(result),
                measurements=passing_measurements(result),
                failures=first_failures(result),
                does_not_load=None if result.checks_not_loaded else result.problem,
            )
        self.progress.save()
        newly_solved = [
            r.exercise for r in grading.results if r.passed and r.exercise.id not in solved_before
        ]
        return Checked(grading, newly_solved, self.current())

    def regrade_changed(
        self,
        announce: Callable[[list[Exercise]], None] = lambda stale: None,
        exercises: list[Exercise] | None = None,
    ) -> dict[str, ExerciseResult]:
        """Bring recorded verdicts up to date with files edited since they were graded
        (`announce` is told which first), of `exercises` or of every exercise; the results
        graded, by exercise id."""
        stale = progress.needs_grading(self.course, self.progress, exercises)
        if not stale:
            return {}
        announce(stale)
        checked = self.check_own(stale)
        return {result.exercise.id: result for result in checked.grading.results}

    def results_of(self, exercise: Exercise, regraded: dict[str, ExerciseResult]) -> ExerciseResult:
        """The exercise's checks: from `regraded` when just graded, else graded now."""
        if exercise.id in regraded:
            return regraded[exercise.id]
        return self.check_own([exercise]).grading.results[0]

    def unconfined_notice(self) -> str | None:
        """Once per course, where code cannot be confined here: that checks run with the
        learner's own rights, and why (it is their own code, so they still run)."""
        reason = confinement.unavailable_reason()
        marker = self.course.state_dir / UNCONFINED_NOTED
        if reason is None or marker.exists():
            return None
        with contextlib.suppress(OSError):  # a read-only course: say it again next time
            self.course.state_dir.mkdir(exist_ok=True)
            marker.touch()
        return f"checks run unconfined here, with your rights ({reason})"

    # Help --------------------------------------------------------------------------

    def hint_exercise(
        self,
        exercise: Exercise | None = None,
        announce: Callable[[list[Exercise]], None] = lambda stale: None,
    ) -> Exercise | None:
        """The exercise a hint is for, its verdict brought up to date with the learner's
        file: `exercise`, else the first one not solved (None once every one is). A file
        edited since its last grading is graded first (`announce` is told), so the hint is
        for the first task the file leaves unsolved now; and when that grading solves the
        current exercise, the next one becomes current."""
        if exercise is not None:
            self.regrade_changed(announce, [exercise])
            return exercise
        current = self.current()
        while current is not None and self.regrade_changed(announce, [current]):
            current = self.current()  # still this one if it is unsolved, else the next
        return current

    def next_hint(self, exercise: Exercise) -> hints.Hint | None:
        """The next hint, for the task the exercise's recorded verdict left unsolved (see
        `hint_exercise` to bring that verdict up to date first)."""
        stub = original_stub(self.course, exercise)
        path = self.exercise_file(exercise)
        mine = path.read_text(encoding="utf-8") if path.is_file() else ""

        def still_the_stub(task: str | None) -> bool:
            return stub is not None and hints.same_definition(mine, stub, task)

        return hints.next_hint(self.progress, exercise, still_the_stub)

    def rules(self) -> list[recap.Rule]:
        return recap.rules(self.course)

    def speedups(self) -> list[recap.Speedup]:
        return recap.measured_speedups(self.course, self.progress)

    def reset(self, exercise: Exercise) -> Path | None:
        """Put the original stub back; the learner's file is backed up first (its copy's
        path, or None if there was no file)."""
        original = original_stub(self.course, exercise)
        if original is None:
            raise NoOriginal(
                f"cannot find the original {exercise.filename}: the course is not a git clone "
                "and the installed kata does not ship it"
            )
        path = self.exercise_file(exercise)
        backup = progress.back_up(self.course, path)
        path.write_text(original, encoding="utf-8")
        # The stub fails every task again, and is never graded until it changes: hints start
        # over from the first task.
        progress.forget_grading(self.progress, exercise)
        self.progress.save()
        return backup
