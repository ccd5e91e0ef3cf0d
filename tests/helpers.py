"""What the tests share: the course clones, the CLI as a learner runs it, and broken files."""

import contextlib
import fcntl
import io
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from click.testing import CliRunner, Result

from kata.cli import cli
from kata.course import load_course
from kata.results import Grading, Limits
from kata.servers.warm import WarmGrader, server_command, stop_worker, wait_for_worker
from kata.supervisor.judge_process import grading_environment
from kata.supervisor.runner import grade

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "tests" / "minicourse"
COURSE_PARTS = ("course.toml", "exercises", "solutions", "checks")
T = TypeVar("T")


def clone_course(source: Path, target: Path) -> Path:
    """Copy a course into `target` and commit it, as a learner's clone has. The stubs come
    from git's HEAD, never from the working tree, where a learner's answers live."""
    target.mkdir(parents=True, exist_ok=True)
    for part in COURSE_PARTS:
        if part == "exercises":
            committed_files(source, part, target / part)
        elif (source / part).is_dir():
            shutil.copytree(
                source / part, target / part, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(source / part, target / part)
    (target / ".gitignore").write_text(".kata/\n__pycache__/\n")
    git = ["git", "-c", "user.name=kata", "-c", "user.email=kata@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=target, check=True)
    subprocess.run([*git, "add", "."], cwd=target, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "course"], cwd=target, check=True)
    return target


def committed_files(source: Path, folder: str, target: Path) -> None:
    """The files of `source/folder` as git's HEAD has them, written under `target`."""
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=source, capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip
    tree = (source.resolve() / folder).relative_to(Path(top).resolve()).as_posix()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", f"HEAD:{tree}"], cwd=top, capture_output=True,
        check=True,
    ).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            extracted = tar.extractfile(member) if member.isfile() else None
            if extracted is not None:
                path = target / member.name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(extracted.read())


def worker_processes(course_root: Path) -> list[int]:
    """The warm graders started for `course_root`: their command line names it. A worker
    started by a command that just ended is still importing JAX, so it is always seen."""
    wanted = str(course_root.resolve()).encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kata.servers.worker" in args and wanted in args:
            found.append(int(entry.name))
    return found


def start_worker_process(folder, course_root=REPO, *options, name="w"):
    """A worker listening at folder/<name>.sock, holding the lock folder/course.lock."""
    socket_path, lock = folder / f"{name}.sock", folder / "course.lock"
    env = grading_environment(load_course(REPO).state_dir)
    process = subprocess.Popen(
        server_command("kata.servers.worker", str(socket_path), str(course_root), str(lock))
        + list(options),
        cwd=folder,
        env=env,
    )
    return process, socket_path


def run_folder(tmp_path_factory, name: str) -> Path:
    """A folder for the whole test run: shared by pytest-xdist's workers, which share the
    parent of their temporary folders; this process's own without them."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return tmp_path_factory.mktemp(name)
    folder = tmp_path_factory.getbasetemp().parent / name
    folder.mkdir(exist_ok=True)
    return folder


def computed_once(tmp_path_factory, name: str, compute: Callable[[], T]) -> T:
    """`compute()`, run by one process of the test run and read by the rest (`run_folder`)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return compute()
    shared = tmp_path_factory.getbasetemp().parent
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stored = shared / f"{name}.pickle"
        if stored.exists():
            return pickle.loads(stored.read_bytes())
        value = compute()
        stored.write_bytes(pickle.dumps(value))
        return value


@contextlib.contextmanager
def warm_graders(
    tmp_path_factory, count: int, course_root: Path = REPO
) -> Iterator[list[WarmGrader]]:
    """`count` warm graders of the course, each in its own folder, stopped on leaving."""
    started = [
        start_worker_process(tmp_path_factory.mktemp("worker"), course_root) for _ in range(count)
    ]
    try:
        for _, socket_path in started:
            assert wait_for_worker(socket_path)
        env = grading_environment(load_course(course_root).state_dir)
        yield [WarmGrader(socket_path, course_root, env) for _, socket_path in started]
    finally:
        for process, socket_path in started:
            stop_worker(socket_path)
            process.wait(timeout=30)


# The command line ----------------------------------------------------------------------


