"""An exercise's `host_devices` (course.toml): its learner's process, and only its, runs on
that many CPU devices, cold, warm and straight under pytest; the judge gets as many."""

import os
import subprocess
import sys

import pytest

from kata.course import load_course
from kata.servers import warm as warm_grading
from kata.servers.warm import WarmGrader, stop_worker, wait_for_worker
from kata.supervisor.judge_process import grading_environment
from kata.supervisor.runner import grade

from .helpers import start_worker_process

CONFTEST = "from kata.checking.fixtures import ex, pytest_configure, rng, tell  # noqa: F401\n"
# One check per exercise: what the learner's process sees, and what the judge has.
CHECKS = """
import jax
import pytest

from kata.checking.learner_calls import in_learner_process


@in_learner_process
def devices_seen(ex):
    return [len(jax.devices()), jax.devices()[0].platform]


@pytest.mark.task("f")
def test_devices(ex):
    count, platform = devices_seen(ex)
    assert [count, platform] == {want}, f"the learner's process saw {{count}} {{platform}}"
    assert len(jax.devices("cpu")) >= 4, "the judge has too few CPU devices"
"""
MANIFEST = """
[course]
title = "devices"

[[exercise]]
id = "01_plain"
title = "The machine's devices"
hints = ["One.", "Two."]

[[exercise]]
id = "02_many"
title = "Four CPU devices"
host_devices = 4
hints = ["One.", "Two."]
"""


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("devices")
    (root / "course.toml").write_text(MANIFEST)
    for folder in ("checks", "exercises"):
        (root / folder).mkdir()
    (root / "checks" / "conftest.py").write_text(CONFTEST)
    # The plain exercise sees what a fresh Python sees here: one CPU device, on a CPU.
    plain = subprocess.run(
        [sys.executable, "-c", "import jax; print(len(jax.devices()), jax.devices()[0].platform)"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    for exercise, want in (("01_plain", [int(plain[0]), plain[1]]), ("02_many", [4, "cpu"])):
        (root / "checks" / f"test_{exercise}.py").write_text(CHECKS.format(want=want))
        (root / "exercises" / f"{exercise}.py").write_text("def f():\n    return 0\n")
    return load_course(root)


def outcomes(grading):
    return {c.exercise: (c.passed, c.message) for r in grading.results for c in r.checks}


def test_an_exercise_gets_its_devices_and_the_others_keep_theirs_cold(course):
    graded = grade(course, list(course.exercises), course.exercises_dir)
    assert outcomes(graded) == {"01_plain": (True, ""), "02_many": (True, "")}


@pytest.mark.skipif(not warm_grading.worker_supported(), reason="needs fork and AF_UNIX")
def test_an_exercise_gets_its_devices_and_the_others_keep_theirs_warm(course, tmp_path):
    process, socket_path = start_worker_process(tmp_path, course.root)
    try:
        assert wait_for_worker(socket_path)
        warm = WarmGrader(socket_path, course.root, grading_environment(course.state_dir))
        for exercises in (list(course.exercises), [course.exercises[1]]):
            graded = grade(course, exercises, course.exercises_dir, warm=warm)
            assert warm.answered
            assert all(passed for passed, _ in outcomes(graded).values()), outcomes(graded)
    finally:
        stop_worker(socket_path)
        process.wait(timeout=30)


def test_straight_under_pytest_too(course):
    """As an IDE runs the checks: no grader, the learner's process started by the judge."""
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         str(course.checks_dir)],
        cwd=course.root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-3000:]
    assert "2 passed" in ran.stdout


PLACEMENT = """
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from kata.handoffs import wire

mesh = Mesh(np.array(jax.devices()), ("d",))
x = np.arange(32.0, dtype=np.float32).reshape(8, 4)


class LooksLikeAJaxArray:
    __module__ = "jax.fake"
    shape, sharding, addressable_shards = (8, 4), None, []

    def __array__(self, dtype=None, copy=None):
        return x


for value in (
    jax.device_put(x, NamedSharding(mesh, PartitionSpec("d"))),
    jax.device_put(x, NamedSharding(mesh, PartitionSpec())),
    jax.device_put(x),
    LooksLikeAJaxArray(),
):
    back = wire.decode(*wire.encode(value))
    assert np.array_equal(back, x)
    print(sorted(back.placement) if isinstance(back, wire.Placed) else None)
"""


def test_the_wire_carries_where_each_block_of_a_sharded_array_lies():
    ran = subprocess.run(
        [sys.executable, "-c", PLACEMENT], capture_output=True, text=True, timeout=300,
        env={**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
             "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    split, copied, one, fake = ran.stdout.splitlines()
    assert split == str([(d, ((d, d + 1), (0, 4))) for d in range(8)])
    assert copied == str([(d, ((0, 8), (0, 4))) for d in range(8)])
    assert one == fake == "None"  # one device, or not JAX's own array: plain data
