"""The judge reads keys drawn from twice out of a program (kata.checking.key_use).

Each function here is exported as the judge receives a learner's function (`jax.export` of
`jax.jit`, a typed key argument): right answers written every way the course has seen
must read clean, and every way of laundering a key past JAX's own checker (wrapped anew,
used as a legacy uint32 key, made again from its own numbers), each applied to each way
of reusing a key, must be found.
"""

import jax
import jax.numpy as jnp
import pytest
from jax import export

from kata.checking.key_use import UnfollowedKeys, reused_keys
from kata.handoffs import wire

R = jax.random


def two_normals(key, shape):
    a, b = R.split(key)
    return R.normal(a, shape), R.normal(b, shape)


def one_draw_of_two(key, shape):
    both = R.normal(key, (2, *shape))
    return both[0], both[1]


def layers_by_fold_in(key, sizes):
    pairs = enumerate(zip(sizes[:-1], sizes[1:], strict=True))
    return [R.normal(R.fold_in(key, i), (m, n)) for i, (m, n) in pairs]


def layers_carrying_the_key(key, sizes):
    layers = []
    for m, n in zip(sizes[:-1], sizes[1:], strict=True):
        key, sub = R.split(key)
        layers.append(R.normal(sub, (m, n)))
    return layers


def layers_from_split(key, sizes):
    keys = R.split(key, len(sizes) - 1)
    return [R.normal(k, (m, n)) for k, m, n in zip(keys, sizes[:-1], sizes[1:], strict=True)]


def walk_scanning_keys(key, n):
    return jnp.cumsum(jax.lax.scan(lambda c, k: (c, R.normal(k)), 0.0, R.split(key, n))[1])


def walk_carrying_the_key(key, n):
    def step(k, _):
        k, sub = R.split(k)
        return k, R.normal(sub)

    return jnp.cumsum(jax.lax.scan(step, key, None, length=n)[1])


def walk_by_vmap(key, n):
    return jnp.cumsum(jax.vmap(lambda k: R.normal(k))(R.split(key, n)))


def walk_by_fori_loop(key, n):
    def body(i, carry):
        positions, k = carry
        k, sub = R.split(k)
        return positions.at[i].set(R.normal(sub)), k

    return jnp.cumsum(jax.lax.fori_loop(0, n, body, (jnp.zeros(n), key))[0])


def walk_folding_in_the_step(key, n):
    steps = jax.lax.fori_loop(
        0, n, lambda i, s: s.at[i].set(R.normal(R.fold_in(key, i))), jnp.zeros(n)
    )
    return jnp.cumsum(steps)


def dropout(key, x, rate):
    return jnp.where(R.bernoulli(key, 1 - rate, x.shape), x / (1 - rate), 0.0)


def dropout_by_uniform(key, x, rate):
    return jnp.where(R.uniform(key, x.shape) >= rate, x / (1 - rate), 0.0)


def legacy_key_split_once(key, shape):
    a, b = R.split(R.key_data(key))
    return R.normal(a, shape), R.normal(b, shape)


def draw_under_cond(key, x, rate):
    return jax.lax.cond(rate > 0.5, lambda: R.normal(key, x.shape), lambda: R.uniform(key, x.shape))


def unknown_to_the_judge(n):
    """A number the judge does not work out from the program (it is n - 1)."""
    return jnp.argmax(jnp.arange(n))


def walk_picking_keys_at_data_places(key, n):
    keys = R.key_data(R.split(key, n))
    offset = unknown_to_the_judge(2)
    steps = jax.lax.fori_loop(
        0,
        n,
        lambda i, s: s.at[i].set(R.normal(R.wrap_key_data(keys[(i + offset) % n]))),
        jnp.zeros(n),
    )
    return jnp.cumsum(steps)


def one_of_two_new_keys_by_data(key, shape):
    a, b = R.key_data(R.split(key))
    return R.normal(R.wrap_key_data(jnp.where(unknown_to_the_judge(3) > 1, a, b)), shape)


def key_table_set_row_by_row(key, shape):
    a, b = R.split(key)
    table = jnp.zeros((2, 2), jnp.uint32).at[0].set(R.key_data(a)).at[1].set(R.key_data(b))
    return R.normal(R.wrap_key_data(table[0]), shape), R.normal(R.wrap_key_data(table[1]), shape)


