"""Hints: each exercise's hints from course.toml, handed out one at a time.

`kata hint` gives the next hint each time it is asked, from a nudge to nearly the answer,
and remembers how many were shown in the learner's progress.
"""

from __future__ import annotations

from dataclasses import dataclass

from kata.course import Exercise
from kata.learning.progress import Progress


@dataclass(frozen=True)
class Hint:
    exercise: Exercise
    number: int  # from 1
    text: str

    @property
    def total(self) -> int:
        return len(self.exercise.hints)

    @property
    def is_last(self) -> bool:
        return self.number == self.total


def next_hint(progress: Progress, exercise: Exercise) -> Hint | None:
    """The hint after the last one shown (the last one again once all were), recorded as
    shown; None if the exercise has none."""
    hints = exercise.hints
    if not hints:
        return None
    number = min(progress.hints_shown.get(exercise.id, 0), len(hints) - 1) + 1
    progress.hints_shown[exercise.id] = number
    progress.save()
    return Hint(exercise, number, hints[number - 1])


def all_hints(exercise: Exercise) -> list[Hint]:
    return [Hint(exercise, number, text) for number, text in enumerate(exercise.hints, 1)]
