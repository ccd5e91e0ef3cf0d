"""Wrong answers a learner writes for 04_vmap, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `raises`, where given, is the exception the
first of them reports, whose diagnosis the grader must show. `CORRECT` lists other right
answers, each appended the same way, that must pass every check.
"""

MISTAKES = [
    {
        "name": "Python loop over rows (right values, program grows with the batch)",
        "advice": None,
        "code": """
def batched_euclid(pa, pb):
    return jnp.stack([euclid(pa[i], pb[i]) for i in range(pa.shape[0])])
""",
        "fails": ["test_batched_euclid_program_size_independent_of_batch"],
    },
    {
        "name": "batched_euclid: one distance for the whole batch",
        "advice": None,
        "code": """
def batched_euclid(pa, pb):
    return euclid(pa, pb)
""",
        "fails": ["test_batched_euclid_matches_loop"],
    },
    {
        "name": "pairwise_distances: Python loop over rows of A, vmap over B",
        "advice": None,
        "code": """
def pairwise_distances(A, B):
    return jnp.stack([jax.vmap(euclid, in_axes=(None, 0))(a, B) for a in A])
""",
        "fails": ["test_pairwise_distances_program_size_independent_of_batch"],
    },
    {
        "name": "pairwise_distances only works when N == M",
        "advice": None,
        "code": """
def pairwise_distances(A, B):
    rows = jnp.arange(A.shape[0])
    return jax.vmap(lambda i: jax.vmap(lambda j: euclid(A[i], B[j]))(rows))(rows)
""",
        "fails": ["test_pairwise_distances_matches_loop"],
    },
    {
        "name": "pairwise_distances as two nested vmaps with the default in_axes",
        "advice": "row i of one with row i of the other",
        "code": """
def pairwise_distances(A, B):
    return jax.vmap(jax.vmap(euclid))(A, B)
""",
        "fails": ["test_pairwise_distances_matches_loop"],
        "raises": "ValueError",
        "explains": "like `zip`",
    },
    {
        "name": "pairwise_distances with the two vmaps swapped (an (M, N) result)",
        "advice": None,
        "code": """
def pairwise_distances(A, B):
    one_row_of_b = jax.vmap(euclid, in_axes=(0, None))
    return jax.vmap(one_row_of_b, in_axes=(None, 0))(A, B)
""",
        "fails": ["test_pairwise_distances_matches_loop"],
    },
    {
        "name": "per_example_grads: Python loop over examples",
        "advice": None,
        "code": """
def per_example_grads(params, xs, ys):
    grads = [jax.grad(example_loss)(params, x, y) for x, y in zip(xs, ys, strict=True)]
    return jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves), *grads)
""",
        "fails": ["test_per_example_grads_program_size_independent_of_batch"],
    },
    {
        "name": "per_example_grads: the batch-mean gradient copied to every example",
        "advice": None,
        "code": """
def per_example_grads(params, xs, ys):
    def mean_loss(params):
        return jnp.mean(jax.vmap(example_loss, in_axes=(None, 0, 0))(params, xs, ys))

    grads = jax.grad(mean_loss)(params)
    n = xs.shape[0]
    return jax.tree_util.tree_map(lambda g: jnp.broadcast_to(g, (n, *g.shape)), grads)
""",
        "fails": ["test_per_example_grads_match_loop"],
    },
    {
        "name": "per_example_grads: params batched too (in_axes=0 for everything)",
        "advice": "shared `params` mapped too",
        "code": """
def per_example_grads(params, xs, ys):
    return jax.vmap(jax.grad(example_loss))(params, xs, ys)
""",
        "fails": ["test_per_example_grads_shapes", "test_per_example_grads_match_loop"],
    },
    {
        "name": "pairwise_distances broadcast with torch's unsqueeze and dim=",
        "advice": "`.unsqueeze()` is a torch.Tensor method",
        "code": """
def pairwise_distances(A, B):
    return jnp.sqrt(jnp.sum((A.unsqueeze(1) - B.unsqueeze(0)) ** 2, dim=-1))
""",
        "fails": ["test_pairwise_distances_matches_loop"],
        "raises": "AttributeError",
        "explains": "`.unsqueeze()`",
    },
    {
        "name": "batched_euclid with torch's keepdim=",
        "advice": "`keepdims=`",
        "code": """
def batched_euclid(pa, pb):
    return jnp.sqrt(jnp.sum((pa - pb) ** 2, axis=-1, keepdim=False))
""",
        "fails": ["test_batched_euclid_matches_loop"],
        "raises": "TypeError",
        "explains": "`keepdim=`",
    },
    {
        "name": "batched_euclid returns a 1-tuple: a trailing comma after return",
        "advice": None,
        "code": """
def batched_euclid(pa, pb):
    return jax.vmap(euclid)(pa, pb),
""",
        "fails": ["test_batched_euclid_matches_loop"],
        "says": "a 1-tuple",
    },
    {
        # The helper's body is lowered once and shared: each row adds a call and a slice.
        "name": "pairwise_distances: Python loop over rows of A calling a jitted helper",
        "advice": None,
        "code": """
@jax.jit
def _distances_to_row(a, B):
    return jax.vmap(euclid, in_axes=(None, 0))(a, B)


def pairwise_distances(A, B):
    return jnp.stack([_distances_to_row(a, B) for a in A])
""",
        "fails": ["test_pairwise_distances_program_size_independent_of_batch"],
    },
    {
        # torch.cdist's matmul form: passes the old checks, whose rows were never (near) equal.
        "name": "pairwise_distances as |a|² + |b|² - 2 a·b, cancelling for equal rows",
        "advice": None,
        "code": """
def pairwise_distances(A, B):
    squared = jnp.sum(A**2, axis=1)[:, None] + jnp.sum(B**2, axis=1)[None, :] - 2 * A @ B.T
    return jnp.sqrt(jnp.maximum(squared, 0.0))
""",
        "fails": ["test_pairwise_distances_matches_loop"],
    },
    {
        "name": "batched_euclid as |a|² + |b|² - 2 a·b, cancelling for equal rows",
        "advice": None,
        "code": """
def batched_euclid(pa, pb):
    squared = jnp.sum(pa**2, axis=1) + jnp.sum(pb**2, axis=1) - 2 * jnp.sum(pa * pb, axis=1)
    return jnp.sqrt(jnp.maximum(squared, 0.0))
""",
        "fails": ["test_batched_euclid_matches_loop"],
    },
    {
        # MLIR prints a function name that is no identifier quoted (`@"<lambda>"`), and read
        # as text those calls counted as nothing. The helper slices and writes its own row
        # at an index it carries, so the loop adds calls alone: 6 operations for 2 pairs
        # and for 32, so read.
        "name": "batched_euclid: Python loop calling a jitted lambda that writes its row",
        "advice": None,
        "code": """
def batched_euclid(pa, pb):
    step = jax.jit(lambda out, i: (out.at[i].set(euclid(pa[i], pb[i])), i + 1))
    carry = (jnp.zeros(pa.shape[0], pa.dtype), jnp.int32(0))
    for _ in range(pa.shape[0]):
        carry = step(*carry)
    return carry[0]
""",
        "fails": ["test_batched_euclid_program_size_independent_of_batch"],
    },
    {
        "name": "pairwise_distances: Python loop over A calling a helper named with quotes",
        "advice": None,
        "code": """
def _row(A, B, out, i):
    return out.at[i].set(jax.vmap(euclid, in_axes=(None, 0))(A[i], B)), i + 1


_row.__name__ = '@"row" {é}'
_row = jax.jit(_row)


def pairwise_distances(A, B):
    carry = (jnp.zeros((A.shape[0], B.shape[0]), A.dtype), jnp.int32(0))
    for _ in range(A.shape[0]):
        carry = _row(A, B, *carry)
    return carry[0]
""",
        "fails": ["test_pairwise_distances_program_size_independent_of_batch"],
    },
    {
        "name": "per_example_grads: Python loop calling a helper named with a space",
        "advice": None,
        "code": """
def _one(params, xs, ys, out, i):
    grads = jax.grad(example_loss)(params, xs[i], ys[i])
    return jax.tree_util.tree_map(lambda o, g: o.at[i].set(g), out, grads), i + 1


_one.__name__ = "one example"
_one = jax.jit(_one)


def per_example_grads(params, xs, ys):
    out = jax.tree_util.tree_map(lambda p: jnp.zeros((xs.shape[0],) + p.shape, p.dtype), params)
    carry = (out, jnp.int32(0))
    for _ in range(xs.shape[0]):
        carry = _one(params, xs, ys, *carry)
    return carry[0]
""",
        "fails": ["test_per_example_grads_program_size_independent_of_batch"],
    },
    {
        # A Python loop over chunks of 16 rows, each vmapped: grows by less than a row's
        # worth per row, yet without end (found by a red team).
        "name": "batched_euclid vmapped over 16 rows at a time by a Python loop over chunks",
        "advice": None,
        "code": """
def batched_euclid(pa, pb):
    pieces = [
        jax.vmap(euclid)(pa[start : start + 16], pb[start : start + 16])
        for start in range(0, pa.shape[0], 16)
    ]
    return jnp.concatenate(pieces)
""",
        "fails": ["test_batched_euclid_program_size_independent_of_batch"],
    },
    {
        # A switch on the batch: a Python loop below 64 examples, vmap above (sizes that
        # grow to 48 and fall at 72: not bounded, though they stop growing).
        "name": "batched_euclid: a Python loop for small batches, vmap for large ones",
        "advice": None,
        "code": """
def batched_euclid(pa, pb):
    if pa.shape[0] >= 64:
        return jax.vmap(euclid)(pa, pb)
    return jnp.stack([euclid(a, b) for a, b in zip(pa, pb)])
""",
        "fails": ["test_batched_euclid_program_size_independent_of_batch"],
    },
    {
        # A Python loop padded with operations that compute nothing, to about 2,700 at every
        # batch up to 245: flat from 2 to 24, where the old check decided "bounded", and
        # 480's loop (5,314) under twice that (a red team's). Held to 64 times the grader's
        # vmap (7 operations), at batches drawn anew, it fails at the first.
        "name": "batched_euclid: a Python loop padded flat with no-op adds",
        "advice": None,
        "code": """
PADDED_TO = 2700


def batched_euclid(pa, pb):
    rows = jnp.stack([euclid(pa[i], pb[i]) for i in range(pa.shape[0])])
    pad = jnp.zeros((), pa.dtype)
    for _ in range(max(0, PADDED_TO - 11 * pa.shape[0])):
        pad = pad + 0.0
    return rows + pad
""",
        "fails": ["test_batched_euclid_program_size_independent_of_batch"],
    },
    {
        # The padded loop flat from 2 to 24, vmap from 400 examples on: the old check
        # measured 480 once and never asked whether it shrank there (a red team's).
        "name": "batched_euclid: a padded Python loop, vmap only past the batches measured",
        "advice": None,
        "code": """
PADDED_TO = 280


def batched_euclid(pa, pb):
    if pa.shape[0] >= 400:
        return jax.vmap(euclid)(pa, pb)
    rows = jnp.stack([euclid(pa[i], pb[i]) for i in range(pa.shape[0])])
    pad = jnp.zeros((), pa.dtype)
    for _ in range(max(0, PADDED_TO - 11 * pa.shape[0])):
        pad = pad + 0.0
    return rows + pad
""",
        "fails": ["test_batched_euclid_program_size_independent_of_batch"],
    },
    {
        # Padded another way: the result multiplied by 1.0 again and again (two operations
        # each), about 3,000 for up to 270 rows of A; flat from 2 to 72, 480's loop under
        # twice that.
        "name": "pairwise_distances: a Python loop over A padded by multiplying by 1.0",
        "advice": None,
        "code": """
PADDED_TO = 3000


def pairwise_distances(A, B):
    out = jnp.stack([jax.vmap(euclid, in_axes=(None, 0))(a, B) for a in A])
    for _ in range(max(0, (PADDED_TO - 11 * A.shape[0]) // 2)):
        out = out * 1.0
    return out
""",
        "fails": ["test_pairwise_distances_program_size_independent_of_batch"],
    },
    {
        # Aimed at the rule that catches the two above: padded to 440, under 64 times vmap's
        # 7 operations, so flat up to 40 examples; the largest batch drawn is 256 or more.
        "name": "batched_euclid: a Python loop padded to just under the size allowed",
        "advice": None,
        "code": """
PADDED_TO = 440


def batched_euclid(pa, pb):
    rows = jnp.stack([euclid(pa[i], pb[i]) for i in range(pa.shape[0])])
    pad = jnp.zeros((), pa.dtype)
    for _ in range(max(0, PADDED_TO - 11 * pa.shape[0])):
        pad = pad + 0.0
    return rows + pad
""",
        "fails": ["test_batched_euclid_program_size_independent_of_batch"],
    },
]


