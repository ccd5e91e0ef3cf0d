"""Points: an exercise's points split equally across its tasks, earned a task at a time.

A task (the functions a check file groups with `@pytest.mark.task`) earns its share when
every one of its checks passes: some checks are true of an untouched stub (a function that
returns its input unchanged passes "does not change its input"), so counting checks one by
one gave the course's stubs 2.82 of 12 points. An instructor who wants credit for a part
of a task sets `partial_credit = true` in course.toml (under `[grading]` for the whole
course, or in one exercise's entry): a task's share is then split across its checks.

A check that rests on the learner's process's word alone (`CheckResult.feedback_only`,
kata.supervisor.evidence) earns nothing and holds back nothing: it is feedback. Its task is
solved when the task's other checks pass, and a task of such checks alone has no share:
the exercise's points go to the tasks whose checks rest on evidence the learner's code
cannot write. So no forgery of what that process reports (a compile count, a helper's
answer) is worth a point.

A file that is the exercise's stub as the course gives it earns nothing, whatever its
checks say: the stub of 10 prints and doubles eagerly already, and what tells it from a
solution is feedback.

Shares are whole hundredths, split by largest remainder (a point over three tasks is
0.34 + 0.33 + 0.33), so every score shows with at most two decimals and the shares add up
to the exercise's points exactly. Every format (gradebook, JSON, Gradescope) adds up to
the same score.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kata.course import Exercise
from kata.results import CheckResult, ExerciseResult

HUNDREDTHS = 100
AS_GIVEN = "not started (the file is the stub as given)"


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


def split_hundredths(total: int, parts: int) -> list[int]:
    """`total` hundredths in `parts` shares that differ by at most one and add up to it."""
    base, left = divmod(total, parts)
    return [base + (1 if index < left else 0) for index in range(parts)]


def score_exercise(
    exercise: Exercise, result: ExerciseResult | None, absent: str | None = None
) -> ExerciseScore:
    """The points `result` earns; with no result, none, and `absent` says why."""
    if result is None:
        why = absent or "missing: no file submitted"
        return ExerciseScore(exercise, 0.0, exercise.points, (), note=why)
    by_task: dict[str | None, list[CheckResult]] = defaultdict(list)
    for check in result.checks:
        if not check.feedback_only:
            by_task[check.task].append(check)
    total_hundredths = round(exercise.points * HUNDREDTHS)
    shares: dict[str, tuple[int, int]] = {}  # per check: earned, out of
    earned = 0
    task_shares = split_hundredths(total_hundredths, len(by_task)) if by_task else []
    for checks, task_share in zip(by_task.values(), task_shares, strict=True):
        task_solved = all(c.passed for c in checks)
        for check, share in zip(checks, split_hundredths(task_share, len(checks)), strict=True):
            counts = check.passed if exercise.partial_credit else task_solved
            earned += share if counts else 0
            shares[check.id] = share if counts else 0, share
    scored = tuple(
        CheckScore(check, *(part / HUNDREDTHS for part in shares.get(check.id, (0, 0))))
        for check in result.checks
    )
    if result.as_given and not result.problem:  # a file that does not load says why
        unearned = tuple(CheckScore(c.check, 0.0, c.max_points) for c in scored)
        return ExerciseScore(exercise, 0.0, exercise.points, unearned, AS_GIVEN)
    points = 0.0 if result.problem else earned / HUNDREDTHS
    return ExerciseScore(exercise, points, exercise.points, scored, result.problem)


def total(scores: list[ExerciseScore]) -> tuple[float, float]:
    return (
        round(sum(s.points for s in scores), 2),
        round(sum(s.max_points for s in scores), 2),
    )
