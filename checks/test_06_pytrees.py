"""Checks for 06_pytrees: every function works on any tree, not just the example's keys.

Each function runs on the example params (the 4-3-1 MLP's `w1, b1, w2, b2`), on other
nestings of dicts, lists and tuples (empty ones among the arrays, shapes drawn afresh each
run), and on trees holding `Linear` layers; inputs must come back unchanged. `Linear` must
pass through `jax.tree.map`, `jax.jit` and `jax.grad`, however it was registered.

A tree of dicts, lists and tuples crosses to the learner's process as data, and what the
function returns for it is judged here against the judge's own answer: value evidence.
The learner's Linear, once registered, crosses as a `Tree` (kata.handoffs.wire): the checks
make each of their layers with the learner's own class (a plain call), learn from the
values which of its children holds w and which b (a flatten of its own may give (b, w)),
and read the layers that come back the same way; `jax.tree.map`'s round trip is the
learner's unflatten, run there on the judge's doubled children. `jit` and `grad` through a
Linear, and "inputs left as they were" (an in-place write shows only in that process), are
helpers: that process's word.
"""

from contextlib import contextmanager
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kata.checking.expect import assert_close, assert_untouched, observed, random_array, show
from kata.checking.learner_calls import LearnerError, in_learner_process, rebuilt, type_name
from kata.handoffs.wire import Tree

NOT_REGISTERED = (
    "Linear is not registered as a pytree, so JAX sees a Linear as one opaque object, not "
    "as a container of the arrays w and b. Register the class as a pytree (for a dataclass: "
    "jax.tree_util.register_dataclass, or register_pytree_node with flatten/unflatten)."
)

# On its way between the processes a Linear is a dict with this one key, holding (w, b).
LINEAR = "Linear(w, b)"


class Linear(NamedTuple):
    """Where the learner's Linear(w, b) stands in the checks' trees; being a named tuple,
    a pytree whose leaves show as `.w` and `.b`."""

    w: Any
    b: Any


def remade(tree, parts, make):
    """`tree` with each layer (an item `parts` gives the (w, b) of, rather than None) made
    anew by `make(w, b)`; dicts, lists and tuples are walked, anything else is kept."""
    found = parts(tree)
    if found is not None:
        return make(*(remade(part, parts, make) for part in found))
    if isinstance(tree, dict):
        return {key: remade(value, parts, make) for key, value in tree.items()}
    if isinstance(tree, list):
        return [remade(item, parts, make) for item in tree]
    if isinstance(tree, tuple):
        return tuple(remade(item, parts, make) for item in tree)
    return tree


def marked(w, b):
    return {LINEAR: (w, b)}


def marked_parts(item):
    return item[LINEAR] if isinstance(item, dict) and list(item) == [LINEAR] else None


def to_learner(tree):
    """The checks' `tree` as it travels: each Linear marked."""
    return remade(tree, lambda item: tuple(item) if isinstance(item, Linear) else None, marked)


def from_learner(value):
    """What the learner's process sent, each mark a Linear again."""
    return remade(value, marked_parts, Linear)


def described(ex, value):
    """`value` with each of the learner's Linear layers marked, for the judge to read."""
    layer = getattr(ex, "Linear", None)

    def parts(item):
        return (item.w, item.b) if isinstance(layer, type) and isinstance(item, layer) else None

    return remade(value, parts, marked)


@in_learner_process
def call_with_layers(ex, name, *args):
    """The learner's `name` on `args`, each marked Linear built as the learner's own: its
    result, then the arguments as they are after the call, Linear layers marked again."""
    built = [remade(arg, marked_parts, lambda w, b: ex.Linear(w=w, b=b)) for arg in args]
    result = getattr(ex, name)(*built)
    return [described(ex, value) for value in (result, *built)]


def learner_call(ex, name, *args):
    """`ex.name(*args)` on trees that may hold Linear layers: (its result, the arguments as
    the call left them)."""
    result, *after = call_with_layers(ex, name, *(to_learner(arg) for arg in args))
    return from_learner(result), [from_learner(arg) for arg in after]


@in_learner_process
def linear_through_jit(ex, w, b, x):
    def forward_and_shift(layer, x):
        return x @ layer.w + layer.b, ex.Linear(w=layer.w + 1.0, b=layer.b - 1.0)

    out, shifted = jax.jit(forward_and_shift)(ex.Linear(w=w, b=b), x)
    return out, described(ex, shifted)


