"""Named numbers a check measures (`kata.results.MEASURES`), recorded under the check that
is running.

`measure("speedup", 29.0)` from anywhere in a check: the grader reads each pair back from
the check's report (kata.judge.pytest_plugin) into `CheckResult.measurements`, which the
JSON, Gradescope, the gradebook, the class report and the course's recap read, as numbers,
never parsed out of a line. `kata.checking.fixtures.pytest_configure` registers this module
as a plugin, so every course's checks know which check is running.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kata.results import MEASUREMENT_PROPERTY, MEASURES

# The check whose body is running (pytest's "call" phase), if any.
_running: list[pytest.Item] = []


@contextmanager
def running(item: pytest.Item) -> Iterator[None]:
    """Measurements made in the block go to `item`'s `user_properties`."""
    _running.append(item)
    try:
        yield
    finally:
        _running.remove(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with running(item):
        yield


def measure(name: str, value: float) -> None:
    """Record `value` as the running check's measurement `name`; outside a check's body
    (a fixture, a plain script) there is nothing to record it under."""
    if name not in MEASURES:
        raise ValueError(f"no measure is named {name!r}: kata.results.MEASURES lists them")
    if _running:
        _running[-1].user_properties.append((MEASUREMENT_PROPERTY, (name, float(value))))
