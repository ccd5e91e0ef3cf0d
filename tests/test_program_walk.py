"""The judge reads an exported program with MLIR's own parser (kata.checking.program_walk):
every spelling of a name or an op counts alike, and what it cannot follow is refused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from kata.checking.expect import CountedProgram
from kata.checking.exported_program import ExportedProgram
from kata.checking.key_use import UnfollowedKeys, reused_keys
from kata.checking.measured import SIZE_SLACK, unbounded_program
from kata.checking.program_walk import UnreadableProgram, read_program

# `main` calls a helper whose name MLIR prints quoted twice, once in generic form, once in a
# while loop's body; the helper calls another, named with quotes and a non-ASCII letter.
QUOTED_AND_NESTED = r"""
module @m {
  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = call @"row step"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
    %1 = "func.call"(%0) {callee = @"row step"} : (tensor<2xf32>) -> tensor<2xf32>
    %2 = "stablehlo.add"(%1, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %3 = stablehlo.while(%iterArg = %2) : tensor<2xf32>
     cond {
      %c = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %4 = func.call @"row step"(%iterArg) : (tensor<2xf32>) -> tensor<2xf32>
      stablehlo.return %4 : tensor<2xf32>
    }
    return %3 : tensor<2xf32>
  }
  func.func private @"row step"(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<2xf32>
    %1 = call @"inner \22q\22 \C3\A9"(%0) : (tensor<2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>
  }
  func.func private @"inner \22q\22 \C3\A9"(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.negate %arg0 : tensor<2xf32>
    %1 = stablehlo.sine %0 : tensor<2xf32>
    return %1 : tensor<2xf32>
  }
}
"""


def test_quoted_names_nested_calls_and_regions_are_counted():
    # inner: 2; row step: 1 + inner = 3; main: 3 (call) + 3 (generic call) + 1 (add)
    # + the while: itself, its cond's constant and return, its body's call (3) and return.
    assert read_program(QUOTED_AND_NESTED).operations == 3 + 3 + 1 + (1 + 2 + 3 + 1)


def module(body, *helpers):
    main = "func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {" + body + "\n}"
    return "module @m {\n" + "\n".join([main, *helpers]) + "\n}"


HELPER = """func.func private @"a helper"(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.sine %arg0 : tensor<2xf32>
    return %0 : tensor<2xf32>
}"""


@pytest.mark.parametrize(
    "text, why",
    [
        (
            # A function that calls itself has no size: refused, not counted once.
            module(
                """
    %0 = call @main(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>"""
            ),
            "calls itself",
        ),
        (
            # A symbol named by an op that the module does not define.
            module(
                """
    %0 = stablehlo.custom_call @target(%arg0) {called_computations = [@"not here"]}
        : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>"""
            ),
            "does not define",
        ),
        (module("\n    %0 = foreign.op %arg0\n    return %0 : tensor<2xf32>"), "does not parse"),
        (
            module(
                """
    %0 = call @elsewhere(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>""",
                "func.func private @elsewhere(tensor<2xf32>) -> tensor<2xf32>",
            ),
            "without a body",
        ),
        ("module @m {\n" + HELPER + "\n}", "no function `main`"),
    ],
)
def test_what_the_walk_cannot_follow_is_refused(text, why):
    with pytest.raises(UnreadableProgram, match=why):
        read_program(text)


def test_a_function_named_by_any_op_counts_where_it_is_named():
    """A composite's decomposition runs where the composite is: its operations count."""
    text = module(
        """
    %0 = stablehlo.composite "kata.hidden" %arg0 {decomposition = @"a helper"}
        : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>""",
        HELPER,
    )
    assert read_program(text).operations == 1 + 1


def test_a_quoted_custom_call_target_is_read_whole():
    text = module(
        r"""
    %0 = stablehlo.custom_call @"xla_python_cpu_callback \22x\22"(%arg0)
        : (tensor<2xf32>) -> tensor<2xf32>
    %1 = "stablehlo.custom_call"(%0) {call_target_name = "xla_ffi_python_cpu_callback"}
        : (tensor<2xf32>) -> tensor<2xf32>
    return %1 : tensor<2xf32>"""
    )
    assert read_program(text).custom_call_targets == (
        'xla_python_cpu_callback "x"',
        "xla_ffi_python_cpu_callback",
    )


def test_generic_form_is_computed_in_its_type():
    text = module(
        """
    %0 = "stablehlo.convert"(%arg0) : (tensor<2xf32>) -> tensor<2xbf16>
    %1 = "stablehlo.reshape"(%0) : (tensor<2xbf16>) -> tensor<1x2xbf16>
    %2 = "stablehlo.multiply"(%0, %0) : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<2xbf16>
    %3 = stablehlo.convert %2 : (tensor<2xbf16>) -> tensor<2xf32>
    return %3 : tensor<2xf32>"""
    )
    computed = read_program(text).computed
    assert [op for op, kind in computed if kind == "bf16"] == [
        "stablehlo.convert",
        "stablehlo.multiply",
    ]


def rnn_over_a_jitted_cell(name):
    """A Python loop over time steps calling a jitted cell whose function is `name`d."""

    def cell(carry, w_h, w_x, xs):
        h, states, t = carry
        h = jnp.tanh(h @ w_h + jax.lax.dynamic_index_in_dim(xs, t, keepdims=False) @ w_x)
        return h, jax.lax.dynamic_update_index_in_dim(states, h, t, 0), t + 1

    cell.__name__ = cell.__qualname__ = name
    jitted = jax.jit(cell)

    def rnn_states(w_h, w_x, h0, xs):
        carry = (h0, jnp.zeros((xs.shape[0], h0.shape[0]), h0.dtype), jnp.int32(0))
        for _ in range(xs.shape[0]):
            carry = jitted(carry, w_h, w_x, xs)
        return carry[1]

    return rnn_states


@pytest.mark.parametrize("name", ["row step", 'row "step"', "schritt ü", '@"x" {', "a\\b"])
def test_a_loop_calling_a_jitted_helper_grows_whatever_its_name(name):
    """The helper's body counts at each call, however MLIR prints its name (a space made it
    `@"row step"`, and patterns counted it as nothing: 32 operations at 3 steps and 30)."""
    rnn_states = rnn_over_a_jitted_cell(name)
    sizes = {}
    for steps in (3, 30):
        args = [np.ones(shape, np.float32) for shape in ((4, 4), (2, 4), (4,), (steps, 2))]
        data = export.export(jax.jit(rnn_states))(*args).serialize()
        sizes[steps] = ExportedProgram.from_bytes(bytes(data)).operation_count
    assert sizes[30] - sizes[3] >= 27 * 5, sizes


def key_program(draws, name):
    """A program over a key's words whose draws are made in a jitted helper `name`d."""
    draws.__name__ = draws.__qualname__ = name
    helper = jax.jit(draws)
    key = jax.random.key(0)
    data = export.export(jax.jit(lambda words: helper(jax.random.wrap_key_data(words))))(
        jax.random.key_data(key)
    ).serialize()
    return ExportedProgram.from_bytes(bytes(data), (key,))


def split_and_draw(key):
    first, second = jax.random.split(key)
    return jax.random.normal(first, (3,)) + jax.random.normal(second, (3,))


def draw_twice(key):
    return jax.random.normal(key, (3,)) + jax.random.normal(key, (3,))


@pytest.mark.parametrize("name", ["<lambda>", "draw step", 'q"x" é'])
def test_keys_are_followed_into_a_helper_whatever_its_name(name):
    """key_use reads text: a call it could not name was the learner's own arithmetic on the
    key, so a right `jax.jit(lambda k: …)` that splits its key read as a reuse by hand."""
    key_program(split_and_draw, name).assert_each_key_used_once("f")
    with pytest.raises(AssertionError, match="draws from one key twice"):
        key_program(draw_twice, name).assert_each_key_used_once("f")


def measured(sizes, own, confirmed):
    """`measured_at` for `unbounded_program`: the learner's sizes and the judge's own by
    length, noting the lengths it confirms."""
    return lambda n: (CountedProgram(sizes[n], lambda: confirmed.append(n)), own[n])


LENGTHS = (20, 80, 160, 640, 1280)
OWN = dict.fromkeys(LENGTHS, 30)


def test_a_bounded_program_passes_every_length_confirmed():
    confirmed = []
    unrolled_four = {20: 60, 80: 65, 160: 47, 640: 47, 1280: 66}  # a scan, unroll=4
    assert unbounded_program(measured(unrolled_four, OWN, confirmed), LENGTHS, 20) is None
    assert confirmed == list(LENGTHS)


def test_a_loop_padded_to_look_flat_fails_by_the_cap_unrun():
    """A Python loop padded with no-op adds to one size at every length (a red team's): flat,
    but past SIZE_SLACK times the judge's own program."""
    confirmed = []
    padded = dict.fromkeys(LENGTHS, SIZE_SLACK * 30 + 1)
    sizes = unbounded_program(measured(padded, OWN, confirmed), LENGTHS, 20)
    assert sizes is not None and "times the 30 operations" in sizes.why
    assert list(sizes.sizes) == [20] and confirmed == [], "the first length fails, none run"


def test_a_program_that_grows_twofold_or_shrinks_to_half_fails():
    confirmed = []
    chunks = {20: 40, 80: 70, 160: 120, 640: 420, 1280: 800}  # a loop over chunks of scans
    grown = unbounded_program(measured(chunks, OWN, confirmed), LENGTHS, 20)
    assert grown is not None and "grew from 40 to 120" in grown.why
    switched = {20: 400, 80: 1500, 160: 31, 640: 31, 1280: 31}  # a loop, then a scan
    cap = dict.fromkeys(LENGTHS, 1000)
    shrunk = unbounded_program(measured(switched, cap, confirmed), LENGTHS, 1000)
    assert shrunk is not None and list(shrunk.sizes) == [20, 80, 160] and confirmed == []


def test_a_wrong_program_of_a_bounded_size_fails_on_its_values():
    def measured_at(n):
        def confirm():
            raise AssertionError("not the reference's values")

        return CountedProgram(40, confirm), 30

    with pytest.raises(AssertionError, match="reference"):
        unbounded_program(measured_at, LENGTHS, 20)


def fold_one_key_twice(key):
    return jax.random.normal(jax.random.fold_in(key, 1), (3,)) + jax.random.normal(
        jax.random.fold_in(key, 2), (3,)
    )


def draw_and_draw_from_its_bits(key):
    again = jax.random.wrap_key_data(jax.random.key_data(key) ^ 1)
    return jax.random.normal(key, (3,)) + jax.random.normal(again, (3,))


@pytest.mark.parametrize("name", ["_normal", "_uniform", "_fold_in", "threefry2x32", "_poisson"])
def test_a_helper_named_like_jaxs_random_functions_is_no_draw_of_its_own(name):
    """A helper named like one of JAX's random functions was taken for one draw, so
    whatever it did with its key inside passed (a red team's): JAX's own never hand one
    key to two random functions, and one that does draws from it twice."""
    for reused in (draw_twice, draw_and_draw_from_its_bits):
        with pytest.raises(AssertionError, match="draws from one key twice|computes with"):
            key_program(reused, name).assert_each_key_used_once("f")
    for right in (split_and_draw, fold_one_key_twice):
        key_program(right, name).assert_each_key_used_once("f")


def test_every_function_of_jax_random_reads_as_one_draw():
    """The measurement `JAXS_OWN_TWO_DRAWS` rests on, kept: no function of jax.random
    reads as a reuse or is refused, binomial aside (its own code splits its key twice)."""
    r = jax.random
    draws = [
        lambda k: r.normal(k, (3,)),
        lambda k: sum(r.normal(part) for part in r.split(k, 3)),
        lambda k: r.bernoulli(k, 0.3, (4,)),
        lambda k: r.categorical(k, jnp.zeros((5,))),
        lambda k: r.choice(k, 10, (3,), replace=False),
        lambda k: r.permutation(k, 10),
        lambda k: r.gamma(k, 2.0, (3,)),
        lambda k: r.beta(k, 2.0, 3.0, (3,)),
        lambda k: r.dirichlet(k, jnp.ones(3)),
        lambda k: r.poisson(k, 3.0, (3,)),
        lambda k: r.truncated_normal(k, -1.0, 1.0, (3,)),
        lambda k: r.multivariate_normal(k, jnp.zeros(2), jnp.eye(2)),
        lambda k: r.orthogonal(k, 3),
        lambda k: r.t(k, 3.0, (3,)),
        lambda k: r.ball(k, 3),
        lambda k: r.loggamma(k, 2.0, (3,)),
        lambda k: r.geometric(k, 0.3, (3,)),
    ]
    for draw in draws:
        key_program(draw, "draws").assert_each_key_used_once("f")


def test_a_program_whose_keys_the_grader_cannot_follow_is_refused():
    """Read as no reuse before: what the judge could not follow hid any reuse in it."""

    def drawn_in_a_condition(key):
        def goes_on(carry):
            return jax.random.uniform(carry[0]) < 0.9

        def turn(carry):
            return jax.random.split(carry[0])[0], carry[1] + 1.0

        return jax.lax.while_loop(goes_on, turn, (key, 0.0))[1]

    def drawn_again_late(key):
        def turn(i, carry):
            walked, total = carry
            walked, part = jax.random.split(walked)
            chosen = jnp.where(i == 150, jax.random.key_data(key), jax.random.key_data(part))
            return walked, total + jax.random.normal(jax.random.wrap_key_data(chosen))

        first, walked = jax.random.split(key)
        return jax.random.normal(first) + jax.lax.fori_loop(0, 200, turn, (walked, 0.0))[1]

    with pytest.raises(AssertionError, match="cannot follow.*a while loop.s condition"):
        key_program(drawn_in_a_condition, "f").assert_each_key_used_once("f")
    with pytest.raises(AssertionError, match="cannot follow.*goes on past 64 turns"):
        key_program(drawn_again_late, "f").assert_each_key_used_once("f")
    calling_itself = """
func.func public @main(%arg0: tensor<2xui32>) -> tensor<2xui32> {
  %0 = call @again(%arg0) : (tensor<2xui32>) -> tensor<2xui32>
  return %0 : tensor<2xui32>
}
func.func private @again(%arg0: tensor<2xui32>) -> tensor<2xui32> {
  %0 = call @again(%arg0) : (tensor<2xui32>) -> tensor<2xui32>
  return %0 : tensor<2xui32>
}
"""
    with pytest.raises(UnfollowedKeys, match="calls itself"):
        reused_keys(calling_itself, frozenset({0}))


def test_a_matrix_product_is_read_with_its_types_and_the_precision_it_asks_for():
    """17's checks read what each product asks of the chip: its operands' and result's
    element types and its precision (or algorithm), in a jitted helper too."""
    a = jax.ShapeDtypeStruct((3, 4), jnp.float32)
    b = jax.ShapeDtypeStruct((4, 5), jnp.float32)

    def read(f):
        products = read_program(export.export(jax.jit(f))(a, b).mlir_module()).contractions
        return [(c.operands, c.result, c.precision, c.algorithm) for c in products]

    def half(a, b):
        return jnp.matmul(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))

    summed_wide = jax.jit(
        lambda a, b: jnp.matmul(
            a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32
        )
    )
    highest = jax.lax.Precision.HIGHEST
    assert read(lambda a, b: a @ b) == [(("f32", "f32"), "f32", ("DEFAULT", "DEFAULT"), ())]
    assert read(lambda a, b: jnp.dot(a, b, precision=highest)) == [
        (("f32", "f32"), "f32", ("HIGHEST", "HIGHEST"), ())
    ]
    assert read(half) == [(("bf16", "bf16"), "bf16", ("DEFAULT", "DEFAULT"), ())]
    assert read(lambda a, b: summed_wide(a, b) * 2) == [
        (("bf16", "bf16"), "f32", ("DEFAULT", "DEFAULT"), ())
    ]
    f32_algorithm = jax.lax.DotAlgorithmPreset.F32_F32_F32
    ((*_, algorithm),) = read(lambda a, b: jax.lax.dot(a, b, precision=f32_algorithm))
    assert algorithm == ("f32", "f32")
    assert read(lambda a, b: (a[:, :, None] * b[None]).sum(1)) == []