@in_learner_process
def linear_through_grad(ex, w, b, x, y):
    def loss(layer, x, y):
        return jnp.sum((x @ layer.w + layer.b - y) ** 2)

    return described(ex, jax.grad(loss)(ex.Linear(w=w, b=b), x, y))


def example_params(rng):
    return {
        "w1": random_array(rng, 4, 3),
        "b1": random_array(rng, 3),
        "w2": random_array(rng, 3, 1),
        "b2": random_array(rng, 1),
    }


def other_structures(rng):
    """(what, tree) pairs: nestings of dicts, lists and tuples, none with the example's keys."""

    def size():
        return int(rng.integers(2, 6))

    hidden = size()
    return [
        (
            "nested dicts",
            {
                "encoder": {
                    "dense": {
                        "kernel": random_array(rng, size(), hidden),
                        "bias": random_array(rng, hidden),
                    },
                    "norm": {"scale": random_array(rng, hidden)},
                },
                "decoder": {"kernel": random_array(rng, hidden, size())},
            },
        ),
        (
            "a list of layers",
            [
                {"w": random_array(rng, size(), hidden), "b": random_array(rng, hidden)},
                {"w": random_array(rng, hidden, 1), "b": random_array(rng, 1)},
            ],
        ),
        (
            "tuples and lists",
            (
                random_array(rng, size()),
                [
                    random_array(rng, size(), size()),
                    (random_array(rng), random_array(rng, 1, size())),
                ],
            ),
        ),
        (
            "empty containers next to arrays",
            {
                "w": random_array(rng, size(), size()),
                "frozen": {},
                "buffers": [],
                "extra": (),
                "head": [random_array(rng, size())],
            },
        ),
    ]


def linear_structures(rng):
    """(what, tree) pairs holding Linear layers (the checks' own; `LearnersLinear.sent`
    makes each the learner's)."""
    return [
        (
            "a dict with a list of Linear layers",
            {
                "layers": [
                    Linear(w=random_array(rng, 4, 3), b=random_array(rng, 3)),
                    Linear(w=random_array(rng, 3, 2), b=random_array(rng, 2)),
                ],
                "temperature": random_array(rng),
            },
        ),
        (
            "a tuple of a Linear and a dict",
            (
                Linear(w=random_array(rng, 2, 5), b=random_array(rng, 5)),
                {"bias": random_array(rng, 5)},
            ),
        ),
    ]


def children_holding(layer, w, b):
    """The names of the children of the learner's `layer` (a Linear made from `w` and `b`)
    that hold w and b, found by their values: a flatten of its own may give them in either
    order. None where its children are not exactly w and b."""
    found = {}
    for name, value in getattr(layer, "children", ()):
        for role, sent in (("w", w), ("b", b)):
            if np.shape(value) == np.shape(sent) and np.array_equal(value, sent):
                found[role] = name
    return (found["w"], found["b"]) if len(layer.children) == 2 and len(found) == 2 else None


class LearnersLinear:
    """The learner's Linear, as a plain call makes it: a `Tree` here, whose children hold w
    and b (which is which, learned from values sent). `sent` turns the checks' trees into
    the learner's, each Linear made by the learner's class; `read` turns what comes back
    into the checks' terms."""

    def __init__(self, ex, why):
        w, b = np.ones((2, 3), np.float32), np.zeros((3,), np.float32)
        probe = ex.Linear(w=w, b=b)
        names = children_holding(probe, w, b) if isinstance(probe, Tree) else None
        assert names is not None, (
            f"{why}, and Linear is not registered as a pytree yet: solve the Linear task first."
        )
        self.ex, self.type_name, (self.w, self.b) = ex, probe.type_name, names

    def sent(self, tree):
        def parts(item):
            return tuple(item) if isinstance(item, Linear) else None

        return remade(tree, parts, lambda w, b: self.ex.Linear(w=w, b=b))

    def read(self, value):
        def parts(item):
            if isinstance(item, Tree) and item.type_name == self.type_name:
                return item[self.w], item[self.b]
            return None

        return remade(value, parts, Linear)


def like(tree, rng):
    """A tree of the same structure as `tree`, with new random arrays."""
    leaves, treedef = jax.tree.flatten(tree)
    return jax.tree.unflatten(treedef, [random_array(rng, *np.shape(leaf)) for leaf in leaves])


def as_float64(leaf):
    return np.asarray(leaf, dtype=np.float64)


@contextmanager
def running_on(tell, what, tree):
    """If learner code raises on `tree`, tell the learner which tree it was."""
    try:
        yield
    except AssertionError:
        raise
    except Exception:
        tell(f"it raised on {what}: {str(jax.tree.map(Shown, tree))[:300]}")
        raise


