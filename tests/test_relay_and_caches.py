"""A relay on the judge's socket, and kata's caches in the learner's process filled by the
learner's module: neither earns a check its plain wrong answer fails.

Each is graded once per forgery over every exercise's wrong answer whose values are right
(tests/test_evidence.py holds the other classes of forgery, and the shared helpers); the
holes they still find are recorded check by check (`HOLES`). A file of its own, so that
the suite's workers share these gradings with test_evidence's.
"""

import json
import runpy
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

from kata.course import Exercise
from kata.cpu_clocks import TICK, kernel_cpu
from kata.learner_side.compile_counts import (
    CACHE_ENTRY_BYTES,
    COMPILE_CPU_SECONDS,
    UNCACHED_COMPILE_CPU_SECONDS,
    UNCOUNTED_BYTES_COMPILE_CPU_SECONDS,
    UNREPORTED_COMPILATION,
    kernel_saw_a_compilation,
)
from kata.results import ExerciseResult, Grading
from kata.supervisor.evidence import (
    OUTSIDE,
    PROGRAM,
    TRANSFORMED,
    VALUE,
    WORD,
    classify_file,
    kernel_counted_checks,
)
from kata.supervisor.runner import grade

from . import test_evidence as evidence
from .helpers import FORGERIES, REPO, passed_checks
from .test_evidence import AFTER, COURSE, SPEED_MISTAKES, assert_forged_no_better, mistake_code

# The fixtures this file shares with test_evidence (pytest finds them by their names here).
graded_plain, grader, worker = evidence.graded_plain, evidence.grader, evidence.worker

sys.path.insert(0, str(REPO / "tools"))
from checks_reached import checks_reached  # noqa: E402

# A relay on the judge's socket. After the learner's file: a thread of the learner's
# process takes the judge's socket (found in kata's own frames) and puts a socket pair
# between it and kata's loop, so that every request and reply passes through `answer`,
# which may rewrite it, answer it itself or send it twice. No function of kata or JAX is
# replaced, so nothing reads as tampering.
RELAY = """
import os as _os, socket as _socket, sys as _sys, threading as _threading
import jax as _jax, numpy as _np
from kata.handoffs import wire as _wire
from kata.learner_side.learner_process import exported as _exported, transformed as _transformed

def _judge_socket():
    frame = _sys._getframe()
    while not isinstance(frame.f_locals.get("connection"), _socket.socket):
        frame = frame.f_back
    return frame.f_locals["connection"]

def _start_relay(answer):
    fd = _judge_socket().fileno()
    judge = _socket.socket(fileno=_os.dup(fd))
    kata, kata_end = _socket.socketpair()
    _os.dup2(kata_end.fileno(), fd)
    kata_end.close()
    def forward(request):
        _wire.send(kata, *request)
        return _wire.receive(kata)
    def relay():
        _wire.send(judge, *_wire.receive(kata))  # the reply to `load`, written after this
        while True:
            for reply in answer(_wire.receive(judge), forward):
                _wire.send(judge, *reply)
    _threading.Thread(target=relay, daemon=True).start()
"""
# What the learner's process is known to notice of itself (kata.isolation.integrity).
TAMPERING_IN_PROCESS = FORGERIES["numpy_always_close"] + FORGERIES["check_assertions_replaced"]
RELAYS = {
    # Each reply's word about its call rewritten: nothing compiled, printed or tampered
    # with (the file also replaces numpy.allclose and the checks' assertions there).
    "rewrites": TAMPERING_IN_PROCESS
    + """
def _rewritten(request, forward):
    document, arrays = forward(request)
    for entry in document.get("dict", []):
        if entry[0] in ("compilations", "tampered"):
            entry[1] = {"list": []}
        elif entry[0] == "printed":
            entry[1] = ""
    yield document, arrays
_start_relay(_rewritten)
""",
    # Requests answered by the relay: an export with a program of constants, the
    # learner's own answer for the arguments exported for, computed without `jit` (nothing
    # to count, no key drawn from, no matmul, no trace to fail); a timed chain, after the
    # first, at once, with the first's result repeated for every call.
    "answers": """
_first_chains = {}
def _constant_program(document, arrays):
    args = _wire.decode(document["args"], arrays, None, _jax.device_put)
    under = [step for step in document["under"] if step[0] != "jit"]
    function = _transformed(globals()[document["target"]["name"]], under)
    answer = _jax.block_until_ready(function(*args))
    program = _exported(lambda *traced: answer, args, document.get("layout"))
    return _wire.encode({"value": program, "compilations": [], "printed": "", "tampered": []})
def _answered(request, forward):
    document, arrays = request
    target = str(document.get("target")) + str(document.get("under"))
    constant = None
    if document["op"] == "export" and "name" in document["target"]:
        try:
            constant = _constant_program(document, arrays)
        except Exception:  # a function that fails even eagerly: kata answers
            pass
    if constant is not None:
        yield constant
    elif document["op"] == "chain" and target in _first_chains:
        reply = _wire.decode(*_first_chains[target])
        calls = int(document["calls"])
        reply["value"] = _jax.tree.map(lambda a: _np.repeat(a[:1], calls, 0), reply["value"])
        yield _wire.encode(reply)
    else:
        reply = forward(request)
        if document["op"] == "chain":
            _first_chains[target] = reply
        yield reply
_start_relay(_answered)
""",
    # Every reply sent twice: from the second request on, the judge reads the reply to
    # the one before it.
    "replays": """
def _twice(request, forward):
    reply = forward(request)
    yield reply
    yield reply
_start_relay(_twice)
""",
}

