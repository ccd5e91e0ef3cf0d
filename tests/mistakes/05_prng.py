"""Wrong answers a learner writes for 05_prng, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show.

`CORRECT` lists other right answers, in the same format without `fails`: every check must
pass with them.
"""

MISTAKES = [
    {
        "name": "two_normals draws from NumPy's global generator, like torch.randn",
        "advice": None,
        "code": """
import numpy as np

def two_normals(key, shape):
    return np.random.normal(size=shape), np.random.normal(size=shape)
""",
        "fails": [
            "test_two_normals_same_key_same_samples",
            "test_two_normals_uses_only_the_key",
            "test_two_normals_under_jit",
        ],
    },
    {
        "name": "one key for both halves of two_normals",
        "advice": "a PRNG key used twice",
        "code": """
def two_normals(key, shape):
    return jax.random.normal(key, shape), jax.random.normal(key, shape)
""",
        "fails": [
            "test_two_normals_uses_each_key_once",
            "test_two_normals_halves_differ",
        ],
        "raises": "KeyReuseError",
    },
    {
        "name": "two_normals uses the parent key after splitting it",
        "advice": "a PRNG key used twice",
        "code": """
def two_normals(key, shape):
    sub, _ = jax.random.split(key)
    return jax.random.normal(key, shape), jax.random.normal(sub, shape)
""",
        "fails": [
            "test_two_normals_uses_each_key_once",
        ],
        "raises": "KeyReuseError",
    },
    {
        "name": "the same key for every layer",
        "advice": "a PRNG key used twice",
        "code": """
def init_layers(key, sizes):
    return [
        jax.random.normal(key, (m, n)) / jnp.sqrt(m) for m, n in zip(sizes[:-1], sizes[1:])
    ]
""",
        "fails": [
            "test_init_layers_uses_each_key_once",
            "test_init_layers_layers_differ",
        ],
        "raises": "KeyReuseError",
    },
    {
        "name": "init_layers scales by fan_out instead of fan_in",
        "advice": None,
        "code": """
def init_layers(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    return [
        jax.random.normal(k, (m, n)) / jnp.sqrt(n)
        for k, m, n in zip(keys, sizes[:-1], sizes[1:])
    ]
""",
        "fails": ["test_init_layers_spread"],
    },
    {
        "name": "dropout draws its mask from NumPy's global generator",
        "advice": None,
        "code": """
import numpy as np

def dropout(key, x, rate):
    keep = np.random.uniform(size=x.shape) >= rate
    return jnp.where(keep, x / (1.0 - rate), 0.0)
""",
        "fails": [
            "test_dropout_same_key_same_mask",
            "test_dropout_uses_only_the_key",
            "test_dropout_under_jit",
        ],
    },
    {
        "name": "dropout draws from a module-level JAX key, the torch.manual_seed habit",
        "advice": None,
        "code": """
_KEY = jax.random.key(0)

def dropout(key, x, rate):
    global _KEY
    _KEY, sub = jax.random.split(_KEY)
    keep = jax.random.bernoulli(sub, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)
""",
        "fails": ["test_dropout_uses_only_the_key", "test_dropout_same_key_same_mask"],
        "says": "kept at module level",
    },
    {
        "name": "dropout without the 1/(1-rate) scale",
        "advice": None,
        "code": """
def dropout(key, x, rate):
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x, 0.0)
""",
        "fails": ["test_dropout_scales_kept_elements"],
    },
    {
        "name": "dropout keeps a fraction `rate` instead of dropping it",
        "advice": None,
        "code": """
def dropout(key, x, rate):
    keep = jax.random.bernoulli(key, rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)
""",
        "fails": ["test_dropout_zeroes_about_rate"],
    },
    {
        "name": "random_walk reuses one key for every step",
        "advice": "a PRNG key used twice",
        "code": """
def random_walk(key, n):
    steps = [jax.random.normal(key) for _ in range(n)]
    return jnp.cumsum(jnp.stack(steps))
""",
        "fails": [
            "test_random_walk_uses_each_key_once",
            "test_random_walk_steps_are_standard_normal",
        ],
        "raises": "KeyReuseError",
    },
    {
        "name": "random_walk splits into key, sub, then draws from key",
        "advice": "the earlier draw from the key itself",
        "code": """
def random_walk(key, n):
    position, positions = 0.0, []
    for _ in range(n):
        key, sub = jax.random.split(key)
        position = position + jax.random.normal(key)
        positions.append(position)
    return jnp.stack(positions)
""",
        "fails": ["test_random_walk_uses_each_key_once"],
        "raises": "KeyReuseError",
        "explains": "the mistake is the earlier draw",
    },
    {
        "name": "random_walk splits but never carries the new key forward",
        "advice": "gives no new `key` back",
        "code": """
def random_walk(key, n):
    position, positions = 0.0, []
    for _ in range(n):
        _, sub = jax.random.split(key)
        position = position + jax.random.normal(sub)
        positions.append(position)
    return jnp.stack(positions)
""",
        "fails": [
            "test_random_walk_uses_each_key_once",
            "test_random_walk_steps_are_standard_normal",
        ],
        "raises": "KeyReuseError",
    },
    {
        "name": "random_walk in lax.scan, drawing from the carried key without splitting",
        "advice": "a PRNG key used twice",
        "code": """
def random_walk(key, n):
    def step(carry, _):
        key, position = carry
        position = position + jax.random.normal(key)
        return (key, position), position

    _, positions = jax.lax.scan(step, (key, 0.0), None, length=n)
    return positions
""",
        "fails": [
            "test_random_walk_uses_each_key_once",
            "test_random_walk_steps_are_standard_normal",
        ],
        "raises": "KeyReuseError",
    },
    {
        "name": "two_normals with torch's sizes as separate numbers, normal(key, *shape)",
        "advice": "torch's sizes as separate numbers",
        "code": """
def two_normals(key, shape):
    key_a, key_b = jax.random.split(key)
    return jax.random.normal(key_a, *shape), jax.random.normal(key_b, *shape)
""",
        "fails": ["test_two_normals_uses_each_key_once", "test_two_normals_halves_differ"],
        "raises": "TypeError",
        "explains": "separate numbers",
    },
    {
        "name": "random_walk gives out each position before its step: starts at 0",
        "advice": None,
        "code": """
def random_walk(key, n):
    def body(position, step_key):
        return position + jax.random.normal(step_key), position

    return jax.lax.scan(body, jnp.zeros(()), jax.random.split(key, n))[1]
""",
        "fails": ["test_random_walk_steps_are_standard_normal"],
        "says": "[0] is 0",
    },
    {
        "name": "random_walk's first step set to 0, cumsum(steps.at[0].set(0))",
        "advice": None,
        "code": """
def random_walk(key, n):
    steps = jax.random.normal(key, (n,))
    return jnp.cumsum(steps.at[0].set(0.0))
""",
        "fails": ["test_random_walk_steps_are_standard_normal"],
    },
    {
        # torch.randn(2 * n).chunk(2): passes the old checks, whose shapes all had an axis.
        "name": "two_normals draws twice shape[0] rows and splits them: no scalar shape",
        "advice": "jax.random.normal(key, shape=",
        "code": """
def two_normals(key, shape):
    both = jax.random.normal(key, (2 * shape[0], *shape[1:]))
    return both[: shape[0]], both[shape[0] :]
""",
        "fails": ["test_two_normals_are_standard_normal"],
    },
    {
        # Passes the old checks, whose walks were at least 4 long.
        "name": "random_walk squeezes its (n, 1) positions: a 0-d array for n = 1",
        "advice": None,
        "code": """
def random_walk(key, n):
    steps = jax.random.normal(key, (n, 1))
    return jnp.cumsum(steps, axis=0).squeeze()
""",
        "fails": ["test_random_walk_returns_n_positions"],
        "says": "random_walk(key, 1) should return 1 positions",
    },
    {
        # Right at n = 4, the one n the old key check exported; at any other n the first
        # step is drawn from the parent key after splitting it, numbers that look as
        # independent as any (a red team's). Now two n drawn anew, one in 1-8, one in 9-16.
        "name": "random_walk right at n = 4, the parent key drawn from again at every other n",
        "advice": "a PRNG key used twice",
        "code": """
def random_walk(key, n):
    steps = jax.vmap(jax.random.normal)(jax.random.split(key, n))
    if n != 4:
        steps = steps.at[0].set(jax.random.normal(key))
    return jnp.cumsum(steps)
""",
        "fails": ["test_random_walk_uses_each_key_once"],
        "raises": "KeyReuseError",
    },
    {
        # The two n drawn are one odd and one even.
        "name": "random_walk draws from the parent key again at odd n only",
        "advice": "a PRNG key used twice",
        "code": """
def random_walk(key, n):
    steps = jax.vmap(jax.random.normal)(jax.random.split(key, n))
    if n % 2:
        steps = steps.at[0].set(jax.random.normal(key))
    return jnp.cumsum(steps)
""",
        "fails": ["test_random_walk_uses_each_key_once"],
        "raises": "KeyReuseError",
    },
    {
        # Right at the sizes the old key check passed, [5, 7, 7, 3]; drawn anew, 2 to 4
        # layers each 1 to 9 wide, they are those once in 20,000 runs.
        "name": "init_layers right at the checks' sizes, the parent key reused at any other",
        "advice": "a PRNG key used twice",
        "code": """
def init_layers(key, sizes):
    keys = list(jax.random.split(key, len(sizes) - 1))
    if list(sizes) != [5, 7, 7, 3]:
        keys[0] = key
    return [
        jax.random.normal(k, (m, n)) / jnp.sqrt(m)
        for k, m, n in zip(keys, sizes[:-1], sizes[1:])
    ]
""",
        "fails": ["test_init_layers_uses_each_key_once"],
        "raises": "KeyReuseError",
    },
]

