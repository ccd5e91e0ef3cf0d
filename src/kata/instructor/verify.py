"""The author check: every stub fails each of its tasks, every solution passes everything.

Like rustlings' `dev check`: it grades `exercises/` and `solutions/` with the course's own
checks and names each exercise and check that breaks a rule, so a course change that
makes a stub pass or a solution fail is caught before a learner meets it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kata.course import Course, Exercise, lesson
from kata.results import CheckResult, ExerciseResult, Grading, Outcome
from kata.supervisor.runner import grade

MIN_HINTS = 2


@dataclass(frozen=True)
class Problem:
    exercise: str
    message: str


@dataclass(frozen=True)
class Verification:
    problems: list[Problem]
    stubs: Grading
    solutions: Grading

    @property
    def passed(self) -> bool:
        return not self.problems


def verify_course(course: Course) -> Verification:
    problems = [p for e in course.exercises for p in _file_problems(course, e)]
    exercises = list(course.exercises)
    # Two children at once: one grades the stubs while the other grades the solutions.
    with ThreadPoolExecutor(max_workers=2) as pool:
        stubs_run = pool.submit(grade, course, exercises, course.exercises_dir)
        solutions_run = pool.submit(grade, course, exercises, course.solutions_dir)
        stubs, solutions = stubs_run.result(), solutions_run.result()
    for stub, reference in zip(stubs.results, solutions.results, strict=True):
        unloaded = next((r for r in (stub, reference) if r.checks_not_loaded), None)
        if unloaded is not None:
            # Nothing was judged: neither the stub, the solution nor the hints are at fault.
            problems.append(Problem(stub.exercise.id, str(unloaded.problem)))
            continue
        problems += _task_hint_problems(reference)
        problems += _stub_problems(stub)
        problems += _solution_problems(course, reference)
    return Verification(problems, stubs, solutions)


def _file_problems(course: Course, exercise: Exercise) -> list[Problem]:
    found = []
    stub = course.exercises_dir / exercise.filename
    for path in (stub, course.solutions_dir / exercise.filename, course.check_file(exercise)):
        if not path.is_file():
            found.append(Problem(exercise.id, f"{path} is missing"))
    if stub.is_file() and not lesson(stub):
        found.append(Problem(exercise.id, "the stub has no lesson (a module docstring)"))
    if len(exercise.hints) < MIN_HINTS:
        found.append(
            Problem(
                exercise.id, f"it has {len(exercise.hints)} hints in course.toml; needs {MIN_HINTS}"
            )
        )
    return found


def _task_hint_problems(graded: ExerciseResult) -> list[Problem]:
    """An exercise with per-task hints has at least MIN_HINTS for each of its tasks, and
    none for a task its checks do not have."""
    exercise = graded.exercise
    if not exercise.task_hints:
        return []
    hinted = dict(exercise.task_hints)
    tasks = list(dict.fromkeys(c.task for c in graded.checks if c.task))
    found = [
        Problem(
            exercise.id,
            f"task {task!r} has {len(hinted.get(task, ()))} hints in its [exercise.task_hints]; "
            f"needs {MIN_HINTS}",
        )
        for task in tasks
        if len(hinted.get(task, ())) < MIN_HINTS
    ]
    found += [
        Problem(exercise.id, f"[exercise.task_hints] names {task!r}, which no check has as task")
        for task in hinted
        if task not in tasks
    ]
    return found


def _stub_problems(stub: ExerciseResult) -> list[Problem]:
    exercise = stub.exercise.id
    if stub.problem is not None:
        return [
            Problem(exercise, f"the stub must import cleanly and fail checks, but: {stub.problem}")
        ]
    found = []
    by_task: dict[str | None, list[CheckResult]] = defaultdict(list)
    for check in stub.checks:
        by_task[check.task].append(check)
        if check.outcome == Outcome.ERROR:
            found.append(
                Problem(exercise, f"check '{check.name}' errored on the stub: {check.message}")
            )
    for task, checks in by_task.items():
        names = ", ".join(repr(c.name) for c in checks)
        scoring = [c for c in checks if not c.feedback_only]
        if task is None:
            found.append(Problem(exercise, f"checks without a @pytest.mark.task: {names}"))
        elif all(c.passed for c in checks):
            found.append(
                Problem(exercise, f"the stub passes every check of task {task!r}: {names}")
            )
        elif scoring and all(c.passed for c in scoring):
            # Only checks worth no points fail it: `kata grade` would give the task's share
            # to the stub edited anywhere else.
            failing = ", ".join(repr(c.name) for c in checks if not c.passed)
            found.append(
                Problem(
                    exercise,
                    f"the stub passes every check of task {task!r} that earns points; only "
                    f"{failing}, on the learner's process's word alone, fails it: add a "
                    "check the stub fails on evidence the grader holds (docs/writing-checks.md)",
                )
            )
    return found


def _solution_problems(course: Course, reference: ExerciseResult) -> list[Problem]:
    exercise = reference.exercise.id
    if reference.problem is not None:
        return [Problem(exercise, f"the solution is not graded: {reference.problem}")]
    found = [
        Problem(exercise, f"the solution fails check '{c.name}': {c.message.strip()[:300]}")
        for c in reference.checks
        if not c.passed
    ]
    defined = _public_names(course.solutions_dir / reference.exercise.filename)
    for task in sorted({c.task for c in reference.checks if c.task} - defined):
        found.append(Problem(exercise, f"task {task!r} is not a name the solution defines"))
    return found


def _public_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names
