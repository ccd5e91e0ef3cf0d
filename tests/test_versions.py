"""The declared version range is the one kata runs on: the floor's constraints match
pyproject.toml, a package outside the range is refused in one line, and checks that cannot
load on the JAX installed say why in every verdict instead of failing the learner's file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from kata.supervisor import judge_process
from kata.versions import (
    VERIFIED_FILE,
    UnsupportedVersions,
    compilation_cache_reloads_correctly,
    jaxlib_version,
    kata_requirements,
    require_supported,
)

from .helpers import MINI, REPO, clone_course, kata

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

FLOOR = REPO / "constraints" / "floor.txt"
# The packages whose oldest release the floor environment must hold (.ci/run grades there).
FLOORED = {"jax", "jaxlib", "optax", "equinox", "ml-dtypes"}


def _name(text: str) -> str:
    return Requirement(text).name.lower().replace("_", "-")


def declared() -> dict[str, Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {_name(text): Requirement(text) for text in project["dependencies"]}


def floor_pins() -> dict[str, Requirement]:
    lines = [line.split("#")[0].strip() for line in FLOOR.read_text().splitlines()]
    return {_name(line): Requirement(line) for line in lines if line}


def test_the_floor_constraints_are_pyprojects_lower_bounds():
    ranges, pins = declared(), floor_pins()
    assert set(pins) >= FLOORED, f"constraints/floor.txt lacks {FLOORED - set(pins)}"
    for name, pin in pins.items():
        (exact,) = list(pin.specifier)
        assert exact.operator == "==", pin
        assert name in ranges, f"{name} is pinned for the floor but pyproject.toml declares none"
        lower = [Version(s.version) for s in ranges[name].specifier if s.operator == ">="]
        assert lower == [Version(exact.version)], (
            f"{name}: the floor pins {exact.version}, pyproject.toml's lower bound is {lower}"
        )
        assert pin.marker == ranges[name].marker, name


def test_the_installed_metadata_declares_pyprojects_ranges():
    """The ranges kata enforces are read from its installed metadata: it must be this
    pyproject.toml's (`pip install -e .` again after changing a dependency)."""
    installed = sorted(kata_requirements())
    assert installed == sorted(str(r) for r in declared().values()), "pip install -e . again"


# A package outside the range ---------------------------------------------------------


@pytest.fixture
def old_jax(tmp_path) -> dict[str, str]:
    """An environment in which the metadata says JAX 0.4.30 is installed (as a learner's
    old environment would), ahead of the real one on the path."""
    info = tmp_path / "site" / "jax-0.4.30.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jax\nVersion: 0.4.30\n")
    return {**os.environ, "PYTHONPATH": str(tmp_path / "site")}


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kata", "--course", str(MINI), *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


WRONG = "jax 0.4.30 is outside the range this kata supports (jax>=0.5.3): pip install 'jax>=0.5.3'"


def test_doctor_names_a_jax_below_the_floor_in_one_line(old_jax, tmp_path):
    done = _run(["doctor"], old_jax, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "outside the range" in line]
    assert line.split()[:1] == ["jax"] and line.endswith(WRONG)


