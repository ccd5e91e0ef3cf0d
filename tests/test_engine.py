"""Unit tests of the plain library: course discovery, ids, progress state, diagnosis."""

import json
import re

import pytest

from kata.course import (
    CourseError,
    UnknownExercise,
    find_course,
    lesson,
    load_course,
    original_stub,
)
from kata.diagnosis.diagnose import Failure, diagnose
from kata.learning import progress
from kata.supervisor.runner import grade

from .helpers import MINI, REPO


@pytest.fixture(scope="module")
def course():
    return load_course(REPO)


@pytest.mark.parametrize("text", ["05_prng", "05", "5", "prng", "PRNG", "05_prng.py"])
def test_ids_resolve_every_way(course, text):
    assert course.resolve(text).id == "05_prng"


def test_unknown_id_suggests_the_closest(course):
    with pytest.raises(UnknownExercise) as raised:
        course.resolve("prgn")
    assert raised.value.suggestion == "05_prng"
    assert "did you mean 05_prng?" in str(raised.value)


def test_resolve_all_keeps_course_order_and_drops_repeats(course):
    chosen = course.resolve_all(["3", "01", "grad"])
    assert [e.id for e in chosen] == ["01_immutability", "03_grad"]
    assert len(course.resolve_all([])) == len(course.exercises)


# The curriculum's exercises in order: parts one and two (01–12), part three (13–16), then
# part four (17).
def test_the_course_numbers_its_exercises_in_order_each_with_its_three_files(course):
    """course.toml is the curriculum's one home: its ids run 01, 02, ... in order, each
    `NN_name`, and each has its stub, reference solution and checks. A new exercise is one
    entry there and its files, and no list elsewhere to update."""
    ids = [e.id for e in course.exercises]
    assert [i.split("_", 1)[0] for i in ids] == [f"{n:02d}" for n in range(1, len(ids) + 1)]
    assert all(re.fullmatch(r"\d\d_[a-z0-9_]+", i) for i in ids), ids
    missing = [
        path
        for i in ids
        for path in (f"exercises/{i}.py", f"solutions/{i}.py", f"checks/test_{i}.py")
        if not (REPO / path).is_file()
    ]
    assert not missing, missing


def test_course_is_found_from_a_subfolder(tmp_path):
    assert find_course(REPO / "checks").root == REPO
    with pytest.raises(CourseError, match="no kata course found"):
        find_course(tmp_path)


def test_unreadable_manifest_is_a_course_error(tmp_path):
    (tmp_path / "course.toml").write_text("[[exercise]]\nid = 'x'\n")
    with pytest.raises(CourseError, match="cannot read"):
        load_course(tmp_path)


def test_lesson_is_the_module_docstring_and_survives_broken_files(tmp_path):
    assert "immutable" in lesson(REPO / "solutions" / "01_immutability.py")
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    assert lesson(broken) is None


def test_original_stub_comes_from_git_even_after_edits(mini):
    course = load_course(mini)
    exercise = course.resolve("1")
    path = course.exercises_dir / exercise.filename
    shipped = path.read_text()
    path.write_text("edited\n")
    assert original_stub(course, exercise) == shipped


def test_progress_follows_the_file_content(mini):
    course = load_course(mini)
    state = progress.load_progress(course)
    first = course.resolve("1")
    graded = progress.digests(course, [first])[first.id]
    progress.record_result(state, first, passed=True, sha256=graded)
    state.save()
    state = progress.load_progress(course)
    assert progress.is_done(course, state, first)
    assert progress.current_exercise(course, state).id == "02_other"
    (course.exercises_dir / first.filename).write_text("# edited after passing\n")
    assert not progress.is_done(course, state, first)
    assert [e.id for e in progress.needs_grading(course, state)] == ["01_demo"]


def test_a_save_during_grading_is_not_credited_with_the_verdict(mini):
    course = load_course(mini)
    state = progress.load_progress(course)
    first = course.resolve("1")
    graded = progress.digests(course, [first])[first.id]
    (course.exercises_dir / first.filename).write_text("# saved while the checks ran\n")
    progress.record_result(state, first, passed=False, sha256=graded)
    assert progress.needs_grading(course, state, [first]) == [first]


def test_untouched_stubs_need_no_grading(mini):
    course = load_course(mini)
    assert progress.needs_grading(course, progress.load_progress(course)) == []


@pytest.mark.parametrize("content", ["{not json", '{"verdicts": []}', '["a list"]', ""])
def test_corrupt_progress_is_set_aside_and_rebuilt(mini, content):
    course = load_course(mini)
    (course.state_dir).mkdir()
    (course.state_dir / "state.json").write_text(content)
    state = progress.load_progress(course)
    assert state.warning and "starting afresh" in state.warning
    assert state.verdicts == {}
    assert (course.state_dir / "state.json.corrupt").read_text() == content
    state.save()
    assert json.loads((course.state_dir / "state.json").read_text())["version"] == 1


def test_save_leaves_no_temporary_files(mini):
    course = load_course(mini)
    state = progress.load_progress(course)
    state.hints_shown["01_demo"] = 1
    state.save()
    assert sorted(p.name for p in course.state_dir.iterdir()) == ["state.json"]


