"""A point rests on evidence the learner's process cannot write: forgeries of it fail.

Each forgery is added to a known wrong answer (tests/mistakes/) of every exercise it
applies to; the forged file must pass no check that the plain wrong answer fails. The
classes: state carried from one exercise to the next, a clock patched where the learner's
code runs, an eager baseline that sleeps, JAX's compile listeners cleared or shadowed, a
loop hidden in a host callback, keys laundered past JAX's key-reuse checker, a relay on
the judge's socket (replies rewritten, requests answered by the relay, replies sent twice)
and kata's cache in the learner's process filled by the learner's module. The last two
are graded once per forgery over every exercise's wrong answer whose values are right;
the holes they still find are strict expected failures (`HOLES`).
"""

import ast
import json
import runpy
import subprocess
import sys

import pytest

from kata.course import load_course
from kata.grading.runner import grade

from .helpers import FORGERIES, LIMITS, MINI, REPO, passed_checks
from .test_warm import worker  # noqa: F401  (the warm grader, for `grader`)

sys.path.insert(0, str(REPO / "tools"))
from evidence_table import OUTSIDE, PROGRAM, TRANSFORMED, VALUE, WORD, classify_file  # noqa: E402

COURSE = load_course(REPO)

# Every timed check's wrong answers that only the timing tells apart (the same code never
# compiled), per exercise: the speed checks' forgeries are tried on each.
SPEED_MISTAKES = {
    "02_jit": "fast_fn is the eager slow_fn under another name",
    "07_train_step": "no jit at all: the step runs op by op, like PyTorch eager",
    "08_gotchas": "fit without jit: the loop runs eagerly",
}
# Wrong answers that compile too often or in pieces: the compile counters' forgeries.
COMPILE_MISTAKES = {
    "02_jit": "fast_fn is a plain function that forgot jax.jit",
    "07_train_step": "only the loss is jitted, the update runs eagerly",
}

# Before the learner's file: the clocks of the learner's process count microseconds per
# reading, so any time it measures itself is as short as it likes.
PATCHED_CLOCKS = (
    "import itertools as _itertools, time as _time\n"
    "_ticks = _itertools.count()\n"
    "_time.perf_counter = _time.monotonic = _time.time = lambda: next(_ticks) * 1e-6\n"
)
# After it: every function sleeps when JAX's jit is switched off, so "the same code run
# eagerly" in the learner's process would look 50 ms a call slower than it is.
SLEEPS_WHEN_EAGER = (
    "\nimport functools as _functools, time as _time, jax as _jax\n"
    "def _slow_when_eager(fn):\n"
    "    @_functools.wraps(fn)\n"
    "    def wrapped(*args, **kwargs):\n"
    "        if _jax.config.jax_disable_jit:\n"
    "            _time.sleep(0.05)\n"
    "        return fn(*args, **kwargs)\n"
    "    return wrapped\n"
    "for _name, _value in list(globals().items()):\n"
    "    if callable(_value) and getattr(_value, '__module__', None) == __name__:\n"
    "        globals()[_name] = _slow_when_eager(_value)\n"
)
LISTENERS_CLEARED = (
    "import jax._src.monitoring as _monitoring\n_monitoring.clear_event_listeners()\n"
)
# A listener after kata's that empties every count kata's has just added to.
LISTENER_SHADOWED = (
    "import jax as _jax, kata.checking.probes as _probes\n"
    "def _hide(event, duration, **details):\n"
    "    for _seen in _probes._open_counts:\n"
    "        _seen.names.clear()\n"
    "_jax.monitoring.register_event_duration_secs_listener(_hide)\n"
)
BEFORE, AFTER = "before", "after"

