"""A point rests on evidence the learner's process cannot write: forgeries of it fail.

Each forgery is added to a known wrong answer (tests/mistakes/) of every exercise it
applies to; the forged file must pass no check that the plain wrong answer fails. The
classes: state carried from one exercise to the next, a clock patched where the learner's
code runs, an eager baseline that sleeps, JAX's compile listeners cleared or shadowed, a
loop hidden in a host callback, and keys laundered past JAX's key-reuse checker. A relay on
the judge's socket and kata's caches filled by the learner's module are in
tests/test_relay_and_caches.py.
"""

import ast
import json
import runpy
import subprocess
import sys

import numpy as np
import pytest

from kata.course import load_course
from kata.reporting.scoring import score_exercise
from kata.supervisor.runner import grade

from .helpers import LIMITS, MINI, REPO, passed_checks
from .test_warm import worker  # noqa: F401  (the warm grader, for `grader`)

sys.path.insert(0, str(REPO / "tools"))
from checks_reached import checks_reached  # noqa: E402

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
    "import jax as _jax, kata.learner_side.compile_counts as _probes\n"
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


def graded(folder, exercise: str, code: str, only: list[str] | None = None, warm=None):
    """`code` as `exercise`'s file, graded cold or by the `warm` grader: by the checks
    named in `only`, or all."""
    folder.mkdir(parents=True)
    (folder / f"{exercise}.py").write_text(code)
    return grade(COURSE, [COURSE.resolve(exercise)], folder, only=only or (), warm=warm)


def graded_forgery(folder, exercise: str, code: str, honest, warm=None):
    """A forged file graded by the checks its plain wrong answer (`honest`) fails: only
    those can be gained, and a wrong answer fails a few of its exercise's checks."""
    failed = sorted(
        {c.id.split("::")[-1] for r in honest.results for c in r.checks if not c.passed}
    )
    assert failed, "the plain wrong answer fails no check"
    return graded(folder, exercise, code, only=failed, warm=warm)


@pytest.fixture(scope="module")
def graded_plain(tmp_path_factory, solutions_compiled):
    """Each plain wrong answer graded once for the module: every forgery of it is compared
    with that one grading (the laundered keys alone tried each plain answer three times).
    Graded by the checks its change can reach (tools/checks_reached.py): the others run the
    reference unchanged, pass, and so can be gained by no forgery."""
    done = {}

    def grading_of(exercise: str, plain: str, warm=None):
        key = (exercise, plain, warm is not None)  # one warm grader serves the module
        if key not in done:
            folder = tmp_path_factory.mktemp("plain") / "submission"
            reached = sorted(checks_reached(exercise, plain))
            done[key] = graded(folder, exercise, plain, only=reached, warm=warm)
        return done[key]

    return grading_of


def assert_forged_no_better(
    tmp_path, graded_plain, exercise: str, plain: str, forgery: str, where: str, warm=None
):
    forged = forgery + plain if where == BEFORE else plain + forgery
    honest = graded_plain(exercise, plain, warm)
    grading = graded_forgery(tmp_path / "forged", exercise, forged, honest, warm)
    gained = sorted(passed_checks(grading) - passed_checks(honest))
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


@pytest.fixture
def warm(request):
    """The course's warm grader."""
    return request.getfixturevalue("worker")


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
def test_a_laundered_key_is_still_reused(tmp_path, graded_plain, warm, exercise, mistake, launder):
    """Graded warm: these 30 forgeries and their 10 plain answers took 288 s of the suite
    cold, 127 s warm (the first of the class is graded cold and in `kata grade` below)."""
    plain = mistake_code(exercise, mistake)
    forgery = laundering(LAUNDERINGS[launder])
    forged = assert_forged_no_better(
        tmp_path, graded_plain, exercise, plain, forgery, AFTER, warm=warm
    )
    honest = graded_plain(exercise, plain, warm)  # graded once for the module
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


# 15's stub, with two ways of showing the judge arrays laid out as they are not: each
# array `shard_rows` returns (still on one device) is claimed split by rows over 8 devices
# in its reply's header (`json.dumps` rewritten on its way out of the learner's process),
# and `fsdp_step` (still returning its params whole on every device) is exported taking
# them whole too, so that they come back "laid out as it took them".
CLAIMED_LAYOUTS = """
import json as _json
import jax.export as _export_module

_claiming = [False]
_given_mesh = [None]
_dumps, _export = _json.dumps, _export_module.export


def _claim(o):
    if isinstance(o, list):
        return [_claim(item) for item in o]
    if not isinstance(o, dict):
        return o
    if _claiming[0] and "array" in o and "placement" not in o and o.get("shape"):
        rows, rest = o["shape"][0], [[0, n] for n in o["shape"][1:]]
        _claiming[0] = False
        step = rows // 8
        return dict(o, placement=[[d, [[d * step, (d + 1) * step], *rest]] for d in range(8)])
    return {key: _claim(value) for key, value in o.items()}


def _claiming_dumps(obj, *args, **kwargs):
    return _dumps(_claim(obj) if _claiming[0] else obj, *args, **kwargs)


def shard_rows(x):
    _claiming[0] = True
    return jax.device_put(x, jax.devices()[0])


@jax.jit
def fsdp_step(params, x, y):
    everywhere = NamedSharding(_given_mesh[0] or devices_mesh(), PartitionSpec())
    return jax.lax.with_sharding_constraint(sgd(params, x, y), everywhere)


def _exported_whole(fun, *args, **kwargs):
    made = _export(fun, *args, **kwargs)
    closure = getattr(getattr(fun, "__wrapped__", None), "__closure__", None) or ()
    if not any(cell.cell_contents is fsdp_step for cell in closure):
        return made

    def taking_everything_whole(*specs):
        _given_mesh[0] = specs[0].sharding.mesh
        whole = NamedSharding(_given_mesh[0], PartitionSpec())
        return made(*[jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=whole) for s in specs])

    return taking_everything_whole


_json.dumps = _claiming_dumps
_export_module.export = _exported_whole
"""


