"""Wrong answers a learner writes for 06_pytrees, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show.

`CORRECT` lists other right answers, in the same format without `fails`: every check must
pass with them.
"""

MISTAKES = [
    {
        "name": "param_shapes loops over the top level, like a state_dict",
        "advice": "a container treated as an array",
        "code": """
def param_shapes(params):
    return {name: value.shape for name, value in params.items()}
""",
        "fails": ["test_param_shapes_any_structure"],
        "raises": "AttributeError",
        "explains": "a container treated as an array",
    },
    {
        "name": "the example's keys hard-coded, like a PyTorch state_dict",
        "advice": "the way a state_dict is read",
        "code": """
NAMES = ("w1", "b1", "w2", "b2")

def param_shapes(params):
    return {name: params[name].shape for name in NAMES}

def count_params(params):
    return sum(params[name].size for name in NAMES)

def sgd_update(params, grads, lr):
    return {name: params[name] - lr * grads[name] for name in NAMES}

def global_norm(tree):
    return jnp.sqrt(sum(jnp.sum(tree[name] ** 2) for name in NAMES))
""",
        "fails": [
            "test_param_shapes_any_structure",
            "test_param_shapes_with_linear",
            "test_count_params_any_structure",
            "test_count_params_with_linear",
            "test_sgd_update_any_structure",
            "test_sgd_update_with_linear",
            "test_global_norm_any_structure",
            "test_global_norm_with_linear",
        ],
        "raises": "KeyError",
    },
    {
        "name": "sgd_update writes into the caller's dict, like p -= lr * p.grad",
        "advice": None,
        "code": """
def sgd_update(params, grads, lr):
    for name in params:
        params[name] = params[name] - lr * grads[name]
    return params
""",
        "fails": [
            "test_sgd_update_leaves_inputs_unchanged",
            "test_sgd_update_any_structure",
            "test_sgd_update_leaves_any_structure_unchanged",
        ],
    },
    {
        "name": "sgd_update writes into the caller's nested dicts and lists",
        "advice": None,
        "code": """
def sgd_update(params, grads, lr):
    def update(p, g):
        for k in (p.keys() if isinstance(p, dict) else range(len(p))):
            if isinstance(p[k], (dict, list)):
                update(p[k], g[k])
            else:
                p[k] = p[k] - lr * g[k]

    update(params, grads)
    return params
""",
        "fails": [
            "test_sgd_update_leaves_inputs_unchanged",
            "test_sgd_update_any_structure",
            "test_sgd_update_leaves_any_structure_unchanged",
        ],
    },
    {
        "name": "global_norm forgets the square root",
        "advice": None,
        "code": """
def global_norm(tree):
    return sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(tree))
""",
        "fails": [
            "test_global_norm_example",
            "test_global_norm_any_structure",
            "test_global_norm_with_linear",
        ],
    },
    {
        "name": "global_norm adds up the norms of the leaves",
        "advice": None,
        "code": """
def global_norm(tree):
    return sum(jnp.linalg.norm(leaf) for leaf in jax.tree.leaves(tree))
""",
        "fails": [
            "test_global_norm_example",
            "test_global_norm_any_structure",
            "test_global_norm_with_linear",
        ],
    },
    {
        "name": "Linear is a dataclass that is not registered as a pytree",
        "advice": None,
        "code": """
import dataclasses

@dataclasses.dataclass
class Linear:
    w: jax.Array
    b: jax.Array
""",
        "fails": [
            "test_linear_is_a_pytree",
            "test_linear_passes_through_jit",
            "test_linear_passes_through_grad",
            "test_param_shapes_with_linear",
            "test_count_params_with_linear",
            "test_sgd_update_with_linear",
            "test_global_norm_with_linear",
        ],
    },
    {
        "name": "Linear registered with an unflatten that swaps w and b",
        "advice": None,
        "code": """
import dataclasses

@dataclasses.dataclass
class Linear:
    w: jax.Array
    b: jax.Array

jax.tree_util.register_pytree_node(
    Linear, lambda layer: ((layer.w, layer.b), None), lambda _, leaves: Linear(*leaves[::-1])
)
""",
        "fails": ["test_linear_is_a_pytree", "test_linear_passes_through_jit"],
    },
    {
        "name": "count_params counts the arrays, not the numbers in them",
        "advice": None,
        "code": """
def count_params(params):
    return len(jax.tree.leaves(params))
""",
        "fails": [
            "test_count_params_example",
            "test_count_params_any_structure",
            "test_count_params_with_linear",
        ],
    },
    {
        "name": "param_shapes returns a flat list of shapes",
        "advice": None,
        "code": """
def param_shapes(params):
    return [leaf.shape for leaf in jax.tree.leaves(params)]
""",
        "fails": [
            "test_param_shapes_example",
            "test_param_shapes_any_structure",
            "test_param_shapes_with_linear",
        ],
    },
    {
        "name": "a hand-written walk that turns tuples into lists",
        "advice": None,
        "code": """
def param_shapes(params):
    if isinstance(params, dict):
        return {k: param_shapes(v) for k, v in params.items()}
    if isinstance(params, (list, tuple)):
        return [param_shapes(v) for v in params]
    if isinstance(params, Linear):
        return Linear(w=params.w.shape, b=params.b.shape)
    return params.shape
""",
        "fails": ["test_param_shapes_any_structure", "test_param_shapes_with_linear"],
    },
    {
        "name": "count_params with torch's p.numel()",
        "advice": "`.numel()` is a torch.Tensor method",
        "code": """
def count_params(params):
    return sum(p.numel() for p in jax.tree.leaves(params))
""",
        "fails": ["test_count_params_example"],
        "raises": "AttributeError",
        "explains": "`.numel()`",
    },
    {
        "name": "sgd_update with torch's in-place p.sub_",
        "advice": "A trailing underscore marks",
        "code": """
def sgd_update(params, grads, lr):
    return jax.tree.map(lambda p, g: p.sub_(lr * g), params, grads)
""",
        "fails": ["test_sgd_update_example"],
        "raises": "AttributeError",
        "explains": "in place",
    },
]

