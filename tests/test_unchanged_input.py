"""A wrong value that is the call's own input is told so, and never claimed otherwise."""

import numpy as np
import pytest

from kata.checking import call_inputs
from kata.checking.expect import as_float32, assert_close, random_array

UNCHANGED = "Your result is"


def verdict(result, expected, call="f(x)") -> str:
    with pytest.raises(AssertionError) as failed:
        assert_close(result, expected, call)
    return str(failed.value)


def test_a_result_that_is_the_input_unchanged_says_so_and_why():
    x = random_array(np.random.default_rng(0), 7)
    returned = np.asarray(x).copy()  # as it comes back over the wire: a new object
    call_inputs.remember((x, np.float32(3.5)), {}, returned)
    expected = np.asarray(x, np.float64).copy()
    expected[0] = 3.5
    message = verdict(returned, expected, "set_first(x, 3.5)")
    assert "Your result is your first argument, unchanged" in message
    assert "`x = x.at[i].set(v)`" in message and "`p -= lr * g`" in message
    assert "diagonal()" in message


def test_a_leaf_of_a_pytree_argument_is_named_by_its_place():
    rng = np.random.default_rng(1)
    params = {"w1": random_array(rng, 3, 2), "b1": random_array(rng, 2)}
    lr = np.float32(0.1)
    returned = {k: np.asarray(v).copy() for k, v in params.items()}
    call_inputs.remember((params, lr), {}, returned)
    message = verdict(returned["w1"], np.asarray(params["w1"]) - 1.0)
    assert "Your result is your first argument's ['w1'], unchanged" in message


def test_a_result_unchanged_only_where_the_answer_changes_says_where():
    m = random_array(np.random.default_rng(2), 5, 5)
    wrong_row = np.asarray(m, np.float64).copy()
    wrong_row[1] *= 4.0  # the update went to another row
    returned = wrong_row.astype(np.float32)
    call_inputs.remember((m, 2, 4.0), {}, returned)
    expected = np.asarray(m, np.float64).copy()
    expected[2] *= 4.0
    message = verdict(returned, expected, "scale_row(m, 2, 4.0)")
    assert (
        "Wherever the answer differs from your first argument (5 of 25 elements, the first "
        "at index (2, 0)), your result still holds its values; and it changed 5 elements "
        "the answer keeps as they were (the first at index (1, 0)): the change went to other "
        "elements than the answer's"
    ) in message
    assert "in place" not in message  # nothing was updated in place


@pytest.mark.parametrize(
    "case",
    [
        "not returned by a call",
        "changed where it had to, wrongly",
        "equal to an input of whole numbers",
        "another shape than every input",
        "a copy the check made of the result",
    ],
)
def test_nothing_is_claimed_where_the_result_is_not_the_input(case):
    rng = np.random.default_rng(3)
    x = random_array(rng, 6)
    expected = np.asarray(x, np.float64) * 2
    returned = np.asarray(x).copy()
    if case == "changed where it had to, wrongly":
        returned = returned * 3
    elif case == "equal to an input of whole numbers":
        x = as_float32(np.arange(6.0))
        expected, returned = np.arange(6.0) + 1, np.arange(6.0, dtype=np.float32)
    elif case == "another shape than every input":
        returned, expected = np.concatenate([returned, returned]), np.zeros(12)
    if case != "not returned by a call":
        call_inputs.remember((x,), {}, returned)
    if case == "a copy the check made of the result":
        returned = returned.copy()
    message = verdict(returned, expected)
    assert "returned a wrong value" in message
    assert UNCHANGED not in message and "still holds" not in message


def test_only_the_latest_results_are_kept():
    x = random_array(np.random.default_rng(4), 4)
    first = np.asarray(x).copy()
    call_inputs.remember((x,), {}, first)
    for _ in range(call_inputs.REMEMBERED_RESULTS):
        call_inputs.remember((x,), {}, np.zeros(2))
    assert call_inputs.inputs_of(first) == []


def test_an_input_the_check_changes_after_the_call_is_compared_as_it_was_given():
    x = np.random.default_rng(5).normal(size=6)
    returned = x.astype(np.float32) * 2
    call_inputs.remember((x,), {}, returned)
    x[:] = returned  # the check reuses its NumPy buffer: the call was given other values
    assert UNCHANGED not in verdict(returned, np.zeros(6))


def test_an_inverted_mask_is_told_its_change_went_elsewhere_not_that_nothing_changed():
    x = random_array(np.random.default_rng(5), 8)
    returned = np.where(np.asarray(x) > 0, 0.0, np.asarray(x)).astype(np.float32)
    call_inputs.remember((x,), {}, returned)  # 08's gate as jnp.where(x > 0, 0, x)
    expected = np.where(np.asarray(x) > 0, np.asarray(x, np.float64), 0.0)
    message = verdict(returned, expected, "gate(x)")
    assert "Is a condition or mask inverted" in message
    assert "unchanged" not in message and "in place" not in message
