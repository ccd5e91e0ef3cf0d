"""What a learner reads: failures grouped by task, repeats collapsed, JAX's words made
plain, and the finale with the learner's own speedups."""

import time
from pathlib import Path
from types import SimpleNamespace

import click
import pytest

from kata.checking import measured
from kata.checking.speed import SpeedResult, assert_faster, compare_speed, here, timed_device
from kata.course import Exercise
from kata.handoffs.seal import Seal
from kata.judge.pytest_plugin import in_learner_terms
from kata.learning import progress
from kata.learning.recap import Rule, Speedup
from kata.learning.session import passing_measurements, unsolved_tasks
from kata.reporting import report
from kata.reporting.formats import to_gradescope, to_json
from kata.results import (
    MEASUREMENT_PROPERTY,
    NOTE_PROPERTY,
    CheckResult,
    ExerciseResult,
    Grading,
    Outcome,
    Verdict,
    event_line,
    read_event,
)

EXERCISE = Exercise("02_jit", "Trace once, compile once", "jit", ("a", "b"))
HERE = {"file": "/course/exercises/02_jit.py", "line": 30, "code": "for _ in range(n):"}
WHY = {"cause": "a traced value used as a Python int", "fix": "mark it static"}


def failing(name, task, message, location=None, diagnosis=None):
    return CheckResult(
        id=f"checks/test_02_jit.py::{name}", exercise=EXERCISE.id, name=name, task=task,
        outcome=Outcome.FAILED, message=message, exception="TracerIntegerConversionError",
        location=location, diagnosis=diagnosis,
    )  # fmt: skip


def passing(name, task, notes=(), speedup=None):
    return CheckResult(
        id=f"checks/test_02_jit.py::{name}", exercise=EXERCISE.id, name=name, task=task,
        outcome=Outcome.PASSED, notes=list(notes), speed=speedup is not None,
        measurements={} if speedup is None else {"speedup": speedup},
    )  # fmt: skip


def shown(result, **options) -> str:
    return "\n".join(click.unstyle(line) for line in report.exercise_lines(result, **options))


def test_the_same_mistake_with_other_values_is_explained_once():
    checks = [
        failing(f"repeat_apply: check {n}", "repeat_apply", f"value {n} differs", HERE, WHY)
        for n in range(4)
    ]
    text = shown(ExerciseResult(EXERCISE, checks), verbose=True)
    assert text.count("why: a traced value") == 1
    assert text.count("(the same error as above)") == 3


def test_each_task_shows_its_first_failure_in_full_and_the_rest_in_a_line():
    checks = [
        failing("fast_fn: one program", "fast_fn", "compiled 9 programs\nsecond line"),
        failing("fast_fn: faster", "fast_fn", "only 2.0× faster\nmore detail here"),
        passing("clip: short", "clip_by_norm"),
        failing("clip: long", "clip_by_norm", "not clipped\nthe values were"),
    ]
    text = shown(ExerciseResult(EXERCISE, checks))
    assert "second line" in text and "the values were" in text
    assert "✗ fast_fn: faster: only 2.0× faster" in text and "more detail here" not in text
    assert "(1 later failure of a task cut to one line; `-v` explains every one)" in text
    assert "more detail here" in shown(ExerciseResult(EXERCISE, checks), verbose=True)


def test_jax_docs_link_is_shown_whole():
    url = "https://docs.jax.dev/en/latest/errors.html#jax.errors.ConcretizationTypeError"
    message = f"ConcretizationTypeError: {'x' * 200} See {url}"
    text = shown(ExerciseResult(EXERCISE, [failing("gate", "gate", message, HERE, WHY)]))
    assert f"JAX's docs: {url}" in text


def test_the_checkers_own_tracers_are_never_shown():
    message = (
        "TypeError: Expected a callable value, got VmapTracer(aval=float32[], batched=float32[200])"
    )
    plain = in_learner_terms(message)
    assert "VmapTracer" not in plain and "float32[200]" not in plain
    assert "your function received a traced value while the check batched it" in plain
    origin = "x\nThis BatchTracer with object id 140325 was created on line:\n  checks/t.py:3\ny"
    assert in_learner_terms(origin) == "x\ny"


