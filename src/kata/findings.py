"""What a check found when it failed, named, so that a hint can say which failure it answers.

A check's assertion raises `Finding(kind, message)`: the message speaks to the learner, the
kind travels with the verdict (`CheckResult.finding`) and is what a course's check hint
declares it answers (`answers = [...]` in `[exercise.check_hints]`, kata.learning.hints).
The kinds every check shares are named here; a check may name a finding of its own
(`Finding("scan's pair", ...)`). Any other assertion of a check is `OWN_TEST`, and an
error the learner's code raised has no finding: it is known by its exception and diagnosis.
"""

from __future__ import annotations

WRONG_VALUE = "wrong value"
YOUR_INPUT = "your input"  # a wrong value that is the call's own input (kata.checking.call_inputs)
WRONG_SHAPE = "wrong shape"
NOT_AN_ARRAY = "not an array"
CALLS_DISAGREE = "calls disagree"
INPUTS_CHANGED = "inputs changed"
OWN_TEST = "own test"

SHARED_FINDINGS = (WRONG_VALUE, YOUR_INPUT, WRONG_SHAPE, NOT_AN_ARRAY, CALLS_DISAGREE,
                   INPUTS_CHANGED, OWN_TEST)  # fmt: skip


class Finding(AssertionError):
    """A check's failed assertion, with the kind of failure it found."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def finding_of(error: BaseException) -> str:
    """The kind of a check's own failed assertion: its Finding's, else OWN_TEST."""
    return error.kind if isinstance(error, Finding) else OWN_TEST
