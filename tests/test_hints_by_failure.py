"""Hints that look at the failure: the next hint answers what the last grading failed on,
and only a failure it says it answers."""

import ast
import builtins
from pathlib import Path

import jax
import pytest

from kata import findings
from kata.course import CourseError, load_course
from kata.diagnosis import diagnose
from kata.findings import Finding
from kata.handoffs.wire import LearnerError
from kata.judge.pytest_plugin import describe_failure
from kata.learning import hints, progress
from kata.learning.session import first_failures
from kata.reporting import report
from kata.results import CheckResult, ExerciseResult, Outcome

from .helpers import REPO


def graded(course, exercise_id, failing_check, task, diagnosis=None, finding=None, exception=None):
    """Record a grading of the exercise in which `failing_check` (of `task`) failed: its
    assertion found `finding`, or the learner's code raised `exception`."""
    exercise = course.resolve(exercise_id)
    check = CheckResult(
        id=f"checks/test_{exercise_id}.py::{failing_check}",
        exercise=exercise_id,
        name=f"{task}: the check",
        task=task,
        outcome=Outcome.FAILED,
        diagnosis=diagnosis,
        finding=finding,
        exception=exception or ("Finding" if finding else None),
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
        course,
        "12_optax",
        "test_train_adam_twice_from_the_same_params_agrees",
        "train_adam",
        finding=findings.CALLS_DISAGREE,
    )
    stub_hint = hints.next_hint(state, exercise, still_the_stub=lambda task: True)
    assert stub_hint.failure is None and stub_hint.number == 1  # for the stub: the fixed ones
    first = hints.next_hint(state, exercise, still_the_stub=lambda task: False)
    assert first.failure == "train_adam: the check" and "adam.init(params)" in first.text
    assert (
        first.text
        == dict(exercise.check_hints)["test_train_adam_twice_from_the_same_params_agrees"].text
    )
    second = hints.next_hint(progress.load_progress(course), exercise, lambda task: False)
    assert second.failure is None and second.number == 2
    assert second.text == exercise.hints_for("train_adam")[1]


def test_a_diagnosed_error_makes_the_hint_when_the_check_has_none(real_course):
    course = load_course(real_course)
    diagnosis = {
        "cause": "`.to()` is a torch.Tensor method.",
        "fix": "`x.astype(dtype)`.",
        "rule": "torch_spelling",
    }
    state, exercise = graded(course, "11_precision", "test_scale_keeps_dtype", "scale", diagnosis)
    hint = hints.next_hint(state, exercise, still_the_stub=lambda task: False)
    assert hint.failure and "torch.Tensor method" in hint.text and "x.astype(dtype)" in hint.text


def test_an_undiagnosed_failure_without_a_hint_of_its_own_falls_back(real_course):
    course = load_course(real_course)
    state, exercise = graded(
        course, "11_precision", "test_scale_keeps_dtype", "scale", finding=findings.WRONG_VALUE
    )
    hint = hints.next_hint(state, exercise, still_the_stub=lambda task: False)
    assert hint.failure is None and hint.text == exercise.hints_for("scale")[0]
    assert hint.unanswered == "scale: the check"
    line = report.hint_line(hint)
    assert "written for the stub's code" in line and "“scale: the check”" in line


# (check, task, what the failure was, whether that check's own hint answers it): each
# hint beside a look-alike failure of the same check that it does not answer.
LOOK_ALIKES = [
    ("09_control_flow", "test_rnn_states_match_reference", "rnn_states", "scan's pair", True),
    # a transposed `xs`: values or an error, never scan's pair
    ("09_control_flow", "test_rnn_states_match_reference", "rnn_states", "wrong value", False),
    ("09_control_flow", "test_rnn_states_match_reference", "rnn_states", "raised TypeError", False),
    # a normalisation bug is a wrong value; fori_loop's body order, an error diagnosed so
    ("09_control_flow", "test_power_iteration_with_traced_n", "power_iteration", "wrong value",
     False),
    ("09_control_flow", "test_power_iteration_with_traced_n", "power_iteration",
     "raised ValueError", False),
    ("09_control_flow", "test_power_iteration_with_traced_n", "power_iteration",
     "diagnosed fori_body_order", True),
    # a sign error is a wrong value; optax.chain's order, the step clipped instead
    ("12_optax", "test_clipped_sgd_step_clips_large_gradients", "clipped_sgd_step",
     "wrong value", False),
    ("12_optax", "test_clipped_sgd_step_clips_large_gradients", "clipped_sgd_step",
     "clipped the step", True),
    ("07_train_step", "test_train_matches_reference_sgd", "train", "wrong value", False),
    ("07_train_step", "test_train_matches_reference_sgd", "train",
     "raised UnexpectedTracerError", True),
]  # fmt: skip


