"""Broken learner files of every kind, graded for real: each gets a clear verdict.

Each case replaces the mini course's 01_demo.py (whose checks call `double` eagerly and
under jit, and `draw` with JAX's key-reuse checker on) and grades it in a child process,
as `kata check --dir` does. The cases are graded up front, two at a time.
"""

import subprocess
import sys
import textwrap
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kata.results import Outcome

from .helpers import CASES, MINI, grade_case


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cases")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(grade_case, tmp, name, code) for name, code in CASES.items()}
        return {name: future.result() for name, future in futures.items()}


def demo(graded, case):
    grading, _ = graded[case]
    return grading.results[0]


def check_named(result, prefix):
    return next(c for c in result.checks if c.name.startswith(prefix))


@pytest.mark.slow
def test_the_other_exercise_is_always_graded(graded):
    for case, (grading, _) in graded.items():
        assert grading.results[1].passed, f"{case}: 02_other was not graded: {grading.results[1]}"


def test_syntax_error_names_file_and_line(graded):
    result = demo(graded, "syntax_error")
    assert result.problem and "SyntaxError" in result.problem
    location = result.checks[0].location
    assert location["file"].endswith("01_demo.py") and location["line"] == 3


def test_import_of_torch_is_diagnosed(graded):
    result = demo(graded, "import_torch")
    assert result.problem and "torch" in result.problem
    assert "torch" in result.checks[0].diagnosis["cause"]


def test_error_at_import_is_a_problem_of_the_file(graded):
    result = demo(graded, "name_error_at_import")
    assert result.problem.startswith("NameError")
    assert all(c.outcome == Outcome.ERROR for c in result.checks)
    assert result.checks[0].location["line"] == 2


def test_endless_loop_times_out_and_the_rest_still_runs(graded):
    result = demo(graded, "endless_loop")
    loop = check_named(result, "double: doubles eagerly")
    assert loop.outcome == Outcome.FAILED and "Timeout" in loop.message
    assert "ran out of time" in loop.diagnosis["cause"]
    assert loop.location["line"] in (4, 5)
    assert check_named(result, "draw").outcome == Outcome.PASSED


def test_loop_that_blocks_the_timeout_signal_still_times_out(graded):
    # The signal is blocked in the learner's process; the judge's own timer still fires.
    grading, seconds = graded["endless_loop_signals_blocked"]
    loop = check_named(grading.results[0], "double: doubles eagerly")
    assert loop.outcome == Outcome.FAILED and "Timeout" in loop.message
    assert loop.location["line"] in (5, 6, 7)
    assert seconds < 60


def test_segfault_is_reported_as_a_crash_and_the_other_checks_still_run(graded):
    result = demo(graded, "segfault")
    crashed = check_named(result, "double: doubles eagerly")
    assert crashed.outcome == Outcome.CRASHED and "SIGSEGV" in crashed.message
    assert check_named(result, "double: works under jax.jit").outcome == Outcome.CRASHED
    assert check_named(result, "draw").outcome == Outcome.PASSED


def test_sys_exit_fails_the_check_only(graded):
    result = demo(graded, "sys_exit")
    check = check_named(result, "double: doubles eagerly")
    assert check.outcome == Outcome.FAILED and "SystemExit" in check.message
    assert "sys.exit" in check.diagnosis["cause"]
    assert check_named(result, "draw").outcome == Outcome.PASSED


def test_no_character_that_steers_a_terminal_reaches_a_verdict(graded):
    result = demo(graded, "terminal_escapes")
    shown = " ".join(text for c in result.checks for text in (c.message or "", c.output))
    assert "dessap 8/8" in shown, shown
    steering = {
        ch
        for ch in shown
        if ch not in "\n\t" and unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")
    }
    assert not steering, sorted(steering)
    assert "\\x1b[2K" in shown and "\\u202e" in shown, shown


def test_os_exit_is_reported_with_its_code(graded):
    check = check_named(demo(graded, "os_exit"), "double: doubles eagerly")
    assert check.outcome == Outcome.CRASHED and "code 7" in check.message


def test_huge_output_is_truncated(graded):
    result = demo(graded, "huge_output")
    check = check_named(result, "double: doubles eagerly")
    assert check.outcome == Outcome.FAILED and "should be 4.0" in check.message
    assert len(check.output) < 10_000 and "more characters not shown" in check.output


@pytest.mark.parametrize(
    ("case", "check", "exception", "cause"),
    [
        ("in_place_write", "double: doubles eagerly", "TypeError", "in-place write"),
        ("numpy_on_tracer", "double: works under jax.jit", "TracerArrayConversionError", "NumPy"),
        ("python_if_on_tracer", "double: works under jax.jit", "TracerBoolConversionError", "`if`"),
        ("float_of_tracer", "double: works under jax.jit", "ConcretizationTypeError", "float"),
        ("item_on_tracer", "double: works under jax.jit", "ConcretizationTypeError", ".item()"),
        ("key_reuse", "draw", "KeyReuseError", "key used twice"),
        ("leaked_tracer", "double: works under jax.jit", "UnexpectedTracerError", "leaked tracer"),
        ("backward_habit", "double: doubles eagerly", "AttributeError", "backward"),
    ],
)
def test_jax_errors_are_diagnosed(graded, case, check, exception, cause):
    found = check_named(demo(graded, case), check)
    assert found.outcome == Outcome.FAILED
    assert found.exception == exception, found.message
    assert found.diagnosis and cause in found.diagnosis["cause"], found.diagnosis
    if case != "key_reuse":  # JAX reports reuse after tracing, naming no line
        assert found.location and found.location["file"].endswith("01_demo.py")


def run_kata(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kata", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_cli_gives_exit_1_and_a_clear_verdict_for_a_broken_file(tmp_path):
    folder = tmp_path / "learner"
    folder.mkdir()
    (folder / "01_demo.py").write_text(CASES["syntax_error"])
    done = run_kata("--course", str(MINI), "check", "1", "--dir", str(folder), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "does not load: SyntaxError" in done.stdout
    assert "01_demo.py:3" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_learner_file_is_never_changed_by_grading(tmp_path):
    folder = tmp_path / "learner"
    folder.mkdir()
    text = textwrap.dedent(CASES["os_exit"])
    (folder / "01_demo.py").write_text(text)
    run_kata("--course", str(MINI), "check", "1", "--dir", str(folder), cwd=tmp_path)
    assert (folder / "01_demo.py").read_text() == text
    assert sorted(p.name for p in folder.iterdir()) == ["01_demo.py"]


def test_a_check_that_skips_while_it_runs_is_no_pass(mini):
    """Its setup passed, then it skipped: the check is SKIPPED, not the setup's PASSED."""
    from kata.course import load_course
    from kata.supervisor.runner import grade

    checks = mini / "checks" / "test_01_demo.py"
    skipping = '\n\n@pytest.mark.task("double")\ndef test_skips_as_it_runs(ex):\n'
    checks.write_text(checks.read_text() + skipping + '    pytest.skip("not today")\n')
    course = load_course(mini)
    (result,) = grade(course, [course.exercises[0]], course.solutions_dir).results
    (skipped,) = [c for c in result.checks if c.id.endswith("test_skips_as_it_runs")]
    assert skipped.outcome == Outcome.SKIPPED and not skipped.passed
    assert not result.passed