CORRECT = [
    {
        "name": "Linear with register_pytree_node",
        "code": """
import dataclasses

@dataclasses.dataclass
class Linear:
    w: jax.Array
    b: jax.Array

jax.tree_util.register_pytree_node(
    Linear, lambda layer: ((layer.w, layer.b), None), lambda _, leaves: Linear(*leaves)
)
""",
    },
    {
        "name": "Linear with register_pytree_node_class, flax-style methods, leaves as (b, w)",
        "code": """
import dataclasses

@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass(frozen=True)
class Linear:
    w: jax.Array
    b: jax.Array

    def tree_flatten(self):
        return (self.b, self.w), ()

    @classmethod
    def tree_unflatten(cls, aux, children):
        b, w = children
        return cls(w=w, b=b)
""",
    },
    {
        "name": "Linear with register_dataclass applied after the class statement",
        "code": """
import dataclasses

@dataclasses.dataclass(frozen=True)
class Linear:
    w: jax.Array
    b: jax.Array

Linear = jax.tree_util.register_dataclass(Linear, data_fields=["w", "b"], meta_fields=[])
""",
    },
    {
        "name": "a hand-written walk over dicts, lists, tuples and Linear",
        "code": """
def _map(f, tree, *rest):
    if isinstance(tree, dict):
        return {k: _map(f, v, *(r[k] for r in rest)) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_map(f, v, *(r[i] for r in rest)) for i, v in enumerate(tree))
    if isinstance(tree, Linear):
        return Linear(
            w=_map(f, tree.w, *(r.w for r in rest)), b=_map(f, tree.b, *(r.b for r in rest))
        )
    return f(tree, *rest)

def _leaves(tree):
    found = []
    _map(found.append, tree)
    return found

def param_shapes(params):
    return _map(jnp.shape, params)

def count_params(params):
    return jnp.sum(jnp.array([leaf.size for leaf in _leaves(params)]))

def sgd_update(params, grads, lr):
    return _map(lambda p, g: p - lr * g, params, grads)

def global_norm(tree):
    return jnp.sqrt(sum(jnp.vdot(leaf, leaf) for leaf in _leaves(tree)))
""",
    },
    {
        "name": "tree_reduce and tree_util spellings",
        "code": """
def count_params(params):
    return jax.tree_util.tree_reduce(lambda total, leaf: total + leaf.size, params, 0)

def sgd_update(params, grads, lr):
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)

def global_norm(tree):
    squares = jax.tree_util.tree_map(lambda leaf: jnp.sum(jnp.square(leaf)), tree)
    return jnp.sqrt(jax.tree_util.tree_reduce(jnp.add, squares))
""",
    },
]