@pytest.mark.parametrize(("exercise_id", "check", "task", "kind", "answered"), LOOK_ALIKES)
def test_a_check_hint_is_offered_only_for_the_failure_it_answers(
    real_course, exercise_id, check, task, kind, answered
):
    course = load_course(real_course)
    how, _, what = kind.partition(" ")
    failed = (
        {"exception": what}
        if how == "raised"
        else {"exception": "ValueError", "diagnosis": {"cause": "c.", "fix": "f.", "rule": what}}
        if how == "diagnosed"
        else {"finding": kind}
    )
    state, exercise = graded(course, exercise_id, check, task, **failed)
    hint = hints.next_hint(state, exercise, still_the_stub=lambda task: False)
    own = dict(exercise.check_hints)[check].text
    assert (hint.text == own) == answered, (kind, hint.text)
    if not answered and how != "diagnosed":
        assert hint.failure is None and hint.unanswered == f"{task}: the check"


def known_answers(exercise, course) -> set[str]:
    """What a check hint of `exercise` may answer: a shared finding, one its check file
    raises (`Finding("scan's pair", ...)`), an exception by name, or a diagnosis rule."""
    tree = ast.parse(course.check_file(exercise).read_text())
    own = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) == "Finding"
        and isinstance(node.args[0], ast.Constant)
    }
    errors = {
        f"raised {name}"
        for module in (builtins, jax.errors)
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    rules = {f"diagnosed {diagnose.rule_name(rule)}" for rule in diagnose.RULES}
    return set(findings.SHARED_FINDINGS) | own | errors | rules


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
        for check, hint in exercise.check_hints:
            assert check in checks and check.startswith("test_"), (exercise.id, check)
            assert hint.text.strip()
            unknown = set(hint.answers) - known_answers(exercise, course)
            assert not unknown, (exercise.id, check, unknown)


def test_a_check_hint_that_does_not_say_what_it_answers_is_refused(tmp_path, real_course):
    manifest = Path(real_course) / "course.toml"
    text = manifest.read_text()
    text += '\n[exercise.check_hints]\ntest_anything = "a hint for any failure"\n'
    (tmp_path / "course.toml").write_text(text)
    with pytest.raises(CourseError, match="the failures it `answers`"):
        load_course(tmp_path)


def test_a_failure_records_what_the_check_found_and_only_the_checks_word():
    def described(error):
        with pytest.raises(BaseException) as info:
            raise error
        return describe_failure(info, Path("/nowhere"))

    assert described(Finding("scan's pair", "returned a pair"))["finding"] == "scan's pair"
    assert described(AssertionError("a check's own test"))["finding"] == findings.OWN_TEST
    learner = LearnerError(["Finding", "AssertionError"], "made up", [])
    assert described(learner)["finding"] is None  # the learner's process names no finding
    assert described(learner)["exception"] == "Finding"


def test_a_file_that_does_not_load_gets_a_hint_about_its_broken_line(real_course):
    """Every check of a file that does not load fails on its loading: the hint is about that
    line, not the first task's fixed hint about the stub's bug (issue #49)."""
    course = load_course(real_course)
    exercise = course.resolve("01_immutability")
    why = "SyntaxError: expected ':' (01_immutability.py, line 3)"
    check = CheckResult(
        id="checks/test_01_immutability.py::test_set_first_replaces_element_0",
        exercise=exercise.id,
        name="set_first: the check",
        task="set_first",
        outcome=Outcome.FAILED,
        exception="SyntaxError",
    )
    state = progress.load_progress(course)
    result = ExerciseResult(exercise, [check], problem=why)
    progress.record_result(
        state, exercise, False, "sha", unsolved=["set_first"],
        failures=first_failures(result), does_not_load=result.problem,
    )  # fmt: skip
    hint = hints.next_hint(state, exercise, still_the_stub=lambda task: False)
    assert hint.failure == hints.LOADING and why in hint.text
    assert hint.text not in exercise.hints_for("set_first")
    # What failed, never what passing would say: "(the file loads): your file does not load"
    # contradicted itself (issue #58).
    shown = report.hint_line(hint)
    assert "the file loads" not in shown, shown
    assert "about your last failed check (loading the file): your file does not load" in shown
    # Once the file loads, the task's hints come back.
    progress.record_result(state, exercise, False, "sha", unsolved=["set_first"])
    assert hints.next_hint(state, exercise, lambda task: True).failure is None
