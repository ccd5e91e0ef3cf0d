"""The checks' shared fixtures (`ex`: the learner's module; `tell`) and markers (`task`).

They live in kata.checking.fixtures, so the grader and any course built on it share one copy.
"""

from kata.checking.fixtures import ex, pytest_configure, tell  # noqa: F401
