"""Wrong answers a learner writes for 14_inside_jit, and the checks that must catch them.

Each entry's `code` is appended to the reference solution (so it replaces that function);
`fails` names the checks that must then fail; `says`, where given, is a fragment of the
first one's message. `CORRECT` lists other right answers, each appended the same way, that
must pass every check.
"""

MISTAKES = [
    # --- count_ops ---
    {
        "name": "count_ops counts the top-level equations only (the stub)",
        "advice": None,
        "code": """
def count_ops(f, *args):
    return dict(Counter(e.primitive.name for e in jax.make_jaxpr(f)(*args).jaxpr.eqns))
""",
        "fails": [
            "test_count_ops_counts_each_call_of_a_jitted_function",
            "test_count_ops_counts_loop_bodies_once",
            "test_count_ops_counts_every_branch_of_cond",
        ],
        "says": "once per call",
    },
    {
        "name": "count_ops counts a jitted function once, however often it is called",
        "advice": None,
        "code": """
def count_ops(f, *args):
    counts, seen = Counter(), set()

    def walk(jaxpr):
        for equation in jaxpr.eqns:
            counts[equation.primitive.name] += 1
            name = equation.params.get("name")
            if name in seen:
                continue
            seen.add(name)
            for inner in sub_jaxprs(equation.params):
                walk(inner)

    walk(jax.make_jaxpr(f)(*args).jaxpr)
    return dict(counts)
""",
        "fails": ["test_count_ops_counts_each_call_of_a_jitted_function"],
    },
    {
        "name": "count_ops counts a scan's body once per round",
        "advice": None,
        "code": """
def count_ops(f, *args):
    counts = Counter()

    def walk(jaxpr, times):
        for equation in jaxpr.eqns:
            counts[equation.primitive.name] += times
            rounds = equation.params.get("length", 1) if equation.primitive.name == "scan" else 1
            for inner in sub_jaxprs(equation.params):
                walk(inner, times * rounds)

    walk(jax.make_jaxpr(f)(*args).jaxpr, 1)
    return dict(counts)
""",
        "fails": ["test_count_ops_counts_loop_bodies_once"],
        "says": "never times the number of rounds",
    },
    {
        "name": "count_ops walks params['jaxpr'] only: no while body, no cond branch",
        "advice": None,
        "code": """
def count_ops(f, *args):
    counts = Counter()

    def walk(jaxpr):
        for equation in jaxpr.eqns:
            counts[equation.primitive.name] += 1
            if "jaxpr" in equation.params:
                walk(equation.params["jaxpr"].jaxpr)

    walk(jax.make_jaxpr(f)(*args).jaxpr)
    return dict(counts)
""",
        "fails": [
            "test_count_ops_counts_loop_bodies_once",
            "test_count_ops_counts_every_branch_of_cond",
        ],
    },
    {
        "name": "count_ops follows the first branch of a cond only",
        "advice": None,
        "code": """
def count_ops(f, *args):
    counts = Counter()

    def walk(jaxpr):
        for equation in jaxpr.eqns:
            counts[equation.primitive.name] += 1
            params = dict(equation.params)
            if "branches" in params:
                params["branches"] = params["branches"][:1]
            for inner in sub_jaxprs(params):
                walk(inner)

    walk(jax.make_jaxpr(f)(*args).jaxpr)
    return dict(counts)
""",
        "fails": ["test_count_ops_counts_every_branch_of_cond"],
    },
    {
        "name": "count_ops keyed by the primitive objects, not their names",
        "advice": None,
        "code": """
def count_ops(f, *args):
    counts = Counter()

    def walk(jaxpr):
        for equation in jaxpr.eqns:
            counts[equation.primitive] += 1
            for inner in sub_jaxprs(equation.params):
                walk(inner)

    walk(jax.make_jaxpr(f)(*args).jaxpr)
    return counts
""",
        "fails": ["test_count_ops_counts_the_program_python_unrolled"],
        "says": "primitive name",
    },
    # --- flops ---
    {
        "name": "flops reads cost_analysis() as a list, as JAX before 0.5 returned it",
        "advice": None,
        "code": """
def flops(f, *args):
    return float(jax.jit(f).lower(*args).compile().cost_analysis()[0]["flops"])
""",
        "fails": ["test_flops_counts_products_and_sums", "test_flops_from_shapes_alone"],
        "says": "returns a dict from JAX 0.5",
    },
    {
        "name": "flops runs f first, as a profiler would",
        "advice": None,
        "code": """
def flops(f, *args):
    jitted = jax.jit(f)
    jax.block_until_ready(jitted(*args))
    return float(jitted.lower(*args).compile().cost_analysis()["flops"])
""",
        "fails": ["test_flops_from_shapes_alone", "test_flops_never_runs_f"],
        "says": "it ran f",
    },
    {
        "name": "flops counts the traced program's operations instead of XLA's estimate",
        "advice": None,
        "code": """
def flops(f, *args):
    return float(sum(count_ops(f, *args).values()))
""",
        "fails": ["test_flops_counts_products_and_sums", "test_flops_from_shapes_alone"],
    },
    {
        "name": "flops returns the whole cost analysis",
        "advice": None,
        "code": """
def flops(f, *args):
    return jax.jit(f).lower(*args).compile().cost_analysis()
""",
        "fails": ["test_flops_counts_products_and_sums"],
        "says": "should return a Python float",
    },
    # --- compile_for ---
    {
        "name": "compile_for returns jax.jit(f): compiled at the first call, for any shape",
        "advice": None,
        "code": """
def compile_for(f, *specs):
    return jax.jit(f)
""",
        "fails": [
            "test_compile_for_refuses_other_shapes_and_dtypes",
            "test_compile_for_compiles_ahead_of_time",
            "test_compile_for_never_runs_f",
        ],
        "says": "compiled f again for them",
    },
    {
        "name": "compile_for lowers but does not compile",
        "advice": None,
        "code": """
def compile_for(f, *specs):
    return jax.jit(f).lower(*specs)
""",
        "fails": ["test_compile_for_gives_f_results", "test_compile_for_compiles_ahead_of_time"],
        "says": "an executable you call like the function",
    },
    {
        "name": "compile_for compiles for the specs on each call",
        "advice": None,
        "code": """
def compile_for(f, *specs):
    def compiled(*args):
        return jax.jit(f).lower(*specs).compile()(*args)

    return compiled
""",
        "fails": [
            "test_compile_for_compiles_ahead_of_time",
        ],
    },
    {
        "name": "compile_for checks the shapes itself and keeps jax.jit(f)",
        "advice": None,
        "code": """
def compile_for(f, *specs):
    jitted = jax.jit(f)

    def compiled(*args):
        if any(a.shape != s.shape or a.dtype != s.dtype for a, s in zip(args, specs)):
            raise TypeError("not the shapes compile_for was given")
        return jitted(*args)

    return compiled
""",
        "fails": [
            "test_compile_for_compiles_ahead_of_time",
            "test_compile_for_never_runs_f",
        ],
    },
    # --- sgd_step ---
    {
        "name": "sgd_step writes into the caller's dict, p.sub_ style (the stub)",
        "advice": "arithmetic on a container of arrays",
        "code": """
def sgd_step(params, grads, lr):
    for name in params:
        params[name] = params[name] - lr * grads[name]
    return params
""",
        "fails": ["test_sgd_step_values", "test_sgd_step_donates_params"],
    },
    {
        "name": "sgd_step donates, then writes the result into the caller's dict too",
        "advice": None,
        "code": """
@partial(jax.jit, donate_argnums=0)
def donated_step(params, grads, lr):
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def sgd_step(params, grads, lr):
    new = donated_step(params, grads, lr)
    params.update(new)
    return params
""",
        "fails": ["test_sgd_step_donates_params"],
        "says": "wrote the new leaves into your params dict",
    },
    {
        "name": "sgd_step jitted without donation",
        "advice": None,
        "code": """
@jax.jit
def sgd_step(params, grads, lr):
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)
""",
        "fails": ["test_sgd_step_donates_params"],
        "says": "still alive",
    },
    {
        "name": "sgd_step donates the grads instead of the params",
        "advice": None,
        "code": """
@partial(jax.jit, donate_argnums=1)
def sgd_step(params, grads, lr):
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)
""",
        "fails": ["test_sgd_step_donates_params"],
        "says": "donated too",
    },
    {
        "name": "sgd_step not jitted: op by op, nothing donated",
        "advice": None,
        "code": """
def sgd_step(params, grads, lr):
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)
""",
        "fails": ["test_sgd_step_donates_params", "test_sgd_step_values"],
    },
    {
        "name": "sgd_step makes a new donating jit of a new function every call",
        "advice": None,
        "code": """
def sgd_step(params, grads, lr):
    step = jax.jit(lambda p, g: jax.tree.map(lambda a, b: a - lr * b, p, g), donate_argnums=0)
    return step(params, grads)
""",
        "fails": ["test_sgd_step_values"],
        "says": "again, for the same shapes",
    },
    {
        # Right for one f: the estimate's formula for (x @ a + b) @ c, from the shapes.
        "name": "flops writes the formula for the one product it expects, never asking XLA",
        "advice": None,
        "code": """
def flops(f, *args):
    (n, k), (_, m), _, (_, p) = (a.shape for a in args)
    return float(2 * n * k * m + n * m + 2 * n * m * p)
""",
        "fails": ["test_flops_counts_products_and_sums", "test_flops_from_shapes_alone"],
        "says": "x @ a @ c + b @ c",
    },
    {
        "name": "compile_for traces f once, then runs it eagerly at every call",
        "advice": None,
        "code": """
def compile_for(f, *specs):
    jax.jit(f).lower(*specs)

    def run(*args):
        if any(a.shape != s.shape or a.dtype != s.dtype for a, s in zip(args, specs)):
            raise TypeError("not the shapes compile_for was given")
        return f(*args)

    return run
""",
        "fails": ["test_compile_for_compiles_ahead_of_time"],
    },
    {
        # Passes the old checks, whose specs were all float32.
        "name": "compile_for lowers on zeros of each spec's shape: float32, whatever the dtype",
        "advice": None,
        "code": """
def compile_for(f, *specs):
    return jax.jit(f).lower(*(jax.numpy.zeros(spec.shape) for spec in specs)).compile()
""",
        # It refuses each of the refusal check's calls too, for another argument's dtype.
        "fails": ["test_compile_for_gives_f_results"],
        "says": "refuses the very shapes and dtypes of the specs",
    },
    {
        # Passes the old checks, whose specs were all float32, and int32 specs alone.
        "name": "compile_for compiles every float spec as float32: a bfloat16 one widened",
        "advice": None,
        "code": """
def compile_for(f, *specs):
    float32, floating = jax.numpy.float32, jax.numpy.floating
    wide = [
        jax.ShapeDtypeStruct(s.shape, float32) if jax.numpy.issubdtype(s.dtype, floating) else s
        for s in specs
    ]
    return jax.jit(f).lower(*wide).compile()
""",
        "fails": [
            "test_compile_for_gives_f_results",
            "test_compile_for_refuses_other_shapes_and_dtypes",
        ],
        "says": "refuses the very shapes and dtypes of the specs",
    },
]

