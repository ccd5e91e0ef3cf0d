"""What a run can make the grader keep between runs: JAX's compilation caches, each
trimmed to kata.isolation.caches.CACHE_BYTES once a run ends, whatever the learner's code
compiled."""

import os

from kata.course import load_course
from kata.isolation import caches
from kata.supervisor.runner import UNMEASURED_BYTES, disk_usage, grade

from .helpers import MINI, clone_course

# 01's `double` closes over a constant drawn afresh at each import (24 MiB): every run
# exports a program no earlier run did, and the judge compiles each into its cache.
FRESH_CONSTANT_PER_IMPORT = """
import jax
import jax.numpy as jnp
import numpy as np

FRESH = np.random.default_rng().standard_normal(6 * 2**20).astype(np.float32)


def double(x):
    return x * 2 + 0 * jnp.sum(jnp.asarray(FRESH) * x)  # x in it: XLA folds no constant


def draw(key):
    first, second = jax.random.split(key)
    return jax.random.normal(first), jax.random.normal(second)
"""


def test_grading_again_and_again_keeps_every_cache_within_its_bound(tmp_path, monkeypatch):
    """Four gradings of a learner's own course whose program holds a fresh 24 MiB constant
    (96 MiB of the judge's entries, as before kept for ever) leave each of the course's
    caches within its bound, the judge's and the learner's own."""
    course = load_course(clone_course(MINI, tmp_path / "course"))
    shared = tmp_path / "jax-cache"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(shared))
    (course.exercises_dir / "01_demo.py").write_text(FRESH_CONSTANT_PER_IMPORT)
    judges = shared.parent / caches.judge_cache(shared.name)
    grew = []
    for _ in range(4):
        graded = grade(course, course.exercises[:1], course.exercises_dir)
        assert graded.results[0].checks, graded.results[0].problem
        grew.append(disk_usage(judges))
        for cache in (shared, judges):
            assert disk_usage(cache) <= caches.CACHE_BYTES, (cache, grew)
    assert max(grew) > 24 * 2**20, f"the judge compiled no big program: {grew}"


def test_trimming_keeps_the_most_recently_written(tmp_path):
    """The oldest entries go first; anything but JAX's files (a folder, a link) goes
    whatever its size, its target untouched; what is within the bound stays as it was."""
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    (cache / "folder" / "deeper").mkdir(parents=True)
    outside.write_text("kept")
    (cache / "link").symlink_to(outside)
    (cache / "folder" / "deeper" / "file").write_bytes(b"x")
    for age, name in enumerate(["newest", "newer", "older", "oldest"]):
        (cache / name).write_bytes(os.urandom(64 * 1024))
        os.utime(cache / name, (1e9 - age * 100, 1e9 - age * 100))
    caches.trim(str(cache), limit=2 * 64 * 1024 + 8192)
    assert sorted(p.name for p in cache.iterdir()) == ["newer", "newest"]
    assert outside.read_text() == "kept"
    caches.trim(str(cache), limit=2 * 64 * 1024 + 8192)
    assert sorted(p.name for p in cache.iterdir()) == ["newer", "newest"]


def nest(folder, name: str, depth: int) -> None:
    """Folders `name` nested `depth` deep in `folder`, a file of 8 KiB at the bottom, made
    as a run would, one level at a time (past the longest path a name can reach)."""
    here = os.getcwd()
    try:
        os.chdir(folder)
        for _ in range(depth):
            os.mkdir(name)
            os.chdir(name)
        with open("f", "wb") as file:
            file.write(bytes(8192))
    finally:
        os.chdir(here)


def unnest(folder, name: str, depth: int) -> None:
    """Remove what `nest` made, from the bottom up: pytest's clean-up of old temporary
    folders (shutil.rmtree) recurses, and a folder 1,200 deep left behind crashed the next
    session's end with RecursionError, before its summary was printed."""
    here = os.getcwd()
    try:
        os.chdir(folder)
        for _ in range(depth):
            os.chdir(name)
        os.remove("f")
        for _ in range(depth):
            os.chdir("..")
            os.rmdir(name)
    finally:
        os.chdir(here)


def test_what_a_run_holds_is_measured_however_deep(tmp_path):
    """A folder nested past Python's recursion limit is measured (`os.walk` raised
    RecursionError in the grader), and one nested past the longest path the grader can
    name counts as over any cap rather than as nothing."""
    deep, far = tmp_path / "deep", tmp_path / "far"
    deep.mkdir()
    far.mkdir()
    nest(deep, "d", 1200)
    nest(far, "n" * 255, 20)
    try:
        assert 8192 <= disk_usage(deep) < UNMEASURED_BYTES
        assert disk_usage(far) == UNMEASURED_BYTES
    finally:
        unnest(deep, "d", 1200)
        unnest(far, "n" * 255, 20)


# A learner's process writes its own course's cache as it likes: 144 MiB of it, then waits.
FILLS_ITS_CACHE = """
import os
import time

for number in range(3):
    with open(os.path.join(os.environ["JAX_COMPILATION_CACHE_DIR"], f"{number}"), "wb") as f:
        f.write(bytes(48 * 2**20))


def double(x):
    time.sleep(20)
    return x * 2
"""


def test_a_run_that_overfills_a_cache_is_stopped(tmp_path, monkeypatch):
    """While a run goes, a cache it may write holds at most RUN_CACHE_BYTES: past it the
    grader stops the run, then trims the cache."""
    course = load_course(clone_course(MINI, tmp_path / "course"))
    shared = tmp_path / "jax-cache"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(shared))
    (course.exercises_dir / "01_demo.py").write_text(FILLS_ITS_CACHE)
    graded = grade(course, course.exercises[:1], course.exercises_dir, only=["test_double_eager"])
    (check,) = graded.results[0].checks
    assert "compiled programs and was stopped" in (check.message or ""), check
    assert disk_usage(shared) <= caches.CACHE_BYTES
