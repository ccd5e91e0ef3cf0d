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

import jax
import jax.numpy as jnp


def matmul_f32(a, b):
    """`a @ b` for bfloat16 `a` and `b`, summed and returned in float32."""
    return jnp.matmul(a, b, preferred_element_type=jnp.float32)


def scale(x, s):
    """`x * s` in `x`'s dtype, for a Python float, NumPy scalar or 0-d array `s`."""
    return (x * s).astype(x.dtype)


def logsumexp(x):
    """`log(sum(exp(x)))` over the last axis, finite for large inputs, in `x`'s dtype."""
    wide = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    # The largest value of each row: exp(x - largest) <= 1 never overflows, and the
    # largest term is exp(0) = 1, so the sum never underflows to 0 either.
    largest = jax.lax.stop_gradient(jnp.max(wide, axis=-1, keepdims=True))
    total = jnp.sum(jnp.exp(wide - largest), axis=-1)
    return (jnp.squeeze(largest, axis=-1) + jnp.log(total)).astype(x.dtype)
