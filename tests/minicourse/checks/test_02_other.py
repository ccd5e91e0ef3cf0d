"""A second exercise, to see one crash not stop the others from being graded."""

import pytest


@pytest.mark.task("answer")
def test_answer(ex):
    """answer: is 42"""
    assert ex.answer() == 42, f"answer() should be 42, got {ex.answer()!r}"