def test_unsolved_tasks_and_measurements_are_recorded_from_a_result(tmp_path):
    fast = passing("fast_fn: faster", "fast_fn", ["compiled: 1 µs, eager: 241 µs: 241×"], 241.0)
    fast.measurements["compilations"] = 2.0
    result = ExerciseResult(EXERCISE, [fast, failing("clip", "clip_by_norm", "no")])
    assert unsolved_tasks(result) == ["clip_by_norm"]
    state = progress.Progress(tmp_path / "state.json")
    progress.record_result(
        state, EXERCISE, False, "sha", ["clip_by_norm"], passing_measurements(result)
    )
    again = {"fast_fn: faster": {"speedup": 90.0, "compilations": 1.0}}
    progress.record_result(state, EXERCISE, False, "sha", [], again)
    best = {"fast_fn: faster": {"speedup": 241.0, "compilations": 1.0}}
    assert progress.measurements(state) == {"02_jit": best}, "the best of each kept"


def test_a_progress_file_from_before_named_measurements_keeps_its_speedups(tmp_path):
    state = progress.Progress(tmp_path / "state.json")
    state.verdicts["02_jit"] = {"sha256": None, "passed": False, "speedups": {"fast": 30.0}}
    assert progress.measurements(state) == {"02_jit": {"fast": {"speedup": 30.0}}}
    progress.forget_grading(state, EXERCISE)
    assert progress.measurements(state) == {"02_jit": {"fast": {"speedup": 30.0}}}


def test_the_finale_recaps_the_course_and_quotes_the_learners_speedups():
    lines = report.finale_lines(
        (EXERCISE,),
        [Speedup(EXERCISE, "fast_fn: faster", 241.0)],
        [Rule(EXERCISE, "jit the whole function")],
        (("torch.compile(f)", "jax.jit(f)"),),
    )
    text = "\n".join(click.unstyle(line) for line in lines)
    assert "All 1 exercises done" in text and "02  Trace once, compile once (jit)" in text
    assert "02_jit  fast_fn: 241× faster" in text
    assert "02  jit the whole function" in text and "torch.compile(f)" in text


def test_a_passed_02_shows_the_learners_speed_beside_the_tutorials():
    """The figures live in course.toml once; the learner's is its timed check's note."""
    import re

    from kata.course import load_course

    from .helpers import REPO

    jit = load_course(REPO).resolve("02")
    reference = jit.reference_speed
    timed = CheckResult(
        id=f"checks/test_02_jit.py::{reference.check}", exercise=jit.id, name="fast_fn: faster",
        task="fast_fn", outcome=Outcome.PASSED,
        notes=["fast_fn: 52 µs, slow_fn: 41 ms: 790× faster (needs 15×), on the CPU"],
    )  # fmt: skip
    other = CheckResult(id="checks/test_02_jit.py::test_x", exercise=jit.id, name="x",
                        task="x", outcome=Outcome.PASSED)  # fmt: skip
    passed = ExerciseResult(jit, [timed, other])
    text = " ".join(click.unstyle(line).strip() for line in report.exercise_lines(passed))
    assert "Your speed: fast_fn: 52 µs, slow_fn: 41 ms: 790× faster (needs 15×), on the CPU" in text
    assert (
        "The tutorial's: eager 518 ms, first jit call 153 ms, jit 0.21 ms (~2500×), on a "
        "1000×1000 array on a TPU v6e-1" in text
    )
    assert "Why they differ: the size" in text and "the device" in text
    other.outcome = Outcome.FAILED
    assert "Your speed" not in "\n".join(report.exercise_lines(passed)), "only once 02 passes"
    # What the why says of the check is what the check does.
    source = (REPO / "checks" / "test_02_jit.py").read_text()
    size = re.search(r"^SPEED_INPUT_SIZE = (\d+)$", source, re.MULTILINE).group(1)
    assert f"a {size}-element array" in reference.why
    assert f"def {reference.check}(" in source


def test_a_speedup_is_rounded_one_way_wherever_it_is_read():
    slow = SpeedResult(fast_seconds=1e-3, slow_seconds=1.6e-3, margin=8, attempts=1)
    assert slow.summary().endswith("1.6× faster (needs 8×)")
    fast = SpeedResult(fast_seconds=1e-6, slow_seconds=241e-6, margin=8, attempts=1)
    assert fast.summary().endswith("241× faster (needs 8×)")


def test_a_speed_check_records_the_speedup_it_shows_as_a_number():
    recorded = []
    with measured.running(SimpleNamespace(user_properties=recorded)):
        assert_faster(
            lambda key, value: recorded.append((key, value)),
            compare_speed(here(lambda: None), here(lambda: time.sleep(1e-3)), margin=8),
            labels=("fast", "slow"),
            failure=lambda result: "never raised",
        )
    (_, note), (_, (name, speedup)) = recorded
    assert [key for key, _ in recorded] == [NOTE_PROPERTY, MEASUREMENT_PROPERTY]
    assert name == "speedup" and isinstance(speedup, float) and speedup >= 8
    shown = note.partition("× faster (needs 8×), on ")[0].rsplit(" ", 1)[1]
    assert note.startswith("fast: ") and float(shown) == speedup
    assert note.endswith(f", on {timed_device()}"), "where it was measured"


