"""CPU clocks that never tick (kata.cpu_clocks): under gVisor every one reads 0. Each
process finds out once; a dead clock is not read, so no verdict rests on it: right answers
still pass, wrong ones still fail, and no line shows "CPU 0 µs" as if measured.
KATA_CPU_CLOCKS=frozen makes kata's clocks read 0 as gVisor's do, on this machine."""

import runpy
import time

import pytest

from kata import cpu_clocks
from kata.checking.speed import SpeedResult, compare_speed, here
from kata.course import load_course
from kata.cpu_clocks import CpuClocks, probe_cpu_clocks
from kata.learner_side.compile_counts import FASTEST_COMPILATION_SECONDS, Compilations
from kata.reporting.scoring import score_exercise
from kata.results import Limits
from kata.supervisor.evidence import clock_counted_checks, feedback_only, kernel_counted_checks
from kata.supervisor.runner import grade

from .helpers import REPO, kata
from .test_relay_and_caches import COUNTS_REWRITTEN, mistake_code, recompiling_answers


@pytest.fixture
def frozen(monkeypatch):
    """This process's CPU clocks read 0 from now on, as under gVisor, and every process
    graded from it too; the probe forgotten before and after."""
    monkeypatch.setenv(cpu_clocks.FROZEN_VARIABLE, "frozen")
    cpu_clocks.cpu_clocks.cache_clear()
    yield
    cpu_clocks.cpu_clocks.cache_clear()


def test_the_probe_tells_a_clock_that_ticks_from_one_that_reads_zero():
    clocks = probe_cpu_clocks(
        {"thread": time.thread_time, "process": lambda: 0.0, "kernel": lambda: None}
    )
    assert clocks == CpuClocks(thread=True, process=False, kernel=None)
    assert probe_cpu_clocks(
        {"thread": lambda: 5.0, "process": time.process_time, "kernel": time.thread_time}
    ) == CpuClocks(thread=False, process=True, kernel=True)


def test_a_clock_stuck_at_any_value_is_dead_and_costs_the_probe_its_spin_at_most():
    started = time.perf_counter()
    clocks = probe_cpu_clocks(
        {"thread": lambda: 1.5, "process": lambda: 1.5, "kernel": lambda: 1.5}
    )
    spent = time.perf_counter() - started
    assert clocks == CpuClocks(thread=False, process=False, kernel=False)
    assert cpu_clocks.SPIN_SECONDS <= spent < 1.0


def test_this_machines_clocks_tick_and_are_read():
    assert probe_cpu_clocks() == CpuClocks(thread=True, process=True, kernel=True)


def test_frozen_clocks_are_found_dead_and_never_read(frozen):
    assert cpu_clocks.cpu_clocks() == CpuClocks(thread=False, process=False, kernel=False)
    assert cpu_clocks.cpu_seconds(1) is None
    assert cpu_clocks.kernel_cpu(1) is None


def test_a_speed_line_shows_no_cpu_it_could_not_measure(frozen):
    fast = here(lambda: 1)
    assert fast(3)[1] is None
    result = compare_speed(fast, here(lambda: time.sleep(1e-3)), margin=2, rounds=3)
    assert result.fast_cpu is None and "CPU" not in result.summary()
    measured = SpeedResult(1e-4, 1e-2, 10, 1, fast_cpu=2e-4, slow_cpu=1e-2)
    assert "(CPU 200 µs)" in measured.summary()


def test_doctor_says_which_clocks_are_dead(frozen):
    doctor = kata(REPO / "tests" / "minicourse", "doctor").output
    clocks = next(line for line in doctor.splitlines() if line.split()[:2] == ["CPU", "clocks"])
    assert "thread, process, kernel: never tick" in clocks
    assert "cannot be measured here" in clocks


# The course under dead clocks: 14's compile_for rests on the learner's process's CPU ----

COURSE = load_course(REPO)
COMPILE_FOR = "test_compile_for_compiles_ahead_of_time"
WRONG_COMPILE_FOR = [
    entry
    for entry in runpy.run_path(str(REPO / "tests" / "mistakes" / "14_inside_jit.py"))["MISTAKES"]
    if COMPILE_FOR in entry["fails"]
]


def graded_14(folder, only):
    exercise = COURSE.resolve("14_inside_jit")
    return grade(COURSE, [exercise], folder, Limits(check_seconds=60), only=only).results[0]


@pytest.mark.slow
def test_the_reference_passes_on_dead_clocks(frozen):
    """It failed under gVisor: 0 s of CPU to compile, 0 s to call, "the compiling happened
    in the call"."""
    result = graded_14(COURSE.solutions_dir, [COMPILE_FOR])
    (check,) = result.checks
    assert check.passed, check.message
    assert "by the judge's clock" in " ".join(check.notes)