class Shown:
    """An array shown by its shape, in a tree printed for the learner."""

    def __init__(self, leaf):
        self.shape = tuple(np.shape(leaf))

    def __repr__(self):
        return f"<array {self.shape}>"


# ------------------------------------------------------------------------ what is expected


def assert_shapes(got, params, what):
    """`got`, what param_shapes(params) returned, is params' structure of shapes."""
    leaves, treedef = jax.tree.flatten(params)
    want = jax.tree.map(lambda leaf: tuple(leaf.shape), params)
    try:
        shapes = treedef.flatten_up_to(got)
    except (TypeError, ValueError):
        shapes = None
    kept = shapes is not None
    assert kept, (
        f"param_shapes(params) for {what} should keep the structure of params: expected "
        f"{str(want)[:300]}, got {str(got)[:300]}"
    )
    for leaf, shape in zip(leaves, shapes, strict=True):
        try:
            matches = tuple(shape) == tuple(leaf.shape)
        except TypeError:
            matches = False
        assert matches, (
            f"param_shapes(params) for {what} gave {shape!r} where the array of shape "
            f"{tuple(leaf.shape)} is: each array should become its shape. Expected "
            f"{str(want)[:300]}"
        )


def assert_count(got, params, what):
    """`got`, what count_params(params) returned, is the number of scalars in params."""
    leaves = jax.tree.leaves(params)
    want = sum(int(np.size(leaf)) for leaf in leaves)
    one_number = np.ndim(got) == 0
    assert one_number, f"count_params(params) for {what} should return one number, got {show(got)}"
    value = float(np.asarray(got))
    hint = ""
    if value == len(leaves):
        hint = f": {len(leaves)} is the number of arrays; count the numbers inside them"
    assert value == want, (
        f"count_params(params) for {what} returned {value:g}, expected {want}, the number "
        f"of scalars in all its arrays{hint}"
    )


def assert_inputs_kept(ex, params, grads, lr, what):
    """sgd_update(params, grads, lr) leaves both trees as they were in the learner's
    process (as it tells of them: an in-place write shows only there); its result."""
    before_params, before_grads = observed(params), observed(grads)
    got, (params_after, grads_after, _) = learner_call(ex, "sgd_update", params, grads, lr)
    call = f"sgd_update(params, grads, lr={lr:g}) for {what}"
    assert_untouched(observed(params_after), before_params, "params", call)
    assert_untouched(observed(grads_after), before_grads, "grads", call)
    return got


def assert_sgd(got, params, grads, lr, what):
    """`got`, what sgd_update(params, grads, lr) returned, is p - lr * g leaf by leaf."""
    call = f"sgd_update(params, grads, lr={lr:g}) for {what}"
    treedef = jax.tree.structure(params)
    same_structure = jax.tree.structure(got) == treedef
    assert same_structure, (
        f"{call} should return a tree shaped like params: expected {str(treedef)[:300]}, "
        f"got {str(jax.tree.structure(got))[:300]}"
    )
    for (path, p), g, new in zip(
        jax.tree_util.tree_flatten_with_path(params)[0],
        jax.tree.leaves(grads),
        jax.tree.leaves(got),
        strict=True,
    ):
        assert_close(
            new,
            as_float64(p) - lr * as_float64(g),
            f"{call}, at params{jax.tree_util.keystr(path)}",
        )


def assert_norm(got, tree, what):
    """`got`, what global_norm(tree) returned, is the norm of all of tree's numbers."""
    squares = sum(float(np.sum(as_float64(leaf) ** 2)) for leaf in jax.tree.leaves(tree))
    want = np.sqrt(squares)
    one_number = np.ndim(got) == 0
    assert one_number, f"global_norm(tree) for {what} should return one number, got {show(got)}"
    squared = np.isclose(float(np.asarray(got)), squares, rtol=1e-4) and abs(want - 1) > 0.01
    rooted = not squared
    assert rooted, (
        f"global_norm(tree) for {what} returned {float(np.asarray(got)):.4g}, the sum of "
        f"squares; the norm is its square root, {want:.4g}"
    )
    assert_close(got, want, f"global_norm(tree) for {what}")


# ---------------------------------------------------------------------------- param_shapes


@pytest.mark.task("param_shapes")
def test_param_shapes_example(ex, rng):
    """param_shapes: the example params' shapes, under the same keys"""
    params = example_params(rng)
    assert_shapes(ex.param_shapes(params), params, "the example params")