def keys_from_a_cond(key, shape):
    a, b = R.split(key)
    keys = jax.lax.cond(unknown_to_the_judge(3) > 1, lambda: R.split(a), lambda: R.split(b))
    return R.normal(keys[0], shape), R.normal(keys[1], shape)


def rows_of_a_large_split(key, shape):
    keys = R.split(key, 3000)
    return R.normal(keys[0], shape), R.normal(keys[1], shape)


def walk_by_fori_loop_read_at_its_end(key, n):
    return walk_by_fori_loop(key, n)[n - 1]


SHAPE, SIZES = (2, 3), [5, 7, 7, 3]
CORRECT = [
    (two_normals, (SHAPE,)),
    (one_draw_of_two, (SHAPE,)),
    (layers_by_fold_in, (SIZES,)),
    (layers_carrying_the_key, (SIZES,)),
    (layers_from_split, (SIZES,)),
    (walk_scanning_keys, (8,)),
    (walk_carrying_the_key, (8,)),
    (walk_by_vmap, (8,)),
    (walk_by_fori_loop, (8,)),
    (walk_folding_in_the_step, (8,)),
    (dropout, (jnp.ones(20), 0.5)),
    (dropout_by_uniform, (jnp.ones(20), 0.5)),
    (legacy_key_split_once, (SHAPE,)),
    (draw_under_cond, (jnp.ones(4), jnp.float32(0.3))),
    (walk_picking_keys_at_data_places, (8,)),
    (one_of_two_new_keys_by_data, (SHAPE,)),
    (key_table_set_row_by_row, (SHAPE,)),
    (keys_from_a_cond, (SHAPE,)),
    (rows_of_a_large_split, (SHAPE,)),
    (walk_by_fori_loop_read_at_its_end, (8,)),
]


def buffer_of(key):
    """A key's words at the front of 20 words."""
    return jnp.concatenate([R.key_data(key), jnp.zeros(18, jnp.uint32)])


def shifted_by_two(_, words):
    return jnp.concatenate([jnp.zeros(2, jnp.uint32), words[:-2]])


# How a key gets past JAX's checker: each gives a key the checker has never seen.
LAUNDERINGS = {
    "as is": lambda k: k,
    "wrapped anew": lambda k: R.wrap_key_data(R.key_data(k)),
    "legacy uint32": lambda k: k if k.dtype == jnp.uint32 else R.key_data(k),
    "made from its numbers": lambda k: R.key(R.key_data(k)[1]),
    "made from their xor": lambda k: R.key(R.key_data(k)[0] ^ R.key_data(k)[1]),
    # Moved and moved back: each op only moves words.
    "flipped twice": lambda k: R.wrap_key_data(jnp.flip(jnp.flip(R.key_data(k)))),
    "padded by nothing": lambda k: R.wrap_key_data(
        jax.lax.pad(R.key_data(k), jnp.uint32(0), [(0, 0, 0)])
    ),
    "padded, then sliced back": lambda k: R.wrap_key_data(
        jax.lax.pad(R.key_data(k), jnp.uint32(0), [(1, 2, 1)])[1:4:2]
    ),
    "chosen by a constant": lambda k: R.wrap_key_data(jnp.where(True, R.key_data(k), 0)),
    "gathered at constant places": lambda k: R.wrap_key_data(R.key_data(k)[jnp.array([0, 1])]),
    "updated into a buffer": lambda k: R.wrap_key_data(
        jax.lax.dynamic_update_slice(jnp.zeros(2, jnp.uint32), R.key_data(k), (0,))
    ),
    "shifted along a buffer for nine turns": lambda k: R.wrap_key_data(
        jax.lax.fori_loop(0, 9, shifted_by_two, buffer_of(k))[18:20]
    ),
    "shifted along a buffer until a count the judge cannot work out": lambda k: R.wrap_key_data(
        jax.lax.while_loop(
            lambda state: state[0] < jnp.argmax(jnp.arange(10)),
            lambda state: (state[0] + 1, shifted_by_two(0, state[1])),
            (0, buffer_of(k)),
        )[1][18:20]
    ),
    # Picked at places the judge does not work out, among words it surely drew from.
    "chosen between itself and itself by data": lambda k: R.wrap_key_data(
        jnp.where(jax.lax.iota(jnp.int32, 1)[0] == 0, R.key_data(k), R.key_data(k))
    ),
    # The same key folded with the same number is the same key again.
    "folded in with the same number": lambda k: R.fold_in(k, 1),
    # int32 arithmetic wraps: 65536 squared is 0, where the judge's int64 said 2**32.
    "chosen by a product that wraps past int32": lambda k: R.wrap_key_data(
        jnp.where(
            jax.lax.optimization_barrier(jnp.int32(65536)) ** 2 == 0,
            R.key_data(k),
            jnp.zeros(2, jnp.uint32),
        )
    ),
    "gathered at a place the judge cannot work out": lambda k: R.wrap_key_data(
        jnp.stack([R.key_data(k), R.key_data(k)])[unknown_to_the_judge(2)]
    ),
    "passed through four slots of a loop": lambda k: R.wrap_key_data(
        jax.lax.fori_loop(
            0,
            3,
            lambda _, slots: jnp.roll(slots, 1, axis=0),
            jnp.stack([R.key_data(k), *[jnp.zeros_like(R.key_data(k))] * 3]),
        )[3]
    ),
}


