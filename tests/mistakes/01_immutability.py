"""Wrong answers a learner writes for 01_immutability, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show.
"""

MISTAKES = [
    {
        "name": "scatter_add with torch's index_add_",
        "advice": ".at[index].add(values)",
        "code": """
def scatter_add(x, idx, values):
    return x.index_add_(0, idx, values)
""",
        "fails": ["test_scatter_add_accumulates_repeated_indices"],
        "raises": "AttributeError",
        "explains": "index_add_",
    },
    {
        "name": "scale_row forgets .multiply: m.at[i] * factor",
        "advice": "`.at[i]` only names where to write",
        "code": """
def scale_row(m, i, factor):
    return m.at[i] * factor
""",
        "fails": ["test_scale_row_scales_only_that_row"],
        "raises": "TypeError",
        "explains": "only names where to write",
    },
    {
        "name": "set_first clones first, the PyTorch way",
        "advice": "`.clone()` is a torch.Tensor method",
        "code": """
def set_first(x, value):
    y = x.clone()
    return y.at[0].set(value)
""",
        "fails": ["test_set_first_under_jit"],
        "raises": "AttributeError",
        "explains": "`.clone()`",
    },
    {
        "name": "NumPy fancy-index += drops repeated indices",
        "advice": None,
        "code": """
import numpy as np

def scatter_add(x, idx, values):
    out = np.array(x)
    out[np.asarray(idx)] += np.asarray(values)
    return jnp.asarray(out)
""",
        "fails": ["test_scatter_add_accumulates_repeated_indices", "test_scatter_add_under_jit"],
    },
    {
        "name": "in-place write, the PyTorch way",
        "advice": "JAX arrays never change",
        "code": """
def set_first(x, value):
    x[0] = value
    return x
""",
        "fails": ["test_set_first_returns_updated_copy"],
        "raises": "TypeError",
    },
    {
        "name": "scale_row scales every row",
        "advice": None,
        "code": """
def scale_row(m, i, factor):
    return m * factor
""",
        "fails": ["test_scale_row_scales_only_that_row", "test_scale_row_under_jit"],
    },
    {
        "name": "zero_diagonal zeroes only the first element",
        "advice": None,
        "code": """
def zero_diagonal(m):
    return m.at[0, 0].set(0.0)
""",
        "fails": ["test_zero_diagonal_zeroes_only_the_diagonal"],
    },
    {
        "name": "zero_diagonal written for the one size tried",
        "advice": None,
        "code": """
def zero_diagonal(m):
    return m.at[jnp.arange(5), jnp.arange(5)].set(0.0)
""",
        "fails": ["test_zero_diagonal_under_jit"],
    },
    {
        "name": "set_first drops what .at[0].set returns, as if it wrote in place",
        "advice": "`x = x.at[0].set(value)`",
        "code": """
def set_first(x, value):
    x.at[0].set(value)
    return x
""",
        "fails": ["test_set_first_returns_updated_copy", "test_set_first_under_jit"],
        "says": "Your result is your first argument, unchanged",
    },
    {
        "name": "zero_diagonal zeroes a copy from m.diagonal(), as if it were a view",
        "advice": None,
        "code": """
def zero_diagonal(m):
    diagonal = m.diagonal()
    diagonal = diagonal.at[:].set(0.0)
    return m
""",
        "fails": ["test_zero_diagonal_zeroes_only_the_diagonal", "test_zero_diagonal_under_jit"],
        "says": "Your result is your first argument, unchanged",
    },
    {
        "name": "scale_row counts rows from 1 and scales the row above",
        "advice": None,
        "code": """
def scale_row(m, i, factor):
    return m.at[i - 1].multiply(factor)
""",
        "fails": ["test_scale_row_scales_only_that_row"],
        "says": "the change went to other elements than the answer's",
    },
]