@pytest.mark.task("param_shapes")
def test_param_shapes_any_structure(ex, rng, tell):
    """param_shapes: keeps any nesting of dicts, lists and tuples, empty ones too"""
    for what, tree in other_structures(rng):
        with running_on(tell, what, tree):
            assert_shapes(ex.param_shapes(tree), tree, what)


@pytest.mark.task("param_shapes")
def test_param_shapes_with_linear(ex, rng, tell):
    """param_shapes: sees inside Linear layers"""
    layers = LearnersLinear(ex, "This check runs on trees holding Linear layers")
    for what, tree in linear_structures(rng):
        with running_on(tell, what, tree):
            assert_shapes(layers.read(ex.param_shapes(layers.sent(tree))), tree, what)


# ---------------------------------------------------------------------------- count_params


@pytest.mark.task("count_params")
def test_count_params_example(ex, rng):
    """count_params: the example params hold 4·3 + 3 + 3·1 + 1 = 19 numbers"""
    params = example_params(rng)
    assert_count(ex.count_params(params), params, "the example params")


@pytest.mark.task("count_params")
def test_count_params_any_structure(ex, rng, tell):
    """count_params: counts every number in any nesting of dicts, lists and tuples"""
    for what, tree in other_structures(rng):
        with running_on(tell, what, tree):
            assert_count(ex.count_params(tree), tree, what)


@pytest.mark.task("count_params")
def test_count_params_with_linear(ex, rng, tell):
    """count_params: counts the numbers inside Linear layers"""
    layers = LearnersLinear(ex, "This check runs on trees holding Linear layers")
    for what, tree in linear_structures(rng):
        with running_on(tell, what, tree):
            assert_count(ex.count_params(layers.sent(tree)), tree, what)


# ------------------------------------------------------------------------------ sgd_update


@pytest.mark.task("sgd_update")
def test_sgd_update_example(ex, rng):
    """sgd_update: p - lr * g for every array of the example params"""
    params = example_params(rng)
    grads, lr = like(params, rng), float(rng.uniform(0.01, 0.5))
    assert_sgd(ex.sgd_update(params, grads, lr), params, grads, lr, "the example")


@pytest.mark.task("sgd_update")
def test_sgd_update_leaves_inputs_unchanged(ex, rng):
    """sgd_update: returns new params; the caller's params and grads stay as they were"""
    params = example_params(rng)
    assert_inputs_kept(ex, params, like(params, rng), 0.1, "the example")


@pytest.mark.task("sgd_update")
def test_sgd_update_any_structure(ex, rng, tell):
    """sgd_update: updates any nesting of dicts, lists and tuples"""
    for what, params in other_structures(rng):
        grads, lr = like(params, rng), float(rng.uniform(0.01, 0.5))
        with running_on(tell, what, params):
            assert_sgd(ex.sgd_update(params, grads, lr), params, grads, lr, what)


@pytest.mark.task("sgd_update")
def test_sgd_update_leaves_any_structure_unchanged(ex, rng, tell):
    """sgd_update: leaves any nesting of dicts, lists and tuples as it was"""
    for what, params in other_structures(rng):
        grads, lr = like(params, rng), float(rng.uniform(0.01, 0.5))
        with running_on(tell, what, params):
            assert_inputs_kept(ex, params, grads, lr, what)


@pytest.mark.task("sgd_update")
def test_sgd_update_with_linear(ex, rng, tell):
    """sgd_update: updates the arrays inside Linear layers"""
    layers = LearnersLinear(ex, "This check runs on trees holding Linear layers")
    for what, params in linear_structures(rng):
        grads, lr = like(params, rng), float(rng.uniform(0.01, 0.5))
        with running_on(tell, what, params):
            got = ex.sgd_update(layers.sent(params), layers.sent(grads), lr)
            assert_sgd(layers.read(got), params, grads, lr, what)


# ----------------------------------------------------------------------------- global_norm


@pytest.mark.task("global_norm")
def test_global_norm_example(ex, rng):
    """global_norm: the square root of the sum of squares over the example params"""
    params = example_params(rng)
    assert_norm(ex.global_norm(params), params, "the example params")


@pytest.mark.task("global_norm")
def test_global_norm_any_structure(ex, rng, tell):
    """global_norm: covers every array in any nesting of dicts, lists and tuples"""
    for what, tree in other_structures(rng):
        with running_on(tell, what, tree):
            assert_norm(ex.global_norm(tree), tree, what)


