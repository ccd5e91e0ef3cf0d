"""What crosses between the judge and the learner's process (kata.handoffs.wire): objects
JAX knows as pytrees cross as data and keep their identity; nothing else is looked inside."""

import equinox as eqx
import jax
import numpy as np
import optax
import pytest

from kata.handoffs import wire


class LearnerSide:
    """The learner's process's end: objects kept by handle, as kata.learner_side.learner_process
    keeps them."""

    def __init__(self):
        self.objects = {}

    def keep(self, item):
        self.objects[id(item)] = item
        return wire.Opaque(id(item), type(item).__name__)

    def find(self, opaque):
        return self.objects[opaque.handle]

    def send(self, value):
        """`value` as the judge receives it."""
        return wire.decode(*wire.encode(value, self.keep))

    def receive(self, value):
        """`value`, sent by the judge, as the learner's process gets it."""
        return wire.decode(*wire.encode(value), self.find, jax.device_put)


class Model(eqx.Module):
    linear: eqx.nn.Linear
    dropout: eqx.nn.Dropout

    def __call__(self, x):
        return self.linear(x)


def model():
    return Model(eqx.nn.Linear(3, 2, key=jax.random.key(0)), eqx.nn.Dropout(p=0.25))


def test_a_module_crosses_as_its_fields_and_comes_back_as_itself():
    learner = LearnerSide()
    original = model()
    seen = learner.send(original)
    assert isinstance(seen, wire.Tree) and seen.type_name == "Model"
    assert seen.names() == ["linear", "dropout"]
    np.testing.assert_array_equal(seen.linear.weight, np.asarray(original.linear.weight))
    assert seen.dropout.p == 0.25 and seen.dropout.inference is False
    assert learner.receive(seen) is original, "passed back, it is not the object itself"


def test_a_replaced_child_is_rebuilt_there_as_the_learners_own_class():
    learner = LearnerSide()
    original = model()
    weight = np.arange(6, dtype=np.float32).reshape(2, 3)
    changed = learner.send(original).replaced(
        {"linear": {"weight": weight}, "dropout": {"inference": True}}
    )
    rebuilt = learner.receive(changed)
    assert type(rebuilt) is Model and rebuilt is not original
    np.testing.assert_array_equal(rebuilt.linear.weight, weight)
    np.testing.assert_array_equal(rebuilt.linear.bias, original.linear.bias)
    assert rebuilt.dropout.inference is True and original.dropout.inference is False
    with pytest.raises(KeyError):
        learner.send(original).replaced({"linear3": 1})


def test_an_optax_state_crosses_as_named_tuples_and_still_updates():
    learner = LearnerSide()
    params = {"w": jax.numpy.ones((2,))}
    optimizer = optax.adam(1e-2)
    state = optimizer.init(params)
    seen = learner.send(state)
    assert isinstance(seen, tuple) and isinstance(seen[0], wire.Tree)
    assert seen[0].type_name == "ScaleByAdamState" and int(seen[0].count) == 0
    back = learner.receive(seen)
    optimizer.update(params, back, params)  # a plain tuple of tuples would fail here
    assert back[0] is state[0]


def test_the_judge_sends_no_tree_and_rebuilds_nothing():
    with pytest.raises(wire.WireError):
        wire.encode(model())  # the judge's own objects never cross
    with pytest.raises(wire.WireError):
        wire.decode({"rebuild": 1, "children": []}, [])  # the judge rebuilds nothing
    functions = LearnerSide()
    assert type(functions.send(np.sum)) is wire.Opaque  # a function is no tree


# Rebuilt in the learner's process: what comes back must be what was asked for ----------

EXERCISE = """
import equinox as eqx
import jax


class Model(eqx.Module):
    scale: jax.Array
    training: bool

    def __call__(self, x):
        return x * self.scale


def make():
    return Model(jax.numpy.ones(3), True)
"""
# A module that replaces kata's builder in its process, past the fingerprint (as
# tests/test_relay_and_caches.py's prefilled helpers do): whatever the judge asks for, it
# hands the learner's functions a model of its own choosing. Any name looked up that the
# module lacks sets it.
FORGED_BUILDER = """

import sys as _sys

def __getattr__(name):
    frame = _sys._getframe(1)
    while frame is not None and type(frame.f_locals.get("self")).__name__ != "LoadedExercise":
        frame = frame.f_back
    session = frame.f_locals["self"]
    real = session.helper
    own = lambda *args, **kwargs: Model(jax.numpy.full(3, 7.0), False)
    session.helper = lambda helper: own if helper == "rebuilt" else real(helper)
    raise AttributeError(name)
"""


def test_a_rebuilt_object_is_the_one_asked_for(learner_module):
    from kata.checking.learner_calls import rebuilt

    ex = learner_module(EXERCISE)
    asked = ex.make().replaced({"scale": np.full(3, 2.0, np.float32)})
    built = rebuilt(ex, asked)
    np.testing.assert_array_equal(built.scale, np.full(3, 2.0))
    np.testing.assert_array_equal(ex.invoke(built)(np.ones(3, np.float32)), np.full(3, 2.0))


def test_a_builder_replaced_in_the_learners_process_is_caught(learner_module):
    from kata.checking.learner_calls import LearnerError, rebuilt

    ex = learner_module(EXERCISE + FORGED_BUILDER)
    with pytest.raises(LearnerError):
        ex.set_the_builder_up  # noqa: B018 — a name the module lacks
    asked = ex.make().replaced({"scale": np.full(3, 2.0, np.float32)})
    with pytest.raises(AssertionError, match="other children than asked"):
        rebuilt(ex, asked)
