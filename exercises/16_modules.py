"""16 · `nn.Module`, the JAX way (Equinox).

In PyTorch a model is an `nn.Module`: an object that owns its parameters, changes mode in
place (`model.eval()`, `model.train()`), hands them to an optimizer that keeps references
to them (`Adam(model.parameters())`) and is updated in place by `optimizer.step()`. Layers
take a batch, and dropout draws from a global random generator.

In Equinox (`import equinox as eqx`) a model is an `eqx.Module`: a frozen dataclass that is
a pytree of its arrays, so `jax.tree_util`, Optax and checkpoints see it as they see a
params dict. Its layers act on one example: batch them with `jax.vmap`. Its fields also
hold things that are not arrays (a dropout rate, a flag, a layer's sizes), so the
transformations come in Equinox's `filter_` versions: `eqx.filter_jit` and
`eqx.filter_value_and_grad` trace the arrays and treat everything else as fixed settings.
Optax trains `eqx.filter(model, eqx.is_array)`, the arrays alone, and
`eqx.apply_updates(model, updates)` returns the new model. `eqx.nn.Dropout` takes a PRNG
key when it trains (one key per example: `jax.random.split(key, n)`), and
`eqx.nn.inference_mode(model)` returns a copy with dropout off. Nothing changes a model in
place: a different model is a new one, `eqx.tree_at(where, model, value)`.

Rule to remember: a model is a value: `model = f(model)`, never `model.eval()`; train
`eqx.filter(model, eqx.is_array)`, and give dropout a key per example.

Deeper: https://docs.kidger.site/equinox/all-of-equinox/ and
https://docs.kidger.site/equinox/api/nn/dropout/
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

optimizer = optax.adam(1e-2)


class MLP(eqx.Module):
    """`linear2(dropout(tanh(linear1(x))))` on one example `x` of shape `(d_in,)`."""

    linear1: eqx.nn.Linear
    dropout: eqx.nn.Dropout
    linear2: eqx.nn.Linear

    def __init__(self, d_in, d_hidden, d_out, *, dropout_rate, key):
        # TODO: PyTorch layers draw their weights from one global generator; here both
        # layers draw from the same `key`, so their weights are not independent (with equal
        # sizes they are identical). Each layer needs a key of its own.
        self.linear1 = eqx.nn.Linear(d_in, d_hidden, key=key)
        self.dropout = eqx.nn.Dropout(dropout_rate)
        self.linear2 = eqx.nn.Linear(d_hidden, d_out, key=key)

    def __call__(self, x, *, key=None):
        return self.linear2(self.dropout(jnp.tanh(self.linear1(x)), key=key))


def predict(model, xs, key=None):
    """The model on each row of `xs`; in training mode each row gets its own dropout key."""
    # TODO: PyTorch's dropout draws a fresh mask for every element of the batch; here every
    # row gets the same `key`, so two equal rows get the same mask.
    return jax.vmap(lambda x: model(x, key=key))(xs)


def evaluation_mode(model):
    """A copy of `model` with dropout off; `model` itself stays in training mode."""
    # TODO: this is `model.eval()`: it switches dropout off in the model you were given (an
    # eqx.Module is frozen, so it forces the write), and every other holder of that model
    # now evaluates too. Return a new model and leave this one as it was.
    object.__setattr__(model.dropout, "inference", True)
    return model


def train_step(model, opt_state, xs, ys, key):
    """One Adam step on the mean squared error; returns `(model, opt_state, loss before)`."""

    def loss(model):
        return jnp.mean((predict(model, xs, key) - ys) ** 2)

    # TODO: like `optimizer.step()`, this expects the optimizer to keep its own state: the
    # new state Optax returns is thrown away and the old one handed back. And nothing is
    # compiled: every operation runs on its own, as in PyTorch's eager mode.
    value, grads = eqx.filter_value_and_grad(loss)(model)
    updates, _ = optimizer.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    return eqx.apply_updates(model, updates), opt_state, value
