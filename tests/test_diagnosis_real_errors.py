"""Each diagnosis against the real JAX error it claims to explain.

Every case is learner code run by JAX here (its file written to disk, so the traceback holds
its lines, as the grader's does); the failure is built the way the grader builds it, and the
diagnosis must be the one meant, naming what the case says it names.
"""

from __future__ import annotations

import importlib.util
import textwrap
import traceback
from pathlib import Path

import numpy as np
import pytest

from kata.diagnosis.diagnose import Failure, diagnose
from kata.judge.pytest_plugin import in_learner_terms

CASES = {
    "a method called on a key": (
        """
        import jax
        def run():
            return jax.random.key(0).split()
        """,
        ["`key.split` on a PRNG key"],
        ["jax.random.split(key, ...)"],
    ),
    "randint in torch's order": (
        """
        import jax
        def run():
            return jax.random.randint(0, 10, (3,))
        """,
        ["take the key first"],
        ["jax.random.randint(key, shape, minval, maxval)"],
    ),
    "normal of a shape alone": (
        """
        import jax
        def run():
            return jax.random.normal((2, 3))
        """,
        ["take the key first"],
        ["jax.random.normal(key, shape)"],
    ),
    "itemsize of a scalar type, as of torch's dtype": (
        """
        import jax.numpy as jnp
        def run():
            return 4 * jnp.float32.itemsize
        """,
        ["is a scalar type"],
        ["jnp.dtype(dtype).itemsize"],
    ),
    "einsum of a list": (
        """
        import jax.numpy as jnp
        def run():
            a = jnp.ones((2, 3))
            return jnp.einsum("ij,kj->ik", [a, a])
        """,
        ["in one list"],
        ["jnp.einsum(eq, a, b)"],
    ),
    "softmax with torch's dtype": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.nn.softmax(jnp.ones(3), -1, dtype=jnp.float32)
        """,
        ["`dtype=` is PyTorch's keyword"],
        ["x.astype(jnp.float32)"],
    ),
    "torch's (values, indices) pair unpacked": (
        """
        import jax, jax.numpy as jnp
        def run():
            x = jnp.arange(12.0).reshape(3, 4)
            values, indices = x.max(1)
            return values
        """,
        ["(values, indices) pair"],
        ["x.argmax(axis=d)"],
    ),
    "torch.cat with no torch": (
        """
        import jax.numpy as jnp
        def run():
            return torch.cat([jnp.ones(2), jnp.ones(2)])
        """,
        ["`torch.cat` is PyTorch's"],
        ["jnp.concatenate"],
    ),
    "F.relu with no torch": (
        """
        import jax.numpy as jnp
        def run():
            return F.relu(jnp.ones(2))
        """,
        ["`F.relu` is PyTorch's"],
        ["jax.nn.relu"],
    ),
    "nonzero under jit": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.jit(lambda x: x.nonzero())(jnp.array([0.0, 1.0, 2.0]))
        """,
        ["depends on the data"],
        ["size=n"],
    ),
    "unique under jit": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.jit(jnp.unique)(jnp.array([1, 1, 2]))
        """,
        ["depends on the data"],
        ["jnp.unique(x, size=n"],
    ),
    "bincount under jit": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.jit(jnp.bincount)(jnp.array([0, 1, 1]))
        """,
        ["depends on the data"],
        ["length=n"],
    ),
    "max of a tracer": (
        """
        import jax, jax.numpy as jnp
        def run():
            f = jax.jit(lambda x: max(x.sum(), 0.0))
            return f(jnp.ones(3))
        """,
        ["built-in `max`/`min`"],
        ["jnp.maximum"],
    ),
    "min under jit of grad": (
        """
        import jax, jax.numpy as jnp
        def clipped(x):
            return min(x, 1.0) ** 2
        def run():
            return jax.jit(jax.grad(clipped))(0.5)
        """,
        ["built-in `max`/`min`"],
        ["jnp.minimum"],
    ),
    "and of two comparisons": (
        """
        import jax, jax.numpy as jnp
        @jax.jit
        def inside(x):
            return (x > 0) and (x < 1)
        def run():
            return inside(0.5)
        """,
        ["`and`/`or`/`not`"],
        ["jnp.logical_and", "(x > 0) & (x < 1)"],
    ),
    "not under vmap": (
        """
        import jax, jax.numpy as jnp
        def flip(x):
            return not x
        def run():
            return jax.vmap(flip)(jnp.array([True, False]))
        """,
        ["`and`/`or`/`not`"],
        ["jnp.logical_not"],
    ),
    "if with or": (
        """
        import jax, jax.numpy as jnp
        @jax.jit
        def relu(x):
            if x > 0 or x < -5:
                return x
            return 0.0 * x
        def run():
            return relu(1.0)
        """,
        ["`and`/`or`/`not`", "`if`/`while` on the same line"],
        ["jnp.logical_or"],
    ),
    "fori body as (carry, i)": (
        """
        import jax, jax.numpy as jnp
        W = jnp.eye(3)
        def body(h, i):
            return jnp.tanh(W @ h)
        @jax.jit
        def unroll(h):
            return jax.lax.fori_loop(0, 3, body, h)
        def run():
            return unroll(jnp.ones(3))
        """,
        ["`body(i, carry)`", "`(carry, i)`"],
        ["def body(i, carry)"],
    ),
    "fori body indexes its carry": (
        """
        import jax, jax.numpy as jnp
        def body(v, i):
            return v.at[i].set(v[0] * 2)
        def run():
            return jax.lax.fori_loop(0, 3, body, jnp.ones(3))
        """,
        ["`body(i, carry)`"],
        ["def body(i, carry)"],
    ),
    "while_loop test over a vector": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.lax.while_loop(lambda v: v < 3, lambda v: v + 1, jnp.zeros(3))
        """,
        ["array of booleans"],
        ["jnp.any"],
    ),
    "while_loop body with two arguments": (
        """
        import jax, jax.numpy as jnp
        def body(i, x):
            return i + 1, x * 2
        def run():
            return jax.lax.while_loop(lambda c: c[0] < 3, body, (0, 1.0))
        """,
        ["`body(carry)`"],
        ["pack what changes"],
    ),
    "while_loop body returns part of its carry": (
        """
        import jax, jax.numpy as jnp
        def body(carry):
            i, total = carry
            return i + 1
        def run():
            return jax.lax.while_loop(lambda c: c[0] < 3, body, (0, 0.0))
        """,
        ["changes structure"],
        ["return the whole carry"],
    ),
    "scan step without its x": (
        """
        import jax, jax.numpy as jnp
        def step(h):
            return h, h
        def run():
            return jax.lax.scan(step, jnp.zeros(2), jnp.ones((4, 2)))
        """,
        ["`step(carry, x)`"],
        ["def step(carry, x)"],
    ),
    "scan step returns only the carry": (
        """
        import jax, jax.numpy as jnp
        def step(h, x):
            return jnp.tanh(h + x)
        def run():
            return jax.lax.scan(step, jnp.zeros(2), jnp.ones((4, 2)))
        """,
        ["must return a pair"],
        ["return new_carry, output"],
    ),
    "torch's sizes as separate numbers to a random function": (
        """
        import jax, jax.numpy as jnp
        def run():
            shape = (2, 3, 4)
            return jax.random.normal(jax.random.key(0), *shape)
        """,
        ["separate numbers"],
        ["jax.random.normal(key, shape)"],
    ),
    "torch's sizes as three numbers": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jnp.ones(2, 3, 4)
        """,
        ["separate numbers"],
        ["jnp.ones((2, 3, 4))"],
    ),
    "tracer leaked through a module-global list": (
        """
        import jax, jax.numpy as jnp
        loss_log = []
        @jax.jit
        def step(x):
            loss_log.append(jnp.sum(x ** 2))
            return x * 0.9
        def run():
            step(jnp.ones(3))
            return jnp.stack(loss_log)
        """,
        ["leaked tracer", "line 6 of", "in `step`"],
        ["return every value"],
    ),
    "tracer leaked through self": (
        """
        import jax, jax.numpy as jnp
        class Model:
            def __init__(self):
                self.last = None
            def forward(self, x):
                self.last = x * 2
                return x
        model = Model()
        def run():
            jax.jit(model.forward)(jnp.ones(2))
            return model.last + 1
        """,
        ["leaked tracer", "line 7 of", "`self.…`"],
        ["return every value"],
    ),
    "tracer leaked through a closure": (
        """
        import jax, jax.numpy as jnp
        def make():
            seen = {}
            def f(x):
                seen["x"] = x + 1
                return x
            return f, seen
        def run():
            f, seen = make()
            jax.jit(f)(jnp.ones(2))
            return seen["x"] * 2
        """,
        ["leaked tracer", "line 6 of"],
        ["return every value"],
    ),
    "forward mode through a custom_vjp": (
        """
        import jax, jax.numpy as jnp
        @jax.custom_vjp
        def f(x):
            return jnp.sqrt(x)
        f.defvjp(lambda x: (f(x), x), lambda x, g: (g / (2 * jnp.sqrt(x)),))
        def run():
            return jax.jvp(f, (jnp.ones(2),), (jnp.ones(2),))
        """,
        ["reverse mode only", "torch.autograd.Function"],
        ["jax.custom_jvp"],
    ),
    "a custom_vjp's bwd returns a bare array": (
        """
        import jax, jax.numpy as jnp
        @jax.custom_vjp
        def clip_gradient(x, limit):
            return x
        def bwd(limit, g):
            return jnp.clip(g, -limit, limit)
        clip_gradient.defvjp(lambda x, limit: (x, limit), bwd)
        def run():
            return jax.grad(lambda x: jnp.sum(clip_gradient(x, 0.5)))(jnp.ones(2))
        """,
        ["one cotangent per input"],
        ["return (g,)"],
    ),
    "a custom_vjp's fwd returns the output alone": (
        """
        import jax, jax.numpy as jnp
        @jax.custom_vjp
        def f(x):
            return jnp.round(x)
        f.defvjp(lambda x: jnp.round(x), lambda _, g: (g,))
        def run():
            return jax.grad(lambda x: jnp.sum(f(x)))(jnp.ones(2))
        """,
        ["ctx.save_for_backward"],
        ["return y, (x,)"],
    ),
    "model.eval() on an Equinox model": (
        """
        import equinox as eqx, jax
        def run():
            model = eqx.nn.Sequential([eqx.nn.Linear(2, 2, key=jax.random.key(0))])
            model.eval()
        """,
        ["torch.nn.Module method"],
        ["eqx.nn.inference_mode(model)"],
    ),
    "model.parameters() for an optimizer": (
        """
        import equinox as eqx, jax
        def run():
            return list(eqx.nn.Linear(2, 2, key=jax.random.key(0)).parameters())
        """,
        ["`model.parameters()`"],
        ["eqx.filter(model, eqx.is_array)"],
    ),
    "a frozen module's field assigned": (
        """
        import equinox as eqx
        def run():
            dropout = eqx.nn.Dropout(0.5)
            dropout.inference = True
        """,
        ["frozen dataclass"],
        ["eqx.tree_at", "eqx.nn.inference_mode(model)"],
    ),
    "dropout in training mode without a key": (
        """
        import equinox as eqx, jax.numpy as jnp
        def run():
            return eqx.nn.Dropout(0.5)(jnp.ones(3))
        """,
        ["got no PRNG key"],
        ["jax.random.split(key, len(xs))"],
    ),
    "jax.grad of a whole Equinox model, its flags too": (
        """
        import equinox as eqx, jax, jax.numpy as jnp
        def run():
            model = eqx.nn.Dropout(0.5)
            return jax.grad(lambda m: jnp.sum(m(jnp.ones(3), key=jax.random.key(0))))(model)
        """,
        ["not a float"],
        ["eqx.filter_value_and_grad(loss)(model)"],
    ),
    # Found by a red team trying ~950 torch spellings: each a class the table or a rule
    # had no answer for, or a wrong one.
    "torch's transpose of two axes of a 3-D array": (
        """
        import jax, jax.numpy as jnp
        def run():
            k = jnp.ones((2, 5, 8))
            return k.transpose(-2, -1)
        """,
        ["permutes every axis"],
        ["x.swapaxes(dim0, dim1)"],
    ),
    "torch's view with three sizes": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jnp.arange(12.0).view(3, 2, 2)
        """,
        ["view"],
        ["x.reshape"],
    ),
    "torch's flatten of a range of axes": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jnp.ones((2, 3, 4)).flatten(0, 1)
        """,
        ["flatten"],
        ["x.reshape"],
    ),
    "grad of a loss per example": (
        """
        import jax, jax.numpy as jnp
        def run():
            x = jnp.ones((3, 4))
            return jax.grad(lambda w: (x @ w) ** 2)(jnp.ones(4))
        """,
        ["one number", "per example"],
        ["losses.mean()"],
    ),
    "class indices to softmax_cross_entropy": (
        """
        import jax, jax.numpy as jnp, optax
        def run():
            logits = jnp.ones((3, 4))
            return optax.softmax_cross_entropy(logits, jnp.array([0, 1, 2]))
        """,
        ["one class index per example"],
        ["softmax_cross_entropy_with_integer_labels"],
    ),
    "one-hot labels to the integer cross-entropy": (
        """
        import jax, jax.numpy as jnp, optax
        def run():
            logits = jnp.ones((3, 4))
            one_hot = jax.nn.one_hot(jnp.array([0, 1, 2]), 4)
            return optax.softmax_cross_entropy_with_integer_labels(logits, one_hot)
        """,
        ["class index"],
        ["optax.softmax_cross_entropy(logits, one_hot_labels)"],
    ),
    "torch.nn.functional's relu, torch not imported": (
        """
        import jax, jax.numpy as jnp
        def run():
            return torch.nn.functional.relu(jnp.ones(3))
        """,
        ["`torch.nn.functional.relu` is PyTorch's"],
        ["jax.nn.relu"],
    ),
    "torch.linalg's inverse": (
        """
        import jax, jax.numpy as jnp
        def run():
            return torch.linalg.inv(jnp.eye(3))
        """,
        ["torch.linalg.inv"],
        ["jnp.linalg.inv"],
    ),
    "torch.optim's SGD": (
        """
        import jax, jax.numpy as jnp
        def run():
            return torch.optim.SGD([], lr=0.1)
        """,
        ["torch.optim.SGD"],
        ["optax.sgd(learning_rate)"],
    ),
    "torch.cuda.is_available": (
        """
        import jax, jax.numpy as jnp
        def run():
            return torch.cuda.is_available()
        """,
        ["torch.cuda.is_available"],
        ["jax.default_backend()"],
    ),
    "nn.Linear, nn not imported": (
        """
        import jax, jax.numpy as jnp
        def run():
            return nn.Linear(3, 4)
        """,
        ["nn.Linear"],
        ["eqx.nn.Linear"],
    ),
    "F.gelu, F not imported": (
        """
        import jax, jax.numpy as jnp
        def run():
            return F.gelu(jnp.ones(3))
        """,
        ["F.gelu"],
        ["approximate=False"],
    ),
    "optax.SGD": (
        """
        import jax, jax.numpy as jnp, optax
        def run():
            return optax.SGD(0.1)
        """,
        ["`SGD` is PyTorch's"],
        ["optax.sgd"],
    ),
    "jax.nn.hardtanh": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.nn.hardtanh(jnp.ones(3))
        """,
        ["hardtanh"],
        ["jax.nn.hard_tanh"],
    ),
    "randint's bounds before the shape, after the key": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.random.randint(jax.random.key(0), 0, 10, (3,))
        """,
        ["then the shape"],
        ["jax.random.randint(key, shape, minval, maxval)"],
    ),
    "uniform's bounds by position": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.random.uniform(jax.random.key(0), (3,), -1.0, 1.0)
        """,
        ["then the shape"],
        ["minval=low, maxval=high"],
    ),
    "normal's mean and std by position": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.random.normal(jax.random.key(0), (3,), 0.0, 1.0)
        """,
        ["then the shape"],
        ["mean + std * jax.random.normal(key, shape)"],
    ),
    "torch's randint(high, size) after the key": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.random.randint(jax.random.key(0), (3,), 10)
        """,
        ["upper bound"],
        ["jax.random.randint(key, shape, 0, high)"],
    ),
    "a legacy key's split method": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.random.PRNGKey(0).split(2)
        """,
        ["`key.split` on a PRNG key"],
        ["jax.random.split(key"],
    ),
    "torch's elementwise max of two arrays": (
        """
        import jax, jax.numpy as jnp
        def run():
            x = jnp.ones(3)
            return jnp.max(x, x)
        """,
        ["element by element"],
        ["jnp.maximum(a, b)"],
    ),
    "torch's keepdim by position to max": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jnp.ones((3, 4)).max(1, True)
        """,
        ["keepdim=True"],
        ["keepdims=True"],
    ),
    "torch's unbiased by position to std": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jnp.ones((3, 4)).std(1, True)
        """,
        ["unbiased=True"],
        ["ddof=1"],
    ),
    "torch's squeeze of an axis longer than 1": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jnp.ones((3, 4)).squeeze(1)
        """,
        ["leaves such an axis"],
        ["x.shape[d] == 1"],
    ),
    "a module of one's own with torch's forward": (
        """
        import equinox as eqx, jax, jax.numpy as jnp
        class Net(eqx.Module):
            scale: float
            def forward(self, x):
                return self.scale * x
        def run():
            return Net(2.0)(jnp.ones(3))
        """,
        ["`Net`", "runs `forward`"],
        ["`__call__`"],
    ),
    "an Equinox model moved torch's way": (
        """
        import equinox as eqx, jax, jax.numpy as jnp
        def run():
            model = eqx.nn.Linear(3, 2, key=jax.random.key(0))
            return model.to("cuda")
        """,
        ["`model.to()` is a torch.nn.Module method"],
        ["jax.device_put(model, device)"],
    ),
    "an Equinox layer called on a whole batch": (
        """
        import equinox as eqx, jax, jax.numpy as jnp
        def run():
            model = eqx.nn.Linear(4, 2, key=jax.random.key(0))
            return model(jnp.ones((5, 4)))
        """,
        ["takes one example, not a batch"],
        ["jax.vmap(model)(xs)"],
    ),
    "an Equinox layer made without a key": (
        """
        import equinox as eqx
        def run():
            return eqx.nn.Linear(3, 4)
        """,
        ["made without a key"],
        ["key=jax.random.key(0)"],
    ),
    "an Equinox LayerNorm given a batch": (
        """
        import equinox as eqx, jax.numpy as jnp
        def run():
            return eqx.nn.LayerNorm(4)(jnp.ones((3, 4)))
        """,
        ["takes one example"],
        ["jax.vmap(layer)(xs)"],
    ),
    "two arrays to jnp.stack one by one": (
        """
        import jax.numpy as jnp
        def run():
            x = jnp.ones((3, 4))
            return jnp.stack(x, x)
        """,
        ["one sequence of arrays"],
        ["jnp.stack([a, b], axis=0)"],
    ),
    "torch's sizes to jnp.reshape": (
        """
        import jax.numpy as jnp
        def run():
            return jnp.reshape(jnp.ones((3, 4)), 2, 6)
        """,
        ["one tuple"],
        ["jnp.reshape(x, (2, 6))"],
    ),
    "torch's learning-rate scheduler on optax": (
        """
        import optax
        def run():
            return optax.StepLR(0.1, 10)
        """,
        ["`StepLR` is PyTorch's"],
        ["optax.exponential_decay"],
    ),
    "torch's activation class on equinox": (
        """
        import equinox as eqx
        def run():
            return eqx.nn.ReLU()
        """,
        ["`ReLU` is PyTorch's"],
        ["eqx.nn.Lambda(jax.nn.relu)"],
    ),
    "torch's name for the GPU backend": (
        """
        import jax
        def run():
            return jax.devices("cuda")
        """,
        ["torch's name for the device"],
        ["jax.devices('gpu')"],
    ),
    "torch's flat padding": (
        """
        import jax.numpy as jnp
        def run():
            return jnp.pad(jnp.ones((3, 4)), (1, 1, 2, 2))
        """,
        ["lists the last axis first"],
        ["jnp.pad(x, ((0, 0), (left, right)))"],
    ),
    "a keyword JAX shares elsewhere, refused here": (
        """
        import jax.numpy as jnp
        def run():
            return jnp.cov(jnp.ones((3, 4)), correction=0)
        """,
        ["`correction=`"],
        ["ddof="],
    ),
    "torch's alpha on jnp.add": (
        """
        import jax.numpy as jnp
        def run():
            x = jnp.ones(3)
            return jnp.add(x, x, alpha=2)
        """,
        ["the function called takes no `alpha`"],
        [],
    ),
    "a device named by a string": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jnp.array([1.0], device='cuda')
        """,
        ["`'cuda'`"],
        ["jax.devices('gpu')[0]"],
    ),
    # Issue #49: a rule states its evidence, and each look-alike gets its own cause.
    "a jax.debug.print format slip": (
        """
        import jax, jax.numpy as jnp
        def run():
            v = jnp.ones(3)
            jax.debug.print("norm={norm}", v)
        """,
        ["field `{norm}`"],
        ["norm=value"],
    ),
    "a params key written out": (
        """
        def run():
            params = {"w": 1, "b": 2}
            return params["w1"]
        """,
        ["`'w1'`", "state_dict"],
        ["jax.tree.map"],
    ),
    "a matmul with torch's weight layout": (
        """
        import jax.numpy as jnp
        def run():
            w = jnp.ones((8, 3)); x = jnp.ones((5, 3))
            return x @ w
        """,
        ["`x @ w` sums the last axis of `x` (3 long) against the first of `w` (8 long)"],
        [],
    ),
    "a scan cell with its arguments swapped": (
        """
        import jax, jax.numpy as jnp
        def run():
            W = jnp.ones((4, 4)); U = jnp.ones((3, 4))
            def cell(x, h):
                h = jnp.tanh(h @ W + x @ U)
                return h, h
            return jax.lax.scan(cell, jnp.zeros(4), jnp.ones((6, 3)))
        """,
        ["inside the function `jax.lax.scan` calls", "`step(carry, x)`"],
        ["argument order"],
    ),
    "an Equinox layer on a batch": (
        """
        import jax, jax.numpy as jnp, equinox as eqx
        def run():
            layer = eqx.nn.Linear(3, 4, key=jax.random.key(0))
            return layer(jnp.ones((5, 3)))
        """,
        ["takes one example"],
        ["jax.vmap(model)(xs)"],
    ),
    "accumulate= on .at[i].set": (
        """
        import jax.numpy as jnp
        def run():
            m = jnp.ones(3)
            return m.at[jnp.array([0, 0])].set(1.0, accumulate=True)
        """,
        ["`accumulate=` is PyTorch's keyword", "`mode=`"],
        ["x.at[idx].add(v)"],
    ),
    "an Optax state's field asked of its tuple": (
        """
        import optax, jax.numpy as jnp
        def run():
            state = optax.adam(0.1).init({"w": jnp.ones(2)})
            return state.mu
        """,
        ["one state per transformation"],
        ["opt_state[0].mu"],
    ),
    "an array's attribute asked of a tuple": (
        """
        import jax.numpy as jnp
        def run():
            params = (jnp.ones(2), jnp.ones(3))
            return params.shape
        """,
        ["a container treated as an array: `.shape` of a tuple"],
        ["jax.tree.map"],
    ),
    "a key that is None, first": (
        """
        import jax
        def run(key=None):
            return jax.random.normal(key, (3,))
        """,
        ["the key passed first is None"],
        ["jax.random.key(0)"],
    ),
    "a seed where the key goes": (
        """
        import jax
        def run():
            seed = 0
            return jax.random.normal(seed, (3,))
        """,
        ["a plain int where the key goes"],
        ["jax.random.key(seed)"],
    ),
    "jax.hessian(f, x)": (
        """
        import jax, jax.numpy as jnp
        def run():
            x = jnp.ones(3)
            return jax.hessian(lambda x: jnp.sum(x ** 3), x)
        """,
        ["the second place of `jax.hessian` is `argnums`"],
        ["jax.hessian(lambda x: jnp.sum(x ** 3))(x)"],
    ),
    "jax.grad(f, 1.0)": (
        """
        import jax
        def run():
            return jax.grad(lambda x: x ** 2, 1.0)
        """,
        ["`argnums`"],
        [],
    ),
    # Issue #49 item 3: calls into JAX, Optax and Equinox, read from their signatures.
    "vmap's in_dims=": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.vmap(lambda a: a * 2, in_dims=0)(jnp.ones(3))
        """,
        ["`jax.vmap(fun, in_axes=0", "takes no `in_dims=`"],
        ["`in_axes=`"],
    ),
    "grad's argnames=": (
        """
        import jax
        def run():
            return jax.grad(lambda a, b: a * b, argnames="a")(1.0, 2.0)
        """,
        ["takes no `argnames=`", "`argnums=`"],
        ["argnums="],
    ),
    "checkpoint's use_reentrant=": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.checkpoint(jnp.sin, use_reentrant=False)(1.0)
        """,
        ["takes no `use_reentrant=`", "`policy=`"],
        ["no reentrant mode"],
    ),
    "a keyword the table renames, on a function that lacks the new name": (
        """
        import jax
        def run():
            return jax.tree.map(lambda a: a, {"a": 1}, dim=0)
        """,
        ["`jax.tree.map(f, tree, *rest, is_leaf=None)` takes no `dim=`"],
        ["pass what `jax.tree.map` takes"],
    ),
    "an Optax keyword torch spells otherwise, unseen by the table": (
        """
        import optax
        def run():
            return optax.sgd(0.1, dampening=0.0)
        """,
        ["takes no `dampening=`", "`momentum=`"],
        [],
    ),
    "a custom_vjp bwd under nondiff_argnums": (
        """
        import jax, jax.numpy as jnp
        from functools import partial
        @partial(jax.custom_vjp, nondiff_argnums=(1,))
        def clip(x, limit):
            return x
        def fwd(x, limit):
            return x, None
        def bwd(res, g):
            return (jnp.clip(g, -1, 1),)
        clip.defvjp(fwd, bwd)
        def run():
            return jax.grad(lambda x: clip(x, 1.0))(2.0)
        """,
        ["`bwd(*nondiff_args, residuals, g)`"],
        ["def bwd(limit, res, g)"],
    ),
    "a custom_vjp fwd without every argument": (
        """
        import jax
        @jax.custom_vjp
        def g(x, y):
            return x * y
        def fwd(x):
            return x, None
        def bwd(res, ct):
            return ct, ct
        g.defvjp(fwd, bwd)
        def run():
            return jax.grad(g)(1.0, 2.0)
        """,
        ["forward rule `fwd`"],
        ["def fwd(x, y)"],
    ),
    "a custom_jvp rule using primals as one array": (
        """
        import jax, jax.numpy as jnp
        @jax.custom_jvp
        def f(x):
            return jnp.sin(x)
        @f.defjvp
        def f_jvp(primals, tangents):
            return jnp.sin(primals), jnp.cos(primals) * tangents
        def run():
            return jax.grad(f)(1.0)
        """,
        ["two tuples"],
        ["(x,) = primals"],
    ),
    "lax.cond given values": (
        """
        import jax, jax.numpy as jnp
        def run():
            x = jnp.ones(3)
            return jax.lax.cond(x.sum() > 0, x * 2, x * 3)
        """,
        ["handed values where it takes functions"],
        ["jnp.where(p, a, b)"],
    ),
    "lax.switch given values": (
        """
        import jax, jax.numpy as jnp
        def run():
            x = jnp.ones(3)
            return jax.lax.switch(1, [x, x * 2], x)
        """,
        ["handed values where it takes functions"],
        [],
    ),
    "jax.grad(f)(x)[0], torch.autograd.grad's habit": (
        """
        import jax
        def run():
            return jax.grad(lambda x: x ** 2)(3.0)[0]
        """,
        ["returns the gradient itself"],
        ["g = jax.grad(f)(x)"],
    ),
    "params - lr * grads on dicts": (
        """
        import jax.numpy as jnp
        def run():
            params = {"w": jnp.ones(2)}
            grads = {"w": jnp.ones(2)}
            return params - 0.1 * grads
        """,
        ["arithmetic on a container of arrays"],
        ["jax.tree.map(lambda p, g: p - lr * g, params, grads)"],
    ),
    ".lower on a plain function": (
        """
        import jax.numpy as jnp
        def f(x):
            return x * 2
        def run():
            return f.lower(jnp.ones(3))
        """,
        ["`.lower` belongs to a jitted function"],
        ["jax.jit(f).lower(x)"],
    ),
    "optax.apply_updates on an Equinox model": (
        """
        import jax, jax.numpy as jnp, optax, equinox as eqx
        def run():
            model = eqx.nn.MLP(2, 2, 4, 1, key=jax.random.key(0))
            grads = eqx.filter_grad(lambda m: jnp.sum(m(jnp.ones(2))))(model)
            opt = optax.sgd(0.1)
            state = opt.init(eqx.filter(model, eqx.is_array))
            updates, state = opt.update(grads, state)
            return optax.apply_updates(model, updates)
        """,
        ["an Equinox model handed whole to Optax"],
        ["eqx.apply_updates(model, updates)"],
    ),
    "dataclasses.replace on a module with its own __init__": (
        """
        import dataclasses, jax, jax.numpy as jnp, equinox as eqx
        class M(eqx.Module):
            w: jax.Array
            def __init__(self, n):
                self.w = jnp.ones(n)
        def run():
            return dataclasses.replace(M(3), w=jnp.zeros(3))
        """,
        ["calling the class's `__init__`"],
        ["eqx.tree_at"],
    ),
    "x.size used as a shape": (
        """
        import jax.numpy as jnp
        def run():
            x = jnp.ones((2, 3))
            n, d = x.size
        """,
        ["`x.size` used as a shape"],
        ["x.shape"],
    ),
    "opt.update without the params adamw reads": (
        """
        import jax.numpy as jnp, optax
        def run():
            p = {"w": jnp.ones(2)}
            opt = optax.adamw(0.1)
            s = opt.init(p)
            return opt.update(p, s)
        """,
        ["reads the parameters"],
        ["opt.update(grads, opt_state, params)"],
    ),
    "a string passed to a jitted function": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.jit(lambda x, mode: x)(jnp.ones(2), "fast")
        """,
        ["a Python value (a `str`)"],
        ["static_argnames"],
    ),
    "opt.update without the state, torch's optimizer.step(grads) habit": (
        """
        import jax.numpy as jnp, optax
        def run():
            opt = optax.sgd(0.1)
            return opt.update({"w": jnp.ones(2)})
        """,
        ["`update(updates, state, params=None)`"],
        ["opt_state = opt.init(params)"],
    ),
    "a name JAX moved to another module": (
        """
        import jax
        def run():
            return jax.tree_map(lambda a: a, [1])
        """,
        ["`tree_map` is in `jax.tree_util`"],
        ["`jax.tree_util.tree_map`"],
    ),
    "a loop over a params dict, the state_dict way": (
        """
        import jax.numpy as jnp
        def run():
            params = {"w": jnp.ones(2)}
            return [p.shape for p in params]
        """,
        ["gives its keys"],
        ["params.values()"],
    ),
    "a fori_loop body of one argument": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.lax.fori_loop(0, 3, lambda x: x + 1, jnp.zeros(2))
        """,
        ["`body(i, value)`"],
        [],
    ),
    "a split that never carries the key forward": (
        """
        import jax
        def run():
            with jax.debug_key_reuse(True):
                key = jax.random.key(0)
                for _ in range(2):
                    _, sub = jax.random.split(key)
                    jax.random.normal(sub)
        """,
        ["gives no new `key` back"],
        ["key, sub = jax.random.split(key)"],
    ),
    "an error no rule knows, from a call into JAX": (
        """
        import jax.numpy as jnp
        def run():
            return jnp.linspace(0.0, 1.0, num=-1)
        """,
        ["this line, which calls `jnp.linspace`, raised"],
        ["jnp.linspace(start, stop, num=50"],
    ),
    # Arguments out of order in JAX's functions that take functions (issue #58, class 3):
    # each slip as JAX 0.10.2 raises it, answered with the function's own order.
    "lax.while_loop with the body first (JAX: cond_fun must return a boolean scalar)": (
        """
        from jax import lax
        def body(c):
            return c + 1
        def cond(c):
            return c < 3
        def run():
            return lax.while_loop(body, cond, 0.0)
        """,
        ["`lax.while_loop(cond_fun, body_fun, init_val)` takes the condition first"],
        ["`lax.while_loop(cond, body, 0.0)`"],
    ),
    "lax.while_loop's functions swapped, named so the line cannot tell them apart": (
        """
        from jax import lax
        def step(c):
            return c + 1
        def keep_going(c):
            return c < 3
        def run():
            return lax.while_loop(step, keep_going, 0.0)
        """,
        ["test that returns a number, not a bool", "takes the condition first"],
        ["`lax.while_loop(cond, body, init)`"],
    ),
    "lax.while_loop's two lambdas swapped": (
        """
        import jax.numpy as jnp
        from jax import lax
        def run():
            return lax.while_loop(lambda c: c + 1, lambda c: c < 3, jnp.zeros(()))
        """,
        ["out of order for `lax.while_loop`"],
        ["`lax.while_loop(lambda c: c < 3, lambda c: c + 1, jnp.zeros(()))`"],
    ),
    "lax.while_loop with the start value first (JAX: should be callable)": (
        """
        import jax
        def body(c):
            return c + 1
        def cond(c):
            return c < 3
        def run():
            return jax.lax.while_loop(0.0, cond, body)
        """,
        ["takes the condition first"],
        ["`jax.lax.while_loop(cond, body, 0.0)`"],
    ),
    "lax.fori_loop with the body last": (
        """
        import jax.numpy as jnp
        from jax import lax
        def body(i, v):
            return v + i
        def run():
            v = jnp.zeros(3)
            return lax.fori_loop(0, 5, v, body)
        """,
        ["`lax.fori_loop(lower, upper, body_fun, init_val)` takes the bounds first"],
        ["`lax.fori_loop(0, 5, body, v)`"],
    ),
    "lax.fori_loop with the start value first": (
        """
        import jax.numpy as jnp
        from jax import lax
        def body(i, v):
            return v + i
        def run():
            return lax.fori_loop(jnp.zeros(3), 0, 5, body)
        """,
        ["takes the bounds first"],
        ["`lax.fori_loop(0, 5, body, jnp.zeros(3))`"],
    ),
    "lax.scan with the start carry first": (
        """
        import jax.numpy as jnp
        from jax import lax
        def step(c, x):
            return c + x, c
        def run():
            return lax.scan(0.0, step, jnp.arange(3.0))
        """,
        ["`lax.scan(f, init, xs=None, length=None, reverse=False, unroll=1)` takes the step"],
        ["`lax.scan(step, 0.0, jnp.arange(3.0))`"],
    ),
    "lax.scan with xs and init swapped, the step failing on them": (
        """
        import jax.numpy as jnp
        from jax import lax
        def step(carry, x):
            return carry @ x, carry
        def run():
            xs, init = jnp.ones((4, 3, 2)), jnp.ones(3)
            return lax.scan(step, xs, init)
        """,
        ["passes `xs` as `init`, `init` as `xs`"],
        ["`lax.scan(step, init, xs)`"],
    ),
    "lax.cond with the predicate last": (
        """
        import jax.numpy as jnp
        from jax import lax
        def run():
            x = jnp.ones(2)
            return lax.cond(lambda v: v * 2, lambda v: v * 3, x.sum() > 0, x)
        """,
        ["`lax.cond(pred, true_fun, false_fun, *operands)` takes the predicate first"],
        ["`lax.cond(x.sum() > 0, lambda v: v * 2, lambda v: v * 3, x)`"],
    ),
    "lax.switch with the branches first": (
        """
        import jax.numpy as jnp
        from jax import lax
        def run():
            return lax.switch([lambda v: v, lambda v: -v], 1, jnp.ones(2))
        """,
        ["`lax.switch(index, branches, *operands)` takes the index first"],
        ["`lax.switch(1, [lambda v: v, lambda v: -v], jnp.ones(2))`"],
    ),
    "lax.map with the array first (JAX: a function is not a valid JAX type)": (
        """
        import jax.numpy as jnp
        from jax import lax
        def double(v):
            return v * 2
        def run():
            return lax.map(jnp.arange(3.0), double)
        """,
        ["`lax.map(f, xs)` takes the function first"],
        ["`lax.map(double, jnp.arange(3.0))`"],
    ),
    "jax.vmap with in_axes first": (
        """
        import jax, jax.numpy as jnp
        def f(v):
            return v * 2
        def run():
            return jax.vmap(0, f)(jnp.arange(3.0))
        """,
        ["`jax.vmap(fun, in_axes=0, out_axes=0, ...)` takes the function first"],
        ["`jax.vmap(f, 0)`"],
    ),
    "jax.grad with argnums first": (
        """
        import jax
        def loss(a, b):
            return a * b
        def run():
            return jax.grad(1, loss)(1.0, 2.0)
        """,
        ["`jax.grad(fun, argnums=0, ...)` takes the function first, then `argnums`"],
        ["`jax.grad(loss, 1)`"],
    ),
    "jax.value_and_grad with argnums first": (
        """
        import jax
        def loss(a, b):
            return a * b
        def run():
            return jax.value_and_grad(1, loss)(1.0, 2.0)
        """,
        ["out of order for `jax.value_and_grad`"],
        ["`jax.value_and_grad(loss, 1)`"],
    ),
    "jax.jit with static_argnums by position": (
        """
        import jax
        def f(a, n):
            return a * n
        def run():
            return jax.jit(f, 1)(1.0, 2)
        """,
        [
            "`jax.jit(fun, *, static_argnums=None, static_argnames=None)` takes the function "
            "alone by position",
            "`1` by position",
        ],
        ["`jax.jit(f, static_argnums=1)`"],
    ),
    "jax.jit with a static name by position, before the function": (
        """
        import jax
        def f(a, n):
            return a * n
        def run():
            return jax.jit("n", f)(1.0, 2)
        """,
        ["out of order for `jax.jit`"],
        ['`jax.jit(f, static_argnames="n")`'],
    ),
    "jax.tree.map with the tree first": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.tree.map({"w": jnp.ones(2)}, lambda p: p * 2)
        """,
        ["`jax.tree.map(f, tree, *rest)` takes the function first"],
        ['`jax.tree.map(lambda p: p * 2, {"w": jnp.ones(2)})`'],
    ),
    "jax.tree_util.tree_map with the tree first, the function named": (
        """
        import jax, jax.numpy as jnp
        def scale_fn(p):
            return p * 2
        def run():
            params = {"w": jnp.ones(2)}
            return jax.tree_util.tree_map(params, scale_fn)
        """,
        ["out of order for `jax.tree_util.tree_map`"],
        ["`jax.tree_util.tree_map(scale_fn, params)`"],
    ),
    "lax.associative_scan with the elements first": (
        """
        import jax.numpy as jnp
        from jax import lax
        def run():
            return lax.associative_scan(jnp.arange(4.0), jnp.add)
        """,
        ["`lax.associative_scan(fn, elems, reverse=False, axis=0)` takes the combining"],
        ["`lax.associative_scan(jnp.add, jnp.arange(4.0))`"],
    ),
    "jax.checkpoint with the policy first": (
        """
        import jax, jax.numpy as jnp
        def f(v):
            return jnp.sin(v)
        def run():
            return jax.checkpoint(jax.checkpoint_policies.nothing_saveable, f)(1.0)
        """,
        ["`jax.checkpoint(fun, *, policy=None)` takes the function alone by position"],
        ["`jax.checkpoint(f, policy=jax.checkpoint_policies.nothing_saveable)`"],
    ),
    "f.defvjp(bwd, fwd), the rules swapped": (
        """
        import jax, jax.numpy as jnp
        @jax.custom_vjp
        def f(x):
            return jnp.sin(x)
        def fwd(x):
            return jnp.sin(x), jnp.cos(x)
        def bwd(res, g):
            return (res * g,)
        f.defvjp(bwd, fwd)
        def run():
            return jax.grad(f)(1.0)
        """,
        ["`f.defvjp(fwd, bwd)` takes the forward rule first"],
        ["f.defvjp(fwd, bwd)"],
    ),
    # Issue #58, class 6: small items, each from the error JAX or Optax raises.
    "a custom_vjp bwd lambda of two arguments under nondiff_argnums": (
        """
        import jax, jax.numpy as jnp
        from functools import partial
        @partial(jax.custom_vjp, nondiff_argnums=(1,))
        def clip(x, limit):
            return x
        clip.defvjp(lambda x, limit: (x, None), lambda limit, g: (jnp.clip(g, -limit, limit),))
        def run():
            return jax.grad(lambda x: clip(x, 1.0))(2.0)
        """,
        ["a `lambda` of two arguments with 3", "`bwd(*nondiff_args, residuals, g)`"],
        ["def bwd(limit, res, g)"],
    ),
    "a custom_vjp backward rule named as torch's, under nondiff_argnums": (
        """
        import jax, jax.numpy as jnp
        from functools import partial
        @partial(jax.custom_vjp, nondiff_argnums=(1,))
        def clip(x, limit):
            return x
        def forward(x, limit):
            return x, None
        def backward(res, g):
            return (jnp.clip(g, -1, 1),)
        clip.defvjp(forward, backward)
        def run():
            return jax.grad(lambda x: clip(x, 1.0))(2.0)
        """,
        ["backward rule `backward`", "`bwd(*nondiff_args, residuals, g)`"],
        ["def bwd(limit, res, g)"],
    ),
    "static_argnames naming no argument of the function": (
        """
        import jax
        from functools import partial
        def run():
            @partial(jax.jit, static_argnames="m")
            def repeat(x, n):
                return x * n
            return repeat(1.0, 2)
        """,
        ["`static_argnames` names an argument the jitted function does not take"],
        ["static_argnames='n'"],
    ),
    "static_argnums counted from 1": (
        """
        import jax
        def repeat(x, n):
            return x * n
        def run():
            return jax.jit(repeat, static_argnums=2)(1.0, 2)
        """,
        ["positions count from 0", "Counted from 1"],
        ["`static_argnums=1` marks `n`"],
    ),
    "static_argnums counted from 1 marks an array": (
        """
        import jax, jax.numpy as jnp
        from functools import partial
        @partial(jax.jit, static_argnums=1)
        def repeat(n, x):
            for _ in range(n):
                x = x * 2
            return x
        def run():
            return repeat(3, jnp.ones(2))
        """,
        ["an array passed as a static argument", "it counts from 0"],
        ["static_argnames='n'"],
    ),
    "optax.multi_transform given a mask for its labels": (
        """
        import jax.numpy as jnp, optax
        def run():
            params = {"w": jnp.ones(2), "b": jnp.ones(2)}
            opt = optax.multi_transform(
                {"train": optax.adam(1e-2), "freeze": optax.set_to_zero()}, {"w": True, "b": False}
            )
            return opt.init(params)
        """,
        ["`optax.multi_transform` was given booleans as its labels"],
        ["jax.tree.map(lambda m: 'train' if m else 'freeze', mask)"],
    ),
    # Issue #58, class 4: a value of the wrong structure, told by its structure, where the
    # fallback only showed the signature of the function called.
    "jnp.sqrt of the dict jax.tree.map returned": (
        """
        import jax, jax.numpy as jnp
        def run():
            params = {"w": jnp.ones(3), "b": jnp.ones(2)}
            squares = jax.tree.map(lambda p: p ** 2, params)
            return jnp.sqrt(squares)
        """,
        ["`jnp.sqrt` was given a dict", "a pytree"],
        ["`jax.tree.map(jnp.sqrt, squares)`"],
    ),
    "jnp.mean of a list of arrays": (
        """
        import jax.numpy as jnp
        def run():
            losses = [jnp.ones(3), jnp.ones(3)]
            return jnp.mean(losses, axis=0)
        """,
        ["`jnp.mean` was given a list", "one array's values"],
        ["jax.tree.map(lambda leaf: jnp.mean(leaf, axis=0), losses)", "jnp.stack(losses)"],
    ),
    "jnp.maximum of a params dict and a number": (
        """
        import jax.numpy as jnp
        def run():
            params = {"w": -jnp.ones(3)}
            return jnp.maximum(params, 0.0)
        """,
        ["`jnp.maximum` was given a dict"],
        ["jax.tree.map(lambda leaf: jnp.maximum(leaf, 0.0), params)"],
    ),
    "vmap in_axes dict missing a key of the params dict": (
        """
        import jax, jax.numpy as jnp
        def predict(params, x):
            return params["w"] @ x + params["b"]
        def run():
            params = {"w": jnp.ones((2, 3)), "b": jnp.ones(2)}
            return jax.vmap(predict, in_axes=({"w": None}, 0))(params, jnp.ones((5, 3)))
        """,
        ["`in_axes[0]` is a dict with the keys `w`", "it lacks `b`"],
        ["`'b': None` to hold it still"],
    ),
    "vmap in_axes a tuple where the argument is a dict": (
        """
        import jax, jax.numpy as jnp
        def predict(params, x):
            return params["w"] @ x + params["b"]
        def run():
            params = {"w": jnp.ones((2, 3)), "b": jnp.ones(2)}
            return jax.vmap(predict, in_axes=((None, None), 0))(params, jnp.ones((5, 3)))
        """,
        ["`in_axes[0]` is a tuple where the argument is a dict"],
        ["in_axes=(None, 0)"],
    ),
    "vmap in_axes with fewer entries than arguments": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.vmap(lambda w, x: w @ x, in_axes=(0,))(jnp.ones((5, 3)), jnp.ones(3))
        """,
        ["`in_axes` has 1 entry for 2 arguments"],
        ["one entry per argument"],
    ),
    "P(None, 'devices') put on a bias": (
        """
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        def run():
            mesh = Mesh(np.array(jax.devices()), ("devices",))
            return jax.device_put(jnp.ones(4), NamedSharding(mesh, P(None, "devices")))
        """,
        ["splits axis 1, not the rows", "PartitionSpec's first entry is axis 0, the rows"],
        ["`P('devices')`"],
    ),
    "tree_flatten returning the children alone, a list": (
        """
        import jax, jax.numpy as jnp
        from jax.tree_util import register_pytree_node_class
        @register_pytree_node_class
        class Linear:
            def __init__(self, w, b):
                self.w, self.b = w, b
            def tree_flatten(self):
                return [self.w, self.b]
            @classmethod
            def tree_unflatten(cls, aux_data, children):
                return cls(*children)
        def run():
            return jax.tree.map(lambda a: a * 2, Linear(jnp.ones(2), jnp.ones(2)))
        """,
        ["returned its children alone", "`(children, aux_data)`"],
        ["return (self.w, self.b), None"],
    ),
    "tree_unflatten taking children first": (
        """
        import jax, jax.numpy as jnp
        from jax.tree_util import register_pytree_node_class
        @register_pytree_node_class
        class Linear:
            def __init__(self, w, b):
                self.w, self.b = w, b
            def tree_flatten(self):
                return (self.w, self.b), None
            @classmethod
            def tree_unflatten(cls, children, aux_data):
                return cls(*children)
        def run():
            return jax.jit(lambda m: m)(Linear(jnp.ones(2), jnp.ones(2)))
        """,
        ["`tree_unflatten(aux_data, children)`", "`children` gets the aux data"],
        ["def tree_unflatten(cls, aux_data, children)"],
    ),
    "tree_unflatten of register_pytree_node unpacking children first": (
        """
        import jax, jax.numpy as jnp
        from jax.tree_util import register_pytree_node
        class Linear:
            def __init__(self, w, b):
                self.w, self.b = w, b
        def unflatten(children, aux_data):
            w, b = children
            return Linear(w, b)
        register_pytree_node(Linear, lambda m: ((m.w, m.b), None), unflatten)
        def run():
            return jax.tree.map(lambda a: a * 2, Linear(jnp.ones(2), jnp.ones(2)))
        """,
        ["`children` is None"],
        ["lambda aux_data, children"],
    ),
    "gradients of argnums=(0, 1) used as one array": (
        """
        import jax, jax.numpy as jnp
        def loss(w, b):
            return jnp.sum(w * b)
        def run():
            w, b = jnp.ones(3), jnp.ones(3)
            grads = jax.grad(loss, argnums=(0, 1))(w, b)
            return w - 0.1 * grads
        """,
        ["`grads` is a tuple (or list), used here as one array", "one gradient per position"],
        ["g_w, g_b = jax.grad(loss, argnums=(0, 1))(w, b)"],
    ),
    "gradients of argnums=(0,) looked up by a key": (
        """
        import jax, jax.numpy as jnp
        def loss(params, x):
            return jnp.sum(params["w"] * x)
        def run():
            grads = jax.grad(loss, argnums=(0,))({"w": jnp.ones(3)}, jnp.ones(3))
            return grads["w"]
        """,
        ["`grads` is a tuple, used here as a dict, by a key"],
        ["`grads[0]['w']`"],
    ),
    "gradients of argnums=(0, 1) mapped beside the params dict": (
        """
        import jax, jax.numpy as jnp
        def loss(params, x):
            return jnp.sum(params["w"] * x)
        def run():
            params, x = {"w": jnp.ones(3)}, jnp.ones(3)
            grads = jax.grad(loss, argnums=(0, 1))(params, x)
            return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
        """,
        ["`grads` is a tuple, used here as a tree shaped like the params"],
        ["argnums=0"],
    ),
    "p.__isub__ in a loop over params.values()": (
        """
        import jax.numpy as jnp
        def run():
            params = {"w": jnp.ones(3), "b": jnp.ones(3)}
            grads = {"w": jnp.ones(3), "b": jnp.ones(3)}
            for p, g in zip(params.values(), grads.values()):
                p.__isub__(0.1 * g)
            return params
        """,
        ["`x.__isub__(y)` is `x -= y` written out", "torch's `x.sub_(y)`", "leaves the dict"],
        ["`x = x - y`", "params = jax.tree.map(lambda p, g: p - lr * g, params, grads)"],
    ),
    "p.__iadd__ on a tracer under jit": (
        """
        import jax, jax.numpy as jnp
        @jax.jit
        def step(params, updates):
            for p, u in zip(params.values(), updates.values()):
                p.__iadd__(u)
            return params
        def run():
            return step({"w": jnp.ones(3)}, {"w": jnp.ones(3)})
        """,
        ["`x += y` written out", "torch's `x.add_(y)`"],
        ["`x = jnp.add(x, ...)`"],
    ),
    "torch's p.sub_ in a loop over params.values()": (
        """
        import jax.numpy as jnp
        def run():
            params = {"w": jnp.ones(3)}
            for p in params.values():
                p.sub_(0.1)
            return params
        """,
        ["`.sub_()` is a torch.Tensor method. A trailing underscore marks one"],
        ["`x = x - y`", "build the new dict"],
    ),
    "torch's zero_ in a tree map": (
        """
        import jax, jax.numpy as jnp
        def run():
            return jax.tree.map(lambda g: g.zero_(), {"w": jnp.ones(3)})
        """,
        ["`.zero_()` is a torch.Tensor method", "changes the tensor in place"],
        ["`x = jnp.zeros_like(x)`"],
    ),
    "an Optax update handed None for its state": (
        """
        import jax.numpy as jnp, optax
        def run():
            params = {"w": jnp.ones(3)}
            opt = optax.adam(1e-2)
            opt_state = None
            return opt.update(params, opt_state, params)
        """,
        ["`update` was handed None for the state"],
        ["opt_state = opt.init(params)"],
    ),
    "x.at[i].add_ with torch's underscore": (
        """
        import jax.numpy as jnp
        def run():
            x = jnp.zeros(3)
            return x.at[0].add_(1.0)
        """,
        ["`.at[i].add_()` with torch's trailing underscore"],
        ["`x = x.at[i].add(v)`"],
    ),
}