# Kata's cache in the learner's process poisoned. After the learner's file: its functions
# move behind a module `__getattr__`, whose first call (the judge asking for a name) finds
# kata's `LoadedExercise` in the calling frames and fills what it keeps with answers the
# forgery chose. Instance attributes only: no function of kata is replaced.
PREFILLED = """
import json as _json, sys as _sys
from kata.handoffs import wire as _wire
from kata.learner_side.learner_process import transformed as _transformed

_hidden = {
    _name: _value for _name, _value in list(globals().items())
    if not _name.startswith("_") and getattr(_value, "__module__", None) == __name__
}
for _name in _hidden:
    del globals()[_name]

def __getattr__(name):
    if name not in _hidden:
        raise AttributeError(name)
    frame = _sys._getframe(1)
    while frame is not None and type(frame.f_locals.get("self")).__name__ != "LoadedExercise":
        frame = frame.f_back
    globals().update(_hidden)
    if frame is not None:
        _poison(frame.f_locals["self"])
    return _hidden[name]
"""
PREFILLS = {
    # The built transformations, each looked up as the forgery chose: the learner's
    # function with jax.jit, jax.disable_jit and the key-reuse checker left out.
    "transformations": PREFILLED
    + """
class _Prefilled(dict):
    def __init__(self, session):
        super().__init__()
        self.session = session
    def __contains__(self, key):
        return True
    def __getitem__(self, key):
        target, under = _json.loads(key)
        if "opaque" in target:
            function = self.session.find(_wire.Opaque(int(target["opaque"]), ""))
        else:
            function = getattr(self.session.module, target["name"])
        kept = [step for step in under if step[0] not in ("jit", "eager", "keys_checked")]
        return _transformed(function, kept)
def _poison(session):
    session.transformed = _Prefilled(session)
""",
    # The check file's helpers looked up as the forgery chose: each answers 1.
    "helpers": PREFILLED
    + """
def _poison(session):
    session.helper = lambda name: lambda *args, **kwargs: 1
""",
}


