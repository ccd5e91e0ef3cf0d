"""Checks for 15_sharding: rows split over 8 devices, DDP and FSDP steps, SyncBatchNorm's
statistics, each one program that XLA fills with collectives.

The learner's process runs on 8 CPU devices (course.toml's `host_devices`). Values are
judged against the check's own NumPy, in float64 (07's MLP and step). Where results lie
is judged twice over: the blocks each device holds of an array that came back
(`wire.Placed`, as the learner's process reports them: feedback, worth no points,
kata.supervisor.evidence), and the output shardings and collectives of the learner's
exported program, which the judge compiles for its own 8 CPU devices and runs on inputs it
lays out as it chose (`ExportedProgram.placed`): the points rest on these. `shard_rows`
places data, which `jax.jit` does not do (inside it, `device_put` to a sharding compiles
to a program that returns its input whole on every device, JAX 0.10.2), so its checks are
feedback alone. Compile counts only ever fail a check.
"""

import re
from collections import Counter

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from kata.checking.expect import assert_close, random_array, show
from kata.checking.learner_calls import count_compilations, in_learner_process, type_name
from kata.checking.mlp_reference import NAMES, make_params, np_sgd_step
from kata.handoffs.wire import Placed

DEVICES = 8  # course.toml: host_devices = 8
# Mesh axis names the checks pick from: code that works names none, or reads them.
AXES = ("batch", "data", "replica", "rows", "shards")
# One collective per line of HLO text: `%x = f32[…] all-reduce(…)`, or its async `-start`.
COLLECTIVE = re.compile(
    r"\b(all-reduce|all-gather|all-to-all|collective-permute|reduce-scatter)(?:-start)?\("
)
# What moves rows of the batch from one device to another; partial sums need none of it.
MOVES_DATA = ("all-gather", "all-to-all", "collective-permute")
# Sizes: every first axis a multiple of 8, so FSDP can split every leaf.
N_IN, N_HIDDEN, N_OUT, BATCH = 8, 16, 8, 64
# A step compiled as one program: one compilation, room for an eager conversion or two.
ONE_PROGRAM = 3


# --- the check's own reference: NumPy, float64 -------------------------------------------


def make_step_inputs(rng):
    params = make_params(rng, n_in=N_IN, n_hidden=N_HIDDEN, n_out=N_OUT)
    return params, random_array(rng, BATCH, N_IN), random_array(rng, BATCH, N_OUT)


def layout(rng, params_split):
    """A judge-chosen 1-D mesh axis and how each argument of a step lies on it: the batch
    by rows, the params split by rows (FSDP) or a copy on every device (DDP)."""
    axis = str(rng.choice(AXES))
    return {"axis": axis, "args": [[axis] if params_split else [], [axis], [axis]]}


def row_blocks(rows):
    """Device i's block of an array split by rows over the mesh, in device order."""
    size = rows // DEVICES
    return [(i * size, (i + 1) * size) for i in range(DEVICES)]


# --- in the learner's process: its functions on inputs laid out over its devices ----------


def laid_out(args, layout):
    mesh = Mesh(np.array(jax.devices()), (layout["axis"],))
    return [
        jax.tree.map(
            lambda a, s=spec: jax.device_put(a, NamedSharding(mesh, PartitionSpec(*s))), arg
        )
        for arg, spec in zip(args, layout["args"], strict=True)
    ]


@in_learner_process
def call_laid_out(ex, name, args, layout):
    """`name(*args)` as the learner's code is called, its inputs laid out by `layout` on
    every device of this process (a 1-D mesh with the layout's axis name)."""
    return getattr(ex, name)(*laid_out(args, layout))


@in_learner_process
def steps_laid_out(ex, name, params, batches, layout):
    """`name` stepped over `batches` from `params`, each step's inputs laid out afresh."""
    for x, y in batches:
        params = getattr(ex, name)(*laid_out([params, x, y], layout))
    return params


@in_learner_process
def first_call_from_cold(ex, name, args, layout):
    """`name`'s first call once JAX's caches are emptied: it compiles all that it runs."""
    placed = laid_out(args, layout)
    jax.clear_caches()
    return getattr(ex, name)(*placed)