def failure_of(source: str, tmp_path: Path, must_raise: bool = True) -> Failure | None:
    path = tmp_path / "learner.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location("learner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.run()
    except Exception as error:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == str(path)]
        types = tuple(cls.__name__ for cls in type(error).__mro__)
        message = in_learner_terms(f"{type(error).__name__}: {error}")
        lines = tuple((f.line or "").strip() for f in frames)
        return Failure(types, message, lines[-1] if lines else "", lines)
    if must_raise:
        pytest.fail("the case raised nothing")
    return None


@pytest.mark.parametrize("case", CASES)
def test_a_real_jax_error_gets_the_diagnosis_meant_for_it(case, tmp_path):
    source, in_cause, in_fix = CASES[case]
    found = diagnose(failure_of(source, tmp_path))
    assert found is not None, case
    for fragment in in_cause:
        assert fragment in found.cause, found
    for fragment in in_fix:
        assert fragment in found.fix, found


def test_a_leaked_tracer_the_grader_reads_is_not_called_a_numpy_call(tmp_path):
    """The learner returns a tracer kept from an earlier trace; the grader's NumPy reads it.
    JAX names the function that was traced, whose line the grader shows: no NumPy there."""
    path = tmp_path / "learner.py"
    path.write_text(
        "import jax, jax.numpy as jnp\n"
        "log = []\n"
        "@jax.jit\n"
        "def step(x):\n"
        "    log.append(x * 2)\n"
        "    return x + 1\n"
        "def run():\n"
        "    step(jnp.ones(3))\n"
        "    return log[-1]\n"
    )
    spec = importlib.util.spec_from_file_location("leaky", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    returned = module.run()
    with pytest.raises(Exception) as raised:
        np.asarray(returned)  # what the grader does with a result
    error = raised.value
    types = tuple(cls.__name__ for cls in type(error).__mro__)
    assert "TracerArrayConversionError" in types
    found = diagnose(Failure(types, f"{types[0]}: {error}", "@jax.jit", ("@jax.jit",)))
    assert found is not None and "leaked tracer" in found.cause, found
    assert "inside `step`" in found.cause and "return every value" in found.fix
    numpy_call = diagnose(Failure(types, f"{types[0]}: {error}", "y = np.asarray(x)"))
    assert numpy_call is not None and "NumPy call" in numpy_call.cause


def test_the_table_of_functions_that_take_functions_is_jaxs_own_signatures():
    """Each row of the table names parameters of the function as JAX's signature spells
    and orders them, and every place by position JAX annotates as a Callable is a function's
    place in it: a parameter JAX renames or adds cannot leave the rule's order behind."""
    import inspect

    import jax  # noqa: F401  (imported, so that the table's paths resolve)

    from kata.diagnosis import argument_order, library_api

    for row in argument_order.TAKES_FUNCTIONS:
        function = library_api.resolve(row.path)
        assert function is not None, row.path
        assert argument_order.takes_functions(function) is row, row.path
        parameters = list(inspect.signature(function).parameters.values())
        names = [p.name for p in parameters]
        named = [name for name in names if name in row.takes]
        assert named == list(row.takes), (row.path, names)  # all of them, in JAX's order
        assert set(row.by_name.values()) <= set(names) and set(row.counts) <= set(names)
        kinds = inspect.Parameter
        by_position = (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD, kinds.VAR_POSITIONAL)
        takes_callables = {
            p.name for p in parameters if "Callable" in str(p.annotation) and p.kind in by_position
        }
        places_for_callables = {
            name
            for name, kind in row.takes.items()
            if kind in (argument_order.FUNCTION, argument_order.TEST, argument_order.FUNCTIONS)
        }
        assert takes_callables <= places_for_callables, row.path


def test_a_static_argnames_error_shows_its_words_once_with_a_why_and_a_fix(tmp_path, monkeypatch):
    """`@partial(jax.jit, static_argnames="m")` stops the file loading; its message wrapped
    past the line its title showed, printing "take these args." twice, with no why or fix."""
    from kata.course import load_course
    from kata.reporting import report
    from kata.results import CheckResult, ExerciseResult, Outcome

    from .helpers import REPO

    failure = failure_of(
        """
        import jax
        from functools import partial
        def run():
            @partial(jax.jit, static_argnames="m")
            def repeat_apply(x, n):
                return x * n
        """,
        tmp_path,
    )
    found = diagnose(failure)
    assert found is not None and found.rule == "static_name_unknown"
    monkeypatch.setenv("COLUMNS", "80")
    check = CheckResult(
        id="checks/test_02_jit.py::test_repeat_apply",
        exercise="02_jit",
        name="repeat_apply: the check",
        outcome=Outcome.ERROR,
        message=failure.message,
        exception=failure.types[0],
        diagnosis={"cause": found.cause, "fix": found.fix, "rule": found.rule},
    )
    exercise = load_course(REPO).resolve("02_jit")
    shown = "\n".join(
        report.exercise_lines(ExerciseResult(exercise, [check], problem=check.message))
    )
    assert shown.count("take these args") == 1, shown
    assert "why: `static_argnames` names an argument" in shown and "fix: name the" in shown


def test_a_keyword_offered_to_kata_rules_is_looked_up_as_a_keyword(tmp_path):
    """`jax.jit(f, mode=...)`: torch has a keyword `mode=` (torch.compile's) and a function
    `torch.mode`, the statistic; `kata rules mode` showed the statistic. A keyword is offered
    spelled as one, `NAME=`, and only where the table has it; spelled so, it finds keywords."""
    from kata.diagnosis import torch_to_jax

    found = diagnose(
        failure_of(
            """
            import jax, jax.numpy as jnp
            def run():
                return jax.jit(jnp.sin, mode="reduce-overhead")(1.0)
            """,
            tmp_path,
        )
    )
    assert found is not None and "takes no `mode=`" in found.cause
    assert "kata rules mode`" not in found.fix, found.fix
    assert torch_to_jax.lookup("keyword", "mode") is None  # so nothing to offer
    assert any(row.kind == "function" for row in torch_to_jax.search("mode"))
    assert all(row.kind == "keyword" for row in torch_to_jax.search("mode="))
    sheet = (("requires_grad=True", "argnums="), ("torch.mode(x)", "no direct function"))
    shown = torch_to_jax.translations(sheet, "requires_grad=")
    assert [row.torch for row in shown][:2] == ["requires_grad=True", "requires_grad="], shown


# Issue #58, class 6: an Optax state handed to another optimizer's `update` (12_optax's
# checks hand a step `optax.adam(1e-2)`'s state, or its own `finetune_init`'s). Optax says
# so in several words: a chain's count of states, another transformation's state without
# the field read, a tuple where `masked`'s or `multi_transform`'s state goes.
OPTIMIZERS = {
    "adam": "optax.adam(1e-2)",
    "adamw": "optax.adamw(1e-2)",
    "sgd with momentum": "optax.sgd(0.1, momentum=0.9)",
    "clipped sgd": "optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1))",
    "clipped adam": "optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-2))",
    "masked adam": "optax.masked(optax.adam(1e-2), TRAINED)",
    "multi_transform": (
        "optax.multi_transform({'trained': optax.adam(1e-2), 'frozen': optax.set_to_zero()}, "
        "{k: 'trained' if v else 'frozen' for k, v in TRAINED.items()})"
    ),
}
OPTAX_STEP = """
import jax, jax.numpy as jnp, optax
TRAINED = {{"w1": False, "b1": False, "w2": True, "b2": True}}
optimizer = {step}
@jax.jit
def step(params, opt_state, grads):
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state
def run():
    params = {{"w1": jnp.ones((4, 3)), "b1": jnp.ones(3)}}
    params.update(w2=jnp.ones((3, 1)), b2=jnp.ones(1))
    return step(params, {init}.init(params), params)
"""


@pytest.mark.parametrize("init", OPTIMIZERS)
def test_a_state_another_optimizer_made_is_told_so_in_all_of_optaxs_words(init, tmp_path):
    """Every optimizer of the course's kinds updating from every other's state: where Optax
    raises (some read no field of the state, and raise nothing), the diagnosis is the one
    rule, whichever of Optax's words it raised with."""
    raised = 0
    for step in OPTIMIZERS:
        source = OPTAX_STEP.format(step=OPTIMIZERS[step], init=OPTIMIZERS[init])
        failure = failure_of(source, tmp_path, must_raise=False)
        if failure is None:
            continue
        raised += 1
        found = diagnose(failure)
        assert found is not None and found.rule == "state_of_another_optimizer", (step, found)
        assert "a state another optimizer's `init` made" in found.cause, (step, found)
        assert "the very optimizer whose `init` made the state" in found.fix
    assert raised, init


def test_optax_update_with_its_arguments_out_of_order_is_told_so(tmp_path):
    found = diagnose(
        failure_of(
            """
            import jax.numpy as jnp, optax
            def run():
                params = {"w": jnp.ones(3), "b": jnp.ones(3), "c": jnp.ones(3)}
                opt = optax.adam(1e-2)
                opt_state = opt.init(params)
                return opt.update(params, params, opt_state)
            """,
            tmp_path,
        )
    )
    assert found is not None and found.rule == "state_of_another_optimizer", found
    assert "another order than it takes them" in found.cause
    assert "opt.update(grads, opt_state, params)" in found.fix


def test_p_none_devices_on_rows_eight_devices_cannot_split_is_told_the_rows_are_axis_0(tmp_path):
    """`P(None, 'devices')` on a batch of 3 features over 8 devices, as 15_sharding runs:
    JAX's IndivisibleError, raised in a process with 8 host devices."""
    import os
    import subprocess
    import sys

    source = textwrap.dedent(
        """
        import jax, jax.numpy as jnp, numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        def shard_rows(x):
            mesh = Mesh(np.array(jax.devices()), ("devices",))
            return jax.device_put(x, NamedSharding(mesh, P(None, "devices")))
        try:
            shard_rows(jnp.ones((16, 3)))
        except Exception as error:
            print(type(error).__name__ + ": " + str(error))
        """
    )
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    env["JAX_PLATFORMS"] = "cpu"
    said = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()
    assert said.startswith("IndivisibleError: "), said
    line = 'return jax.device_put(x, NamedSharding(mesh, P(None, "devices")))'
    failure = Failure(("IndivisibleError", "ValueError", "Exception"), said, line, (line,))
    found = diagnose(failure)
    assert found is not None and found.rule == "spec_splits_another_axis", found
    assert "axis 1 holds 3, which 8 devices cannot split evenly" in found.cause
    assert "PartitionSpec's first entry is axis 0, the rows" in found.cause
    assert "`P('devices')`" in found.fix and "a multiple of 8" in found.fix
