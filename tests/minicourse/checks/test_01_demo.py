"""Checks that call the learner's functions the ways a real course does."""

import jax
import numpy as np
import pytest

from kata.checking.learner_calls import in_learner_process


@pytest.mark.task("double")
def test_double_eager(ex):
    """double: doubles eagerly"""
    assert float(ex.double(np.float32(2.0))) == 4.0, "double(2.0) should be 4.0"


@pytest.mark.task("double")
def test_double_jit(ex):
    """double: works under jax.jit"""
    assert float(ex.double.jit()(np.float32(3.0))) == 6.0, "jit(double)(3.0) should be 6.0"


@in_learner_process
def draws_checking_key_reuse(ex):
    with jax.debug_key_reuse(True):
        a, b = jax.jit(ex.draw)(jax.random.key(0))
    return float(a), float(b)


@pytest.mark.task("draw")
def test_draw_with_key_reuse_checker(ex):
    """draw: two different numbers from one key, no key reused"""
    a, b = draws_checking_key_reuse(ex)
    assert a != b, "the two draws should differ"