# The plain mistake's Python loop, moved into a host callback: one opaque operation in the
# program, whatever the loop's length (the same for the learner's and the grader's eyes).
HIDDEN_LOOPS = {
    "09_control_flow": (
        "the RNN stepped by a Python loop over the rows",
        """
import numpy as _np
def rnn_states(w_h, w_x, h0, xs):
    def loop(w_h, w_x, h0, xs):
        h, states = _np.asarray(h0), []
        for x_t in _np.asarray(xs):
            h = _np.tanh(h @ _np.asarray(w_h) + x_t @ _np.asarray(w_x))
            states.append(h)
        return _np.stack(states).astype(_np.float32)
    shape = jax.ShapeDtypeStruct((xs.shape[0], h0.shape[-1]), jnp.float32)
    return jax.pure_callback(loop, shape, w_h, w_x, h0, xs)
""",
    ),
    "04_vmap": (
        "Python loop over rows (right values, program grows with the batch)",
        """
import numpy as _np
def batched_euclid(pa, pb):
    def loop(pa, pb):
        rows = zip(_np.asarray(pa), _np.asarray(pb))
        return _np.stack([_np.linalg.norm(a - b) for a, b in rows]).astype(_np.float32)
    return jax.pure_callback(loop, jax.ShapeDtypeStruct(pa.shape[:1], jnp.float32), pa, pb)
""",
    ),
}


def mistake_code(exercise: str, name: str) -> str:
    listed = runpy.run_path(str(REPO / "tests" / "mistakes" / f"{exercise}.py"))
    (entry,) = [e for e in listed["MISTAKES"] if e["name"] == name]
    reference = (REPO / "solutions" / f"{exercise}.py").read_text()
    return reference + "\n" + entry["code"]


def graded(folder, exercise: str, code: str):
    folder.mkdir(parents=True)
    (folder / f"{exercise}.py").write_text(code)
    return grade(COURSE, [COURSE.resolve(exercise)], folder)


@pytest.fixture(scope="module")
def graded_plain(tmp_path_factory):
    """Each plain wrong answer graded once for the module: every forgery of it is compared
    with that one grading (the laundered keys alone tried each plain answer three times)."""
    done = {}

    def grading_of(exercise: str, plain: str):
        if (exercise, plain) not in done:
            folder = tmp_path_factory.mktemp("plain") / "submission"
            done[exercise, plain] = graded(folder, exercise, plain)
        return done[exercise, plain]

    return grading_of


def assert_forged_no_better(
    tmp_path, graded_plain, exercise: str, plain: str, forgery: str, where: str
):
    forged = forgery + plain if where == BEFORE else plain + forgery
    honest = passed_checks(graded_plain(exercise, plain))
    grading = graded(tmp_path / "forged", exercise, forged)
    gained = sorted(passed_checks(grading) - honest)
    assert not gained, f"forged passes: {gained}"
    return grading


@pytest.mark.slow
@pytest.mark.parametrize("exercise", sorted(SPEED_MISTAKES))
@pytest.mark.parametrize(
    ("forgery", "where"),
    [(PATCHED_CLOCKS, BEFORE), (SLEEPS_WHEN_EAGER, AFTER)],
    ids=["clocks", "sleeps"],
)
def test_a_speed_check_is_timed_outside_the_learners_reach(
    tmp_path, graded_plain, exercise, forgery, where
):
    plain = mistake_code(exercise, SPEED_MISTAKES[exercise])
    assert_forged_no_better(tmp_path, graded_plain, exercise, plain, forgery, where)


@pytest.mark.slow
@pytest.mark.parametrize("exercise", sorted(COMPILE_MISTAKES))
@pytest.mark.parametrize(
    "forgery", [LISTENERS_CLEARED, LISTENER_SHADOWED], ids=["cleared", "shadowed"]
)
def test_compile_listeners_changed_are_named(tmp_path, graded_plain, exercise, forgery):
    plain = mistake_code(exercise, COMPILE_MISTAKES[exercise])
    grading = assert_forged_no_better(tmp_path, graded_plain, exercise, plain, forgery, BEFORE)
    messages = {c.message for r in grading.results for c in r.checks}
    assert any("jax.monitoring" in m for m in messages if m), messages


@pytest.fixture(params=["cold", "warm"])
def grader(request):
    """How a run is graded: a new grading process, or the course's warm worker."""
    return request.getfixturevalue("worker") if request.param == "warm" else None


