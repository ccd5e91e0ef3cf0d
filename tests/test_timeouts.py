"""An endless loop costs one time limit per task, not one per check."""

from dataclasses import replace

import pytest

from kata.checking.exported_program import ENDLESS_CPU_SECONDS
from kata.results import Outcome

from .helpers import CASES, LIMITS, grade_case


def test_a_timed_out_check_ends_its_task_and_the_other_tasks_still_run(tmp_path):
    grading, _ = grade_case(tmp_path, "endless_loop", CASES["endless_loop"])
    checks = {c.name: c for c in grading.results[0].checks}
    eager, jitted = checks["double: doubles eagerly"], checks["double: works under jax.jit"]
    assert eager.outcome == Outcome.FAILED and "Timeout" in eager.message
    assert jitted.outcome == Outcome.NOT_RUN and "not reached" in jitted.message
    assert "ran out of time" in jitted.message
    assert not grading.results[0].passed
    draw = next(c for c in grading.results[0].checks if c.task == "draw")
    # Run, not cut off (whether it passes in its 4 s is up to the machine's load: a new
    # learner process starts JAX first).
    assert draw.outcome != Outcome.NOT_RUN and "not reached" not in draw.message
    assert jitted.duration < 1, "the second check waited out the loop too"


ENDLESS_WHEN_COMPILED = """
import jax


def double(x):
    if isinstance(x, jax.core.Tracer):  # a loop whose condition stays True, once compiled
        return jax.lax.while_loop(lambda v: v > -1.0, lambda v: v + 1.0, abs(x) * 2)
    return x * 2


def draw(key):
    first, second = jax.random.split(key)
    return jax.random.normal(first), jax.random.normal(second)
"""


# Spends ENDLESS_CPU_SECONDS (3 s) of CPU by design.
@pytest.mark.slow
def test_a_program_that_never_ends_fails_on_the_cpu_it_spent_not_the_clock(tmp_path):
    """The judge runs a learner's compiled program itself: one still running after
    ENDLESS_CPU_SECONDS of its thread's CPU fails its check at once, and ends its task as a
    timeout does; the other tasks run beside the loop, which spins on until the run ends."""
    limits = replace(LIMITS, check_seconds=10 * ENDLESS_CPU_SECONDS)
    grading, _ = grade_case(tmp_path, "endless_when_compiled", ENDLESS_WHEN_COMPILED, limits)
    checks = {c.name: c for c in grading.results[0].checks}
    jitted = checks["double: works under jax.jit"]
    assert checks["double: doubles eagerly"].passed
    assert jitted.outcome == Outcome.FAILED and "a loop that never ends" in jitted.message
    assert jitted.duration < limits.check_seconds / 2, "it waited for the check's time limit"
    draw = next(c for c in grading.results[0].checks if c.task == "draw")
    assert draw.passed, draw.message
