"""A submission that forges its verdict is graded as failed, never as passed.

The learner's module runs in a process of its own (kata.learner_side.learner_process): what it
patches there cannot reach the judge, and patching what kata's probes rely on is named.
"""

import pytest

from kata.course import load_course
from kata.supervisor.runner import grade

from .helpers import FORGERIES, REPO, assert_nothing_forged, forged_stubs

pytestmark = pytest.mark.slow

# The forgeries that patch what the learner's process measures with, which it reports.
TAMPERING = {
    "numpy_always_close",
    "pytest_reports_passed",
    "check_assertions_replaced",
    "check_assertions_edited_in_place",
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_stub_passes_no_check_the_stub_fails(
    tmp_path, forgery, stub_passes, stub_failures
):
    course = load_course(REPO)
    folder = forged_stubs(REPO, tmp_path / forgery, FORGERIES[forgery])
    # The whole course in one run, as `kata check` grades it, by the checks the stub fails.
    grading = grade(course, list(course.exercises), folder, only=stub_failures)
    assert_nothing_forged(grading, stub_passes, stub_failures)
    if forgery in TAMPERING:
        messages = {c.message for r in grading.results for c in r.checks}
        assert any("changed the grader's own modules" in m for m in messages), messages


def test_a_solution_that_uses_numpy_for_a_constant_still_passes(tmp_path):
    course = load_course(REPO)
    exercise = course.resolve("01")
    folder = tmp_path / "numpy_constant"
    folder.mkdir()
    reference = (REPO / "solutions" / exercise.filename).read_text()
    (folder / exercise.filename).write_text(
        "import numpy as np\nHALF = np.float32(0.5)\n" + reference
    )
    assert grade(course, [exercise], folder).passed
