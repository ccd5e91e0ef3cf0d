"""Wrong answers a learner writes for 15_sharding, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports; `says`, a fragment of its message. `CORRECT` entries are other
right answers, appended the same way, that must pass every check.
"""

# shard_map with its check off, on either JAX: the gradient of a replicated input is then
# each device's own, and `pmean` is the all-reduce DDP does.
UNCHECKED_SHARD_MAP = """
try:
    from jax import shard_map

    UNCHECKED = {"check_vma": False}
except ImportError:  # JAX 0.4/0.5
    from jax.experimental.shard_map import shard_map

    UNCHECKED = {"check_rep": False}
"""

MISTAKES = [
    # --- shard_rows ---------------------------------------------------------------------------
    {
        "name": "the whole array on the first device, like x.to('cuda:0')",
        "advice": None,
        "code": """
def shard_rows(x):
    return jax.device_put(x, jax.devices()[0])
""",
        "fails": ["test_shard_rows_one_block_per_device", "test_shard_rows_any_shape"],
        "says": "came back on one device",
    },
    {
        "name": "jnp.asarray: on the default device",
        "advice": None,
        "code": """
def shard_rows(x):
    return jnp.asarray(x)
""",
        "fails": ["test_shard_rows_one_block_per_device", "test_shard_rows_any_shape"],
        "says": "came back on one device",
    },
    {
        "name": "a copy on every device: PartitionSpec() replicates",
        "advice": None,
        "code": """
def shard_rows(x):
    return jax.device_put(x, NamedSharding(devices_mesh(), PartitionSpec()))
""",
        "fails": ["test_shard_rows_one_block_per_device", "test_shard_rows_any_shape"],
        "says": "on every device",
    },
    {
        "name": "a 2-D mesh, rows split over its first axis only",
        "advice": None,
        "code": """
def shard_rows(x):
    mesh = Mesh(np.array(jax.devices()).reshape(2, -1), ("hosts", "chips"))
    return jax.device_put(x, NamedSharding(mesh, PartitionSpec("hosts")))
""",
        "fails": ["test_shard_rows_one_block_per_device", "test_shard_rows_any_shape"],
        "says": "consecutive rows on each of the 8",
    },
    {
        "name": "half of the devices",
        "advice": None,
        "code": """
def shard_rows(x):
    mesh = Mesh(np.array(jax.devices()[:4]), ("devices",))
    return jax.device_put(x, NamedSharding(mesh, PartitionSpec("devices")))
""",
        "fails": ["test_shard_rows_one_block_per_device", "test_shard_rows_any_shape"],
        "says": "lies on 4 devices",
    },
    # --- ddp_step -----------------------------------------------------------------------------
    {
        "name": "the batch pulled to the host and stepped on one device (the stub)",
        "advice": None,
        "code": """
def ddp_step(params, x, y):
    first = jax.devices()[0]
    x, y = np.asarray(x), np.asarray(y)
    return jax.jit(sgd)(
        jax.device_put(params, first), jax.device_put(x, first), jax.device_put(y, first)
    )
""",
        "fails": [
            "test_ddp_step_returns_params_on_every_device",
            "test_ddp_step_all_reduces_gradients",
            "test_ddp_step_compiles_once",
        ],
        "says": "came back on one device",
    },
    {
        "name": "the batch gathered onto every device before the step",
        "advice": None,
        "code": """
@jax.jit
def ddp_step(params, x, y):
    everywhere = NamedSharding(devices_mesh(), PartitionSpec())
    x, y = jax.lax.with_sharding_constraint((x, y), everywhere)
    return jax.lax.with_sharding_constraint(sgd(params, x, y), everywhere)
""",
        "fails": ["test_ddp_step_all_reduces_gradients"],
        "says": "moves data between them",
    },
    {
        "name": "the new params split by rows, not replicated",
        "advice": None,
        "code": """
@jax.jit
def ddp_step(params, x, y):
    by_rows = NamedSharding(devices_mesh(), PartitionSpec("devices"))
    return jax.lax.with_sharding_constraint(sgd(params, x, y), by_rows)
""",
        "fails": [
            "test_ddp_step_returns_params_on_every_device",
            "test_ddp_step_all_reduces_gradients",
        ],
    },
    {
        # JAX 0.6+'s shard_map sums the gradient of a replicated input over the devices
        # itself (check_vma); pmean of that sum is the sum, 8 times the mean gradient. On
        # JAX 0.5 there is no jax.shard_map, and the same code with
        # jax.experimental.shard_map (check_rep on) is right: 1 times (measured on 0.5.3).
        "name": "pmean(grad) inside jax.shard_map with check_vma on: 8 times the gradient",
        "advice": None,
        "jax_from": "0.6",
        "code": """
from jax import shard_map


def _ddp_on_each_device(params, x, y):
    grads = jax.lax.pmean(jax.grad(loss)(params, x, y), "devices")
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


@jax.jit
def ddp_step(params, x, y):
    rows = PartitionSpec("devices")
    return shard_map(
        _ddp_on_each_device,
        mesh=devices_mesh(),
        in_specs=(PartitionSpec(), rows, rows),
        out_specs=PartitionSpec(),
    )(params, x, y)
""",
        "fails": ["test_ddp_step_matches_single_device_step"],
        "says": "its step is 8× the expected one: gradients summed over 8",
    },
    {
        "name": "each device steps on its own rows, gradients never combined",
        "advice": None,
        "code": UNCHECKED_SHARD_MAP
        + """

def _own_rows_step(params, x, y):
    return sgd(params, x, y)


@jax.jit
def ddp_step(params, x, y):
    rows = PartitionSpec("devices")
    return shard_map(
        _own_rows_step,
        mesh=devices_mesh(),
        in_specs=(PartitionSpec(), rows, rows),
        out_specs=PartitionSpec(),
        **UNCHECKED,
    )(params, x, y)
""",
        "fails": [
            "test_ddp_step_matches_single_device_step",
            "test_ddp_step_all_reduces_gradients",
        ],
    },
    {
        "name": "a new jax.jit of a new function on every step",
        "advice": None,
        "code": """
def ddp_step(params, x, y):
    return jax.jit(lambda params, x, y: sgd(params, x, y))(params, x, y)
""",
        "fails": ["test_ddp_step_compiles_once"],
    },
    {
        "name": "no jit: the step runs op by op on the sharded arrays",
        "advice": None,
        "code": """
def ddp_step(params, x, y):
    grads = jax.grad(loss)(params, x, y)
    return {k: params[k] - 0.1 * grads[k] for k in params}
""",
        "fails": ["test_ddp_step_compiles_once"],
    },
    # --- fsdp_step ----------------------------------------------------------------------------
    {
        "name": "the new params gathered whole onto every device (the stub: DDP's layout)",
        "advice": None,
        "code": """
@jax.jit
def fsdp_step(params, x, y):
    everywhere = NamedSharding(devices_mesh(), PartitionSpec())
    return jax.lax.with_sharding_constraint(sgd(params, x, y), everywhere)
""",
        "fails": [
            "test_fsdp_step_keeps_params_sharded",
            "test_fsdp_step_compiled_keeps_params_sharded",
        ],
        "says": "DDP's full copy",
    },
    {
        "name": "the params split along their last axis",
        "advice": None,
        "code": """
def _by_last_axis(p):
    spec = PartitionSpec(*([None] * (p.ndim - 1)), "devices")
    return jax.lax.with_sharding_constraint(p, NamedSharding(devices_mesh(), spec))


@jax.jit
def fsdp_step(params, x, y):
    return jax.tree.map(_by_last_axis, sgd(params, x, y))
""",
        "fails": [
            "test_fsdp_step_keeps_params_sharded",
            "test_fsdp_step_compiled_keeps_params_sharded",
        ],
        "says": "another axis than the rows",
    },
    {
        "name": "the new params pulled to the first device",
        "advice": None,
        "code": """
def fsdp_step(params, x, y):
    return jax.device_put(jax.jit(sgd)(params, x, y), jax.devices()[0])
""",
        "fails": ["test_fsdp_step_keeps_params_sharded"],
        "says": "came back on one device",
    },
    # --- sync_batch_stats ---------------------------------------------------------------------
    {
        "name": "each device's own statistics averaged (the stub: BatchNorm under DDP)",
        "advice": None,
        "code": """
try:
    from jax import shard_map
except ImportError:
    from jax.experimental.shard_map import shard_map


def _own_stats(block):
    mean = jnp.mean(block, axis=0)
    variance = jnp.mean((block - mean) ** 2, axis=0)
    return jax.lax.pmean(mean, "devices"), jax.lax.pmean(variance, "devices")


@jax.jit
def sync_batch_stats(x):
    return shard_map(
        _own_stats,
        mesh=devices_mesh(),
        in_specs=PartitionSpec("devices"),
        out_specs=(PartitionSpec(), PartitionSpec()),
    )(x)
""",
        "fails": [
            "test_sync_batch_stats_over_the_whole_batch",
            "test_sync_batch_stats_all_reduces_partial_sums",
        ],
        "says": "average of each device's own variance",
    },
    {
        "name": "the whole batch gathered onto every device first",
        "advice": None,
        "code": """
@jax.jit
def sync_batch_stats(x):
    x = jax.lax.with_sharding_constraint(x, NamedSharding(devices_mesh(), PartitionSpec()))
    return jnp.mean(x, axis=0), jnp.var(x, axis=0)
""",
        "fails": ["test_sync_batch_stats_all_reduces_partial_sums"],
        "says": "moves rows between devices",
    },
    {
        "name": "the unbiased variance (divided by N - 1), torch.var's default",
        "advice": None,
        "code": """
@jax.jit
def sync_batch_stats(x):
    return jnp.mean(x, axis=0), jnp.var(x, axis=0, ddof=1)
""",
        "fails": [
            "test_sync_batch_stats_over_the_whole_batch",
            "test_sync_batch_stats_all_reduces_partial_sums",
        ],
        "says": "of the expected: Bessel's correction",
    },
    {
        "name": "statistics of the first device's rows only",
        "advice": None,
        "code": """
def sync_batch_stats(x):
    rows = x.shape[0] // len(jax.devices())
    return jnp.mean(x[:rows], axis=0), jnp.var(x[:rows], axis=0)
""",
        "fails": ["test_sync_batch_stats_over_the_whole_batch"],
    },
]

