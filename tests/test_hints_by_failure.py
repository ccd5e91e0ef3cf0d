"""Hints that look at the failure: the next hint answers what the last grading failed on."""

import ast

from kata.course import load_course
from kata.learning import hints, progress
from kata.learning.session import first_failures
from kata.results import CheckResult, ExerciseResult, Outcome

from .helpers import REPO


def graded(course, exercise_id, failing_check, task, diagnosis=None):
    """Record a grading of the exercise in which `failing_check` (of `task`) failed."""
    exercise = course.resolve(exercise_id)
    check = CheckResult(
        id=f"checks/test_{exercise_id}.py::{failing_check}",
        exercise=exercise_id,
        name=f"{task}: the check",
        task=task,
        outcome=Outcome.FAILED,
        diagnosis=diagnosis,
    )
    state = progress.load_progress(course)
    result = ExerciseResult(exercise, [check])
    progress.record_result(
        state, exercise, False, "sha", unsolved=[task], failures=first_failures(result)
    )
    state.save()
    return state, exercise


def test_a_failed_check_with_its_own_hint_gets_it_before_the_fixed_ones(real_course):
    course = load_course(real_course)
    state, exercise = graded(
        course, "12_optax", "test_train_adam_twice_from_the_same_params_agrees", "train_adam"
    )
    stub_hint = hints.next_hint(state, exercise, still_the_stub=lambda task: True)
    assert stub_hint.failure is None and stub_hint.number == 1  # for the stub: the fixed ones
    first = hints.next_hint(state, exercise, still_the_stub=lambda task: False)
    assert first.failure == "train_adam: the check" and "adam.init(params)" in first.text
    assert (
        first.text
        == dict(exercise.check_hints)["test_train_adam_twice_from_the_same_params_agrees"]
    )
    second = hints.next_hint(progress.load_progress(course), exercise, lambda task: False)
    assert second.failure is None and second.number == 2
    assert second.text == exercise.hints_for("train_adam")[1]


def test_a_diagnosed_error_makes_the_hint_when_the_check_has_none(real_course):
    course = load_course(real_course)
    diagnosis = {"cause": "`.to()` is a torch.Tensor method.", "fix": "`x.astype(dtype)`."}
    state, exercise = graded(course, "11_precision", "test_scale_keeps_dtype", "scale", diagnosis)
    hint = hints.next_hint(state, exercise, still_the_stub=lambda task: False)
    assert hint.failure and "torch.Tensor method" in hint.text and "x.astype(dtype)" in hint.text


def test_an_undiagnosed_failure_without_a_hint_of_its_own_falls_back(real_course):
    course = load_course(real_course)
    state, exercise = graded(course, "11_precision", "test_scale_keeps_dtype", "scale")
    hint = hints.next_hint(state, exercise, still_the_stub=lambda task: False)
    assert hint.failure is None and hint.text == exercise.hints_for("scale")[0]


def test_a_task_is_the_stubs_while_its_function_is_defined_alike():
    stub = (
        "import jax\n\ndef scale(x, s):\n    # TODO\n    return x * s\n\ndef other():\n    pass\n"
    )
    assert hints.same_definition(stub.replace("# TODO", "# mine"), stub, "scale")
    assert hints.same_definition(stub.replace("pass", "return 1"), stub, "scale")
    assert not hints.same_definition(stub.replace("x * s", "(x * s).to(x.dtype)"), stub, "scale")
    assert not hints.same_definition("def scale(:", stub, "scale")


def test_every_check_hint_names_a_check_of_its_exercise():
    course = load_course(REPO)
    for exercise in course.exercises:
        tree = ast.parse(course.check_file(exercise).read_text())
        checks = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        for check, text in exercise.check_hints:
            assert check in checks and check.startswith("test_"), (exercise.id, check)
            assert text.strip()
