"""15 · Many devices, one program.

PyTorch spreads work over devices with processes: one per GPU, each holding its own copy
of the model (`DistributedDataParallel`) or a slice of it (`FullyShardedDataParallel`),
calling `dist.all_reduce` on the gradients after `loss.backward()`, and swapping
`BatchNorm` for `SyncBatchNorm` so the statistics cover the whole batch.

JAX runs one program over a `jax.sharding.Mesh` of devices. An array's sharding,
`NamedSharding(mesh, PartitionSpec("d"))`, says which device holds which block (axis 0
split over the mesh axis "d"; `PartitionSpec()`: a full copy on every device), and
`jax.device_put(x, sharding)` puts it there. Call a `jax.jit`ted function on sharded
arrays and XLA compiles it for those shardings, putting in the collectives itself: a
gradient summed over a batch split across devices becomes an all-reduce, parameters split
across devices are all-gathered where the math needs them whole. Nobody writes
`all_reduce`; the one program is the same code as on one device. `jax.lax.with_sharding_constraint`
pins where an intermediate or a result lives.

To write the per-device program by hand, as PyTorch code does, use `shard_map` (`jax.shard_map`
from JAX 0.6; before, `jax.experimental.shard_map.shard_map`): the function sees its
device's block, and `jax.lax.psum` / `jax.lax.pmean` over the mesh axis are
`dist.all_reduce`. One trap: with shard_map's check on (`check_vma=True`, the default
from 0.6; `check_rep` before), the gradient of a replicated input is already summed over
the devices, so the old recipe `pmean(grad(...))` is 8 times too large on 8 devices;
under `check_rep` (JAX 0.4/0.5) it is each device's own and needs the `pmean`.

The checks run your code on 8 CPU devices, which the grader sets up (to see them in your
own Python: `XLA_FLAGS=--xla_force_host_platform_device_count=8 python`); use all of
`jax.devices()`, and take arrays wherever they lie.

Rule to remember: place the data (`device_put` with a `NamedSharding`), jit the
single-device code, and let XLA insert the collectives.

Go deeper, in JAX's documentation:
  https://docs.jax.dev/en/latest/sharded-computation.html
  https://docs.jax.dev/en/latest/notebooks/shard_map.html
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


def devices_mesh():
    """Every device in one row: a 1-D mesh whose axis is named "devices"."""
    return Mesh(np.array(jax.devices()), ("devices",))


def shard_rows(x):
    """`x` split along axis 0 into one block of consecutive rows per device."""
    return jax.device_put(x, NamedSharding(devices_mesh(), PartitionSpec("devices")))


def mlp(params, x):
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"] + params["b2"]


def loss(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)


def sgd(params, x, y, lr=0.1):
    grads = jax.grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


@jax.jit
def ddp_step(params, x, y):
    """07's SGD step on a batch split by rows, params replicated: XLA all-reduces the
    gradient, and the new params come out replicated like the old."""
    new = sgd(params, x, y)
    everywhere = NamedSharding(devices_mesh(), PartitionSpec())
    return jax.lax.with_sharding_constraint(new, everywhere)


@jax.jit
def fsdp_step(params, x, y):
    """The same step with every param split along its first axis: XLA all-gathers each
    where it is used, and the new params are split as the old ones were."""
    new = sgd(params, x, y)
    by_rows = NamedSharding(devices_mesh(), PartitionSpec("devices"))
    return jax.lax.with_sharding_constraint(new, by_rows)


@jax.jit
def sync_batch_stats(x):
    """Each channel's mean and variance over all rows of `x`, wherever they lie."""
    mean = jnp.mean(x, axis=0)
    variance = jnp.mean((x - mean) ** 2, axis=0)
    everywhere = NamedSharding(devices_mesh(), PartitionSpec())
    return jax.lax.with_sharding_constraint((mean, variance), everywhere)
