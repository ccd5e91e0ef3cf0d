"""Points: an exercise's points split equally across its tasks, a task's across its checks.

So a learner who solves two of four tasks, or passes most checks of a task, gets partial
credit, and every format (gradebook, JSON, Gradescope) adds up to the same score.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kata.course import Exercise
from kata.results import CheckResult, ExerciseResult


@dataclass(frozen=True)
class CheckScore:
    check: CheckResult
    points: float
    max_points: float


@dataclass(frozen=True)
class ExerciseScore:
    exercise: Exercise
    points: float
    max_points: float
    checks: tuple[CheckScore, ...]
    note: str | None = None


def score_exercise(exercise: Exercise, result: ExerciseResult | None) -> ExerciseScore:
    if result is None:
        return ExerciseScore(exercise, 0.0, exercise.points, (), note="missing: no file submitted")
    by_task: dict[str | None, list[CheckResult]] = defaultdict(list)
    for check in result.checks:
        by_task[check.task].append(check)
    scored = []
    for checks in by_task.values():
        share = exercise.points / len(by_task) / len(checks)
        scored += [CheckScore(c, share if c.passed else 0.0, share) for c in checks]
    points = 0.0 if result.problem else sum(s.points for s in scored)
    return ExerciseScore(exercise, round(points, 4), exercise.points, tuple(scored), result.problem)


def total(scores: list[ExerciseScore]) -> tuple[float, float]:
    return round(sum(s.points for s in scores), 4), sum(s.max_points for s in scores)