def evidence_of_checks() -> dict[str, str]:
    """Each check of the course (its id) and the kind of evidence it rests on, read from
    the checks' source as docs/evidence.md's table is (tools/evidence_table.py)."""
    return {
        f"checks/{path.name}::{name}": kind
        for path in sorted((REPO / "checks").glob("test_*.py"))
        for name, kind in classify_file(path).items()
    }


EVIDENCE = evidence_of_checks()


def right_values_wrong_way() -> dict[str, str]:
    """Per exercise, its first known wrong answer whose values are right: it fails no
    check that rests on values called plainly, only checks of how it computes them (under
    jit, its program, its speed, its compile counts). Right on every JAX kata allows."""
    found = {}
    for exercise in (e.id for e in COURSE.exercises):
        listed = REPO / "tests" / "mistakes" / f"{exercise}.py"
        kinds = {n.split("::")[-1]: k for n, k in EVIDENCE.items() if f"test_{exercise}" in n}
        for mistake in runpy.run_path(str(listed))["MISTAKES"] if listed.exists() else []:
            failed = {kinds[check] for check in mistake["fails"]}
            if "jax_from" not in mistake and VALUE not in failed:
                found[exercise] = mistake["name"]
                break
    return found


RIGHT_VALUES = right_values_wrong_way()
FORGED = {f"relay_{name}": RELAY + code for name, code in RELAYS.items()} | {
    f"prefilled_{name}": code for name, code in PREFILLS.items()
}


@dataclass(frozen=True)
class Hole:
    """A check a forgery is known to gain: the hole this file records. `every_time`: it
    gains it in every grading, so a hole closed fails here, to be removed from `HOLES`."""

    check: str
    why: str
    every_time: bool = True


# What a forgery of each class is known to gain, by the kind of evidence.
HOLES = {
    ("relay_rewrites", WORD): (
        Hole(
            "checks/test_07_train_step.py::test_step_compiles_to_one_program",
            "how many programs a first call compiled is the learner's process's word, which "
            "a relay rewrites (one compilation or thirty cost the kernel alike; "
            "docs/evidence.md, 'Only detected'): 07's unjitted step reads as one program",
        ),
        *(
            Hole(
                check,
                f"the same for {step} run op by op. Its later steps compile nothing, truly; "
                "the kernel's count of their CPU had failed it while any request past 8 ms "
                "counted as a compilation, the bound that failed eager stubs and correct "
                "files under load. Not every time: an eager step past 15 ms still counts",
                every_time=False,
            )
            for check, step in (
                ("checks/test_12_optax.py::test_adam_step_compiles_once", "12's adam_step"),
                ("checks/test_16_modules.py::test_train_step_compiles_once", "16's train_step"),
            )
        ),
    ),
    ("prefilled_transformations", WORD): (
        Hole(
            "checks/test_10_debugging.py::test_log_norm_prints_on_every_jitted_call",
            "jax.jit is applied in the learner's process for what only that process shows, "
            "what it prints: a cache that leaves it out runs 10's Python print on every "
            "'jitted' call (values under jit, vmap and grad come from the exported program, "
            "run by the judge)",
        ),
    ),
    ("prefilled_helpers", WORD): (
        Hole(
            "checks/test_07_train_step.py::test_step_compiles_once",
            "a check-file helper's answer is the learner's process's word (docs/evidence.md, "
            "'Only detected'): 07's step, its helpers answering 1, reads as compiled once. Not "
            "every time: an eager step past the kernel's bound for a compilation the "
            "process did not report fails the check",
            every_time=False,
        ),
    ),
}


def packed(folder, forgery: str):
    """Each exercise's right-valued wrong answer, with `forgery` after it, in `folder`."""
    folder.mkdir(parents=True)
    for exercise, mistake in RIGHT_VALUES.items():
        (folder / f"{exercise}.py").write_text(mistake_code(exercise, mistake) + forgery)
    return folder