@pytest.mark.slow
def test_where_arrays_lie_earns_no_point_on_the_learners_word(tmp_path):
    """Where a returned array's blocks lie is read in the learner's process, which may
    rewrite its reply: those checks pass a claim and earn nothing. A program must take its
    arguments as the judge laid them out: one exported to take them otherwise fails."""
    folder = tmp_path / "claimed"
    folder.mkdir()
    stub = (COURSE.exercises_dir / "15_sharding.py").read_text()
    (folder / "15_sharding.py").write_text(stub + CLAIMED_LAYOUTS)
    exercise = COURSE.resolve("15_sharding")
    (result,) = grade(COURSE, [exercise], folder, LIMITS).results
    checks = {c.id.split("::")[-1]: c for c in result.checks}
    claimed = [checks[n] for n in checks if n.startswith("test_shard_rows")]
    assert claimed and all(c.passed and c.feedback_only for c in claimed), claimed
    compiled = checks["test_fsdp_step_compiled_keeps_params_sharded"]
    assert not compiled.passed and "not as the grader gave it" in compiled.message
    assert score_exercise(exercise, result).points == 0


# The program asked for, exported for two platforms instead (the learner's module wraps
# `jax.export.export`): the platform's index comes first among its arguments, so a scan
# that follows the call's arguments by position follows it instead of the key.
TWO_PLATFORMS = """
import jax.export as _export_module

_export = _export_module.export


def _for_two_platforms(fun, **options):
    return _export(fun, **{**options, "platforms": ("cpu", "tpu")})


_export_module.export = _for_two_platforms
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("exercise", "mistake"),
    [next(m for m in KEY_REUSES if m[0] == e) for e in ("05_prng", "08_gotchas")],
    ids=["05_prng", "08_gotchas"],
)
def test_a_program_for_two_platforms_is_refused(tmp_path, graded_plain, warm, exercise, mistake):
    plain = mistake_code(exercise, mistake)
    forgery = laundering(LAUNDERINGS["wrapped"]) + TWO_PLATFORMS
    forged = assert_forged_no_better(
        tmp_path, graded_plain, exercise, plain, forgery, AFTER, warm=warm
    )
    messages = [c.message for r in forged.results for c in r.checks if not c.passed]
    assert any("takes arguments of its own" in m for m in messages), messages


# 09's RNN as a Python loop over a jitted cell that slices its step's row and writes its
# state itself: JAX writes the cell's body once and one `call` per step.
LOOP_OVER_A_JITTED_CELL = """
import jax
import jax.numpy as jnp


@jax.jit
def cell(carry, w_h, w_x, xs):
    h, states, t = carry
    h = jnp.tanh(h @ w_h + jax.lax.dynamic_index_in_dim(xs, t, keepdims=False) @ w_x)
    return h, jax.lax.dynamic_update_index_in_dim(states, h, t, 0), t + 1


def rnn_states(w_h, w_x, h0, xs):
    carry = (h0, jnp.zeros((xs.shape[0], h0.shape[0]), h0.dtype), jnp.int32(0))
    for _ in range(xs.shape[0]):
        carry = cell(carry, w_h, w_x, xs)
    return carry[1]
"""


def test_a_loop_calling_a_jitted_helper_grows_its_program():
    """The program's size counts a called function at each call (32 operations at 3 steps
    and at 30, counted as text; 61 and 601 walked by MLIR's parser)."""
    import jax
    from jax import export

    from kata.checking.exported_program import ExportedProgram

    scope: dict = {}
    exec(LOOP_OVER_A_JITTED_CELL, scope)
    sizes = {}
    for steps in (3, 30):
        args = [np.ones(shape, np.float32) for shape in ((4, 4), (2, 4), (4,), (steps, 2))]
        program = export.export(jax.jit(scope["rnn_states"]))(*args)
        sizes[steps] = ExportedProgram.from_bytes(bytes(program.serialize())).operation_count
    assert sizes[30] - sizes[3] >= 27, sizes