def test_nothing_one_exercise_leaves_reaches_the_next(tmp_path, grader):
    """01 leaves a value in its process's builtins; 02's answer reads it: a process shared
    by the two would pass 02's check."""
    course = load_course(MINI)
    folder = tmp_path / "carried"
    folder.mkdir()
    reference = (MINI / "solutions" / "01_demo.py").read_text()
    (folder / "01_demo.py").write_text("import builtins\nbuiltins.kata_carried = 42\n" + reference)
    (folder / "02_other.py").write_text(
        "import builtins\n\ndef answer():\n    return getattr(builtins, 'kata_carried', 0)\n"
    )
    grading = grade(course, list(course.exercises), folder, LIMITS, warm=grader)
    first, second = grading.results
    assert first.passed
    (answer,) = second.checks
    assert not answer.passed and "got 0" in answer.message


@pytest.mark.slow
@pytest.mark.parametrize("exercise", sorted(HIDDEN_LOOPS))
def test_a_loop_hidden_in_a_host_callback_is_no_compiled_loop(tmp_path, graded_plain, exercise):
    name, hidden = HIDDEN_LOOPS[exercise]
    plain = mistake_code(exercise, name)
    grading = assert_forged_no_better(tmp_path, graded_plain, exercise, plain, hidden, AFTER)
    messages = {c.message for r in grading.results for c in r.checks}
    assert any("calls back into Python on the host" in m for m in messages if m), messages


# How a key gets past JAX's key-reuse checker, which runs in the learner's process: each
# use gets a key the checker has never seen, whose numbers are the old key's.
LAUNDERINGS = {
    "wrapped": "lambda k: _jax.random.wrap_key_data(_jax.random.key_data(k))",
    "legacy": "lambda k: k if k.dtype == _jnp.uint32 else _jax.random.key_data(k)",
    "reseeded": "lambda k: _jax.random.key(_jax.random.key_data(_launder_legacy(k))[1])",
}


def laundering(launder: str) -> str:
    """After the learner's file: its name `jax` becomes a stand-in whose random functions
    launder the key they are given. No function of JAX is replaced, so nothing reads as
    tampering; the file's own code is the plain mistake's, unchanged."""
    return f"""
import jax as _jax, jax.numpy as _jnp
_launder_legacy = lambda k: k if k.dtype == _jnp.uint32 else _jax.random.key_data(k)
_launder = {launder}
class _Random:
    def __getattr__(self, name):
        fn = getattr(_jax.random, name)
        if name in ("key", "PRNGKey", "key_data", "wrap_key_data") or not callable(fn):
            return fn
        return lambda key, *args, **kwargs: fn(_launder(key), *args, **kwargs)
class _Jax:
    random = _Random()
    def __getattr__(self, name):
        return getattr(_jax, name)
jax = _Jax()
"""


def key_checks(exercise: str) -> set[str]:
    """The checks of `exercise` that judge key use on the program the grader reads."""
    path = REPO / "checks" / f"test_{exercise}.py"
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and node.name.startswith("test_")
        and "assert_each_key_used_once" in ast.unparse(node)
    }


def key_reuse_mistakes() -> list[tuple[str, str]]:
    """Every known wrong answer that one of those checks must catch, of every exercise."""
    found = []
    for exercise in (e.id for e in COURSE.exercises):
        listed = REPO / "tests" / "mistakes" / f"{exercise}.py"
        checks = key_checks(exercise)
        if checks and listed.exists():
            mistakes = runpy.run_path(str(listed))["MISTAKES"]
            found += [(exercise, m["name"]) for m in mistakes if checks & set(m["fails"])]
    return found


KEY_REUSES = key_reuse_mistakes()
KEY_REUSE_WORDS = ("draws from one key twice", "computes with the numbers of")


def test_every_exercise_about_keys_has_a_key_reuse_mistake():
    assert {exercise for exercise, _ in KEY_REUSES} >= {"05_prng", "08_gotchas"}