@pytest.mark.slow
@pytest.mark.parametrize("mistake", WRONG_COMPILE_FOR, ids=lambda entry: entry["name"])
def test_wrong_answers_still_fail_on_dead_clocks(frozen, tmp_path, mistake):
    reference = (COURSE.solutions_dir / "14_inside_jit.py").read_text()
    (tmp_path / "14_inside_jit.py").write_text(reference + "\n" + mistake["code"])
    result = graded_14(tmp_path, [COMPILE_FOR])
    (check,) = result.checks
    assert not check.passed, mistake["name"]


# Compile counts the kernel cannot corroborate earn no points ----------------------------

CHECK_FILES = sorted((REPO / "checks").glob("test_*.py"))
ROW_SUMS = "test_row_sums_compiles_a_bounded_number_of_times"


def test_checks_on_compile_counts_earn_no_points_where_the_kernel_cannot_count(frozen):
    counted = {path.stem: kernel_counted_checks(path) for path in CHECK_FILES}
    clocked = {path.stem: clock_counted_checks(path) for path in CHECK_FILES}
    assert counted["test_02_jit"] and not clocked["test_02_jit"]
    for path in CHECK_FILES:
        assert counted[path.stem] - clocked[path.stem] <= feedback_only(path), path.stem
        assert not clocked[path.stem] & feedback_only(path), path.stem


def test_row_sums_holds_its_calls_to_the_judges_clock_where_the_kernel_cannot_count(frozen):
    """08's row_sums is its task's only check its stub fails on evidence the judge holds:
    with dead clocks, the judge's wall clock across each call (kata.learner_side.compile_counts),
    so it still earns its points."""
    path = REPO / "checks" / "test_08_gotchas.py"
    assert clock_counted_checks(path) == {ROW_SUMS}
    assert kernel_counted_checks(path) == {ROW_SUMS}
    assert ROW_SUMS not in feedback_only(path)


def test_where_it_counts_they_earn_their_points():
    for path in CHECK_FILES:
        assert not kernel_counted_checks(path) & feedback_only(path), path.stem


@pytest.mark.slow
def test_a_relay_hiding_compilations_earns_nothing_on_dead_clocks(frozen, tmp_path):
    """The wrong answer whose every compilation a relay hides from its replies: with no
    kernel count to add them back, the checks it then passes earn no points."""
    exercise = "02_jit"
    mistake, caught = recompiling_answers()[exercise]
    (tmp_path / f"{exercise}.py").write_text(mistake_code(exercise, mistake) + COUNTS_REWRITTEN)
    (result,) = grade(COURSE, [COURSE.resolve(exercise)], tmp_path, only=caught).results
    assert {c.id.split("::")[-1] for c in result.checks} == set(caught)
    for check in result.checks:
        assert check.feedback_only or not check.passed, check.id
    assert score_exercise(result.exercise, result).points == 0


# 08's row_sums on the judge's clock -----------------------------------------------------


def test_a_request_answered_sooner_than_any_compilation_compiled_nothing():
    seen = Compilations(judge_seconds=[0.001, FASTEST_COMPILATION_SECONDS, 0.002, 0.5])
    assert seen.answered_too_fast_to_compile == 2


def graded_08(folder):
    (result,) = grade(COURSE, [COURSE.resolve("08_gotchas")], folder, only=[ROW_SUMS]).results
    (check,) = result.checks
    return check


@pytest.mark.slow
def test_row_sums_earns_its_points_on_the_judges_clock(frozen, tmp_path):
    """With dead clocks, the stub fails row_sums' compile count on the judge's clock alone,
    its replies' counts rewritten to none by a relay (every call compiles, none comes back
    sooner than a compilation takes), and the solution passes it; both verdicts earn."""
    stub = (REPO / "exercises" / "08_gotchas.py").read_text()
    (tmp_path / "08_gotchas.py").write_text(stub + COUNTS_REWRITTEN)
    forged = graded_08(tmp_path)
    assert not forged.passed and not forged.feedback_only
    assert "came back sooner than any compilation takes" in (forged.message or "")
    # A busy machine slows calls that compile nothing too, and the check then asks for a
    # re-check (10 tries each): in a run of the whole suite beside another (load 10 to 80
    # on 2 cores) one grading of the solution failed, so the solution gets three.
    gradings = []
    while len(gradings) < 3 and not any(g.passed for g in gradings):
        gradings.append(graded_08(COURSE.solutions_dir))
    assert any(g.passed for g in gradings), [g.message for g in gradings]
    assert not any(g.feedback_only for g in gradings)