CORRECT = [
    {
        "name": "lax.map, NumPy-style broadcasting, vmap over a closure",
        "code": """
@jax.jit
def batched_euclid(pa, pb):
    return jax.lax.map(lambda ab: euclid(*ab), (pa, pb))

def pairwise_distances(A, B):
    return jnp.sqrt(jnp.sum((A[:, None, :] - B[None, :, :]) ** 2, axis=-1))

def per_example_grads(params, xs, ys):
    def one(x, y):
        return jax.grad(example_loss)(params, x, y)

    return jax.jit(jax.vmap(one))(xs, ys)
""",
    },
    {
        "name": "vmap over B inside a vmapped lambda",
        "code": """
def pairwise_distances(A, B):
    return jax.vmap(lambda a: jax.vmap(lambda b: euclid(a, b))(B))(A)
""",
    },
    {
        # A bounded program is no Python loop: a scan unrolled u times grows and shrinks
        # with the batch (batched_euclid with unroll=4: 30, 71, 71 operations at 2, 32, 128).
        "name": "scans over examples unrolled (unroll=4, 8, 3), helpers named with spaces",
        "code": """
def batched_euclid(pa, pb):
    return jax.lax.scan(lambda c, ab: (c, euclid(*ab)), 0, (pa, pb), unroll=4)[1]


def _row(a, B):
    return jax.vmap(euclid, in_axes=(None, 0))(a, B)


_row.__name__ = "one row"


def pairwise_distances(A, B):
    return jax.lax.scan(lambda c, a: (c, jax.jit(_row)(a, B)), 0, A, unroll=3)[1]


def per_example_grads(params, xs, ys):
    def one(c, xy):
        return c, jax.grad(example_loss)(params, *xy)

    return jax.lax.scan(one, 0, (xs, ys), unroll=8)[1]
""",
    },
]