@pytest.mark.task("global_norm")
def test_global_norm_with_linear(ex, rng, tell):
    """global_norm: covers the arrays inside Linear layers"""
    layers = LearnersLinear(ex, "This check runs on trees holding Linear layers")
    for what, tree in linear_structures(rng):
        with running_on(tell, what, tree):
            assert_norm(ex.global_norm(layers.sent(tree)), tree, what)


# ---------------------------------------------------------------------------------- Linear


def linear_data(rng):
    return (
        random_array(rng, 4, 3),
        random_array(rng, 3),
        random_array(rng, 6, 4),
        random_array(rng, 6, 3),
    )


@pytest.mark.task("Linear")
def test_linear_is_a_pytree(ex, rng):
    """Linear: jax.tree.map sees its w and b, and rebuilds a Linear"""
    w, b, _, _ = linear_data(rng)
    layer = ex.Linear(w=w, b=b)
    registered = isinstance(layer, Tree)
    assert registered, (
        "jax.tree.leaves(Linear(w, b)) gave 1 leaf, the Linear itself, instead of the two "
        f"arrays w and b. {NOT_REGISTERED}"
    )
    names = children_holding(layer, w, b)
    assert names is not None, (
        f"jax.tree.leaves(Linear(w, b)) gave {len(layer)} leaves, {show(list(layer))[:200]}, "
        "not the two arrays w and b: flatten should give (w, b) as its children"
    )
    # What jax.tree.map(lambda a: 2 * a, layer) does: flatten, double, unflatten, here with
    # the learner's own unflatten, in its process.
    doubled = rebuilt(ex, layer.replaced({names[0]: 2 * w, names[1]: 2 * b}), as_asked=False)
    is_linear = isinstance(doubled, Tree) and doubled.type_name == layer.type_name
    assert is_linear, (
        f"jax.tree.map(f, Linear(w, b)) should give back a Linear, got {type_name(doubled)}"
    )
    kept = children_holding(doubled, 2 * w, 2 * b) == names
    assert kept, (
        "jax.tree.map(lambda a: 2 * a, Linear(w, b)) gave a Linear whose w and b are not "
        "2 * w and 2 * b where flatten put them: unflatten should rebuild the Linear from "
        "the children in the order flatten gave them"
    )


@pytest.mark.task("Linear")
def test_linear_passes_through_jit(ex, rng):
    """Linear: goes into and comes out of a jax.jit function"""
    w, b, x, _ = linear_data(rng)
    try:
        out, shifted = linear_through_jit(ex, w, b, x)
        accepted = True
    except LearnerError as error:
        if not error.is_a("TypeError"):
            raise
        accepted = False
    assert accepted, (
        f"jax.jit(f)(layer, x) raised a TypeError: jit cannot take a Linear as an argument. "
        f"{NOT_REGISTERED}"
    )
    assert_close(out, as_float64(x) @ as_float64(w) + as_float64(b), "jax.jit(f)(layer, x)")
    shifted = from_learner(shifted)
    is_linear = isinstance(shifted, Linear)
    assert is_linear, f"a Linear returned from jax.jit came back as {type_name(shifted)}"
    assert_close(shifted.w, as_float64(w) + 1.0, "the w of a Linear returned from jax.jit")
    assert_close(shifted.b, as_float64(b) - 1.0, "the b of a Linear returned from jax.jit")


@pytest.mark.task("Linear")
def test_linear_passes_through_grad(ex, rng):
    """Linear: jax.grad of a loss of a Linear gives a Linear of gradients"""
    w, b, x, y = linear_data(rng)
    try:
        grads = from_learner(linear_through_grad(ex, w, b, x, y))
        accepted = True
    except LearnerError as error:
        if not error.is_a("TypeError"):
            raise
        accepted = False
    assert accepted, (
        f"jax.grad(loss)(layer, x, y) raised a TypeError: grad cannot differentiate with "
        f"respect to a Linear. {NOT_REGISTERED}"
    )
    is_linear = isinstance(grads, Linear)
    assert is_linear, (
        f"jax.grad(loss)(layer, x, y) should be a Linear of gradients, got {type_name(grads)}"
    )
    residual = as_float64(x) @ as_float64(w) + as_float64(b) - as_float64(y)
    assert_close(
        grads.w,
        2 * as_float64(x).T @ residual,
        "jax.grad(loss)(layer, x, y).w",
        rtol=1e-4,
        atol=1e-4,
    )
    assert_close(
        grads.b, 2 * residual.sum(axis=0), "jax.grad(loss)(layer, x, y).b", rtol=1e-4, atol=1e-4
    )
