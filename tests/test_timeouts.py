"""An endless loop costs one time limit per task, not one per check."""

from kata.results import Outcome

from .helpers import CASES, grade_case


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
