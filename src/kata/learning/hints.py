"""Hints: each exercise's hints from course.toml, handed out one at a time.

`kata hint` gives the next hint each time it is asked, from a nudge to nearly the answer,
and remembers how many were shown in the learner's progress. An exercise with per-task
hints (`[exercise.task_hints]`) gets them for its first task not yet solved, so the last
hint of one function never gives away every function at once.

A hint looks at the failure first: the fixed hints are written for the stub's bugs, and
once the learner has rewritten a task's function its failures are its own. Then, when the
task's last grading failed a check whose own hint (`[exercise.check_hints]`) answers that
kind of failure (`failure_kinds`), or raised an error the grader diagnosed, the next hint
answers that failure (once per grading), before the fixed ones. A check hint answers only
the failures it names: "scan returns a pair" is no answer to a wrong value. A fixed hint
shown for a rewritten task says it was written for the stub, and which failure of the
learner's it leaves unanswered.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kata.course import CheckHint, Exercise
from kata.learning.progress import Progress, unsolved_tasks


@dataclass(frozen=True)
class Hint:
    exercise: Exercise
    number: int  # from 1
    text: str
    task: str | None = None  # None: an exercise-wide hint
    failure: str | None = None  # the failed check this hint answers (not counted in `total`)
    # A fixed hint shown after the learner's own code failed this check, which it does not
    # answer: it was written for the stub.
    unanswered: str | None = None

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


def last_failure(progress: Progress, exercise: Exercise, task: str | None) -> dict[str, Any] | None:
    """What the task's last grading failed on (session.first_failures), if it failed."""
    failures = progress.verdicts.get(exercise.id, {}).get("failures", {})
    return failures.get(task or "") or (None if task else next(iter(failures.values()), None))


def failure_kinds(failure: dict[str, Any]) -> set[str]:
    """The kinds a check hint may answer that this failure is: what the check's assertion
    found, else what the learner's code raised; and the diagnosis's rule, if any."""
    kinds = {failure["finding"]} if failure.get("finding") else set()
    if not kinds and failure.get("exception"):
        kinds.add(f"raised {failure['exception']}")
    rule = (failure.get("diagnosis") or {}).get("rule")  # none in a hand-made record
    if rule:
        kinds.add(f"diagnosed {rule}")
    return kinds


def hint_answers(hint: CheckHint | None, failure: dict[str, Any]) -> bool:
    """Whether `hint` answers `failure`: it names one of the failure's kinds."""
    return hint is not None and bool(failure_kinds(failure) & set(hint.answers))


# The failure a file that does not load gets its hint for, in `Hint.failure`: what failed,
# as `kata hint` shows it ("about your last failed check (loading the file): ..."), never
# what a passing check would say ("the file loads"), which the hint's text contradicts.
LOADING = "loading the file"


def loading_hint(progress: Progress, exercise: Exercise) -> Hint | None:
    """Where the last grading found the file not loading (a syntax error, an import that
    fails): a hint about that line, before any task's. Every check saw the same error, and
    a task's hint, written for the stub's bug, answers none of them."""
    problem = progress.verdicts.get(exercise.id, {}).get("does_not_load")
    if not problem:
        return None
    why = problem.removeprefix("does not load: ")
    text = (
        f"your file does not load ({why}). No check can look at your functions until it "
        f"does: fix that line first (`python exercises/{exercise.filename}` shows the same "
        "error), then ask again for a hint about the function that still fails."
    )
    return Hint(exercise, 0, text, failure=LOADING)


def failure_hint(progress: Progress, exercise: Exercise, task: str | None) -> Hint | None:
    """The hint for what the task's last grading failed on, if it has one not yet given:
    the failed check's own hint where it answers that failure, else the diagnosis of the
    error it raised."""
    failure = last_failure(progress, exercise, task)
    if not failure or failure.get("hinted"):
        return None
    diagnosis = failure.get("diagnosis")
    check_hint = dict(exercise.check_hints).get(failure["check"])
    if hint_answers(check_hint, failure):
        text = check_hint.text
    elif diagnosis:
        text = f"{diagnosis['cause']} So: {diagnosis['fix']}"
    else:
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
    """For a file that does not load, the hint about the line that broke it; for a task the
    learner has rewritten (`still_the_stub(task)` false), the hint for its last failure,
    if it has one not yet given; else the fixed hint after the last one shown
    (the last one again once all were), recorded as shown, and naming the rewritten task's
    failure it does not answer; None if there is neither."""
    loading = loading_hint(progress, exercise)
    if loading is not None:
        return loading
    task = hint_task(progress, exercise)
    rewritten = not still_the_stub(task)
    answered = failure_hint(progress, exercise, task) if rewritten else None
    if answered is not None:
        return answered
    failure = last_failure(progress, exercise, task) if rewritten else None
    hints = exercise.hints_for(task)
    if not hints:
        return None
    shown_key = f"{exercise.id}:{task}" if task else exercise.id
    number = min(progress.hints_shown.get(shown_key, 0), len(hints) - 1) + 1
    progress.hints_shown[shown_key] = number
    progress.save()
    unanswered = failure["name"] if failure and not failure.get("hinted") else None
    return Hint(exercise, number, hints[number - 1], task, unanswered=unanswered)


def all_hints(exercise: Exercise) -> list[Hint]:
    """Every hint: the exercise-wide ones, then each task's."""
    found = [Hint(exercise, number, text) for number, text in enumerate(exercise.hints, 1)]
    for task, texts in exercise.task_hints:
        found += [Hint(exercise, number, text, task) for number, text in enumerate(texts, 1)]
    return found
