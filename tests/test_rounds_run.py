"""A loop's rounds are counted against the reference's, and named only where they differ."""

import numpy as np

from kata.checking.expect import rounds_matched, rounds_said


def halving(start: np.ndarray, rounds: int) -> np.ndarray:
    """A loop whose every round halves its carry: each count of rounds gives another value."""
    return start * 0.5**rounds


START = np.array([0.3, -1.7, 2.9])


def reference_for(rounds: int) -> np.ndarray:
    return halving(START, rounds)


def test_a_result_is_counted_as_the_rounds_it_holds():
    assert rounds_matched(halving(START, 3), reference_for, asked=4) == 3
    assert rounds_matched(halving(START, 5), reference_for, asked=4) == 5
    assert rounds_matched(START, reference_for, asked=1) == 0


def test_a_right_count_is_counted_as_asked():
    # the look-alike: a right answer is its own count, never another
    assert rounds_matched(halving(START, 4), reference_for, asked=4) == 4


def test_a_wrong_body_matches_no_count():
    # the look-alike: a loop whose round is wrong (no normalisation, another update) ran
    # the right count, and nothing is said of its rounds
    assert rounds_matched(START * 0.6**4, reference_for, asked=4) is None
    assert rounds_matched(halving(START, 9), reference_for, asked=4) is None  # past n + 2


def test_one_round_short_at_every_n_names_the_bound():
    said = rounds_said([(1, 0), (9, 8)], "v")
    assert "ran n - 1 rounds where n were asked (0 for n = 1, 8 for n = 9)" in said
    assert "runs upper - lower rounds, like Python's `range(lower, upper)`" in said
    assert "starting at 1" in said


def test_one_round_more_at_every_n_names_the_upper_bound():
    said = rounds_said([(1, 2), (9, 10)], "v")
    assert "ran n + 1 rounds where n were asked" in said and "upper bound of n + 1" in said


def test_no_rounds_at_every_n_says_both_causes():
    said = rounds_said([(1, 0), (9, 0)], "v")
    assert "no rounds at all, whatever n" in said
    assert "lower equal to upper" in said and "result is dropped" in said
    assert "`v = jax.lax.fori_loop(0, n, body, v)`" in said


def test_one_count_alone_is_not_called_a_pattern():
    # n = 1 alone cannot tell one round short from none at all
    said = rounds_said([(1, 0), (9, None)], "v")
    assert "0 for n = 1" in said and "whatever n" not in said and "n - 1" not in said


def test_counts_as_asked_or_unknown_say_nothing():
    assert rounds_said([(1, 1), (9, 9)], "v") == ""
    assert rounds_said([(1, None), (9, None)], "v") == ""
    assert rounds_said([(1, 1), (9, None)], "v") == ""
