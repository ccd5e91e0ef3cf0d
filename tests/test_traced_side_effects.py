"""Side effects inside jit: found in the learner's file, explained only on that evidence."""

from pathlib import Path

import pytest

from kata.diagnosis.diagnose import Failure
from kata.diagnosis.traced_side_effects import explain, jitted_side_effects
from kata.findings import Finding
from kata.judge.pytest_plugin import describe_failure

LOGGED_STEP = """
import jax
import jax.numpy as jnp

loss_log = []
calls = 0


@jax.jit
def step(params, x):
    global calls
    calls += 1
    loss_log.append(jnp.sum(x))
    print("step", x)
    return params
"""


def test_appends_counts_and_prints_in_a_jitted_function_are_found():
    found = [(effect.function, effect.what) for effect in jitted_side_effects(LOGGED_STEP)]
    assert found == [
        ("step", "assigns `calls`, a name outside it"),
        ("step", "calls `loss_log.append`"),
        ("step", "prints"),
    ]


@pytest.mark.parametrize(
    "source",
    [
        # the same function, never jitted: its appends run at every call
        LOGGED_STEP.replace("@jax.jit\n", ""),
        # a list of its own, stacked inside the trace: no side effect
        "import jax\n@jax.jit\ndef f(xs):\n    out = []\n    for x in xs:\n"
        "        out.append(x * 2)\n    return jax.numpy.stack(out)\n",
        # Optax's update and jnp's functions share names with a container's methods
        "import jax, optax, jax.numpy as jnp\nadam = optax.adam(1e-2)\n@jax.jit\n"
        "def step(p, g, s):\n    u, s = adam.update(g, s, p)\n"
        "    return jnp.insert(u, 0, 1.0), s\n",
        # jax.debug.print prints on every call
        "import jax\n@jax.jit\ndef f(x):\n    jax.debug.print('x={}', x)\n    return x\n",
        # writing into its own argument: jit hands the function a container of its own
        "import jax\n@jax.jit\ndef f(params):\n    params['w'] = params['w'] * 2\n"
        "    return params\n",
        "def f(:",
    ],
    ids=["not jitted", "own list", "optax and jnp", "debug print", "own argument", "no parse"],
)
def test_look_alikes_are_no_side_effect(source):
    assert jitted_side_effects(source) == []


def test_jitted_by_a_call_or_with_options_and_closing_over_a_list():
    source = """
import functools, jax

def train(params, steps):
    losses = []

    def logged(params):
        losses.append(params)
        return params

    fast = jax.jit(logged)
    return fast(params), losses

@functools.partial(jax.jit, static_argnums=1)
def other(x, n):
    print(x)
    return x
"""
    found = [(effect.function, effect.what) for effect in jitted_side_effects(source)]
    assert found == [("logged", "calls `losses.append`"), ("other", "prints")]


LEAK = Failure(("UnexpectedTracerError", "JAXTypeError"), "Encountered an unexpected tracer.")
EMPTY = Failure(("ValueError",), "ValueError: Need at least one array to stack.")


def test_a_leaked_tracer_is_told_in_pytorch_terms_with_the_files_evidence():
    found = explain(LEAK, LOGGED_STEP)
    assert "In PyTorch a step that appends, prints or counts does so on every call" in (found.cause)
    assert "`step` calls `loss_log.append` (line 13)" in found.cause
    assert "jax.debug.print" in found.fix and found.rule == "traced_side_effect"
    assert "In your file" not in explain(LEAK, None).cause  # JAX's word alone: no evidence


def test_an_empty_list_is_told_only_where_a_jitted_function_appends():
    found = explain(EMPTY, LOGGED_STEP)
    assert "the list given to stack or concatenate is empty" in found.cause
    assert "after the first call the list gets nothing more" in found.cause
    assert explain(EMPTY, LOGGED_STEP.replace("@jax.jit\n", "")) is None
    assert explain(EMPTY, None) is None
    other = Failure(("ValueError",), "ValueError: operands could not be broadcast together")
    assert explain(other, LOGGED_STEP) is None


