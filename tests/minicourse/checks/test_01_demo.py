"""Checks that call the learner's functions the ways a real course does."""

import jax
import jax.numpy as jnp
import pytest


@pytest.mark.task("double")
def test_double_eager(ex):
    """double: doubles eagerly"""
    assert float(ex.double(jnp.float32(2.0))) == 4.0, "double(2.0) should be 4.0"


@pytest.mark.task("double")
def test_double_jit(ex):
    """double: works under jax.jit"""
    assert float(jax.jit(ex.double)(jnp.float32(3.0))) == 6.0, "jit(double)(3.0) should be 6.0"


@pytest.mark.task("draw")
def test_draw_with_key_reuse_checker(ex):
    """draw: two different numbers from one key, no key reused"""
    with jax.debug_key_reuse(True):
        a, b = jax.jit(ex.draw)(jax.random.key(0))
    assert float(a) != float(b), "the two draws should differ"
