"""A wrong value is told what relates it to the expected one, where one thing relates every
element (kata.checking.expect.how_it_is_off): a factor (the batch a sum was not divided by,
the devices psum added over, Bessel's correction), the sign, an offset, swapped axes; and
nothing where nothing does."""

import numpy as np
import pytest

from kata.checking.expect import assert_close, how_it_is_off

RNG = np.random.default_rng(7)
WANT = RNG.normal(size=(8, 5)) + 3.0  # no element near 0
SQUARE = RNG.normal(size=(4, 4))


@pytest.mark.parametrize(
    "got, says",
    [
        (WANT * 16, "16× the expected: a sum where a mean was meant"),
        (WANT * 8, "8× the expected"),
        (WANT / 16, "1/16 of the expected: a mean where a sum was meant"),
        (WANT * 64 / 63, "64/63 of the expected: Bessel's correction"),
        (WANT * np.sqrt(64 / 63), "sqrt(64/63) of the expected: a standard deviation"),
        (-WANT, "sign flipped"),
        (WANT - 2.5, "off by the same -2.5"),
        (WANT * 1.7, "1.7× the expected: one factor off for all of them"),
        # float32's rounding leaves the factor plain
        ((WANT * 16).astype(np.float32).astype(np.float64), "16× the expected"),
    ],
)
def test_a_wrong_value_is_told_the_one_thing_that_relates_it(got, says):
    assert says in how_it_is_off(got, WANT)


def test_swapped_axes_are_told():
    assert "transposed" in how_it_is_off(SQUARE.T, SQUARE)


@pytest.mark.parametrize(
    "got, want",
    [
        (WANT + RNG.normal(size=WANT.shape), WANT),  # just wrong
        (np.where(np.arange(40).reshape(8, 5) == 3, 0.0, WANT * 2), WANT),  # one element off
        (WANT * 2, np.where(np.arange(40).reshape(8, 5) == 3, 0.0, WANT)),  # a 0 expected
        (np.array([2.0]), np.array([1.0])),  # one element says nothing
        (WANT * np.linspace(1, 2, 40).reshape(8, 5), WANT),  # a factor that varies
        (np.full((8, 5), np.nan), WANT),
    ],
)
def test_a_wrong_value_nothing_relates_is_told_nothing(got, want):
    assert how_it_is_off(got, want) == ""


def test_the_check_s_message_carries_it():
    with pytest.raises(AssertionError, match=r"; every value is 16× the expected"):
        assert_close(WANT * 16, WANT, "loss(params, x, y)")


START = RNG.normal(size=(8, 5))
STEP = RNG.normal(size=(8, 5)) * 0.1 + 0.5


@pytest.mark.parametrize(
    "step, says",
    [
        (STEP * 8, "its step is 8× the expected one: gradients summed over 8"),
        (STEP / 10, "its step is 1/10 of the expected one: a learning rate 10× smaller"),
        (-STEP, "its step goes the other way"),
        (STEP * 0.37, "its step is 0.37× the expected one"),
    ],
)
def test_a_step_off_by_one_factor_is_told_so(step, says):
    with pytest.raises(AssertionError) as raised:
        assert_close(START + step, START + STEP, "step(params)['w1']", moved_from=START)
    assert says in str(raised.value)


def test_a_step_nothing_relates_is_told_nothing_of_it():
    wrong = START + STEP + RNG.normal(size=STEP.shape)
    with pytest.raises(AssertionError) as raised:
        assert_close(wrong, START + STEP, "step(params)['w1']", moved_from=START)
    assert "its step" not in str(raised.value)


def test_a_step_read_off_float32_params_is_told_its_factor_through_their_rounding():
    """Adam's steps at lr 1e-3 on params near 1: float32 rounds each new param by ~6e-8, a
    relative 1e-4 of a 1e-3 step."""
    start = (RNG.normal(size=(8, 5)) + 2.0).astype(np.float32).astype(np.float64)
    want = start + 1e-2 * np.sign(RNG.normal(size=start.shape))
    got = (start + 1e-3 * np.sign(want - start)).astype(np.float32).astype(np.float64)
    with pytest.raises(AssertionError, match="its step is 1/10 of the expected one"):
        assert_close(got, want, "adam_step(...)['w1']", moved_from=start)


def test_a_step_with_a_few_elements_near_zero_is_still_told_its_factor():
    """A drawn gradient has elements near 0 at times: the factor is read off the others and
    held on them all (15's psum for pmean, whose ×8 one CI run did not say)."""
    from kata.checking.expect import how_the_step_is_off

    want = RNG.normal(size=(8, 16)) * 0.01
    want[0, :3] = [1e-9, -2e-9, 0.0]
    slack = 6e-8  # float32's rounding of params near 1
    assert "its step is 8× the expected one" in how_the_step_is_off(want * 8, want, slack)
    wrong = want * 8
    wrong[0, 0] = 0.5  # an element near 0 in the expected step, far off in this one
    assert how_the_step_is_off(wrong, want, slack) == ""
    mostly_zero = np.zeros((8, 16))
    mostly_zero[0, :4] = want[1, :4]
    assert how_the_step_is_off(mostly_zero * 8, mostly_zero, slack) == ""
