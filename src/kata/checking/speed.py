"""The course's speed check: is the compiled side clearly faster than the eager one?

Every speed check of the course times both sides beside the learner's code, in the
learner's process (`measure_speed`, in an `@in_learner_process` helper), and judges the
timings it gets back with `assert_faster`. `compare_speed` is built to give the same
verdict on a quiet laptop and on a noisy shared CPU:
- warm-up calls first, so compilation is never timed;
- `jax.block_until_ready` on every result, so asynchronous dispatch is not mistaken for
  speed;
- the two sides interleaved round by round, so a burst of machine noise hits both;
- medians of several rounds, and a margin far from both a right answer's ratio and a
  wrong one's (jax-notes.md: ~10× separates jitted from eager with room on both sides);
- a bounded number of attempts, since noise can only slow one round, not fake a speedup;
  none more once a ratio is hopelessly short, so that a wrong answer fails quickly.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import jax

from kata.results import NOTE_PROPERTY, SPEEDUP_PROPERTY

# A timed batch of the fast side lasts at least this long: longer than a scheduler's time
# slice, so one pause of the process under load is averaged out rather than taken whole.
MIN_BATCH_SECONDS = 20e-3
MAX_BATCH_CALLS = 1_000
# Below this fraction of the margin another attempt is not worth its time: machine noise
# slows single rounds, it does not halve an interleaved median ratio.
HOPELESS_FRACTION = 0.5


@dataclass(frozen=True)
class SpeedResult:
    fast_seconds: float
    slow_seconds: float
    margin: float
    attempts: int

    @property
    def ratio(self) -> float:
        return self.slow_seconds / self.fast_seconds if self.fast_seconds > 0 else math.inf

    @property
    def passed(self) -> bool:
        return self.ratio >= self.margin

    @property
    def speedup(self) -> float:
        """The ratio rounded as `summary` shows it, so every report quotes the same figure."""
        return float(format_ratio(self.ratio))

    def summary(self, fast_label: str = "compiled", slow_label: str = "eager") -> str:
        """e.g. "compiled: 0.21 ms, eager: 6.1 ms: 29× faster (needs 10×)"."""
        return (
            f"{fast_label}: {format_seconds(self.fast_seconds)}, "
            f"{slow_label}: {format_seconds(self.slow_seconds)}: "
            f"{format_ratio(self.ratio)}× faster (needs {self.margin:g}×)"
        )


def format_ratio(ratio: float) -> str:
    """One rounding for every speedup a learner reads: 1.6, 29, 241."""
    return f"{ratio:.1f}" if ratio < 10 else f"{ratio:.0f}"


def format_seconds(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def eagerly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` run with every `jax.jit` switched off, the eager baseline of a speed check."""

    def run_eagerly(*args: Any, **kwargs: Any) -> Any:
        with jax.disable_jit():
            return fn(*args, **kwargs)

    return run_eagerly


def time_call(fn: Callable[[], Any], calls: int) -> float:
    """Seconds per call of `fn`, over `calls` calls, waiting for every result."""
    start = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn())
    return (time.perf_counter() - start) / calls


def compare_speed(
    fast: Callable[[], Any],
    slow: Callable[[], Any],
    *,
    margin: float,
    rounds: int = 7,
    attempts: int = 3,
    warmup: int = 2,
) -> SpeedResult:
    """Time `fast` against `slow` (both called with no arguments) and judge the ratio.

    Passes as soon as one attempt's median ratio reaches `margin`; otherwise returns the
    best attempt, so the learner sees the most favourable figure measured.
    """
    for _ in range(warmup):
        jax.block_until_ready(fast())
        jax.block_until_ready(slow())
    one_call = max(time_call(fast, 1), 1e-7)
    batch = max(1, min(MAX_BATCH_CALLS, math.ceil(MIN_BATCH_SECONDS / one_call)))
    best: SpeedResult | None = None
    for attempt in range(1, attempts + 1):
        fast_times, slow_times = [], []
        for _ in range(rounds):
            fast_times.append(time_call(fast, batch))
            slow_times.append(time_call(slow, 1))
        result = SpeedResult(
            fast_seconds=statistics.median(fast_times),
            slow_seconds=statistics.median(slow_times),
            margin=margin,
            attempts=attempt,
        )
        if best is None or result.ratio > best.ratio:
            best = result
        if result.passed:
            return result
        if result.ratio < margin * HOPELESS_FRACTION:
            break
    assert best is not None
    return replace(best, attempts=attempt)


def measure_speed(
    fast: Callable[[], Any], slow: Callable[[], Any], *, margin: float
) -> dict[str, float]:
    """`compare_speed`'s timings as data: what a check's `@in_learner_process` helper
    measures beside the learner's code and returns for `assert_faster` to judge."""
    result = compare_speed(fast, slow, margin=margin)
    return {
        "fast_seconds": result.fast_seconds,
        "slow_seconds": result.slow_seconds,
        "attempts": result.attempts,
    }


def assert_faster(
    record_property: Callable[[str, object], None],
    measured: Mapping[str, float],
    *,
    margin: float,
    labels: tuple[str, str],
    failure: Callable[[SpeedResult], str],
) -> None:
    """A speed check: the fast side `measured` (by `measure_speed`) at least `margin` times
    faster than the slow one, else `failure`'s message. The margin is the judge's own.

    Pass or fail, the learner reads the measurement under the check (`summary`, with the
    fast and slow sides' `labels`), and the grader gets the speedup as a number for
    Gradescope, the gradebook and the course's recap.
    """
    result = SpeedResult(
        fast_seconds=float(measured["fast_seconds"]),
        slow_seconds=float(measured["slow_seconds"]),
        margin=margin,
        attempts=int(measured["attempts"]),
    )
    record_property(NOTE_PROPERTY, result.summary(*labels))
    record_property(SPEEDUP_PROPERTY, result.speedup)
    if not result.passed:
        raise AssertionError(failure(result))