def test_a_wrong_value_is_tied_to_state_kept_by_jitted_code_only_where_there_is_some():
    wrong = Failure(("Finding", "AssertionError"), "step(params) returned a wrong value")
    found = explain(wrong, LOGGED_STEP, finding="calls disagree")
    assert "can come from state your jitted code keeps outside it" in found.cause
    assert "a count kept this way stops at 1" in found.cause
    printing_only = "import jax\n@jax.jit\ndef f(x):\n    print(x)\n    return x\n"
    assert explain(wrong, printing_only, finding="wrong value") is None
    assert explain(wrong, LOGGED_STEP, finding="wrong shape") is None
    assert explain(wrong, LOGGED_STEP.replace("@jax.jit\n", ""), finding="wrong value") is None


def test_a_leak_without_evidence_in_the_file_names_where_jax_says_it_was_made():
    leak = Failure(
        LEAK.types, "The leaked intermediate value was created on line /t/07.py:31:11 (loss)."
    )
    assert "made at line 31 of 07.py, in `loss`" in explain(leak, "x = 1\n").cause


def test_the_grader_reads_the_graded_file_for_a_checks_own_finding(tmp_path):
    graded = tmp_path / "07_train_step.py"
    graded.write_text(LOGGED_STEP)
    with pytest.raises(Finding) as info:
        raise Finding("wrong value", "step(params) returned a wrong value")
    described = describe_failure(info, Path("/nowhere"), graded)
    assert described["diagnosis"]["rule"] == "traced_side_effect"
    assert describe_failure(info, Path("/nowhere"))["diagnosis"] is None


def test_of_a_function_defined_twice_the_later_definition_counts():
    redefined = (
        LOGGED_STEP + "\n\ndef step(params, x):\n    loss_log.append(x)\n    return params\n"
    )
    assert jitted_side_effects(redefined) == []
    rejitted = "import jax\nlog = []\ndef f(x):\n    return x\ndef f(x):\n    log.append(x)\n"
    assert [e.line for e in jitted_side_effects(rejitted + "g = jax.jit(f)\n")] == [6]


def test_writing_into_a_module_level_dict_is_no_binding_of_it():
    source = (
        "import jax\nvelocity = {}\n@jax.jit\ndef step(params, grads):\n    new = {}\n"
        "    for name in params:\n        velocity[name] = grads[name]\n"
        "        new[name], (a, *rest) = params[name], (1, 2)\n    return new\n"
    )
    assert [e.what for e in jitted_side_effects(source)] == ["writes into `velocity[name]`"]


STORED_STEP = """
import jax

seen = []


@jax.jit
def step(x):
    seen.append(x)
    return x * 2


def run(x):
    step(x)
    return float(seen[0])
"""
# JAX's words for `float(seen[0])` after step's trace ended (JAX 0.10.2).
CONCRETIZED = (
    "ConcretizationTypeError: Abstract tracer value encountered where concrete value is "
    "expected: traced array with shape float32[]\\nThe problem arose with the `float` function. "
    "\\nThe error occurred while tracing the function step at /tmp/x.py:7 for jit. This "
    "concrete value was not available in Python because it depends on the value of the "
    "argument x."
)


def test_a_tracer_stored_while_tracing_and_read_after_is_told_so_not_float_under_jit():
    failure = Failure(
        ("ConcretizationTypeError", "TypeError"), CONCRETIZED, "return float(seen[0])"
    )
    found = explain(failure, STORED_STEP)
    assert found is not None and found.rule == "traced_side_effect"
    assert "`step` calls `seen.append`" in found.cause and "after that trace ended" in found.cause


def test_a_float_inside_the_traced_function_is_left_to_the_rules_of_conversion():
    """The look-alike: the same words, the failing line inside the jitted function that
    also stores: a conversion under jit, not a stored tracer."""
    source = STORED_STEP.replace("    return x * 2\n", "    return float(x) * 2\n")
    failure = Failure(("ConcretizationTypeError", "TypeError"), CONCRETIZED, "return float(x) * 2")
    assert explain(failure, source) is None
    printing = STORED_STEP.replace("seen.append(x)", "print(x)")
    failure = Failure(
        ("ConcretizationTypeError", "TypeError"), CONCRETIZED, "return float(seen[0])"
    )
    assert explain(failure, printing) is None
