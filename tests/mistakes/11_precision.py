"""Wrong answers a learner writes for 11_precision, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show. `CORRECT` lists other right
answers, each appended the same way, that must pass every check.
"""

MISTAKES = [
    {
        "name": "bfloat16 matmul cast to float32 afterwards: the sums are already rounded",
        "advice": None,
        "code": """
def matmul_f32(a, b):
    return (a @ b).astype(jnp.float32)
""",
        # Judged by its program under jit, the same on every JAX (0.10.2 passed its values).
        "fails": ["test_matmul_f32_under_jit", "test_matmul_f32_sums_in_float32"],
        "says": "whose result is bf16",
    },
    {
        "name": "a plain bfloat16 matmul",
        "advice": None,
        "code": """
def matmul_f32(a, b):
    return a @ b
""",
        "fails": [
            "test_matmul_f32_returns_float32",
            "test_matmul_f32_sums_in_float32",
            "test_matmul_f32_under_jit",
        ],
    },
    {
        "name": "the matmul done in float16, as torch.autocast does on GPUs",
        "advice": None,
        "code": """
def matmul_f32(a, b):
    return (a.astype(jnp.float16) @ b.astype(jnp.float16)).astype(jnp.float32)
""",
        "fails": ["test_matmul_f32_sums_in_float32", "test_matmul_f32_under_jit"],
    },
    {
        "name": "the factor turned into a NumPy float64",
        "advice": "a NumPy call on a traced value",
        "code": """
import numpy as np


def scale(x, s):
    return x * np.float64(s)
""",
        "fails": ["test_scale_under_jit", "test_scale_keeps_dtype"],
        "raises": "TracerArrayConversionError",
    },
    {
        "name": "x * s with no thought for the dtype",
        "advice": None,
        "code": """
def scale(x, s):
    return x * s
""",
        "fails": ["test_scale_keeps_dtype", "test_scale_under_jit"],
    },
    {
        "name": "float(s), the way a config value is read in PyTorch",
        "advice": "a traced value turned into a Python number",
        "code": """
def scale(x, s):
    return x * float(s)
""",
        "fails": ["test_scale_under_jit"],
        "raises": "ConcretizationTypeError",
    },
    {
        "name": "jax.lax.mul, which does not promote mixed dtypes",
        "advice": "never promote",
        "code": """
def scale(x, s):
    return jax.lax.mul(x, s)
""",
        "fails": ["test_scale_keeps_dtype", "test_scale_under_jit"],
        "raises": "TypeError",
    },
    {
        "name": "scale computed in float32 and not cast back",
        "advice": None,
        "code": """
def scale(x, s):
    return x.astype(jnp.float32) * s
""",
        "fails": ["test_scale_keeps_dtype", "test_scale_under_jit"],
    },
    {
        "name": "naive log(sum(exp(x)))",
        "advice": None,
        "code": """
def logsumexp(x):
    return jnp.log(jnp.sum(jnp.exp(x), axis=-1))
""",
        "fails": ["test_logsumexp_of_large_inputs", "test_logsumexp_keeps_dtype"],
    },
    {
        "name": "one max over the whole array instead of each row's",
        "advice": None,
        "code": """
def logsumexp(x):
    largest = jnp.max(x)
    return largest + jnp.log(jnp.sum(jnp.exp(x - largest), axis=-1))
""",
        "fails": ["test_logsumexp_of_large_inputs"],
        "says": "shift each row by its own max",
    },
    {
        "name": "the max subtracted and never added back",
        "advice": None,
        "code": """
def logsumexp(x):
    largest = jnp.max(x, axis=-1, keepdims=True)
    return jnp.log(jnp.sum(jnp.exp(x - largest), axis=-1))
""",
        "fails": ["test_logsumexp_of_moderate_inputs", "test_logsumexp_of_large_inputs"],
    },
    {
        "name": "summed over every axis, not the last one",
        "advice": None,
        "code": """
def logsumexp(x):
    largest = jnp.max(x)
    return largest + jnp.log(jnp.sum(jnp.exp(x - largest)))
""",
        "fails": ["test_logsumexp_of_moderate_inputs", "test_logsumexp_of_large_inputs"],
    },
    {
        "name": "computed in float32 and returned in float32 for bfloat16 input",
        "advice": None,
        "code": """
def logsumexp(x):
    return jax.nn.logsumexp(x.astype(jnp.float32), axis=-1)
""",
        "fails": ["test_logsumexp_keeps_dtype"],
    },
    {
        "name": "scale cast back with torch's .to(dtype)",
        "advice": "`.to()` is a torch.Tensor method",
        "code": """
def scale(x, s):
    return (x * s).to(x.dtype)
""",
        "fails": ["test_scale_keeps_dtype", "test_scale_under_jit"],
        "raises": "AttributeError",
        "explains": "a cast and a move",
    },
    {
        "name": "logsumexp widened to float64, silently float32 without jax_enable_x64",
        "advice": None,
        "code": """
def logsumexp(x):
    wide = x.astype(jnp.float64)
    largest = jnp.max(wide, axis=-1, keepdims=True)
    total = jnp.sum(jnp.exp(wide - largest), axis=-1)
    return (jnp.squeeze(largest, axis=-1) + jnp.log(total)).astype(x.dtype)
""",
        "fails": ["test_logsumexp_asks_for_no_float64"],
        "says": "jax_enable_x64",
    },
    {
        "name": "matmul_f32 summed in float64, silently float32 without jax_enable_x64",
        "advice": None,
        "code": """
def matmul_f32(a, b):
    return jnp.matmul(a.astype(jnp.float64), b.astype(jnp.float64)).astype(jnp.float32)
""",
        "fails": ["test_matmul_f32_asks_for_no_float64"],
        "says": "jax_enable_x64",
    },
    {
        # XLA on a CPU may drop the bfloat16 rounding of the products: the values alone pass.
        "name": "matmul_f32 multiplies in bfloat16 and sums the products in float32",
        "advice": None,
        "code": """
@jax.jit
def matmul_f32(a, b):
    return jnp.sum(a[:, :, None] * b[None, :, :], axis=1, dtype=jnp.float32)
""",
        "fails": ["test_matmul_f32_under_jit"],
        "says": "computes in 16 bits",
    },
    {
        # Exact for the checks' N(0, 1) inputs; infinite past float16's 65504.
        "name": "matmul_f32 casts its inputs to float16 before a float32 matmul",
        "advice": None,
        "code": """
def matmul_f32(a, b):
    return jnp.matmul(
        a.astype(jnp.float16), b.astype(jnp.float16), preferred_element_type=jnp.float32
    )
""",
        "fails": ["test_matmul_f32_under_jit"],
        "says": "stablehlo.convert",
    },
    {
        # Finite wherever a row's entries lie within 88 of their mean; the checks' row of
        # zeros with one entry of 500 to 9000 overflows every time.
        "name": "logsumexp shifted by each row's mean instead of its max",
        "advice": None,
        "code": """
def logsumexp(x):
    wide = x.astype(jnp.float32)
    centre = jnp.mean(wide, axis=-1, keepdims=True)
    return (centre[..., 0] + jnp.log(jnp.sum(jnp.exp(wide - centre), axis=-1))).astype(x.dtype)
""",
        "fails": ["test_logsumexp_of_large_inputs", "test_logsumexp_keeps_dtype"],
        "says": "shifted by the row's mean or its first entry",
    },
    {
        "name": "logsumexp shifted by each row's first entry instead of its max",
        "advice": None,
        "code": """
def logsumexp(x):
    wide = x.astype(jnp.float32)
    centre = wide[..., :1]
    return (centre[..., 0] + jnp.log(jnp.sum(jnp.exp(wide - centre), axis=-1))).astype(x.dtype)
""",
        "fails": ["test_logsumexp_of_large_inputs", "test_logsumexp_keeps_dtype"],
        "says": "shifted by the row's mean or its first entry",
    },
]

CORRECT = [
    {
        "name": "inputs cast to float32 before an ordinary matmul",
        "code": """
def matmul_f32(a, b):
    return a.astype(jnp.float32) @ b.astype(jnp.float32)
""",
    },
    {
        "name": "einsum with a float32 result; the factor cast to x's dtype first",
        "code": """
def matmul_f32(a, b):
    return jnp.einsum("nk,km->nm", a, b, preferred_element_type=jnp.float32)


def scale(x, s):
    return x * jnp.asarray(s, dtype=x.dtype)
""",
    },
    {
        "name": "JAX's own logsumexp",
        "code": """
def logsumexp(x):
    return jax.nn.logsumexp(x, axis=-1)
""",
    },
    {
        "name": "logsumexp with the max trick in x's own dtype",
        "code": """
def logsumexp(x):
    largest = jnp.max(x, axis=-1)
    return largest + jnp.log(jnp.sum(jnp.exp(x - largest[..., None]), axis=-1))
""",
    },
]
