"""Hints: each exercise's hints from course.toml, handed out one at a time.

`kata hint` gives the next hint each time it is asked, from a nudge to nearly the answer,
and remembers how many were shown in the learner's progress. An exercise with per-task
hints (`[exercise.task_hints]`) gets them for its first task not yet solved, so the last
hint of one function never gives away every function at once.

A hint looks at the failure first: the fixed hints are written for the stub's bugs, and
once the learner has rewritten a task's function its failures are its own. Then, when the
task's last grading failed a check that has a hint of its own (`[exercise.check_hints]`),
or raised an error the grader diagnosed, the next hint answers that failure (once per
grading), before the fixed ones.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from kata.course import Exercise
from kata.learning.progress import Progress, unsolved_tasks


@dataclass(frozen=True)
class Hint:
    exercise: Exercise
    number: int  # from 1
    text: str
    task: str | None = None  # None: an exercise-wide hint
    failure: str | None = None  # the failed check this hint answers (not counted in `total`)

    @property
    def total(self) -> int:
        return len(self.exercise.hints_for(self.task))

    @property
    def is_last(self) -> bool:
        return self.number == self.total


def hint_task(progress: Progress, exercise: Exercise) -> str | None:
    """The task the next hint is for: the first with hints that the last grading found
    unsolved (the first with hints before any grading); None for exercise-wide hints."""
    with_hints = [task for task, texts in exercise.task_hints if texts]
    if not with_hints:
        return None
    unsolved = unsolved_tasks(progress, exercise)
    if unsolved is None:
        return with_hints[0]
    return next((task for task in with_hints if task in unsolved), None)


def failure_hint(progress: Progress, exercise: Exercise, task: str | None) -> Hint | None:
    """The hint for what the task's last grading failed on, if it has one not yet given:
    the failed check's own hint, else the diagnosis of the error it raised."""
    failures = progress.verdicts.get(exercise.id, {}).get("failures", {})
    failure = failures.get(task or "") or (None if task else next(iter(failures.values()), None))
    if not failure or failure.get("hinted"):
        return None
    diagnosis = failure.get("diagnosis")
    text = dict(exercise.check_hints).get(failure["check"]) or (
        f"{diagnosis['cause']} So: {diagnosis['fix']}" if diagnosis else None
    )
    if text is None:
        return None
    failure["hinted"] = True
    progress.save()
    return Hint(exercise, 0, text, task, failure=failure["name"])


def same_definition(mine: str, stub: str, task: str | None) -> bool:
    """Whether the learner's file defines the task's function (the whole file, for no
    task) as the stub does, whatever the comments and layout."""

    def definition(source: str) -> str | None:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return None
        if task is None:
            return ast.dump(tree)
        found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == task]
        return ast.dump(found[-1]) if found else None

    ours = definition(mine)
    return ours is not None and ours == definition(stub)


def next_hint(
    progress: Progress,
    exercise: Exercise,
    still_the_stub: Callable[[str | None], bool] = lambda task: True,
) -> Hint | None:
    """For a task the learner has rewritten (`still_the_stub(task)` false), the hint for its
    last failure, if it has one not yet given; else the fixed hint after the last one shown
    (the last one again once all were), recorded as shown; None if there is neither."""
    task = hint_task(progress, exercise)
    answered = None if still_the_stub(task) else failure_hint(progress, exercise, task)
    if answered is not None:
        return answered
    hints = exercise.hints_for(task)
    if not hints:
        return None
    shown_key = f"{exercise.id}:{task}" if task else exercise.id
    number = min(progress.hints_shown.get(shown_key, 0), len(hints) - 1) + 1
    progress.hints_shown[shown_key] = number
    progress.save()
    return Hint(exercise, number, hints[number - 1], task)


def all_hints(exercise: Exercise) -> list[Hint]:
    """Every hint: the exercise-wide ones, then each task's."""
    found = [Hint(exercise, number, text) for number, text in enumerate(exercise.hints, 1)]
    for task, texts in exercise.task_hints:
        found += [Hint(exercise, number, text, task) for number, text in enumerate(texts, 1)]
    return found