@pytest.fixture(scope="module")
def graded_packed(tmp_path_factory, worker, solutions_compiled):
    """The right-valued wrong answers of the whole course graded once plainly, by every
    check their change can reach (tools/checks_reached.py: the others run the reference
    unchanged and pass), and once with each forgery, by the checks the plain answers fail:
    only those can be gained (31 of the course's checks). Graded warm, as the relay's first
    case is cold and in `kata grade` below: the sweep took 138 s of the suite cold, 95 s
    warm; the plain grading by every check alone, 63 s of it."""
    done = {}

    def grading_of(forgery: str) -> Grading:
        if forgery not in done:
            folder = packed(
                tmp_path_factory.mktemp("packed") / "submission", FORGED.get(forgery, "")
            )
            if not forgery:
                results = [
                    result
                    for exercise in map(COURSE.resolve, RIGHT_VALUES)
                    for result in grade(
                        COURSE,
                        [exercise],
                        folder,
                        only=sorted(
                            checks_reached(
                                exercise.id, mistake_code(exercise.id, RIGHT_VALUES[exercise.id])
                            )
                        ),
                        warm=worker,
                    ).results
                ]
                done[forgery] = Grading(folder, results)
            else:
                results = [
                    result
                    for exercise, failed in failed_checks(grading_of("").results).items()
                    for result in grade(
                        COURSE, [exercise], folder, only=failed, warm=worker
                    ).results
                ]
                done[forgery] = Grading(folder, results)
        return done[forgery]

    return grading_of


def failed_checks(results: list[ExerciseResult]) -> dict[Exercise, list[str]]:
    """The checks each exercise's grading failed, by name (`test_name[param]`)."""
    failed = {
        result.exercise: [c.id.split("::")[-1] for c in result.checks if not c.passed]
        for result in results
    }
    return {exercise: names for exercise, names in failed.items() if names}


@pytest.mark.slow
@pytest.mark.parametrize("kind", [VALUE, TRANSFORMED, PROGRAM, OUTSIDE, WORD])
@pytest.mark.parametrize("forgery", sorted(FORGED))
def test_a_relay_or_a_prefilled_cache_gains_no_check(graded_packed, forgery, kind):
    """No forged file passes a check resting on `kind` of evidence that its plain wrong
    answer fails, but those this file records as holes (`HOLES`)."""
    holes = HOLES.get((forgery, kind), ())
    plain, forged = graded_packed(""), graded_packed(forgery)
    # The forged files load, and each check the plain answers fail took them up.
    assert all(result.problem is None for result in forged.results)
    taken_up = {c.id for result in forged.results for c in result.checks}
    assert taken_up == {c.id for result in plain.results for c in result.checks if not c.passed}
    gained = sorted(c for c in passed_checks(forged) - passed_checks(plain) if EVIDENCE[c] == kind)
    recorded = {hole.check for hole in holes}
    assert [c for c in gained if c not in recorded] == [], f"forged passes: {gained}"
    for hole in holes:
        if hole.every_time:
            assert hole.check in gained, f"closed, remove it from HOLES: {hole.why}"
    # A hole gains a verdict, never a point: each rests on the learner's process's word.
    forged_checks = {c.id: c for result in forged.results for c in result.checks}
    assert all(forged_checks[c].feedback_only for c in gained if c in recorded), gained


# Each reply's compile count rewritten to none, and nothing else: the relay alone.
COUNTS_REWRITTEN = (
    RELAY
    + """
def _uncounted(request, forward):
    document, arrays = forward(request)
    for entry in document.get("dict", []):
        if entry[0] == "compilations":
            entry[1] = {"list": []}
    yield document, arrays
_start_relay(_uncounted)
"""
)


# A process that, for each line it reads, spends 0.15 s of CPU as the line says: in its
# main thread, in a thread that ends before it answers, or not at all.
BURNER = """
import sys, threading, time
def burn():
    end = time.thread_time() + 0.15
    while time.thread_time() < end:
        pass
for line in sys.stdin:
    if line.strip() == "main":
        burn()
    elif line.strip() == "thread":
        worker = threading.Thread(target=burn)
        worker.start()
        worker.join()
    print("done", flush=True)
"""