@pytest.mark.parametrize(
    "command",
    [
        ["check", "--cold"],
        ["check", "--solutions", "--cold"],
        ["next"],
        ["verify"],
        ["grade", str(MINI / "solutions"), "--out", "{tmp}/grades.csv"],
    ],
)
def test_grading_commands_refuse_a_jax_below_the_floor_in_one_line(old_jax, tmp_path, command):
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    done = _run(args, old_jax, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == f"kata: cannot grade here: {WRONG}\n"
    assert done.stdout == "" and not (tmp_path / "grades.csv").exists()


def test_an_environment_in_range_is_remembered_until_a_package_changes(tmp_path, monkeypatch):
    state = tmp_path / "state"
    require_supported(state)
    assert (state / VERIFIED_FILE).is_file()
    require_supported(state)  # remembered: no metadata read
    site = tmp_path / "site" / "jax-0.4.30.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text("Metadata-Version: 2.1\nName: jax\nVersion: 0.4.30\n")
    monkeypatch.syspath_prepend(str(site.parent))
    with pytest.raises(UnsupportedVersions, match="jax 0.4.30 is outside"):
        require_supported(state)


# Checks that cannot load -------------------------------------------------------------

MISSING_NAME = "from jax.tree_util import NoSuchName  # a name this JAX lacks\n"
WHY = "ImportError: cannot import name 'NoSuchName' from 'jax.tree_util'"


@pytest.fixture(scope="module")
def unloadable(tmp_path_factory) -> Path:
    """The mini course with 01's check file importing a name JAX does not have."""
    course = clone_course(MINI, tmp_path_factory.mktemp("unloadable"))
    checks = course / "checks" / "test_01_demo.py"
    checks.write_text(MISSING_NAME + checks.read_text())
    return course


def test_a_check_file_that_cannot_load_says_why_in_one_line(unloadable):
    shown = kata(unloadable, "check", "01", "--cold", "-v")
    assert shown.exit_code == 1
    lines = shown.output.splitlines()
    (problem,) = [line for line in lines if "could not be loaded" in line]
    assert "checks/test_01_demo.py:1: " + WHY in problem and "on jax " in problem
    assert "no checks ran" not in shown.output and "Traceback" not in shown.output
    assert "valid Python names" not in shown.output  # pytest's hint, wrong here


@pytest.mark.parametrize("form", ["json", "junit", "gradescope", "classroom50"])
def test_every_output_format_carries_the_reason(unloadable, form):
    shown = kata(unloadable, "check", "01", "--cold", "--format", form)
    assert shown.exit_code == 1
    assert WHY in shown.output.replace("&apos;", "'").replace("&#x27;", "'")
    if form == "json":
        (exercise,) = json.loads(shown.output)["exercises"]
        assert WHY in exercise["problem"] and "\n" not in exercise["problem"]


def test_verify_reports_checks_that_cannot_load_once_and_blames_nothing_else(unloadable):
    shown = kata(unloadable, "verify")
    assert shown.exit_code == 1
    problems = [line for line in shown.output.splitlines() if "✗" in line or "01_demo" in line]
    (problem,) = [line for line in problems if "01_demo" in line]
    assert WHY in problem
    assert "hint" not in problem and "stub" not in problem and "solution" not in problem
    assert "1 problems." in shown.output and "02_other: the stub fails" in shown.output


@pytest.mark.slow
def test_a_class_graded_with_checks_that_cannot_load_says_why_per_row(unloadable, tmp_path):
    out = tmp_path / "grades.csv"
    shown = kata(unloadable, "grade", str(unloadable / "solutions"), "--out", str(out))
    assert shown.exit_code in (0, 1), shown.output
    assert WHY in out.read_text()


def test_checks_that_cannot_start_say_why_instead_of_no_checks_ran(tmp_path):
    """A JAX without a name kata's own helpers for the checks use as they load (JAX
    before 0.4.33 had no jax.tree_util.KeyPath, which they imported once): pytest cannot
    even load kata's plugin. Simulated here by taking away the monitoring listener that
    kata.learner_side.compile_counts registers, in every Python the test starts."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import jax.monitoring\ndel jax.monitoring.register_event_duration_secs_listener\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "KATA_COLD": "1"}
    done = _run(["check", "--cold", "-v"], env, tmp_path)
    assert done.returncode == 1, done.stderr
    verdicts = [line for line in done.stdout.splitlines() if "✗" in line]
    assert len(verdicts) == 2, done.stdout  # both exercises
    for line in verdicts:
        assert "the checks could not start" in line
        assert "has no attribute 'register_event_duration_secs_listener'" in line
    assert "no checks ran" not in done.stdout


def test_the_bundle_pins_every_dependency_within_its_range_for_each_python():
    """The Gradescope bundle's requirements.txt, which the Actions workflow installs too:
    a dependency it leaves unpinned (equinox, once) is whatever the index has that day."""
    from packaging.utils import canonicalize_name

    from kata.instructor.bundle_pins import PINS

    for python, pins in PINS.items():
        pinned = {canonicalize_name(p.split("==")[0]): p.split("==")[1] for p in pins}
        for requirement in declared().values():
            environment = {"python_version": python, "extra": ""}
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            version = pinned.get(canonicalize_name(requirement.name))
            assert version is not None, f"Python {python}: {requirement.name} is not pinned"
            assert requirement.specifier.contains(version, prereleases=True), (python, version)


def test_the_notebook_magic_refuses_a_jax_below_the_floor_in_one_line(old_jax, tmp_path):
    probe = (
        "from kata.notebook import kata_magic\n"
        "kata_magic('01_demo', 'def double(x):\\n    return x * 2\\n')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=old_jax, cwd=clone_course(MINI, tmp_path / "course"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"kata: cannot grade here: {WRONG}\n"


def test_on_a_jaxlib_that_reloads_programs_wrong_every_run_compiles_afresh(monkeypatch):
    """jaxlib 0.5.3 ran a cached fori_loop with a traced count no turn at all
    (tests/test_floor.py grades 09 twice there): no run reads or writes the cache."""
    assert not compilation_cache_reloads_correctly((0, 5, 3))
    assert compilation_cache_reloads_correctly((0, 6, 0))
    assert compilation_cache_reloads_correctly(jaxlib_version()) is (jaxlib_version() >= (0, 6))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "/somewhere/the/learner/chose")
    monkeypatch.setattr(judge_process, "compilation_cache_reloads_correctly", lambda: False)
    assert "JAX_COMPILATION_CACHE_DIR" not in judge_process.grading_environment(MINI / ".kata")


def test_lapack_is_set_up_without_scipy_linalg_and_both_still_work():
    """The judge sets up JAX's LAPACK kernels from SciPy's two Cython modules alone
    (kata.judge.start.set_up_lapack): a program solving a linear system then runs
    right, and `import scipy.linalg` afterwards gets the whole package."""
    script = """
import sys
import numpy as np
from kata.judge.start import preload_grading_modules
preload_grading_modules()
print("scipy.linalg" in sys.modules)
import jax, jax.numpy as jnp
from jax import export
a = np.array([[3.0, 1.0], [1.0, 2.0]], np.float32)
program = export.deserialize(export.export(jax.jit(jnp.linalg.solve))(a, a[0]).serialize())
print(np.allclose(a @ np.asarray(program.call(a, a[0])), a[0], atol=1e-5))
import scipy.linalg
print(np.allclose(scipy.linalg.inv(a) @ a, np.eye(2), atol=1e-5))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout.split() == ["False", "True", "True"], done.stderr
