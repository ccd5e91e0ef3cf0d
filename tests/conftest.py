"""Shared fixtures: throwaway git clones of the real course and of the engine's mini course,
and one JAX compilation cache for the whole test run."""

import shutil
import warnings
from collections import Counter
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kata.course import load_course
from kata.instructor.verify import Verification, verify_course
from kata.isolation import caches
from kata.servers import warm
from kata.supervisor.runner import grade

from .helpers import MINI, REPO, clone_course, computed_once, passed_checks, run_folder


@pytest.fixture
def mini(tmp_path: Path) -> Path:
    return clone_course(MINI, tmp_path / "mini")


@pytest.fixture
def real_course(tmp_path: Path) -> Path:
    return clone_course(REPO, tmp_path / "course")


@pytest.fixture
def learner_module(tmp_path: Path):
    """Load a file's code as a learner's module, straight under pytest (as in an IDE): its
    functions called through kata.checking.learner_calls, in a process of its own."""
    from kata.checking.learner_calls import LearnerModule, _shared_process

    def loaded(code: str) -> LearnerModule:
        (tmp_path / "exercises").mkdir(exist_ok=True)
        (tmp_path / "checks").mkdir(exist_ok=True)
        (tmp_path / "exercises" / "model.py").write_text(code)
        # A check file using learner_calls' builder, as 06's and 16's do.
        checks = "from kata.checking.learner_calls import rebuilt  # noqa: F401\n"
        (tmp_path / "checks" / "test_model.py").write_text(checks)
        return LearnerModule(
            tmp_path / "exercises" / "model.py", tmp_path / "checks" / "test_model.py"
        )

    yield loaded
    _shared_process().stop()


@pytest.fixture(autouse=True)
def a_plain_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The notebook's functions mark the test process a kernel for good (its warm graders end
    with it, it starts no chip holder: kata.servers.warm): each test begins as a plain one."""
    monkeypatch.setattr(warm, "_workers_end_with_this_process", False)


@pytest.fixture(autouse=True, scope="session")
def jax_cache_outside_the_tree(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Grading in place (the course's own exercises/ and solutions/) must not write JAX's
    compilation cache into the source tree, where a course's `.kata/` would hold it. One
    cache for the run, as a learner's course has one: what one worker's runs compiled, the
    other's read (a whole course's stubs graded in 48 s with it empty, 21 s with it full).
    Every folder the suite grades is its own, so runs of any folder read it, as no
    submission's may (kata.isolation.caches)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JAX_COMPILATION_CACHE_DIR", str(run_folder(tmp_path_factory, "jax-cache")))
        patch.setenv(caches.SHARE_WITH_EVERY_SOURCE_VARIABLE, "1")
        yield


@pytest.fixture(scope="session")
def solutions_compiled(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    """The cache holding the programs of every solution: a learner's course whose exercises
    are solved graded once, its exercises split over two processes. Every known wrong answer
    shares all but a function or two with the reference, whose own runs keep a cache no
    other run reads (kata.isolation.caches.reference_cache). Where each selected test that
    needs it names its exercise (`-k 05_prng`), those exercises' solutions alone."""
    named = _exercises_named(request.session.items)

    def grade_a_solved_course() -> list[str]:
        solved = load_course(clone_course(REPO, tmp_path_factory.mktemp("solved") / "course"))
        for solution in solved.solutions_dir.glob("*.py"):
            shutil.copy(solution, solved.exercises_dir / solution.name)
        chosen = [e for e in solved.exercises if named is None or e.id in named]
        halves = [half for half in (chosen[::2], chosen[1::2]) if half]
        with ThreadPoolExecutor(len(halves)) as pool:
            graded = list(pool.map(lambda half: grade(solved, half, solved.exercises_dir), halves))
        results = [result for grading in graded for result in grading.results]
        return [f"{r.exercise.id}: {r.problem}" for r in results if r.problem] + [
            f"{check.id}: {check.outcome}: {check.message}"
            for result in results
            for check in result.checks
            if not check.passed
        ]

    # It fills a cache: the tests that hold the solutions to their checks are verify's and
    # warm-against-cold's. A check a solution failed here is named, not a reason to error
    # every test that reads the cache.
    name = "solutions_compiled" + "".join(f"-{exercise}" for exercise in sorted(named or ()))
    failed = computed_once(tmp_path_factory, name, grade_a_solved_course)
    if failed:
        warnings.warn(f"the solved course failed {len(failed)} checks: {failed}", stacklevel=1)


def _exercises_named(items: list[pytest.Item]) -> set[str] | None:
    """The exercises named in the ids of the selected tests that need the solutions'
    cache (a wrong answer's: `05_prng: mistake: …`); None, for every exercise, where one
    of them names none."""
    ids = [exercise.id for exercise in load_course(REPO).exercises]
    named: set[str] = set()
    for item in items:
        if "solutions_compiled" in getattr(item, "fixturenames", ()):
            found = {exercise for exercise in ids if exercise in item.nodeid}
            if not found:
                return None
            named |= found
    return named or None


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


@pytest.fixture(scope="session")
def stub_failures(verified_course: Verification) -> list[str]:
    """The checks the course's stubs fail, by name (`test_name[param]`): a forged stub is
    graded by these alone, the only ones it could gain. The stubs pass 62 of 189 checks,
    which took 56 s of a 121 s grading of them (cold, 2 shared cores)."""
    return sorted(
        {
            c.id.split("::")[-1]
            for r in verified_course.stubs.results
            for c in r.checks
            if not c.passed
        }
    )


# One test process per core, each test file whole on one of them (a file's module fixtures
# grade once, and `tests.helpers.computed_once` shares the session's): pytest-xdist's `-n
# auto --dist loadfile`, set here rather than in pyproject.toml's addopts, where pytest
# without xdist refused the whole run ("unrecognized arguments: -n").
PROCESSES, DISTRIBUTION = "auto", "loadfile"


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, object, object]:
    """Spread the run over the cores where pytest-xdist is installed and enabled, as far as
    the command line did not choose (`-n 0` is one process, `-n 4` four processes, still
    a file to each); one process without it. A wrapper, so it runs before xdist's own hook
    turns "auto" into a count; and an initial conftest's, which pytest calls this hook for
    (this folder's, for a run of the suite or of any file in it)."""
    if _xdist_options_here(config):
        if config.option.numprocesses is None:
            config.option.numprocesses = PROCESSES
        if config.option.dist == "no":
            config.option.dist = DISTRIBUTION
    return (yield)


def _xdist_options_here(config: pytest.Config) -> bool:
    """Whether xdist added its options (it is installed, and not `-p no:xdist`) and this
    is not one of its workers, which get the run's options from their parent."""
    return hasattr(config.option, "numprocesses") and not hasattr(config, "workerinput")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with the most slow tests first, in a stable order: pytest-xdist hands out
    whole files (`--dist loadfile`) in this order, so the longest start at once and the
    short ones fill in around them. Alphabetical, the wrong answers' 336 tests started
    early but the forgeries' 30 late, and one core idled for the last minutes."""
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])
