"""Results dropped where a change in place was expected: found in the learner's file, and
explained only on that evidence."""

import pytest

from kata import findings
from kata.diagnosis.diagnose import Failure
from kata.diagnosis.dropped_results import dropped_calls, explain

HEADER = "import equinox as eqx\nimport jax\nimport jax.numpy as jnp\nimport optax\n\n"


def found(body: str) -> list[tuple[str, str]]:
    return [(d.kind, d.call) for d in dropped_calls(HEADER + body)]


@pytest.mark.parametrize(
    ("body", "kind", "call"),
    [
        ("def ev(model):\n    eqx.nn.inference_mode(model)\n    return model\n",
         "mode", "eqx.nn.inference_mode(model)"),
        ("def ev(m):\n    eqx.tree_at(lambda t: t.dropout.inference, m, True)\n    return m\n",
         "tree_at", "eqx.tree_at(lambda t: t.dropout.inference, m, True)"),
        ("def step(m, u):\n    eqx.apply_updates(m, u)\n    return m\n",
         "apply_updates", "eqx.apply_updates(m, u)"),
        ("def step(g, s, p):\n    opt.update(g, s, p)\n    return p\n",
         "optimizer_update", "opt.update(g, s, p)"),
        ("def f(x):\n    x.at[0].set(1.0)\n    return x\n", "at", "x.at[0].set(1.0)"),
        ("def f(v):\n    jax.lax.fori_loop(0, 3, lambda i, v: v * 2, v)\n    return v\n",
         "loop", "jax.lax.fori_loop(0, 3, lambda i, v: v * 2, v)"),
        ("def f(x):\n    jnp.clip(x, 0, 1)\n    return x\n", "pure", "jnp.clip(x, 0, 1)"),
        # in a method of a class, as in a module's __call__
        ("class M(eqx.Module):\n    def __call__(self, x):\n        x.astype(jnp.int32)\n"
         "        return x\n", "pure", "x.astype(jnp.int32)"),
    ],
    ids=["inference_mode", "tree_at", "apply_updates", "optimizer update", "at set",
         "fori_loop", "jnp", "astype"],
)  # fmt: skip
def test_a_dropped_result_is_found_with_its_kind(body, kind, call):
    assert found(body) == [(kind, call)]


@pytest.mark.parametrize(
    "body",
    [
        # kept, returned, or assigned: the result is used
        "def ev(model):\n    return eqx.nn.inference_mode(model)\n",
        "def ev(model):\n    model = eqx.nn.inference_mode(model)\n    return model\n",
        "def f(x):\n    y = x.at[0].set(1.0)\n    return y\n",
        # a dict's update takes one mapping and changes the dict in place
        "def f(d, e):\n    d.update(e)\n    return d\n",
        # called for what they print or write
        "def f(x):\n    jax.debug.print('x={}', x)\n    return x\n",
        "def f(p):\n    jax.tree.map(lambda a: print(a.shape), p)\n    return p\n",
        "def f(x):\n    jnp.save('x.npy', x)\n    return x\n",
        "def f(x):\n    x.block_until_ready()\n    return x\n",
        # NumPy has in-place functions
        "import numpy as np\ndef f(a, b):\n    np.copyto(a, b)\n    return a\n",
        # a line of a notebook or script at module level shows its value
        "x = jnp.zeros(3)\njnp.sum(x)\n",
        "def f(:",
    ],
    ids=["returned", "kept", "assigned", "dict update", "debug print", "tree.map print",
         "jnp.save", "block_until_ready", "np.copyto", "module level", "no parse"],
)  # fmt: skip
def test_look_alikes_are_no_dropped_result(body):
    assert found(body) == []


DROPPED_MODE = HEADER + (
    "class MLP(eqx.Module):\n"
    "    def __call__(self, x, key=None):\n"
    "        return self.dropout(x, key=key)\n\n\n"
    "def evaluation_mode(model):\n"
    "    eqx.nn.inference_mode(model)\n"
    "    return model\n"
)
NO_KEY = "RuntimeError: Dropout requires a key when running in non-deterministic mode."


def test_a_check_verdict_on_the_function_that_drops_is_put_down_to_it():
    failure = Failure(("Finding",), "evaluation_mode(model) returned a model still training")
    said = explain(failure, DROPPED_MODE, findings.OWN_TEST)
    assert said is not None and said.rule == "dropped_result"
    assert "`evaluation_mode` drops the result of `eqx.nn.inference_mode(model)`" in said.cause
    assert "unlike torch's `model.eval()`" in said.cause
    assert "`model = eqx.nn.inference_mode(model)`" in said.fix


def test_a_check_verdict_on_another_function_is_not():
    # the look-alike: a wrong value from predict, in a file whose evaluation_mode drops
    failure = Failure(("Finding",), "predict(model, xs) returned a wrong value")
    assert explain(failure, DROPPED_MODE, findings.WRONG_VALUE) is None


def test_an_error_a_dropped_mode_leaves_behind_says_both_causes():
    # The model's own line raised: the function that drops is not in the traceback, so
    # a dropout never given a key fits too.
    failure = Failure(("RuntimeError",), NO_KEY, "return self.dropout(x, key=key)")
    said = explain(failure, DROPPED_MODE)
    assert said is not None and said.cause.startswith("two causes fit.")
    assert "drops the result of `eqx.nn.inference_mode(model)`" in said.cause
    assert "got no PRNG key" in said.cause and "pass one per example" in said.fix


def test_an_error_raised_inside_the_function_that_drops_is_put_down_to_it_alone():
    source = HEADER + (
        "def predict(model, xs):\n"
        "    eqx.nn.inference_mode(model)\n"
        "    return jax.vmap(model)(xs)\n"
    )
    failure = Failure(("RuntimeError",), NO_KEY, "return jax.vmap(model)(xs)")
    said = explain(failure, source)
    assert said is not None and "two causes" not in said.cause
    assert "`predict` drops the result" in said.cause


@pytest.mark.parametrize(
    ("message", "source"),
    [
        # the look-alikes: another error in a file that drops; the same error in one that
        # does not (dropout_without_key answers it)
        ("TypeError: unsupported operand", DROPPED_MODE),
        (NO_KEY, DROPPED_MODE.replace("    eqx.nn.inference_mode(model)\n", "")),
        # a dropped `.at` leaves no dropout behind
        (NO_KEY, HEADER + "def f(x):\n    x.at[0].set(1.0)\n    return x\n"),
    ],
    ids=["another error", "nothing dropped", "another kind dropped"],
)
def test_an_error_without_that_evidence_is_left_to_the_rules(message, source):
    assert explain(Failure(("RuntimeError",), message), source) is None