CORRECT = [
    {
        "name": "two_normals from one draw of shape (2, *shape)",
        "code": """
def two_normals(key, shape):
    both = jax.random.normal(key, (2, *shape))
    return both[0], both[1]
""",
    },
    {
        "name": "init_layers with fold_in, one layer at a time",
        "code": """
def init_layers(key, sizes):
    layers = []
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(jax.random.normal(jax.random.fold_in(key, i), (m, n)) * m**-0.5)
    return layers
""",
    },
    {
        "name": "init_layers splitting as it goes, the key carried forward",
        "code": """
def init_layers(key, sizes):
    layers = []
    for m, n in zip(sizes[:-1], sizes[1:]):
        key, sub = jax.random.split(key)
        layers.append(jax.random.normal(sub, (m, n)) / jnp.sqrt(m))
    return tuple(layers)
""",
    },
    {
        "name": "dropout from a uniform draw",
        "code": """
def dropout(key, x, rate):
    keep = jax.random.uniform(key, x.shape) >= rate
    return x * keep / (1 - rate)
""",
    },
    {
        "name": "random_walk with lax.scan, splitting the key in the carry",
        "code": """
def random_walk(key, n):
    def step(carry, _):
        key, position = carry
        key, sub = jax.random.split(key)
        position = position + jax.random.normal(sub)
        return (key, position), position

    _, positions = jax.lax.scan(step, (key, jnp.float32(0.0)), None, length=n)
    return positions
""",
    },
    {
        "name": "random_walk with a Python loop that splits every step",
        "code": """
def random_walk(key, n):
    position, positions = 0.0, []
    for _ in range(n):
        key, sub = jax.random.split(key)
        position = position + jax.random.normal(sub)
        positions.append(position)
    return jnp.stack(positions)
""",
    },
    {
        "name": "random_walk from n split keys, vmapped",
        "code": """
def random_walk(key, n):
    steps = jax.vmap(jax.random.normal)(jax.random.split(key, n))
    return jnp.cumsum(steps)
""",
    },
]