CORRECT = [
    {
        "name": "shard_rows on jax.make_mesh",
        "code": """
def shard_rows(x):
    mesh = jax.make_mesh((len(jax.devices()),), ("batch",))
    return jax.device_put(x, NamedSharding(mesh, PartitionSpec("batch")))
""",
    },
    {
        "name": "DDP and FSDP as plain jax.jit of 07's step: XLA places the results",
        "code": """
ddp_step = jax.jit(sgd)
fsdp_step = jax.jit(sgd)
""",
    },
    {
        "name": "DDP by hand: shard_map, each device's gradient, pmean (check off)",
        "code": UNCHECKED_SHARD_MAP
        + """

def _ddp_on_each_device(params, x, y):
    grads = jax.lax.pmean(jax.grad(loss)(params, x, y), "devices")
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)


@jax.jit
def ddp_step(params, x, y):
    rows = PartitionSpec("devices")
    return shard_map(
        _ddp_on_each_device,
        mesh=devices_mesh(),
        in_specs=(PartitionSpec(), rows, rows),
        out_specs=PartitionSpec(),
        **UNCHECKED,
    )(params, x, y)
""",
    },
    {
        "name": "SyncBatchNorm by hand: shard_map, psum of sums, then of squared deviations",
        "code": UNCHECKED_SHARD_MAP
        + """

def _synced_stats(block):
    count = jax.lax.psum(block.shape[0], "devices")
    mean = jax.lax.psum(jnp.sum(block, axis=0), "devices") / count
    variance = jax.lax.psum(jnp.sum((block - mean) ** 2, axis=0), "devices") / count
    return mean, variance


@jax.jit
def sync_batch_stats(x):
    return shard_map(
        _synced_stats,
        mesh=devices_mesh(),
        in_specs=PartitionSpec("devices"),
        out_specs=(PartitionSpec(), PartitionSpec()),
        **UNCHECKED,
    )(x)
""",
    },
    {
        "name": "sync_batch_stats as E[x^2] - E[x]^2 under jit",
        "code": """
@jax.jit
def sync_batch_stats(x):
    mean = jnp.mean(x, axis=0)
    return mean, jnp.mean(x * x, axis=0) - mean * mean
""",
    },
]