@pytest.mark.parametrize(
    ("types", "message", "line", "expected"),
    [
        (("TypeError",), "JAX arrays are immutable and do not support", "x[0] = 1", "in-place"),
        (("TracerBoolConversionError", "ConcretizationTypeError"), "", "if x:", "`if`"),
        (("ConcretizationTypeError",), "Abstract tracer value", "    if x > 0:", "`if`"),
        (("ConcretizationTypeError",), "Abstract tracer value", "return x.item()", ".item()"),
        (("ConcretizationTypeError",), "Abstract tracer value", "return float(x)", "float(t)"),
        (("TracerIntegerConversionError",), "", "for i in range(n):", "range(n)"),
        (("TracerIntegerConversionError",), "", "    for _ in range(n):", "`for` loop"),
        (("TracerBoolConversionError",), "", "    while jnp.abs(x) > tol:", "`while`"),
        (("ConcretizationTypeError",), "Abstract tracer", "while err > tol:", "`while`"),
        (
            ("TypeError",),
            "scan body function carry input and carry output must have equal types",
            "",
            "carry",
        ),
        (
            ("AttributeError",),
            "'dict' object has no attribute 'block_until_ready'",
            "fn(*args).block_until_ready()",
            "`.block_until_ready()`",
        ),
        (("TracerArrayConversionError",), "", "np.asarray(x)", "NumPy"),
        (("KeyReuseError",), "already consumed", "", "key used twice"),
        (("UnexpectedTracerError",), "", "", "leaked tracer"),
        (("AttributeError",), "'ArrayImpl' object has no attribute 'backward'", "", "autograd"),
        (("TypeError",), "got an unexpected keyword argument 'requires_grad'", "", "autograd"),
        (("AttributeError",), "'ArrayImpl' object has no attribute 'detach'", "", "torch.Tensor"),
        (("ModuleNotFoundError", "ImportError"), "No module named 'torch'", "", "imports torch"),
        (("NonConcreteBooleanIndexError", "IndexError"), "", "x[x > 0]", "boolean-mask"),
        (("SystemExit",), "3", "sys.exit(3)", "sys.exit"),
        (("KeyError", "LookupError"), "KeyError: 'w1'", "return params['w1']", "looks up `'w1'`"),
        (("ValueError",), "vmap got inconsistent sizes for array axes to be mapped", "", "vmap"),
        (("TypeError",), "Error interpreting argument to f as an abstract array", "", "container"),
        (("Failed",), "Failed: Timeout (>2.0s) from pytest-timeout.", "", "out of time"),
        (
            ("AttributeError",),
            "'GradientTransformationExtraArgs' object has no attribute 'step'",
            "",
            "torch.optim",
        ),
        (
            ("AttributeError",),
            "'GradientTransformation' object has no attribute 'zero_grad'",
            "",
            "torch.optim",
        ),
        (
            ("TypeError",),
            "'GradientTransformationExtraArgs' object is not callable",
            "",
            "torch.optim",
        ),
        (
            ("TypeError",),
            "lax.mul requires arguments to have the same dtypes, got bfloat16, float32.",
            "",
            "dtypes",
        ),
        (("ConcretizationTypeError",), "Abstract tracer", "if float(norm) > m:", "float(t)"),
        (("AttributeError",), "DynamicJaxprTracer has no attribute clone", "", "`.clone()`"),
        (("AttributeError",), "'ArrayImpl' object has no attribute 'index_add_'", "", "index_add"),
        (("AttributeError",), "'ArrayImpl' has no attribute 'fill_diagonal_'", "", "in place"),
        (("AttributeError",), "DynamicJaxprTracer has no attribute zero_", "", "`.zero_()`"),
        (("TypeError",), "operand type(s) for *: '_IndexUpdateRef'", "m.at[i] * f", ".at[i]"),
        (("TypeError",), "scan body output must be a pair, got float32[4].", "", "pair"),
        (
            ("ValueError",),
            "vmap got inconsistent sizes for array axes to be mapped",
            "    return jax.vmap(jax.vmap(euclid))(A, B)",
            "like `zip`",
        ),
        (
            ("TypeError",),
            "Output from batched function <function f at 0x7f> with type <class 'function'> "
            "is not a valid JAX type",
            "",
            "a function returned",
        ),
        (
            ("TypeError",),
            "body() takes 1 positional argument but 2 were given",
            "    return jax.lax.fori_loop(0, n, body, v)",
            "body(i, value)",
        ),
        (("TypeError",), "Expected a callable value, got 3.0", "", "not a function"),
        (("AttributeError",), "'dict' object has no attribute 'shape'", "", "container"),
        (("AttributeError",), "type object 'L' has no attribute 'tree_unflatten'", "", "methods"),
        (("AttributeError",), "'ArrayImpl' object has no attribute 'grad'", "", "autograd"),
        (("KeyReuseError",), "passed to jit-compiled function", "normal(KEY, s)", "manual_seed"),
        (("KeyReuseError",), "consumed", "    key, sub = jax.random.split(key)", "earlier draw"),
        (("KeyReuseError",), "passed to jit-compiled function", "", "whether or not you used jit"),
    ],
)
def test_diagnosis_names_the_cause(types, message, line, expected):
    found = diagnose(Failure(types, message, line))
    assert found is not None and expected in found.cause


def test_ordinary_errors_get_no_diagnosis():
    assert diagnose(Failure(("ZeroDivisionError", "ArithmeticError"), "division by zero")) is None
    assert diagnose(Failure(("AssertionError",), "double(2.0) should be 4.0")) is None


def test_mini_course_loads():
    assert [e.id for e in load_course(MINI).exercises] == ["01_demo", "02_other"]


def test_a_run_of_several_exercises_runs_the_checks_named_of_each():
    """`only` names checks of either exercise; each runs its own (a name sent with every
    file made pytest refuse the whole run)."""
    course = load_course(MINI)
    only = ["test_double_jit", "test_answer"]
    grading = grade(course, list(course.exercises), course.solutions_dir, only=only)
    ran = [[check.id.split("::")[-1] for check in r.checks] for r in grading.results]
    assert ran == [[name] for name in only]
    assert grading.passed
