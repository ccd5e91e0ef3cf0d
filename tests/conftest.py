"""Shared fixtures: throwaway git clones of the real course and of the engine's mini course."""

from collections import Counter
from pathlib import Path

import pytest

from kata.course import load_course
from kata.grading import warm
from kata.instructor.verify import Verification, verify_course

from .helpers import MINI, REPO, clone_course, computed_once, passed_checks


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


@pytest.fixture(scope="session")
def verified_course(tmp_path_factory: pytest.TempPathFactory) -> Verification:
    """`kata verify` on a clean clone of the course: its stubs and its solutions, each graded
    cold once for every test that needs their verdicts."""

    def verify_a_clone() -> Verification:
        clone = clone_course(REPO, tmp_path_factory.mktemp("verified") / "course")
        return verify_course(load_course(clone))

    return computed_once(tmp_path_factory, "verified_course", verify_a_clone)


@pytest.fixture(scope="session")
def stub_passes(verified_course: Verification) -> set[str]:
    """The checks the course's stubs pass as they are: all a forgery may pass."""
    return passed_checks(verified_course.stubs)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with the most slow tests first, in a stable order: pytest-xdist hands out
    whole files (`--dist loadfile`) in this order, so the longest start at once and the
    short ones fill in around them. Alphabetical, the wrong answers' 336 tests started
    early but the forgeries' 30 late, and one core idled for the last minutes."""
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])
