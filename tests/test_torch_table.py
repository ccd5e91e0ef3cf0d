"""The PyTorch → JAX table against JAX itself: every row is what JAX does.

A row that says JAX spells a name otherwise must raise JAX's real error when typed the
torch way, on an array and on the tracers of `jit`, `vmap` and `grad`, and that error must
be diagnosed with the row's own advice. A row that says JAX takes torch's spelling must
run as typed.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from kata.course import load_course
from kata.diagnosis import torch_to_jax
from kata.diagnosis.diagnose import Failure, diagnose
from kata.diagnosis.torch_to_jax import Row
from kata.judge.pytest_plugin import in_learner_terms
from tests.helpers import REPO, kata

ROWS = sorted(torch_to_jax.rows().values(), key=lambda row: (row.kind, row.name))


def typed(row: Row) -> str:
    """What a PyTorch user types for the row, `x` an array."""
    if row.typed:
        return row.typed
    return f"jnp.{row.name}" if row.kind == "function" else f"x.{row.name}"


def run_as_typed(row: Row, mode: str) -> BaseException | None:
    """Run the row's torch spelling in `mode`; the exception it raises, or None."""
    code = compile(typed(row), f"<{row.kind} {row.name}>", "eval")

    def learner_function(x: jax.Array):
        result = eval(code, {"x": x, "jnp": jnp, "jax": jax, "np": np, "optax": optax})
        return jnp.sum(jnp.asarray(result, dtype=jnp.float32)) if mode == "grad" else x

    x = jnp.arange(6.0).reshape(2, 3)
    try:
        if mode == "eager":
            eval(code, {"x": x, "jnp": jnp, "jax": jax, "np": np, "optax": optax})
        elif mode == "jit":
            jax.jit(learner_function).trace(x)
        elif mode == "vmap":
            jax.vmap(learner_function)(jnp.stack([x, x]))
        else:
            jax.grad(learner_function)(x)
    except Exception as error:  # what JAX raises is the point
        return error
    return None


def as_the_grader_sees_it(error: BaseException, row: Row) -> Failure:
    types = tuple(cls.__name__ for cls in type(error).__mro__)
    return Failure(types, in_learner_terms(f"{type(error).__name__}: {error}"), typed(row))


@pytest.mark.parametrize(
    "row", [r for r in ROWS if not r.same or r.error], ids=lambda r: f"{r.kind}:{r.name}"
)
def test_a_torch_spelling_raises_and_gets_its_rows_advice(row):
    modes = ["eager", "jit", "vmap", "grad"] if row.kind == "method" else ["eager", "jit"]
    for mode in modes[row.concrete :]:
        error = run_as_typed(row, mode)
        assert error is not None, f"{typed(row)} ran in JAX ({mode}): the row should be `same`"
        if row.error:
            assert row.error in str(error), (mode, str(error))
        found = diagnose(as_the_grader_sees_it(error, row))
        assert found is not None, (mode, str(error))
        assert (row.jax or row.none) in found.fix, (mode, found)
        assert row.name in found.cause or row.note in found.cause, (mode, found)


@pytest.mark.parametrize(
    "row", [r for r in ROWS if r.same and not r.error], ids=lambda r: f"{r.kind}:{r.name}"
)
def test_a_spelling_jax_shares_runs_as_typed(row):
    if row.kind == "keyword" and not row.typed:
        pytest.fail("a keyword row JAX shares needs `typed`, to show it runs")
    assert run_as_typed(row, "eager") is None


def test_a_lookup_reads_the_same_row_as_the_whole_table():
    assert all(torch_to_jax.lookup(row.kind, row.name) == row for row in ROWS)
    assert set(torch_to_jax.rows_by_error()) == {row for row in ROWS if row.error}


def test_every_name_of_torchs_documented_surface_has_a_row():
    coverage = torch_to_jax.coverage()
    assert coverage["function"][0] == coverage["function"][1] > 400
    assert coverage["method"][0] == coverage["method"][1] > 500