def kata(course: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--course", str(course), *args])


def kata_process(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kata", *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def solve(course: Path, exercise: str) -> None:
    shutil.copy(course / "solutions" / f"{exercise}.py", course / "exercises" / f"{exercise}.py")


# Broken learner files, for the mini course's 01_demo.py --------------------------------

GOOD_DRAW = """
def draw(key):
    first, second = jax.random.split(key)
    return jax.random.normal(first), jax.random.normal(second)
"""

CASES = {
    "syntax_error": "import jax\n\ndef double(x)\n    return x * 2\n",
    "import_torch": "import torch\n",
    "name_error_at_import": "import jax\nundefined_thing + 1\n",
    "endless_loop": "import jax\n\ndef double(x):\n    while True:\n        pass\n" + GOOD_DRAW,
    "endless_loop_signals_blocked": (
        "import jax, signal\n\ndef double(x):\n"
        "    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
        "    while True:\n        pass\n" + GOOD_DRAW
    ),
    "segfault": "import ctypes, jax\n\ndef double(x):\n    ctypes.string_at(0)\n" + GOOD_DRAW,
    "sys_exit": "import sys, jax\n\ndef double(x):\n    sys.exit(3)\n" + GOOD_DRAW,
    "os_exit": "import os, jax\n\ndef double(x):\n    os._exit(7)\n" + GOOD_DRAW,
    "huge_output": (
        "import jax\n\ndef double(x):\n    print('spam ' * 2_000_000)\n    return x * 3\n"
        + GOOD_DRAW
    ),
    "in_place_write": (
        "import jax\nimport jax.numpy as jnp\n\ndef double(x):\n    y = jnp.zeros(1)\n"
        "    y[0] = x * 2\n    return y[0]\n" + GOOD_DRAW
    ),
    "numpy_on_tracer": (
        "import jax\nimport numpy as np\n\ndef double(x):\n    return np.asarray(x) * 2\n"
        + GOOD_DRAW
    ),
    "python_if_on_tracer": (
        "import jax\n\ndef double(x):\n    if x > 0:\n        return x * 2\n    return x * 2\n"
        + GOOD_DRAW
    ),
    "float_of_tracer": "import jax\n\ndef double(x):\n    return float(x) * 2\n" + GOOD_DRAW,
    "item_on_tracer": "import jax\n\ndef double(x):\n    return x.item() * 2\n" + GOOD_DRAW,
    "key_reuse": (
        "import jax\n\ndef double(x):\n    return x * 2\n\n"
        "def draw(key):\n    return jax.random.normal(key), jax.random.normal(key)\n"
    ),
    "leaked_tracer": (
        "import jax\n\n_seen = []\n\ndef double(x):\n"
        "    jax.jit(lambda y: _seen.append(y) or y)(x)\n    return _seen[-1] * 2\n" + GOOD_DRAW
    ),
    # A message and printed text that steer a terminal: clear the screen, draw a verdict,
    # set the clipboard (OSC 52), a one-character CSI, and a line reversed (bidi override).
    "terminal_escapes": (
        "import jax\n\ndef double(x):\n"
        "    print('\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J')\n"
        "    raise ValueError('\\x1b[1A\\x1b[2K\\x9b2J\\u202edessap 8/8\\r ok\\u2028"
        "  \\u2713 passed\\u200b')\n" + GOOD_DRAW
    ),
    "backward_habit": (
        "import jax\n\ndef double(x):\n    y = x * 2\n    y.backward()\n    return y\n" + GOOD_DRAW
    ),
}

LIMITS = Limits(check_seconds=4, grace_seconds=2, run_seconds=120)


def grade_case(tmp: Path, name: str, code: str, limits: Limits = LIMITS) -> tuple[Grading, float]:
    folder = tmp / name
    folder.mkdir()
    (folder / "01_demo.py").write_text(code)
    (folder / "02_other.py").write_text((MINI / "solutions" / "02_other.py").read_text())
    course = load_course(MINI)
    started = time.monotonic()
    grading = grade(course, list(course.exercises), folder, limits)
    return grading, time.monotonic() - started


# Submissions that forge their own verdict from inside the grading process --------------

FORGERIES = {
    "numpy_always_close": (
        "import numpy as _np\n"
        "_np.allclose = lambda *args, **kwargs: True\n"
        "_np.isclose = lambda a, b, *args, **kwargs: _np.ones(_np.shape(a), bool)\n"
    ),
    "pytest_reports_passed": (
        "from _pytest.reports import TestReport as _Report\n"
        "_made = _Report.from_item_and_call\n"
        "def _passed(item, call):\n"
        "    report = _made(item, call)\n"
        "    report.outcome = 'passed'\n"
        "    return report\n"
        "_Report.from_item_and_call = staticmethod(_passed)\n"
    ),
    "check_assertions_replaced": (
        "import sys as _sys\n"
        "for _name, _module in list(_sys.modules.items()):\n"
        "    if _name.startswith(('test_', 'kata.checking')):\n"
        "        for _attribute in list(vars(_module)):\n"
        "            if _attribute.startswith('assert'):\n"
        "                setattr(_module, _attribute, lambda *args, **kwargs: None)\n"
    ),
    # The same functions, edited in place: each keeps its identity, and runs nothing.
    "check_assertions_edited_in_place": (
        "import sys as _sys, types as _types\n"
        "_nothing = (lambda *args, **kwargs: None).__code__\n"
        "for _name, _module in list(_sys.modules.items()):\n"
        "    if _name.startswith(('test_', 'kata.checking')):\n"
        "        for _attribute, _value in list(vars(_module).items()):\n"
        "            if _attribute.startswith('assert') and isinstance(_value, _types.FunctionType)"
        " and not _value.__closure__:\n"
        "                _value.__code__ = _nothing\n"
    ),
    # In one process with the checks, this found the plugin that writes the verdicts.
    "plugin_rewritten_via_gc": (
        "import gc as _gc\n"
        "class _AllPassed(dict):\n"
        "    def pop(self, key, default=None):\n"
        "        return 'passed'\n"
        "for _object in _gc.get_objects():\n"
        "    if type(_object).__name__ == 'EventWriter':\n"
        "        _object.outcomes, _object.failures = _AllPassed(), {}\n"
    ),
    # Last: it ends the process. Written as the verdicts were, before they were sealed.
    "events_file_appended": (
        "import json as _json, os as _os, sys as _sys\n"
        "from kata.results import Outcome as _Outcome, Verdict as _Verdict, event_line as _line\n"
        "_paths = [a.split('=', 1)[1] for a in _sys.argv if a.startswith('--kata-events=')]\n"
        "_paths.append(_os.path.join(_os.environ.get('TMPDIR', '/tmp'), 'events.jsonl'))\n"
        "for _path in _paths:\n"
        "    try:\n"
        "        with open(_path) as _events:\n"
        "            _text = _events.read()\n"
        "        _ids = [check['id'] for _row in _text.splitlines()\n"
        "                for check in _json.JSONDecoder().raw_decode(_row)[0].get('checks', [])]\n"
        "        with open(_path, 'a') as _events:\n"
        "            for _id in _ids:\n"
        "                _events.write(_line(_Verdict(id=_id, outcome=_Outcome.PASSED)))\n"
        "    except (OSError, ValueError):\n"
        "        pass\n"
        "_os._exit(0)\n"
    ),
}
FORGERIES["all_at_once"] = "".join(FORGERIES.values())


def forged_stubs(course_root: Path, folder: Path, forgery: str) -> Path:
    """Every stub of the course with `forgery` prepended, in `folder`."""
    folder.mkdir(parents=True)
    for stub in sorted((course_root / "exercises").glob("*.py")):
        (folder / stub.name).write_text(forgery + stub.read_text())
    return folder


def passed_checks(grading: Grading) -> set[str]:
    return {c.id for result in grading.results for c in result.checks if c.passed}


def assert_nothing_forged(grading: Grading, honest: set[str], graded_by: list[str]) -> None:
    """No check passes that the stub without the forgery fails (a few checks are true of
    a stub: 02's eager fast_fn does match slow_fn), and every check the forged stubs were
    graded by (`graded_by`, the ones the stubs fail) took them up: none was left out."""
    forged = sorted(passed_checks(grading) - honest)
    assert not forged, f"forged passes: {forged}"
    taken_up = {c.id.split("::")[-1] for result in grading.results for c in result.checks}
    assert set(graded_by) <= taken_up, f"not graded: {sorted(set(graded_by) - taken_up)}"


def escapees(mark: str) -> list[int]:
    """The processes whose command line holds `mark` (a test's hostile processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found