@pytest.mark.slow
@pytest.mark.parametrize(("exercise", "mistake"), KEY_REUSES, ids=[m for _, m in KEY_REUSES])
@pytest.mark.parametrize("launder", sorted(LAUNDERINGS))
def test_a_laundered_key_is_still_reused(tmp_path, graded_plain, exercise, mistake, launder):
    plain = mistake_code(exercise, mistake)
    honest = graded_plain(exercise, plain)
    forged = graded(tmp_path / "forged", exercise, plain + laundering(LAUNDERINGS[launder]))
    gained = sorted(passed_checks(forged) - passed_checks(honest))
    assert not gained, f"forged passes: {gained}"
    # Where JAX's checker caught the plain reuse, the program read by the grader says why.
    reused = {
        c.id for r in honest.results for c in r.checks if c.exception == "KeyReuseError"
    } & key_checks(exercise)
    for check in (c for r in forged.results for c in r.checks if c.id in reused):
        assert any(word in check.message for word in KEY_REUSE_WORDS), check.message


@pytest.mark.slow
def test_a_laundered_key_is_reused_cold_and_warm(tmp_path, grader):
    """The first of the class, graded in a new process and by the warm grader."""
    exercise, mistake = KEY_REUSES[0]
    forged = mistake_code(exercise, mistake) + laundering(LAUNDERINGS["wrapped"])
    folder = tmp_path / "forged"
    folder.mkdir()
    (folder / f"{exercise}.py").write_text(forged)
    grading = grade(COURSE, [COURSE.resolve(exercise)], folder, warm=grader)
    (reuse_check,) = [
        c
        for r in grading.results
        for c in r.checks
        if c.id.endswith("uses_each_key_once") and c.task == "two_normals"
    ]
    assert not reuse_check.passed
    assert "draws from one key twice" in (reuse_check.message or ""), reuse_check.message