# --- reading what came back ----------------------------------------------------------------


def new_params(result, call):
    assert isinstance(result, dict), (
        f"{call} should return the new params dict (w1, b1, w2, b2), but returned "
        f"{type_name(result)}: {show(result)}"
    )
    missing = [k for k in NAMES if k not in result]
    assert not missing, f"{call} returned a params dict without {', '.join(missing)}"
    return result


def blocks_of(array, call):
    """{device id: the (start, stop) rows it holds} of an array that came back, with each
    device's span on the other axes checked to be whole."""
    if not isinstance(array, Placed):
        raise AssertionError(
            f"{call} came back on one device: like a tensor left on cuda:0, it is not spread "
            f"over the {DEVICES} devices. Place it with "
            "`jax.device_put(x, NamedSharding(mesh, PartitionSpec(...)))`"
        )
    blocks = {}
    for device, spans in array.placement:
        assert device not in blocks, f"{call}: device {device} holds two blocks"
        blocks[device] = spans
    return blocks


def where_rows_lie(blocks):
    return ", ".join(f"device {d}: rows {s[0][0]}:{s[0][1]}" for d, s in sorted(blocks.items())[:4])


def assert_split_by_rows(array, rows, call):
    """Every device holds one block of consecutive rows, whole along the other axes, and
    every row lies on exactly one device."""
    blocks = blocks_of(array, call)
    assert len(blocks) == DEVICES, (
        f"{call} lies on {len(blocks)} devices, not all {DEVICES}: use every device of "
        "`jax.devices()` in the mesh"
    )
    whole = [(0, n) for n in np.shape(array)[1:]]
    uneven = [d for d, spans in blocks.items() if list(spans[1:]) != whole]
    assert not uneven, (
        f"{call} is split along another axis than the rows (device {uneven[0]} holds "
        f"{blocks[uneven[0]]}): PartitionSpec's first entry is axis 0, the rows"
    )
    spans = sorted(spans[0] for spans in blocks.values())
    if spans == [(0, rows)] * DEVICES:
        raise AssertionError(
            f"{call} holds all {rows} rows on every device: that is a copy per device "
            "(`PartitionSpec()`), as DDP keeps its model, not the batch split between them. "
            "Name the mesh axis for axis 0: `PartitionSpec(axis)`"
        )
    assert spans == row_blocks(rows), (
        f"{call} should hold {rows // DEVICES} consecutive rows on each of the {DEVICES} "
        f"devices, each row on one device only, but lies so: {where_rows_lie(blocks)}… "
        f"(a mesh of another shape than ({DEVICES},) splits the rows in fewer blocks, each "
        "on several devices)"
    )


def assert_on_every_device(array, call, what):
    blocks = blocks_of(array, call)
    whole = [(0, n) for n in np.shape(array)]
    assert len(blocks) == DEVICES and all(list(s) == whole for s in blocks.values()), (
        f"{call} should hold {what} whole on each of the {DEVICES} devices, as every DDP "
        f"process holds the whole model, but lies so: {where_rows_lie(blocks)}"
    )


def collectives(compiled):
    return Counter(COLLECTIVE.findall(compiled.as_text()))


def described(found):
    return ", ".join(f"{n} {name}" for name, n in sorted(found.items())) or "no collective"


# --- shard_rows ----------------------------------------------------------------------------


