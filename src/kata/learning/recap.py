"""The course's cheat sheet and its finale: the rules to remember, PyTorch → JAX, and what
the learner achieved.

The rules are each lesson's "Rule to remember:" paragraph, read from the reference
solutions (whose docstrings are the lessons, and which a learner's edits never break);
the mapping table is course.toml's `[[course.mapping]]` rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from kata.course import Course, Exercise, lesson
from kata.learning import progress
from kata.learning.progress import Progress

RULE_MARK = "Rule to remember:"


@dataclass(frozen=True)
class Rule:
    exercise: Exercise
    text: str


@dataclass(frozen=True)
class Speedup:
    exercise: Exercise
    check: str
    ratio: float


def rule_of(text: str) -> str | None:
    """A lesson's "Rule to remember:" paragraph, joined into one line."""
    start = text.find(RULE_MARK)
    if start < 0:
        return None
    paragraph = text[start + len(RULE_MARK) :].split("\n\n", 1)[0]
    return " ".join(paragraph.split())


def rules(course: Course) -> list[Rule]:
    found = []
    for exercise in course.exercises:
        for folder in (course.solutions_dir, course.exercises_dir):
            text = lesson(folder / exercise.filename)
            rule = rule_of(text) if text else None
            if rule:
                found.append(Rule(exercise, rule))
                break
    return found


def measured_speedups(course: Course, state: Progress) -> list[Speedup]:
    """The best speedup each of the learner's timed checks measured, in course order."""
    recorded = progress.measurements(state)
    return [
        Speedup(exercise, check, numbers["speedup"])
        for exercise in course.exercises
        for check, numbers in recorded.get(exercise.id, {}).items()
        if "speedup" in numbers
    ]