CORRECT = [
    {
        "name": "a stack instead of recursion; jax.extend.core's classes; the lowered estimate",
        "code": """
from jax.extend.core import ClosedJaxpr, Jaxpr


def count_ops(f, *args):
    counts, todo = {}, [jax.make_jaxpr(f)(*args).jaxpr]
    while todo:
        for equation in todo.pop().eqns:
            name = equation.primitive.name
            counts[name] = counts.get(name, 0) + 1
            for value in equation.params.values():
                for item in value if isinstance(value, tuple) else (value,):
                    if isinstance(item, ClosedJaxpr):
                        todo.append(item.jaxpr)
                    elif isinstance(item, Jaxpr):
                        todo.append(item)
    return counts


def flops(f, *args):
    cost = jax.jit(f).lower(*args).cost_analysis()
    return float((cost[0] if isinstance(cost, (list, tuple)) else cost)["flops"])
""",
    },
    {
        "name": "trace, lower and compile spelled out; donation by name, lr static, via a wrapper",
        "code": """
def compile_for(f, *specs):
    return jax.jit(f).trace(*specs).lower().compile()


@partial(jax.jit, donate_argnames="params", static_argnames="lr")
def donating_step(params, grads, lr):
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


def sgd_step(params, grads, lr):
    return donating_step(params, grads, lr=lr)
""",
    },
]
