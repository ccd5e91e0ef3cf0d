"""PyTorch habits no list of known mistakes names (neither tests/mistakes/ nor issue #49),
run by JAX 0.10.2 here: none may get wrong advice, and none raised by a call into JAX,
Optax or Equinox may stay a raw traceback. Written to attack the diagnosis with cases its
rules were not written from; each must reach advice that names its cause or fix.
"""

from __future__ import annotations

import pytest

from kata.diagnosis.diagnose import diagnose

from .test_diagnosis_real_errors import failure_of

pytest.importorskip("optax")
pytest.importorskip("equinox")

# habit -> (learner code, fragment the cause or fix must hold)
UNLISTED = {
    "torch.compile's mode= on jax.jit": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.jit(jnp.sin, mode="reduce-overhead")(1.0)
        """,
        "takes no `mode=`",
    ),
    "torch.randn's size= on jax.random.normal": (
        """
        import jax
        def run():
            return jax.random.normal(jax.random.key(0), size=(3,))
        """,
        "`shape=`",
    ),
    "optimizer.step(grads): an Optax update without its state": (
        """
        import jax.numpy as jnp, optax
        def run():
            return optax.adam(0.1).update({"w": jnp.ones(2)})
        """,
        "opt_state = opt.init(params)",
    ),
    "torch.optim.Adam(params, lr=...): the params first": (
        """
        import jax.numpy as jnp, optax
        def run():
            return optax.adam({"w": jnp.ones(2)}, lr=1e-3)
        """,
        "`learning_rate=`",
    ),
    "a loop over a state_dict's names, read as its tensors": (
        """
        import jax.numpy as jnp
        def run():
            params = {"w": jnp.ones(2), "b": jnp.ones(1)}
            total = 0
            for p in params:
                total = total + p.sum()
            return total
        """,
        "gives its keys, the names",
    ),
    "a fori_loop body written for `for _ in range(n)`": (
        """
        import jax, jax.numpy as jnp
        def run():
            def body(x):
                return x * 2
            return jax.lax.fori_loop(0, 3, body, jnp.ones(2))
        """,
        "`body(i, value)`",
    ),
    "torch.norm's dim= on jnp.linalg.norm": (
        """
        import jax.numpy as jnp
        def run():
            return jnp.linalg.norm(jnp.ones((2, 3)), dim=1)
        """,
        "`axis=`",
    ),
    "nn.ReLU() as a layer of eqx.nn.Sequential": (
        """
        import jax, equinox as eqx
        def run():
            return eqx.nn.Sequential([eqx.nn.Linear(2, 2, key=jax.random.key(0)), eqx.nn.ReLU()])
        """,
        "eqx.nn.Lambda(jax.nn.relu)",
    ),
    "torch.vmap's randomness= on jax.vmap": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.vmap(jnp.sin, randomness="different")(jnp.ones(3))
        """,
        "its own key",
    ),
    "SGD's dampening=, which Optax's sgd lacks": (
        """
        import optax
        def run():
            return optax.sgd(0.1, momentum=0.9, dampening=0.1)
        """,
        "takes no `dampening=`",
    ),
    "nn.Linear's bias=False on eqx.nn.Linear": (
        """
        import jax, equinox as eqx
        def run():
            return eqx.nn.Linear(3, 4, bias=False, key=jax.random.key(0))
        """,
        "`use_bias=`",
    ),
    "torch.autograd.grad's create_graph= on jax.grad": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.grad(jnp.sin, create_graph=True)(1.0)
        """,
        "jax.grad(jax.grad(f))",
    ),
    "a loss returning one value to value_and_grad(has_aux=True)": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.value_and_grad(lambda p: jnp.sum(p), has_aux=True)(jnp.ones(2))
        """,
        "value_and_grad(fun, argnums=0, has_aux=False",
    ),
    "a moved name, jax.tree_map, after torch.utils._pytree": (
        """
        import jax
        def run():
            return jax.tree_map(lambda a: a * 2, {"w": 1.0})
        """,
        "jax.tree_util",
    ),
}


@pytest.mark.parametrize("habit", UNLISTED)
def test_an_unlisted_pytorch_habit_gets_advice_naming_its_cause(habit, tmp_path):
    source, fragment = UNLISTED[habit]
    found = failure_of(source, tmp_path)
    diagnosis = diagnose(found)
    assert diagnosis is not None, (habit, found.message)
    assert fragment in f"{diagnosis.cause} {diagnosis.fix}", diagnosis