def reusing(launder):
    """Each way of using a key twice, its keys laundered before every use."""

    def same_key_twice(key, shape):
        return R.normal(launder(key), shape), R.normal(launder(key), shape)

    def parent_after_split(key, shape):
        sub, _ = R.split(launder(key))
        return R.normal(launder(key), shape), R.normal(launder(sub), shape)

    def one_key_per_layer(key, sizes):
        pairs = zip(sizes[:-1], sizes[1:], strict=True)
        return [R.normal(launder(key), (m, n)) for m, n in pairs]

    def walk_drawing_from_the_carry(key, n):
        steps = []
        for _ in range(n):
            following, _ = R.split(launder(key))
            steps.append(R.normal(launder(key)))
            key = following
        return jnp.cumsum(jnp.stack(steps))

    def walk_loop_reusing_one_key(key, n):
        return jax.lax.scan(lambda c, _: (c, R.normal(launder(key))), 0.0, None, length=n)[1]

    def in_a_jitted_helper(key, shape):
        @jax.jit
        def helper(k):
            return R.normal(launder(k), shape), R.uniform(launder(k), shape)

        return helper(key)

    def fold_in_after_use(key, shape):
        return R.normal(key, shape), R.normal(R.fold_in(launder(key), 1), shape)

    return [
        (same_key_twice, (SHAPE,)),
        (parent_after_split, (SHAPE,)),
        (one_key_per_layer, (SIZES,)),
        (walk_drawing_from_the_carry, (6,)),
        (walk_loop_reusing_one_key, (6,)),
        (in_a_jitted_helper, (SHAPE,)),
        (fold_in_after_use, (SHAPE,)),
    ]


def reuses_of(fn, args):
    """What the judge reads from `fn`'s program: exported as a learner's function is."""
    arrays = [a for a in args if hasattr(a, "shape")]
    fixed = [a for a in args if not hasattr(a, "shape")]
    program = export.export(jax.jit(lambda key, *xs: fn(key, *xs, *fixed)))(R.key(7), *arrays)
    return reused_keys(program.mlir_module(), frozenset({0}))


@pytest.mark.parametrize(("fn", "args"), CORRECT, ids=[fn.__name__ for fn, _ in CORRECT])
def test_a_right_answer_reads_clean(fn, args):
    assert reuses_of(fn, args) == []


@pytest.mark.parametrize("laundering", sorted(LAUNDERINGS))
def test_every_laundered_reuse_is_found(laundering):
    missed = [
        fn.__name__ for fn, args in reusing(LAUNDERINGS[laundering]) if not reuses_of(fn, args)
    ]
    assert not missed, f"{laundering}: no reuse found in {missed}"


