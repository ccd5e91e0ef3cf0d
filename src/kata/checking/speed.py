"""The course's speed check: is the learner's compiled code clearly faster than eager code?

Both sides are measured by the judge, never by the learner's process: the fast side is
the learner's function called in chains in its process (`LearnerFunction.speed_vs`),
timed across the boundary on the judge's clock, with the kernel's count of that
process's CPU time shown beside it; the slow side is the judge's own code (the reference
run eagerly here). `compare_speed` is built to give the same verdict on a quiet laptop and
on a noisy shared CPU:
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
from collections.abc import Callable
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
    # The kernel's count of the learner's process's CPU time per fast call, where measured:
    # shown beside the judge's clock, never judged.
    fast_cpu_seconds: float | None = None

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
        cpu = (
            f" (CPU {format_seconds(self.fast_cpu_seconds)})"
            if self.fast_cpu_seconds is not None
            else ""
        )
        return (
            f"{fast_label}: {format_seconds(self.fast_seconds)}{cpu}, "
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
    """`fn` run with every `jax.jit` switched off: the judge's eager baseline (its own
    reference), and learner code under `.eagerly()`."""

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


# Seconds per call over `calls` calls, each finished before the next.
Timer = Callable[[int], float]


def here(fn: Callable[[], Any]) -> Timer:
    """`fn`, called in this process and timed by its clock: the judge's own baseline."""
    return lambda calls: time_call(fn, calls)


def compare_speed(
    fast: Timer,
    slow: Timer,
    *,
    margin: float,
    rounds: int = 7,
    attempts: int = 3,
    warmup: int = 2,
) -> SpeedResult:
    """Time `fast` against `slow` and judge the ratio.

    Passes as soon as one attempt's median ratio reaches `margin`; otherwise returns the
    best attempt, so the learner sees the most favourable figure measured.
    """
    for _ in range(warmup):
        fast(1)
        slow(1)
    # Batches grow until one lasts MIN_BATCH_SECONDS: timed across a process boundary, a
    # single call also carries the request's own cost (~1 ms).
    batch = 1
    while batch < MAX_BATCH_CALLS and fast(batch) * batch < MIN_BATCH_SECONDS:
        batch = min(MAX_BATCH_CALLS, batch * 4)
    best: SpeedResult | None = None
    for attempt in range(1, attempts + 1):
        fast_times, slow_times = [], []
        for _ in range(rounds):
            fast_times.append(fast(batch))
            slow_times.append(slow(1))
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


def assert_faster(
    record_property: Callable[[str, object], None],
    result: SpeedResult,
    *,
    labels: tuple[str, str],
    failure: Callable[[SpeedResult], str],
) -> None:
    """A speed check: `result` (from `LearnerFunction.speed_vs`) at least its margin,
    else `failure`'s message.

    Pass or fail, the learner reads the measurement under the check (`summary`, with the
    fast and slow sides' `labels`), and the grader gets the speedup as a number for
    Gradescope, the gradebook and the course's recap.
    """
    record_property(NOTE_PROPERTY, result.summary(*labels))
    record_property(SPEEDUP_PROPERTY, result.speedup)
    if not result.passed:
        raise AssertionError(failure(result))