def test_a_slower_side_fails_with_the_checks_message_and_still_records():
    recorded = []
    with (
        pytest.raises(AssertionError) as failed,
        measured.running(SimpleNamespace(user_properties=recorded)),
    ):
        assert_faster(
            lambda key, value: recorded.append((key, value)),
            compare_speed(here(lambda: time.sleep(1e-3)), here(lambda: time.sleep(1e-3)), margin=8),
            labels=("fast", "slow"),
            failure=lambda result: f"only {result.speedup:g}× faster",
        )
    assert failed.value.args == (f"only {recorded[1][1][1]:g}× faster",)


def test_measurements_travel_from_the_check_to_the_text_gradescope_and_the_recap():
    check = CheckResult(
        id="checks/test_02_jit.py::test_fast", exercise=EXERCISE.id, name="fast_fn: faster",
        task="fast_fn", speed=True,
    )  # fmt: skip
    note = "fast_fn: 3 µs, slow_fn: 87 µs: 29× faster (needs 50×)"
    measurements = {"speedup": 29.0, "compilations": 1.0}
    verdict = Verdict(id=check.id, outcome=Outcome.PASSED, notes=[note], measurements=measurements)
    read_event(event_line(verdict)).apply_to(check)
    grading = Grading(Path("."), [ExerciseResult(EXERCISE, [check])])
    (test,) = to_gradescope(grading, 1.0)["tests"]
    assert test["extra_data"] == {"measurements": measurements, "notes": [note]}
    assert to_gradescope(grading, 1.0)["leaderboard"] == [
        {"name": "jit speedup, 02_jit", "value": 29.0}
    ]
    assert to_json(grading)["exercises"][0]["checks"][0]["measurements"] == measurements
    assert passing_measurements(grading.results[0]) == {"fast_fn: faster": measurements}
    text = [click.unstyle(line) for line in report.check_lines(check, measured=True)]
    assert text == ["  ✓ fast_fn: faster", f"      {note}", "      XLA compilations seen: 1"]


def test_the_runner_reads_only_lines_the_judge_sealed_in_order():
    judge, runner = Seal("the run's key"), Seal("the run's key")
    first, second = (judge.seal(f'{{"n": {n}}}\n') for n in (1, 2))
    forged = Seal("a guessed key").seal('{"n": 3}\n')
    assert runner.open(first) == '{"n": 1}'
    assert runner.open(first) is None, "a line replayed"
    assert runner.open(forged) is None
    assert runner.open('{"n": 3}\n') is None, "a line with no seal"
    assert runner.open(second) == '{"n": 2}'


def test_a_failing_line_is_shown_where_the_front_end_places_it():
    assert report.location_text(HERE) == "/course/exercises/02_jit.py:30: for _ in range(n):"
    in_cell = {**HERE, "place": "cell line 31"}
    assert report.location_text(in_cell) == "cell line 31: for _ in range(n):"
    text = shown(ExerciseResult(EXERCISE, [failing("f: x", "f", "boom", in_cell, WHY)]))
    assert "at cell line 31: for _ in range(n):" in text


def test_the_list_aligns_titles_whatever_the_ids_length():
    rows = [(EXERCISE, progress.DONE), (Exercise("10_debugging", "Debug", "debug", ()), "")]
    lines = [click.unstyle(line) for line in report.exercise_list_lines("kata", rows)]
    assert lines[0] == "kata: 1 of 2 done"
    assert lines[1].index("Trace once") == lines[2].index("Debug")


def test_a_search_of_the_torch_table_prints_each_row_or_the_closest_names():
    from kata.diagnosis import torch_to_jax

    found = torch_to_jax.search("clamp")
    lines = [click.unstyle(line) for line in report.translation_lines("clamp", found)]
    assert lines[0] == "  torch.clamp → `jnp.clip(x, min, max)`"
    missing = report.translation_lines("clampp", torch_to_jax.search("clampp"))
    assert len(missing) == 1
    assert missing[0].startswith("no PyTorch name or JAX spelling mentions 'clampp'; did you mean")
    assert "clamp" in missing[0].split("did you mean")[1]


def test_a_count_of_one_is_said_in_the_singular():
    """`kata grade` said "Grading 1 submissions"."""
    said = [report.counted(n, "submission") for n in (0, 1, 2)]
    assert said == ["0 submissions", "1 submission", "2 submissions"]