@pytest.mark.slow
def test_a_laundered_key_is_reused_in_kata_grade(tmp_path):
    """The first of the class, in a class's gradebook: the same verdict, no point."""
    exercise, mistake = KEY_REUSES[0]
    folder = tmp_path / "laundering"
    folder.mkdir()
    forged = mistake_code(exercise, mistake) + laundering(LAUNDERINGS["reseeded"])
    (folder / f"{exercise}.py").write_text(forged)
    book = tmp_path / "grades.json"
    command = [sys.executable, "-m", "kata", "--course", str(REPO), "grade", str(folder)]
    command += ["--out", str(tmp_path / "grades.csv"), "--json", str(book), "--jobs", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(book.read_text())["submissions"]
    graded = row["exercises"][exercise]
    reused = [c for c in graded["checks"] if any(w in c["message"] for w in KEY_REUSE_WORDS)]
    assert reused and all(c["outcome"] != "passed" and c["score"] == 0 for c in reused)
    assert graded["score"] < graded["max"]


# A relay on the judge's socket. After the learner's file: a thread of the learner's
# process takes the judge's socket (found in kata's own frames) and puts a socket pair
# between it and kata's loop, so that every request and reply passes through `answer`,
# which may rewrite it, answer it itself or send it twice. No function of kata or JAX is
# replaced, so nothing reads as tampering.
RELAY = """
import os as _os, socket as _socket, sys as _sys, threading as _threading
import jax as _jax, numpy as _np
from kata.grading import wire as _wire
from kata.grading.learner_process import exported as _exported, transformed as _transformed

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
# What the learner's process is known to notice of itself (kata.grading.integrity).
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
    # learner's own answer for the arguments exported for (nothing to count, no key drawn
    # from, no matmul); a timed chain, after the first, at once, with the first's result
    # repeated for every call.
    "answers": """
_first_chains = {}
def _constant_program(document, arrays):
    args = _wire.decode(document["args"], arrays, None, _jax.device_put)
    function = _transformed(globals()[document["target"]["name"]], document["under"])
    answer = _jax.block_until_ready(function(*args))
    program = _exported(lambda *traced: answer, args, document.get("layout"))
    return _wire.encode({"value": program, "compilations": [], "printed": "", "tampered": []})
def _answered(request, forward):
    document, arrays = request
    target = str(document.get("target")) + str(document.get("under"))
    if document["op"] == "export" and "name" in document["target"]:
        yield _constant_program(document, arrays)
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
from kata.grading import wire as _wire
from kata.grading.learner_process import transformed as _transformed

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
    the checks' source as the README's table is (tools/evidence_table.py)."""
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
# What a forgery of each class is known to gain, by the kind of evidence: the holes this
# file records (strict: a hole closed shows as a pass to be removed from here).
HOLES = {
    ("relay_rewrites", WORD): (
        "a compile count is the learner's process's word, which a relay rewrites (README, "
        "'Only detected'): 07's unjitted step reads as one program"
    ),
    ("prefilled_transformations", TRANSFORMED): (
        "jax.jit, disable_jit and the key-reuse checker are applied in the learner's "
        "process: a cache that leaves them out answers with the plain function (01's "
        "set_first, 09's power_iteration, 10's log_norm; README: 'under jit' is the "
        "learner's process's word)"
    ),
    ("prefilled_helpers", WORD): (
        "a check-file helper's answer is the learner's process's word (README, 'Only "
        "detected'): 07's step, its helpers answering 1, reads as compiled once"
    ),
}


def packed(folder, forgery: str):
    """Each exercise's right-valued wrong answer, with `forgery` after it, in `folder`."""
    folder.mkdir(parents=True)
    for exercise, mistake in RIGHT_VALUES.items():
        (folder / f"{exercise}.py").write_text(mistake_code(exercise, mistake) + forgery)
    return folder


@pytest.fixture(scope="module")
def graded_packed(tmp_path_factory):
    """The right-valued wrong answers of the whole course graded once plainly and once
    with each forgery: one grading each for every check of the course."""
    done = {}

    def grading_of(forgery: str):
        if forgery not in done:
            folder = packed(
                tmp_path_factory.mktemp("packed") / "submission", FORGED.get(forgery, "")
            )
            done[forgery] = grade(COURSE, list(COURSE.exercises), folder)
        return done[forgery]

    return grading_of


@pytest.mark.slow
@pytest.mark.parametrize("kind", [VALUE, TRANSFORMED, PROGRAM, OUTSIDE, WORD])
@pytest.mark.parametrize("forgery", sorted(FORGED))
def test_a_relay_or_a_prefilled_cache_gains_no_check(graded_packed, request, forgery, kind):
    """No forged file passes a check resting on `kind` of evidence that its plain wrong
    answer fails, but where this file records a hole."""
    if (forgery, kind) in HOLES:
        request.applymarker(pytest.mark.xfail(strict=True, reason=HOLES[forgery, kind]))
    honest, forged = passed_checks(graded_packed("")), passed_checks(graded_packed(forgery))
    assert forged != honest, "the forgery changed no verdict: did it run at all?"
    gained = sorted(c for c in forged - honest if EVIDENCE[c] == kind)
    assert not gained, f"forged passes: {gained}"


# The relay's timed chains answered at once, on a step whose result changes each call.
RELAYED_SPEED = ("08_gotchas", SPEED_MISTAKES["08_gotchas"], "test_fit_beats_eager")


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
    assert "timed calls in a row" in (speed.message or ""), speed.message


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
    assert "timed calls in a row" in speed["message"], speed["message"]


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="02's fast_fn is 100 rounds of sin + cos, which reach the map's fixed point "
    "(1.2587…) from any finite input: a chain of timed calls on finite inputs answered with "
    "its first result repeated is right at every link (a constant fast_fn fails on inf)",
)
def test_a_relay_answering_02s_timed_calls_gains_nothing(tmp_path, graded_plain):
    plain = mistake_code("02_jit", SPEED_MISTAKES["02_jit"])
    forgery = FORGED["relay_answers"]
    assert_forged_no_better(tmp_path, graded_plain, "02_jit", plain, forgery, AFTER)