def test_a_key_crosses_the_wire_as_data():
    keys = R.split(R.key(3), 4)
    document, arrays = wire.encode({"keys": keys, "one": R.key(5)})
    back = wire.decode(document, arrays)
    assert jnp.array_equal(R.key_data(back["keys"]), R.key_data(keys))
    assert str(back["one"].dtype) == str(keys.dtype)


def test_a_key_of_an_unknown_generator_is_refused():
    document, arrays = wire.encode(R.key(5))
    document["impl"] = "os.system"
    with pytest.raises(wire.WireError, match="unknown generator"):
        wire.decode(document, arrays)


def test_a_pick_that_may_be_a_key_drawn_from_already_is_a_reuse():
    """Drawn from as it is, then from a choice, made by data, between it and a key made
    from it: the data chose, the learner's code offered it a key already used."""

    def offered_again(key, shape):
        words = R.key_data(key)
        other = R.key_data(R.fold_in(key, 3))
        picked = R.wrap_key_data(jnp.where(unknown_to_the_judge(3) > 1, words, other))
        return R.normal(key, shape), R.normal(picked, shape)

    def offered_first(key, shape):
        words = R.key_data(key)
        other = R.key_data(R.fold_in(key, 3))
        picked = R.wrap_key_data(jnp.where(unknown_to_the_judge(3) > 1, words, other))
        return R.normal(picked, shape), R.normal(key, shape)

    assert reuses_of(offered_again, (SHAPE,)) and reuses_of(offered_first, (SHAPE,))


def test_one_draw_over_a_batch_holding_one_key_twice_is_a_reuse():
    """`jax.vmap` of a draw over keys where one key stands twice: the same numbers twice."""

    def stacked(key, shape):
        return jax.vmap(lambda k: R.normal(k, shape))(jnp.stack([key, key]))

    def broadcast(key, shape):
        return jax.vmap(lambda k: R.normal(k, shape))(jnp.broadcast_to(key, (4,)))

    assert reuses_of(stacked, (SHAPE,)) and reuses_of(broadcast, (SHAPE,))


def test_a_key_returned_by_a_cond_may_be_that_key():
    """A cond that may return the key itself: drawing from both is a reuse."""

    def returned(key, shape):
        other = R.wrap_key_data(R.key_data(key)[::-1])
        chosen = jax.lax.cond(unknown_to_the_judge(3) > 1, lambda: key, lambda: other)
        return R.normal(key, shape), R.normal(chosen, shape)

    assert reuses_of(returned, (SHAPE,))


def two_draws_from_keys_folded_with_data(key, d, e):
    """`d` and `e` are arguments: the judge cannot work out whether they differ."""
    return R.normal(R.fold_in(key, d), (3,)), R.normal(R.fold_in(key, e), (3,))


def one_draw_from_a_key_folded_with_data(key, d):
    return R.normal(R.fold_in(key, d), (3,)) + R.normal(R.fold_in(key, 1), (3,))


def test_keys_folded_in_with_data_not_known_to_differ_are_one_key():
    """fold_in(k, d) twice with a d the judge cannot work out (always 0, say) makes one key
    twice: a reuse, unless the judge can tell the data apart."""
    program = export.export(jax.jit(two_draws_from_keys_folded_with_data))(
        R.key(7), jnp.int32(0), jnp.int32(0)
    )
    assert reused_keys(program.mlir_module(), frozenset({0})) != []


def test_one_key_folded_with_unknown_data_beside_one_with_known_data_reads_clean():
    program = export.export(jax.jit(one_draw_from_a_key_folded_with_data))(R.key(7), jnp.int32(3))
    assert reused_keys(program.mlir_module(), frozenset({0})) == []


@jax.jit
def _threefry_fold_in(key, data):
    """A learner's helper named as JAX's fold_in, which draws from the key it is given:
    were it read as JAX's, the draw inside would only read the key."""
    return R.normal(key, (3,)) + data


def two_draws_one_inside_a_function_named_as_fold_in(key):
    return R.normal(key, (3,)), _threefry_fold_in(key, 1.0)


def test_a_function_of_the_learners_named_as_jaxs_fold_in_is_refused_by_its_content():
    with pytest.raises(UnfollowedKeys, match="named as JAX's fold_in but calls _normal"):
        reuses_of(two_draws_one_inside_a_function_named_as_fold_in, ())
