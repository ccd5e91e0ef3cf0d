"""Wrong answers a learner writes for 03_grad, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show. `CORRECT` lists other right
answers, each appended the same way, that must pass every check.
"""

MISTAKES = [
    {
        "name": "df passes grad a value, like loss.backward(): jax.grad(f(x))",
        "advice": "was given a value, not a function",
        "code": """
def df(x):
    return jax.grad(f(x))
""",
        "fails": ["test_df_is_the_first_derivative"],
        "raises": "TypeError",
        "explains": "given a value, not a function",
        "says": "your function received a traced value while the check batched it",
    },
    {
        "name": "df by hand, forgetting the chain rule",
        "advice": None,
        "code": """
def df(x):
    return 2 * jnp.sin(x)
""",
        "fails": ["test_df_is_the_first_derivative"],
    },
    {
        "name": "the first derivative passed off as the second",
        "advice": None,
        "code": """
d2f = jax.grad(f)
""",
        "fails": ["test_d2f_is_the_second_derivative"],
    },
    {
        "name": "d2f differentiates f twice side by side instead of nesting",
        "advice": None,
        "code": """
def d2f(x):
    return 2 * jax.grad(f)(x)
""",
        "fails": ["test_d2f_is_the_second_derivative"],
    },
    {
        "name": "dloss_db differentiates with respect to w, the first argument",
        "advice": None,
        "code": """
dloss_db = jax.grad(weighted_loss)
""",
        "fails": ["test_dloss_db_is_gradient_wrt_b"],
    },
    {
        "name": "d2f returns the gradient function instead of calling it",
        "advice": "a function returned where a value was expected",
        "code": """
def d2f(x):
    return jax.grad(jax.grad(f))
""",
        "fails": ["test_d2f_is_the_second_derivative"],
        "raises": "TypeError",
        "explains": "a function returned where a value was expected",
    },
    {
        "name": "dloss_db counts argnums from 1",
        "advice": None,
        "code": """
dloss_db = jax.grad(weighted_loss, argnums=2)
""",
        "fails": ["test_dloss_db_is_gradient_wrt_b"],
        "says": "argnums counts from 0",
    },
    {
        "name": "dloss_db returns the gradients for both w and b",
        "advice": None,
        "code": """
dloss_db = jax.grad(weighted_loss, argnums=(0, 1))
""",
        "fails": ["test_dloss_db_is_gradient_wrt_b"],
    },
    {
        "name": "requires_grad, backward() and .grad, the PyTorch way",
        "advice": "carry no gradient tape",
        "code": """
def loss_and_grads(params, x, y):
    for p in params.values():
        p.requires_grad = True
    loss = mlp_loss(params, x, y)
    loss.backward()
    return loss, {name: p.grad for name, p in params.items()}
""",
        "fails": [
            "test_loss_and_grads_loss_value",
            "test_loss_and_grads_structure",
            "test_loss_and_grads_gradient_values",
        ],
        "raises": "AttributeError",
    },
    {
        "name": "grads returned as a flat list of leaves",
        "advice": None,
        "code": """
def loss_and_grads(params, x, y):
    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
    return loss, jax.tree_util.tree_leaves(grads)
""",
        "fails": ["test_loss_and_grads_structure", "test_loss_and_grads_gradient_values"],
    },
    {
        "name": "gradient with respect to x instead of params",
        "advice": None,
        "code": """
def loss_and_grads(params, x, y):
    return jax.value_and_grad(mlp_loss, argnums=1)(params, x, y)
""",
        "fails": ["test_loss_and_grads_structure", "test_loss_and_grads_gradient_values"],
    },
    {
        "name": "(grads, loss) in the wrong order",
        "advice": None,
        "code": """
def loss_and_grads(params, x, y):
    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
    return grads, loss
""",
        "fails": ["test_loss_and_grads_loss_value", "test_loss_and_grads_gradient_values"],
    },
    {
        "name": "the loss's sum instead of its mean is differentiated",
        "advice": None,
        "code": """
def loss_and_grads(params, x, y):
    def summed(params):
        hidden = jnp.tanh(x @ params["w1"] + params["b1"])
        return jnp.sum((hidden @ params["w2"] + params["b2"] - y) ** 2)

    return mlp_loss(params, x, y), jax.grad(summed)(params)
""",
        "fails": ["test_loss_and_grads_gradient_values"],
    },
    {
        "name": "jax.grad with torch's create_graph=True",
        "advice": "jax.grad(jax.grad(f))",
        "code": """
def loss_and_grads(params, x, y):
    return mlp_loss(params, x, y), jax.grad(mlp_loss, create_graph=True)(params, x, y)
""",
        "fails": ["test_loss_and_grads_loss_value"],
        "raises": "TypeError",
        "explains": "`create_graph=`",
    },
]


CORRECT = [
    {
        "name": "wrapper functions, a lambda for b, loss and grad computed separately",
        "code": """
def df(x):
    return jax.grad(f)(x)

def d2f(x):
    return jax.grad(lambda t: jax.grad(f)(t))(x)

def dloss_db(w, b, x):
    return jax.grad(lambda b: weighted_loss(w, b, x))(b)

def loss_and_grads(params, x, y):
    return mlp_loss(params, x, y), jax.grad(mlp_loss)(params, x, y)
""",
    },
    {
        "name": "forward-mode second derivative, jitted value_and_grad",
        "code": """
d2f = jax.jacfwd(jax.grad(f))

loss_and_grads = jax.jit(jax.value_and_grad(mlp_loss))
""",
    },
]
