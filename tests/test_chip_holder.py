"""The chip holder (kata.servers.chip_holder), with the CPU standing in for the chip: the one
process that opens the chip, reached by a run's judge over the connection the run is handed;
it times a learner's exported program as a chain of calls and the judge's own baseline run
eagerly, answers only its user with its token, runs only kata's and a course's check files,
and a speed check whose holder fails keeps the CPU's figure."""

import inspect
import os
import socket
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kata.checking.mlp_reference import jax_sgd_step
from kata.course import load_course
from kata.grading_platform import GradingPlatform
from kata.handoffs import chip_requests, wire
from kata.handoffs.chip_connection import Chip, ChipError, eager_request, program_request
from kata.handoffs.chip_requests import Hello
from kata.servers import chip_holder
from kata.servers.warm import server_command, worker_token
from kata.supervisor import doctor, runner
from kata.supervisor.judge_process import grading_environment

from . import stand_in_gpu_holder
from .helpers import REPO

linux_only = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="Unix sockets")


@pytest.fixture(scope="module")
def holder(tmp_path_factory):
    """A holder of its own (socket, token and lock in a folder of this test's), on the CPU."""
    folder = tmp_path_factory.mktemp("holder")
    path = folder / "chip.sock"
    process = subprocess.Popen(
        server_command(chip_holder.MODULE_NAME, str(path), str(folder / "chip.lock")),
        cwd=folder,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    deadline = time.monotonic() + 60
    while not chip_holder.holder_running(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    yield path
    chip_holder.stop_holder(path)
    process.wait(timeout=30)


def greeted(path) -> Chip:
    connection = chip_holder.reach_at(path)
    assert connection is not None
    return Chip(connection).greeted()


def exported(fn, *shapes, platform=None):
    specs = [jax.ShapeDtypeStruct(shape, np.float32) for shape in shapes]
    platforms = [platform] if platform else None
    return jax.export.export(jax.jit(fn), platforms=platforms)(*specs).serialize()


@linux_only
def test_a_hello_with_the_token_is_answered_with_the_device(holder):
    chip = greeted(holder)
    assert (chip.device, chip.platform) == ("the CPU", "cpu")


@linux_only
def test_a_hello_without_the_token_is_dropped_unanswered(holder):
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(str(holder))
    chip_requests.send(connection, Hello("guessed"))
    connection.settimeout(10)
    with pytest.raises(EOFError):
        wire.receive(connection)


@linux_only
@pytest.mark.parametrize("each_waited", [True, False], ids=["each-waited", "sent-ahead"])
def test_a_program_runs_as_a_chain_each_call_fed_the_last(holder, each_waited):
    """Each call gets the part at `path` of what the one before returned, as its leaves
    `carried`; the links asked for come back as they were carried, whether each call is
    waited for or the chain sent ahead (a throughput's timing)."""
    program = exported(lambda x, y: (x * 2 + y, x), (3,), (3,))
    x, y = np.float32([1, 2, 3]), np.float32([1, 1, 1])
    request = program_request(program, [x, y], (0, 1), (0,), 5, {0, 4}, each_waited)
    seconds, links = greeted(holder).time_program(request)
    want, carried = x, []
    for _ in range(5):
        want = want * 2 + y
        carried.append(want)
    assert seconds > 0
    np.testing.assert_allclose(links[0], carried[0])
    np.testing.assert_allclose(links[4], carried[4])
    assert set(links) == {0, 4}


@linux_only
def test_a_program_for_another_platform_is_refused(holder):
    program = exported(jnp.sin, (3,), platform="tpu")
    with pytest.raises(ChipError, match=r"a program for \('tpu',\), not cpu"):
        request = program_request(program, [np.zeros(3, np.float32)], (0, 1), (), 2, {0})
        greeted(holder).time_program(request)


@linux_only
def test_kata_s_own_baseline_is_timed_eagerly(holder):
    assert greeted(holder).time_eager(eager_request(jax_sgd_step, sgd_inputs(), 3)) > 0


def sgd_inputs(width=4, batch=8):
    params = {
        k: np.ones((width, width) if k[0] == "w" else (width,), np.float32)
        for k in ("w1", "b1", "w2", "b2")
    }
    x = y = np.ones((batch, width), np.float32)
    return params, x, y


@linux_only
def test_what_is_sent_ahead_is_answered_before_the_next_request(holder):
    """A speed check sends the program and a first eager run of its baseline ahead, to be
    compiled while the CPU times the learner's calls; their replies are read, in order,
    before the next request's."""
    chip = greeted(holder)
    program = exported(lambda x, y: (x * 2 + y, x), (3,), (3,))
    words = [np.float32([1, 2, 3]), np.float32([1, 1, 1])]
    chip.send_ahead(
        program_request(program, words, (0, 1), (0,), 2, set()),
        eager_request(jax_sgd_step, sgd_inputs(), 1),
    )
    assert chip.owed == 2
    assert chip.time_eager(eager_request(jax_sgd_step, sgd_inputs(), 2)) > 0
    assert chip.owed == 0
    _, links = chip.time_program(program_request(program, words, (0, 1), (0,), 3, {2}))
    np.testing.assert_allclose(links[2], [15, 23, 31])


@linux_only
def test_a_request_sent_ahead_that_fails_fails_the_request_after_it(holder):
    chip = greeted(holder)
    wrong = exported(jnp.sin, (3,), platform="tpu")
    baseline = eager_request(jax_sgd_step, sgd_inputs(), 1)
    ahead = program_request(wrong, [np.zeros(3, np.float32)], (0, 1), (), 2, set())
    chip.send_ahead(ahead, baseline)
    with pytest.raises(ChipError, match=r"a program for \('tpu',\), not cpu"):
        chip.time_eager(baseline)
    assert chip.time_eager(baseline) > 0, "the reply to the eager run sent ahead was read too"


def test_whether_the_chip_is_open_is_asked_without_waiting():
    """A holder still opening the chip has not greeted: the check sends nothing ahead, and
    asks again (waiting then) once the CPU's timing is over. A greeting that failed is told
    to every later ask."""
    ours, theirs = socket.socketpair()
    chip = Chip(ours)
    assert not chip.opened()
    wire.send(theirs, *wire.encode({"device": "TPU v5 lite", "platform": "tpu"}))
    assert chip.opened() and chip.device == "TPU v5 lite"
    ours, theirs = socket.socketpair()
    refused = Chip(ours)
    wire.send(theirs, *wire.encode({"error": "the chip holder did not listen within 30 s"}))
    theirs.close()
    for ask in (refused.opened, refused.greeted):
        with pytest.raises(ChipError, match="did not listen within 30 s"):
            ask()


def outside_baseline(x):
    return x


@linux_only
def test_code_from_neither_kata_nor_a_course_s_checks_is_never_run(holder):
    """This file is a test of kata's, not a check of a course: the holder refuses to import
    it, as it would any file a learner's process named."""
    with pytest.raises(ChipError, match="neither kata's nor a course's checks"):
        greeted(holder).time_eager(eager_request(outside_baseline, (np.float32(1),), 1))


@linux_only
def test_a_holder_that_is_gone_is_an_error_the_judge_can_keep_its_figure_on():
    ours, theirs = socket.socketpair()
    theirs.close()
    with pytest.raises(ChipError):
        Chip(ours, "the CPU", "cpu").time_eager(eager_request(jax_sgd_step, (), 1))


@linux_only
def test_a_holder_that_never_listens_is_told_to_the_judge(monkeypatch, tmp_path):
    """The run is handed a connection all the same, whose one answer says why: the judge
    shows it beside the CPU's figure."""
    monkeypatch.setattr(chip_holder, "holder_socket", lambda env: tmp_path / "chip.sock")
    monkeypatch.setattr(chip_holder, "start_holder", lambda path, env: None)
    connection = chip_holder.reach({}, start=True, seconds=0.1)
    assert connection is not None
    with pytest.raises(ChipError, match=r"^the chip holder did not listen within 0.1 s$"):
        Chip(connection).greeted()
    assert chip_holder.reach({}, start=False) is None, "a notebook's run starts none"


@linux_only
@pytest.mark.slow  # a cold run of 02's speed checks, and a holder started for it
def test_a_run_on_a_machine_with_a_free_chip_times_its_speed_checks_there(monkeypatch):
    """The runner starts the holder and hands the judge a connection; each speed line is the
    holder's figure, with the CPU's beside it."""
    monkeypatch.setattr(runner, "grading_platform", lambda: GradingPlatform("cpu", chip="TPU"))
    course = load_course(REPO)
    exercise = course.resolve("02_jit")
    env = grading_environment(course.state_dir)
    try:
        grading = runner.grade(
            course, [exercise], course.solutions_dir, only=["test_fast_fn_beats_eager_slow_fn"]
        )
    finally:
        chip_holder.stop_holder(chip_holder.holder_socket(env))
    (check,) = grading.results[0].checks
    assert check.passed, check.message
    (note,) = check.notes
    assert "× faster (needs 15×), on the CPU (on the CPU: " in note, note
    deadline = time.monotonic() + 30  # it answers the stop, then cleans up and exits
    while worker_token(chip_holder.holder_socket(env)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker_token(chip_holder.holder_socket(env)) == "", "the holder cleaned up"


def test_doctor_says_whether_the_chip_holder_runs(monkeypatch):
    monkeypatch.setattr(doctor, "grading_platform", lambda: GradingPlatform("cpu", chip="TPU"))
    (finding,) = doctor._chip_holder(load_course(REPO))
    assert (finding.label, finding.ok) == ("chip holder", True)
    assert finding.value in (
        "not running; the next check starts one, which holds the TPU until 10 idle minutes",
        "running: it holds the TPU and times the speed checks there, until 10 idle minutes",
    )


# A GPU's holder, and one nothing can wedge ---------------------------------------------------

STAND_IN = REPO / "tests" / "stand_in_gpu_holder.py"


def start_stand_in(path, greeting, request_seconds=None):
    """A holder that greets as a GPU's does (tests/stand_in_gpu_holder.py), at `path`."""
    seconds = [] if request_seconds is None else [str(request_seconds)]
    lock = path.with_name(path.name + ".lock")
    command = [sys.executable, str(STAND_IN), str(path), str(lock), greeting, *seconds]
    process = subprocess.Popen(
        command,
        cwd=path.parent,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(REPO / "src")},
    )
    deadline = time.monotonic() + 60
    while not chip_holder.holder_running(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return process


@linux_only
@pytest.mark.parametrize(
    "greeting, exports_for", [("gpu", "cuda"), ("cuda", "cuda"), ("rocm", "rocm")]
)
def test_a_gpu_s_holder_is_sent_programs_exported_as_jax_export_names_its_platform(
    tmp_path, greeting, exports_for
):
    """A CUDA device's `platform` is "gpu", which a CPU-only process cannot export for; its
    programs' platform is "cuda"."""
    path = tmp_path / "chip.sock"
    process = start_stand_in(path, greeting)
    try:
        chip = greeted(path)
        assert (chip.device, chip.platform) == (stand_in_gpu_holder.DEVICE, exports_for)
        program = exported(lambda x, y: (x * 2 + y, x), (3,), (3,), platform=chip.platform)
        words = [np.float32([1, 2, 3]), np.float32([1, 1, 1])]
        _, links = chip.time_program(program_request(program, words, (0, 1), (0,), 3, {2}))
        np.testing.assert_allclose(links[2], [15, 23, 31])
    finally:
        chip_holder.stop_holder(path)
        process.wait(timeout=30)


def endless_on_the_chip(x):
    """Right on the CPU; on any other platform a loop whose condition stays true."""
    return jax.lax.platform_dependent(
        x,
        cpu=lambda x: x,
        default=lambda x: jax.lax.while_loop(
            lambda c: c[0] >= 0, lambda c: (c[0], c[1] + 1), (jnp.abs(x).sum(), x)
        )[1],
    )


@linux_only
def test_a_program_that_never_ends_on_the_chip_ends_the_holder_not_the_runs_after(tmp_path):
    """The holder cannot interrupt a program the chip runs: its watchdog ends the holder,
    removing its socket, so the judge hears it go and the next run starts a fresh one."""
    path = tmp_path / "chip.sock"
    process = start_stand_in(path, "cuda", request_seconds=3)
    chip = greeted(path)
    endless = exported(endless_on_the_chip, (3,), platform="cuda")
    started = time.monotonic()
    with pytest.raises(ChipError, match="did not answer"):
        chip.time_program(program_request(endless, [np.ones(3, np.float32)], (0, 1), (), 2, {1}))
    assert time.monotonic() - started < 20
    assert process.wait(timeout=10) == -9
    assert not path.exists(), "the next run finds no holder, and starts one"
    with pytest.raises(ChipError, match="did not answer"):
        chip.time_eager(eager_request(jax_sgd_step, sgd_inputs(), 1))  # told again, at once
    process = start_stand_in(path, "cuda", request_seconds=3)
    try:
        assert greeted(path).time_eager(eager_request(jax_sgd_step, sgd_inputs(), 1)) > 0
    finally:
        chip_holder.stop_holder(path)
        process.wait(timeout=30)


def test_doctor_says_what_of_a_gpu_s_memory_the_holder_takes(monkeypatch):
    monkeypatch.setattr(doctor, "grading_platform", lambda: GradingPlatform("cpu", chip="GPU"))
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    (finding,) = doctor._chip_holder(load_course(REPO))
    assert finding.value.endswith(
        "(its GPU memory allocated as its programs need it, at most 10%)"
    ), finding.value
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    (finding,) = doctor._chip_holder(load_course(REPO))
    assert finding.value.endswith("(10% of the GPU's memory, taken at once)"), finding.value


def test_the_holder_allocates_a_gpu_s_memory_as_it_needs_up_to_a_tenth():
    held = chip_holder.holders_environment({"PATH": "/bin", "JAX_PLATFORMS": "cpu"})
    assert held == {
        "PATH": "/bin",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.10",
        "XLA_CLIENT_MEM_FRACTION": "0.10",
    }
    own = chip_holder.holders_environment({"XLA_CLIENT_MEM_FRACTION": "0.5"})
    assert own == {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_CLIENT_MEM_FRACTION": "0.5"}
    own = chip_holder.holders_environment({"XLA_PYTHON_CLIENT_PREALLOCATE": "true"})
    assert own["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"


def grade_02_with_a_holder(monkeypatch, source, greeting, request_seconds=None, only=None):
    """02 graded on `source` in a run handed a stand-in GPU holder greeting `greeting`: its
    speed checks' results, by name."""
    monkeypatch.setattr(runner, "grading_platform", lambda: GradingPlatform("cpu", chip="GPU"))
    started = []

    def start(path, env):
        started.append(start_stand_in(path, greeting, request_seconds))

    monkeypatch.setattr(chip_holder, "start_holder", start)
    course = load_course(REPO)
    env = grading_environment(course.state_dir)
    try:
        grading = runner.grade(course, [course.resolve("02_jit")], source, only=only or ())
    finally:
        chip_holder.stop_holder(chip_holder.holder_socket(env))
        for process in started:
            process.wait(timeout=30)
    return {check.id.rpartition("::")[2]: check for check in grading.results[0].checks}


@linux_only
@pytest.mark.slow  # 02 graded cold three times, a holder started for each
def test_02_graded_beside_a_gpu_s_holder_passes_and_an_endless_program_stops_nothing(
    monkeypatch, tmp_path
):
    checks = grade_02_with_a_holder(monkeypatch, REPO / "solutions", "gpu")
    assert all(check.passed for check in checks.values()), [
        check.message for check in checks.values() if not check.passed
    ]
    (note,) = checks["test_fast_fn_beats_eager_slow_fn"].notes
    assert f"on {stand_in_gpu_holder.DEVICE} (on the CPU: " in note, note
    # A function whose program runs forever on the chip alone: its CPU figure stands, and
    # the reference solution graded next is timed on a fresh holder.
    source = learner_02(tmp_path, endless_on_the_chip)
    checks = grade_02_with_a_holder(monkeypatch, source, "cuda", request_seconds=5)
    check = checks["test_fast_fn_beats_eager_slow_fn"]
    assert check.passed and "not timed on the chip: the chip holder did not answer" in str(
        check.notes
    ), (check.message, check.notes)
    checks = grade_02_with_a_holder(monkeypatch, REPO / "solutions", "cuda")
    assert all(check.passed for check in checks.values())
    assert "on the CPU: " in checks["test_fast_fn_beats_eager_slow_fn"].notes[0]


def unexportable_for_the_chip(x):
    """Right on the CPU, and exported there; JAX lowers `schur` for the CPU alone."""
    t, _ = jax.lax.linalg.schur(jnp.eye(2, dtype=x.dtype) + x[0])
    return x + 0 * t[0, 0]


@linux_only
@pytest.mark.slow  # one speed check, graded cold
def test_a_program_that_cannot_be_exported_for_the_chip_is_the_chip_s_failure(
    monkeypatch, tmp_path
):
    source = learner_02(tmp_path, unexportable_for_the_chip)
    only = ["test_fast_fn_beats_eager_slow_fn"]
    checks = grade_02_with_a_holder(monkeypatch, source, "cuda", only=only)
    check = checks[only[0]]
    assert check.passed, check.message
    assert "not timed on the chip: it could not be exported for cuda: " in check.notes[0]
    assert "'schur' not found for platform cuda" in check.notes[0]


def learner_02(folder, on_the_chip):
    """A course's exercises/ whose 02 is the reference with `fast_fn` passed through
    `on_the_chip` (a function of this file's, which must be right on the CPU)."""
    (folder / "exercises").mkdir(parents=True)
    solved = (REPO / "solutions" / "02_jit.py").read_text()
    (folder / "exercises" / "02_jit.py").write_text(
        f"{solved}\n\n{inspect.getsource(on_the_chip)}\n\n"
        f"fast_fn = jax.jit(lambda x: {on_the_chip.__name__}(slow_fn(x)))\n"
    )
    return folder / "exercises"
