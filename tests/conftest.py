"""Shared fixtures: throwaway git clones of the real course and of the engine's mini course."""

import shutil
import subprocess
from pathlib import Path

import pytest

from kata.grading import warm

REPO = Path(__file__).resolve().parents[1]
MINI = REPO / "tests" / "minicourse"
COURSE_PARTS = ("course.toml", "exercises", "solutions", "checks")


def clone_course(source: Path, target: Path) -> Path:
    """Copy a course's files into `target` and commit them, as a learner's clone has."""
    target.mkdir(parents=True, exist_ok=True)
    for part in COURSE_PARTS:
        if (source / part).is_dir():
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


@pytest.fixture
def mini(tmp_path: Path) -> Path:
    return clone_course(MINI, tmp_path / "mini")


@pytest.fixture
def real_course(tmp_path: Path) -> Path:
    return clone_course(REPO, tmp_path / "course")


@pytest.fixture(autouse=True, scope="session")
def jax_cache_outside_the_tree(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Grading in place (the course's own exercises/ and solutions/) must not write JAX's
    compilation cache into the source tree, where a course's `.kata/` would hold it."""
    cache = tmp_path_factory.mktemp("jax-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAX_COMPILATION_CACHE_DIR", str(cache))
        yield


@pytest.fixture(autouse=True)
def cold_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grade cold: a warm grader started in the background for each throwaway course would
    outlive its test. The tests of the warm grader start and stop their own."""
    monkeypatch.setenv(warm.COLD_VARIABLE, "1")
