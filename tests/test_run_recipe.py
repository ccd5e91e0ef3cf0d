"""The run's recipe (kata.judge.start.RECIPE): every run, cold or warm, takes one list of
named steps in one order, a warm spare the first part while the learner edits. The order
that matters is held here; that both kinds of run give the same verdicts, in
tests/test_warm.py, and that what each step keeps out stays out, in tests/test_hostile.py."""

import subprocess
import sys

import pytest

from kata.judge import start
from kata.judge.start import BEFORE_THE_RUN, FOR_THE_RUN, RECIPE


def before(first, then) -> bool:
    return RECIPE.index(first) < RECIPE.index(then)


def test_a_warm_spare_takes_the_same_steps_as_a_cold_run():
    assert RECIPE == BEFORE_THE_RUN + FOR_THE_RUN
    assert len(set(RECIPE)) == len(RECIPE)


def test_the_events_key_comes_once_every_process_of_the_learners_code_is_forked():
    """A process forked before the key came never held it; the starter forks the learner's
    processes, and forks them holding none of the judge's descriptors."""
    assert before(start.start_the_starter, start.take_the_events_key)
    assert before(start.confine_the_judge, start.take_the_events_key)


def test_the_learners_processes_are_confined_before_the_judge_may_call_them():
    assert before(start.give_the_starter_the_run, start.hand_the_learner_to_the_judge)
    assert RECIPE[-1] is start.hand_the_learner_to_the_judge


def test_the_run_is_settled_before_anything_takes_its_settings():
    """Its mounts made and its capabilities given up first: the starter and the judge then
    take the run's folder, limits and confinement from a process that can no longer leave
    them."""
    settled = RECIPE.index(start.settle_the_container)
    assert settled == len(BEFORE_THE_RUN)
    assert all(RECIPE.index(step) > settled for step in FOR_THE_RUN[1:])


def test_a_step_taken_out_of_its_order_says_so():
    with pytest.raises(AssertionError, match="out of its order"):
        start.hand_the_learner_to_the_judge(start.JudgeToBe(host_devices=0))


def test_the_judges_start_imports_no_jax_before_its_container_forks():
    """The processes that stay outside a run's container are forked before the judge
    imports JAX: imported at the top of kata.judge.start, JAX's 130 MiB sat in two idle
    processes of every cold run, and 6 of 189 right checks met Gradescope's memory cap."""
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, kata.judge.start; print('jax' in sys.modules, 'numpy' in sys.modules)",
        ],
        capture_output=True,
        text=True,
    )
    assert imported.stdout.strip() == "False False", imported