@pytest.mark.task("shard_rows")
def test_shard_rows_one_block_per_device(ex, rng, tell):
    """shard_rows: the same values, one block of consecutive rows on each of the 8 devices"""
    x = random_array(rng, 8 * DEVICES, 5)
    got = ex.shard_rows(x)
    assert_close(got, x, "shard_rows(x)", rtol=0, atol=0)
    assert_split_by_rows(got, x.shape[0], f"shard_rows(x) for x of shape {x.shape}")
    shape = (x.shape[0] // DEVICES, x.shape[1])
    tell(f"shard_rows: {DEVICES} devices, each holding a {shape} block of x {tuple(x.shape)}")


@pytest.mark.task("shard_rows")
def test_shard_rows_any_shape(ex, rng):
    """shard_rows: any number of rows that is a multiple of 8, any trailing axes"""
    for shape in ((2 * DEVICES,), (DEVICES, 3, 2), (16 * DEVICES, 1)):
        x = random_array(rng, *shape)
        got = ex.shard_rows(x)
        assert_close(got, x, f"shard_rows(x) for x of shape {shape}", rtol=0, atol=0)
        assert_split_by_rows(got, shape[0], f"shard_rows(x) for x of shape {shape}")


# --- ddp_step ------------------------------------------------------------------------------


def assert_step_close(got, want, call, moved_from):
    """`got`'s params are `want`'s; a step from `moved_from` off by one factor is told so
    (psum where pmean was meant: ×8)."""
    got = new_params(got, call)
    for k in NAMES:
        start = moved_from[k]
        assert_close(got[k], want[k], f"{call}['{k}']", rtol=1e-4, atol=1e-5, moved_from=start)


@pytest.mark.task("ddp_step")
def test_ddp_step_matches_single_device_step(ex, rng):
    """ddp_step: on a batch split by rows, the same new params as 07's step on the whole batch"""
    for _ in range(2):
        params, x, y = make_step_inputs(rng)
        got = call_laid_out(ex, "ddp_step", [params, x, y], layout(rng, params_split=False))
        assert_step_close(got, np_sgd_step(params, x, y), "ddp_step(params, x, y)", params)


@pytest.mark.task("ddp_step")
def test_ddp_step_returns_params_on_every_device(ex, rng):
    """ddp_step: the new params come back replicated on every device, like the old ones"""
    params, x, y = make_step_inputs(rng)
    got = new_params(
        call_laid_out(ex, "ddp_step", [params, x, y], layout(rng, params_split=False)),
        "ddp_step(params, x, y)",
    )
    for k in NAMES:
        assert_on_every_device(got[k], f"ddp_step(params, x, y)['{k}']", "a copy")


@pytest.mark.task("ddp_step")
def test_ddp_step_all_reduces_gradients(ex, rng, tell):
    """ddp_step: the compiled program all-reduces the gradients and moves no batch data"""
    params, x, y = make_step_inputs(rng)
    program = ex.ddp_step.exported(params, x, y, layout=layout(rng, params_split=False))
    want = np_sgd_step(params, x, y)
    assert_step_close(program.run(params, x, y), want, "jax.jit(ddp_step)", params)
    compiled = program.compiled(params, x, y)
    found = collectives(compiled)
    tell(f"jax.jit(ddp_step) compiled for {DEVICES} devices: {described(found)}")
    moved = {name: found[name] for name in MOVES_DATA if found[name]}
    assert not moved, (
        f"jax.jit(ddp_step) compiled for {DEVICES} devices moves data between them "
        f"({described(Counter(moved))}): DDP keeps each device's rows where they are and "
        "sends only gradients. Is the batch gathered onto every device "
        "(with_sharding_constraint to PartitionSpec(), or a reshape across the rows)?"
    )
    assert found["all-reduce"] >= 1, (
        f"jax.jit(ddp_step) compiled for {DEVICES} devices has no all-reduce: the gradients "
        "of the devices' blocks of the batch are never summed, as DDP's `dist.all_reduce` "
        "does after `loss.backward()`"
    )
    for k, sharding in zip(NAMES, _leaves_by_name(compiled.output_shardings), strict=True):
        assert sharding.is_fully_replicated, (
            f"jax.jit(ddp_step) returns params['{k}'] split over the devices ({sharding}): "
            "DDP's params are a full copy on every device. Return them replicated "
            "(`with_sharding_constraint(new, NamedSharding(mesh, PartitionSpec()))`)"
        )


def _leaves_by_name(tree):
    """A params-dict-shaped pytree's leaves in NAMES order."""
    return [tree[k] for k in NAMES]


@pytest.mark.task("ddp_step")
def test_ddp_step_compiles_once(ex, rng):
    """ddp_step: one compiled program, built on the first step and reused for the next five"""
    params, x, y = make_step_inputs(rng)
    chosen = layout(rng, params_split=False)
    ex.ddp_step.exported(params, x, y, layout=chosen)  # one program, as the judge runs it
    with count_compilations() as compiled:
        new_params(first_call_from_cold(ex, "ddp_step", [params, x, y], chosen), "ddp_step")
    assert compiled.count <= ONE_PROGRAM, (
        f"ddp_step's first call compiled {compiled.count} separate programs: every operation "
        "outside `jax.jit` runs on its own. Put the whole step under one `jax.jit`"
    )
    batches = [(random_array(rng, BATCH, N_IN), random_array(rng, BATCH, N_OUT)) for _ in range(5)]
    with count_compilations() as compiled:
        new_params(steps_laid_out(ex, "ddp_step", params, batches, chosen), "ddp_step")
    assert compiled.count <= 1, (
        f"ddp_step compiled {compiled.count} times in 5 steps with data of one shape and "
        f"layout ({', '.join(sorted(set(compiled.names)))}): make the jitted step once, at "
        "module level, and keep the shardings of what it returns the same as what it takes"
    )


# --- fsdp_step -----------------------------------------------------------------------------


@pytest.mark.task("fsdp_step")
def test_fsdp_step_matches_single_device_step(ex, rng):
    """fsdp_step: with every param split by rows, the same new params as 07's step"""
    for _ in range(2):
        params, x, y = make_step_inputs(rng)
        got = call_laid_out(ex, "fsdp_step", [params, x, y], layout(rng, params_split=True))
        assert_step_close(got, np_sgd_step(params, x, y), "fsdp_step(params, x, y)", params)


@pytest.mark.task("fsdp_step")
def test_fsdp_step_keeps_params_sharded(ex, rng, tell):
    """fsdp_step: each device keeps its own block of every new param, as FSDP does"""
    params, x, y = make_step_inputs(rng)
    got = new_params(
        call_laid_out(ex, "fsdp_step", [params, x, y], layout(rng, params_split=True)),
        "fsdp_step(params, x, y)",
    )
    for k in NAMES:
        call = f"fsdp_step(params, x, y)['{k}']"
        blocks = blocks_of(got[k], call)
        if all(list(s) == [(0, n) for n in got[k].shape] for s in blocks.values()):
            raise AssertionError(
                f"{call} comes back whole on every device: that is DDP's full copy, the "
                "memory FSDP saves. Return each param split by rows as it came in "
                "(`with_sharding_constraint(new, NamedSharding(mesh, PartitionSpec(axis)))`)"
            )
        assert_split_by_rows(got[k], got[k].shape[0], call)
    shapes = {k: (got[k].shape[0] // DEVICES, *got[k].shape[1:]) for k in NAMES}
    tell(f"fsdp_step: each device holds {', '.join(f'{k} {s}' for k, s in shapes.items())}")


@pytest.mark.task("fsdp_step")
def test_fsdp_step_compiled_keeps_params_sharded(ex, rng):
    """fsdp_step: compiled for 8 devices, it returns the params laid out as it took them"""
    params, x, y = make_step_inputs(rng)
    program = ex.fsdp_step.exported(params, x, y, layout=layout(rng, params_split=True))
    want = np_sgd_step(params, x, y)
    assert_step_close(program.run(params, x, y), want, "jax.jit(fsdp_step)", params)
    taken = program.placed(params, x, y)[0]
    given = program.compiled(params, x, y).output_shardings
    for k, sharding in zip(NAMES, _leaves_by_name(given), strict=True):
        shape = np.shape(params[k])
        assert sharding.devices_indices_map(shape) == taken[k].sharding.devices_indices_map(
            shape
        ), (
            f"jax.jit(fsdp_step) returns params['{k}'] laid out as {sharding}, not as it "
            "came in (each device its block of rows): FSDP keeps every param split; pin the "
            "result's layout with `jax.lax.with_sharding_constraint`"
        )


# --- sync_batch_stats -----------------------------------------------------------------------


def uneven_batch(rng, channels=6):
    """(N, C) rows whose block on each device has a mean of its own, as the batches of
    DDP's processes do when the data is not shuffled across them."""
    x = rng.normal(size=(8 * DEVICES, channels))
    x += np.repeat(rng.normal(scale=3.0, size=(DEVICES, channels)), 8, axis=0)
    return np.asarray(x, np.float32)


def read_stats(result, call):
    assert isinstance(result, (tuple, list)) and len(result) == 2, (
        f"{call} should return a pair (mean, variance), but returned "
        f"{type_name(result)}: {show(result)}"
    )
    return result


@pytest.mark.task("sync_batch_stats")
def test_sync_batch_stats_over_the_whole_batch(ex, rng):
    """sync_batch_stats: each channel's mean and variance over all rows, on every device"""
    for _ in range(2):
        x = uneven_batch(rng)
        axis = str(rng.choice(AXES))
        chosen = {"axis": axis, "args": [[axis]]}
        call = "sync_batch_stats(x)"
        mean, variance = read_stats(call_laid_out(ex, "sync_batch_stats", [x], chosen), call)
        x64 = x.astype(np.float64)
        assert_close(mean, x64.mean(axis=0), f"{call}[0], the mean", rtol=1e-4, atol=1e-5)
        per_device = x64.reshape(DEVICES, -1, x.shape[1]).var(axis=1).mean(axis=0)
        if np.allclose(np.asarray(variance, np.float64), per_device, rtol=1e-3, atol=1e-4):
            raise AssertionError(
                f"{call}[1] is the average of each device's own variance ({show(variance)}; "
                f"over all rows it is {show(x64.var(axis=0))}): that is nn.BatchNorm under "
                "DDP, each process normalizing by its own batch. SyncBatchNorm's variance is "
                "over all N rows: combine partial sums (of x and x², or of squared "
                "deviations from the global mean), not per-device variances"
            )
        assert_close(variance, x64.var(axis=0), f"{call}[1], the variance", rtol=1e-4, atol=1e-5)
        for i, what in enumerate(("the mean", "the variance")):
            assert_on_every_device((mean, variance)[i], f"{call}[{i}]", what)


@pytest.mark.task("sync_batch_stats")
def test_sync_batch_stats_all_reduces_partial_sums(ex, rng, tell):
    """sync_batch_stats: compiled, it all-reduces partial sums and gathers no rows"""
    x = uneven_batch(rng)
    axis = str(rng.choice(AXES))
    program = ex.sync_batch_stats.exported(x, layout={"axis": axis, "args": [[axis]]})
    mean, variance = read_stats(program.run(x), "jax.jit(sync_batch_stats)(x)")
    x64 = x.astype(np.float64)
    assert_close(mean, x64.mean(axis=0), "jax.jit(sync_batch_stats)(x)[0]")
    assert_close(variance, x64.var(axis=0), "jax.jit(sync_batch_stats)(x)[1]")
    compiled = program.compiled(x)
    found = collectives(compiled)
    tell(f"jax.jit(sync_batch_stats) compiled for {DEVICES} devices: {described(found)}")
    moved = {name: found[name] for name in MOVES_DATA if found[name]}
    assert not moved, (
        f"jax.jit(sync_batch_stats) moves rows between devices ({described(Counter(moved))}): "
        "SyncBatchNorm sends each device's partial sums, a few numbers per channel, never "
        "the batch itself. Reduce on each device's rows and let the sums be all-reduced"
    )
    assert found["all-reduce"] >= 1, (
        "jax.jit(sync_batch_stats) has no all-reduce: the devices never combine their "
        "partial sums, so each has its own statistics"
    )
    for i, sharding in enumerate(compiled.output_shardings):
        assert sharding.is_fully_replicated, (
            f"jax.jit(sync_batch_stats)(x)[{i}] comes out split over the devices "
            f"({sharding}): every device normalizes with the same statistics, so each "
            "needs them whole"
        )
