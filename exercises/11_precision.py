"""11 · Dtypes on accelerators.

In PyTorch you pick a dtype with `.to(torch.bfloat16)` or let `torch.autocast` choose one
per operation, and a NumPy float64 scalar mixed into a float32 tensor is quietly
absorbed. JAX has no autocast: every operation's result dtype follows from its inputs'
dtypes by JAX's promotion rules, so you say where precision goes. A bfloat16 matmul
returns bfloat16 unless you ask for a float32 result (`preferred_element_type=`); a
strongly typed NumPy or float32 scalar promotes a bfloat16 array to float32, while a
Python float does not (it is "weak"); and `exp` of a large float overflows in any dtype,
so a reduction like log-sum-exp must be written to stay in range.

Rule to remember: know each result's dtype: ask for wider accumulation where sums need
it, cast back to the input's dtype where the caller expects it, and keep intermediate
values in range.

Deeper: https://docs.jax.dev/en/latest/type_promotion.html and
https://docs.jax.dev/en/latest/default_dtypes.html
"""

import jax.numpy as jnp
import numpy as np


def matmul_f32(a, b):
    """`a @ b` for bfloat16 `a` and `b`, summed and returned in float32."""
    # TODO: a product of two bfloat16 matrices is a bfloat16 matrix: every sum has been
    # rounded to bfloat16's 8 bits before this cast, which cannot bring them back. Make
    # the matmul itself produce float32.
    return (a @ b).astype(jnp.float32)


def scale(x, s):
    """`x * s` in `x`'s dtype, for a Python float, NumPy scalar or 0-d array `s`."""
    # TODO: a NumPy float64 is strongly typed: it turns a bfloat16 `x` into float32 (and
    # under jax.jit NumPy cannot read a traced `s` at all). The result must keep `x`'s dtype.
    return x * np.float64(s)


def logsumexp(x):
    """`log(sum(exp(x)))` over the last axis, finite for large inputs, in `x`'s dtype."""
    # TODO: exp(100) is already inf in float32 and exp(-110) is 0, so this formula gives
    # inf or -inf for inputs that are large in magnitude. Keep exp's argument in range.
    return jnp.log(jnp.sum(jnp.exp(x), axis=-1))