def test_the_kernel_counts_cpu_in_threads_that_ended():
    """What the judge reads of a process's CPU across a request (kata.checking.speed):
    exact for its live threads, and at most a few clock ticks short for a thread that
    ended within the request, whose time only the process's totals keep."""
    burner = subprocess.Popen(
        [sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:

        def spent(line: str) -> float:
            before = kernel_cpu(burner.pid)
            burner.stdin.write(line + "\n")
            burner.stdin.flush()
            assert burner.stdout.readline() == "done\n"
            return kernel_cpu(burner.pid).spent_since(before)

        spent("idle")  # the interpreter's start-up, before the first answer
        assert spent("idle") < COMPILE_CPU_SECONDS
        assert 0.15 <= spent("main") < 0.3
        assert 0.15 - 4 * TICK <= spent("thread") < 0.3
    finally:
        burner.kill()
        burner.wait()


# A function that compiles a program for each new value of x and keeps it, called through
# the relay that rewrites every count to none.
PER_VALUE = """
import jax
import numpy as np

programs = {}


def per_value(x):
    seen = np.asarray(x).tobytes()
    if seen not in programs:
        programs[seen] = jax.jit(lambda y, shift=float(np.asarray(x)[0]): y + shift)
    return programs[seen](x)
"""


def test_a_program_per_value_counts_though_its_reports_are_rewritten(learner_module):
    """A program compiled for each new value, its counts rewritten to none, counts once
    per call, on the kernel's word."""
    from kata.checking.learner_calls import count_compilations

    ex = learner_module(PER_VALUE + COUNTS_REWRITTEN)
    ex.per_value(np.arange(4, dtype=np.float32))
    with count_compilations() as seen:
        for start in range(1, 4):
            ex.per_value(np.arange(start, start + 4, dtype=np.float32))
    assert seen.names == [UNREPORTED_COMPILATION] * 3, seen.names


def test_what_the_kernel_counts_as_a_compilation():
    """CPU time counts as a compilation from a lower bound where the request moved a
    compilation cache entry, from a higher one where it moved none, from one between where
    the kernel does not count bytes, and never where it does not count CPU time."""
    entry, none = CACHE_ENTRY_BYTES, 0
    assert COMPILE_CPU_SECONDS < UNCOUNTED_BYTES_COMPILE_CPU_SECONDS < UNCACHED_COMPILE_CPU_SECONDS
    for moved, bound in ((entry, COMPILE_CPU_SECONDS), (none, UNCACHED_COMPILE_CPU_SECONDS)):
        assert kernel_saw_a_compilation(bound, moved)
        assert not kernel_saw_a_compilation(bound * 0.99, moved)
    assert not kernel_saw_a_compilation(UNCACHED_COMPILE_CPU_SECONDS * 0.99, entry - 1)
    assert kernel_saw_a_compilation(UNCOUNTED_BYTES_COMPILE_CPU_SECONDS, None)
    assert not kernel_saw_a_compilation(UNCOUNTED_BYTES_COMPILE_CPU_SECONDS * 0.99, None)
    assert not kernel_saw_a_compilation(None, entry)


# Work that costs the CPU more than a compilation read from the cache (an eager function of
# hundreds of operations does, on a busy machine) but moves no cache entry.
BUSY_WITHOUT_COMPILING = """
import time

import jax.numpy as jnp


def busy(x):
    end = time.thread_time() + 0.005
    while time.thread_time() < end:
        pass
    return jnp.asarray(x) + 1
"""


def test_cpu_without_a_cache_entry_moved_is_no_compilation(learner_module):
    """5 ms of CPU that compiles nothing, the request around it past the bound for one that
    moved a cache entry (9.4 ms quiet), does not count: it moved no bytes, and a
    compilation without the cache costs more."""
    from kata.checking.learner_calls import count_compilations

    ex = learner_module(BUSY_WITHOUT_COMPILING)
    x = np.arange(4, dtype=np.float32)
    ex.busy(x)
    with count_compilations() as seen:
        for _ in range(3):
            ex.busy(x)
    assert seen.names == [], seen.names


# A compiled function whose calls keep what they make, as JAX's caches do, and leave
# cycles only Python's collector frees: a full collection scans all that is kept.
KEEPS_WHAT_IT_MAKES = """
import jax
import jax.numpy as jnp

_compiled = jax.jit(lambda x: jnp.sin(x) * 2)
_kept = []


def keeps_what_it_makes(x):
    _kept.extend([{"call": len(_kept)}] for _ in range(10_000))
    for _ in range(1_000):
        cycle = []
        cycle.append(cycle)
    return _compiled(x)
"""


def test_no_collection_of_python_garbage_counts_as_a_compilation(learner_module):
    """A function compiled once, whose calls leave ever more for Python's collector to scan,
    compiles nothing more: the collector waits for the calls whose CPU is not counted.
    Each call costs 3-5 ms; a full collection inside one, 21 ms by the 17th call and 44 ms
    by the 28th (measured in plain Python), the CPU of a compilation, as one was in 16's
    reference."""
    from kata.checking.learner_calls import count_compilations

    ex = learner_module(KEEPS_WHAT_IT_MAKES)
    x = np.arange(4, dtype=np.float32)
    ex.keeps_what_it_makes(x)
    with count_compilations() as seen:
        for _ in range(24):
            ex.keeps_what_it_makes(x)
    assert seen.names == [], seen.names


# A jitted function built anew on every call, whose program the persistent cache holds
# after the first, called through the relay that rewrites every count to none.
REBUILT = """
import jax
import jax.numpy as jnp


def rebuilt_each_call(x):
    def rounds(y):
        for _ in range(30):
            y = jnp.sin(y) * 1.01 + 0.1
        return y

    return jax.jit(rounds)(x)
"""


def test_a_program_read_from_the_cache_counts_though_its_reports_are_rewritten(
    learner_module, monkeypatch
):
    """A jitted function built anew each call compiles from the persistent cache: it reads
    the cache entry, so each call counts, its counts rewritten to none."""
    from kata.checking.learner_calls import count_compilations

    # Every program into the cache (the suite's), as grading keeps them
    # (kata.supervisor.judge_process).
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    ex = learner_module(REBUILT + COUNTS_REWRITTEN)
    x = np.arange(4, dtype=np.float32)
    ex.rebuilt_each_call(x)  # writes the cache entry, if no run before did
    with count_compilations() as seen:
        for _ in range(3):
            ex.rebuilt_each_call(x)
    assert seen.names == [UNREPORTED_COMPILATION] * 3, seen.names


def recompiling_answers() -> dict[str, tuple[str, list[str]]]:
    """Per exercise with checks that rest on compile counts the kernel corroborates, its
    first known wrong answer that fails one of them by compiling (not by raising), and
    those it fails."""
    found = {}
    for path in sorted((REPO / "checks").glob("test_*.py")):
        exercise, counted = path.stem.removeprefix("test_"), kernel_counted_checks(path)
        listed = runpy.run_path(str(REPO / "tests" / "mistakes" / f"{exercise}.py"))
        for mistake in listed["MISTAKES"] if counted else []:
            caught = [check for check in mistake["fails"] if check in counted]
            if caught and "raises" not in mistake:
                found[exercise] = (mistake["name"], caught)
                break
    return found


@pytest.mark.slow
def test_a_relay_rewriting_compile_counts_hides_no_compilation(tmp_path):
    """Wrong answers that compile again on later calls (a new jitted function each call,
    a program per length or per loop count), their replies' counts rewritten to none by a
    relay: each request the kernel saw compile counts, and every such check still fails."""
    answers = recompiling_answers()
    assert set(answers) >= {"02_jit", "08_gotchas"}, answers
    for exercise, (mistake, caught) in answers.items():
        folder = tmp_path / exercise
        folder.mkdir()
        (folder / f"{exercise}.py").write_text(mistake_code(exercise, mistake) + COUNTS_REWRITTEN)
        (result,) = grade(COURSE, [COURSE.resolve(exercise)], folder, only=caught).results
        verdicts = {c.id.split("::")[-1]: c for c in result.checks}
        assert set(verdicts) == set(caught), (exercise, result)
        for check, verdict in verdicts.items():
            assert not verdict.passed, f"{exercise}: {check} passed, its counts rewritten"
            assert UNREPORTED_COMPILATION in (verdict.message or ""), verdict.message


# The relay's timed chains answered at once, on a step whose result changes each call.
RELAYED_SPEED = ("08_gotchas", SPEED_MISTAKES["08_gotchas"], "test_fit_beats_eager")


def forgery_caught(message: str) -> bool:
    """Whether a speed check's failure names what gave the relay away: a timed link that is
    not what the reference gives, or (checked first since the timed calls must return what
    the function's own program does) a program that disagrees with the function."""
    return "timed calls in a row" in message or "exported program" in message


def relayed_speed_check(folder, exercise: str, mistake: str) -> None:
    folder.mkdir()
    forged = mistake_code(exercise, mistake) + FORGED["relay_answers"]
    (folder / f"{exercise}.py").write_text(forged)


@pytest.mark.slow
def test_a_relay_answering_the_timed_calls_is_judged_cold_and_warm(tmp_path, grader):
    """The relay that answers the judge's timed chains itself, graded in a new process and
    by the warm grader: the chain's links are checked, the speed check fails."""
    exercise, mistake, check = RELAYED_SPEED
    relayed_speed_check(tmp_path / "relayed", exercise, mistake)
    grading = grade(COURSE, [COURSE.resolve(exercise)], tmp_path / "relayed", warm=grader)
    (speed,) = [c for r in grading.results for c in r.checks if c.id.endswith(check)]
    assert not speed.passed
    assert forgery_caught(speed.message or ""), speed.message


@pytest.mark.slow
def test_a_relay_answering_the_timed_calls_earns_nothing_in_kata_grade(tmp_path):
    """The same forgery in a class's gradebook: the speed check earns no point."""
    exercise, mistake, _ = RELAYED_SPEED
    relayed_speed_check(tmp_path / "relayed", exercise, mistake)
    book = tmp_path / "grades.json"
    command = [sys.executable, "-m", "kata", "--course", str(REPO), "grade"]
    command += [str(tmp_path / "relayed"), "--out", str(tmp_path / "grades.csv")]
    command += ["--json", str(book), "--jobs", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(book.read_text())["submissions"]
    (speed,) = [c for c in row["exercises"][exercise]["checks"] if c["speed"]]  # its one
    assert speed["outcome"] != "passed" and speed["score"] == 0, speed
    assert forgery_caught(speed["message"]), speed["message"]


@pytest.mark.slow
def test_a_relay_answering_02s_timed_calls_gains_nothing(tmp_path, graded_plain):
    """02's fast_fn is 100 rounds of sin + cos, which reach the map's fixed point (1.2587…)
    from any finite input: within the reference's tolerance, a chain answered with its
    first result repeated is right at every link. Each chain now starts from values drawn
    anew, and its links must be its program's bits, which end on one of two neighbours of
    that point as the input falls: a repeated answer fails."""
    plain = mistake_code("02_jit", SPEED_MISTAKES["02_jit"])
    forgery = FORGED["relay_answers"]
    assert_forged_no_better(tmp_path, graded_plain, "02_jit", plain, forgery, AFTER)
