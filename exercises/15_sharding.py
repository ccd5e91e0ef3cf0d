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

try:
    from jax import shard_map  # JAX 0.6+
except ImportError:  # JAX 0.4/0.5
    from jax.experimental.shard_map import shard_map


def devices_mesh():
    """Every device in one row: a 1-D mesh whose axis is named "devices"."""
    return Mesh(np.array(jax.devices()), ("devices",))


def shard_rows(x):
    """`x` split along axis 0 into one block of consecutive rows per device."""
    # TODO: this is `x.to("cuda:0")`: the whole array on the first device. Spread it over
    # the mesh, one block of rows per device.
    return jax.device_put(x, jax.devices()[0])


def mlp(params, x):
    hidden = jnp.tanh(x @ params["w1"] + params["b1"])
    return hidden @ params["w2"] + params["b2"]


def loss(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)


@jax.jit
def sgd(params, x, y, lr=0.1):
    grads = jax.grad(loss)(params, x, y)
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def ddp_step(params, x, y):
    """07's SGD step on a batch split by rows, params replicated on every device."""
    # TODO: `x.cpu().numpy()` and a step on one device: the batch leaves the devices it was
    # split over, the step runs on one of them, the new params stay there, and it cannot
    # run under jax.jit. Let one jitted program work where the data lies.
    first = jax.devices()[0]
    x, y = np.asarray(x), np.asarray(y)
    return sgd(jax.device_put(params, first), jax.device_put(x, first), jax.device_put(y, first))


@jax.jit
def fsdp_step(params, x, y):
    """The same step with every param split along its first axis over the devices."""
    # TODO: the new params come out whole on every device, as DDP keeps them: FSDP's point
    # is that each device keeps only its block of each param. Return them split as they came.
    new = sgd(params, x, y)
    everywhere = NamedSharding(devices_mesh(), PartitionSpec())
    return jax.lax.with_sharding_constraint(new, everywhere)


def _per_device_stats(block):
    mean = jnp.mean(block, axis=0)
    variance = jnp.mean((block - mean) ** 2, axis=0)
    return jax.lax.pmean(mean, "devices"), jax.lax.pmean(variance, "devices")


@jax.jit
def sync_batch_stats(x):
    """Each channel's mean and variance over all rows of `x`, wherever they lie."""
    # TODO: each device's own variance, averaged: nn.BatchNorm under DDP, not SyncBatchNorm.
    # When the devices' rows have different means, that is not the variance of the batch.
    per_device = shard_map(
        _per_device_stats,
        mesh=devices_mesh(),
        in_specs=PartitionSpec("devices"),
        out_specs=(PartitionSpec(), PartitionSpec()),
    )
    return per_device(x)