@pytest.mark.parametrize(
    ("message", "line", "advice"),
    [
        # one message, several torch habits: the diagnosis names them all
        ("TypeError: Cannot interpret '3' as a data type", "jnp.zeros(2, 3)", "jnp.zeros((2, 3))"),
        ("TypeError: Cannot interpret 'True' as a data type", "x.sum(1, True)", "keepdims=True"),
        ("TypeError: Cannot interpret '6' as a data type", "x.view(6)", "x.reshape(6)"),
    ],
)
def test_a_message_with_several_causes_names_each(message, line, advice):
    found = diagnose(Failure(("TypeError", "Exception"), message, line))
    assert found is not None and advice in found.fix
    assert "separate numbers" in found.cause and "keepdim" in found.cause


def test_to_is_a_cast_or_a_move_never_dropped():
    found = diagnose(Failure(("AttributeError",), "DynamicJaxprTracer has no attribute to"))
    assert found is not None and "astype" in found.fix and "device_put" in found.fix
    assert "drop the call" not in found.fix


def test_search_finds_a_name_its_jax_spelling_and_a_torch_habit():
    assert torch_to_jax.search("cat")[0].name == "cat"
    assert any(row.name == "clamp" for row in torch_to_jax.search("jnp.clip"))
    assert torch_to_jax.search("torch.randn")[0].name == "randn"
    assert torch_to_jax.search("keepdim=")[0].kind == "keyword"


def test_kata_rules_term_prints_the_rows_jax_spelling(real_course):
    shown = kata(real_course, "rules", "view")
    assert shown.exit_code == 0, shown.output
    assert shown.output.lstrip().startswith("x.view() → `x.reshape(-1, d)`")
    assert "`keepdims=`" in kata(real_course, "rules", "keepdim=").output


def test_kata_rules_without_a_match_suggests_the_closest_names(real_course):
    shown = kata(real_course, "rules", "masked_fil")
    assert shown.exit_code == 0 and "jnp.where(mask, value, x)" in shown.output
    missing = kata(real_course, "rules", "concatenat_x")
    assert missing.exit_code == 1
    assert missing.output.count("\n") == 1 and "did you mean" in missing.output


def test_kata_rules_term_finds_the_courses_cheat_sheet_rows(real_course, tmp_path):
    """nn.Module's surface is no torch function or Tensor method: the cheat sheet has it."""
    shown = kata(real_course, "rules", "model.eval()")
    assert shown.exit_code == 0, shown.output
    assert "eqx.nn.inference_mode(model)" in shown.output
    assert "eqx.filter(model, eqx.is_array)" in kata(real_course, "rules", "parameters").output
    outside = kata(tmp_path, "rules", "view")  # no course there: the table alone
    assert outside.exit_code == 0 and "x.reshape" in outside.output


@pytest.mark.parametrize("term", ["to", "sum", "clone", "grad", "checkpoint", "x.max()"])
def test_kata_rules_lists_exact_names_then_prefixes_then_the_rest(term):
    """`kata rules to` began with `x.clone()`, whose JAX side says "nothing to protect":
    a row named by the term comes first, then names starting with it, then names
    holding it, and rows that only mention it last (the course's cheat sheet included)."""
    course = load_course(REPO)
    needle = term.removeprefix("x.").strip("()")

    def closeness(row):
        names = {
            n.strip("().=").removeprefix("x.").removeprefix("torch.").lower()
            for n in re.findall(r"[A-Za-z_][\w.]*", row.torch)
        }
        names |= {n.rpartition(".")[2] for n in names}
        if needle in names:
            return 0
        if any(n.startswith(needle) for n in names):
            return 1
        return 2 if any(needle in n for n in names) else 3

    found = torch_to_jax.translations(course.mapping, term)
    ranks = [closeness(row) for row in found]
    assert ranks[0] == 0 and ranks == sorted(ranks), [r.torch for r in found[:8]]


def test_kata_rules_to_starts_with_x_to(real_course):
    shown = kata(real_course, "rules", "to")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].lstrip().startswith("x.to("), lines[:3]
    assert not any("x.clone()" in line for line in lines[:5]), lines[:5]


def test_the_cheat_sheet_says_how_to_search_the_table(real_course):
    shown = kata(real_course, "rules")
    assert "451 functions, 562 Tensor methods" in shown.output and "kata rules view" in shown.output


def test_a_name_jax_shares_typed_on_the_wrong_module_gets_its_home():
    with pytest.raises(AttributeError) as raised:
        jax.nn.where  # noqa: B018 — torch.where, in JAX jnp.where
    found = diagnose(Failure(("AttributeError",), f"AttributeError: {raised.value}"))
    assert found is not None and "`jnp.where`" in found.fix
