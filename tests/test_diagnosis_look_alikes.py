"""Every diagnosis rule stays silent on a look-alike: an error that shares its words (the
exception's type, a fragment of its text) but not its cause, because the failing line or
call shows another. A rule that fired on a word would give the look-alike its advice,
which the learner would believe.

Messages are JAX 0.10.2's (and Python's) own, as tests/test_diagnosis_real_errors.py
provokes them; each look-alike says what it is.
"""

from __future__ import annotations

import pytest

from kata.diagnosis import error_rules
from kata.diagnosis.diagnose import KNOWN, RULES, Failure, rule_name

TYPE = ("TypeError", "Exception")
ATTRIBUTE = ("AttributeError", "Exception")
VALUE = ("ValueError", "Exception")
CONCRETE = ("ConcretizationTypeError", "TypeError", "Exception")

# rule -> (what the look-alike is, its failure: types, message, failing line[, learner lines])
LOOK_ALIKES: dict[str, tuple[str, tuple]] = {
    "timeout": (
        "the learner's own TimeoutError",
        (("TimeoutError", "OSError"), "TimeoutError: timeout (> 10 s) waiting for a lock", ""),
    ),
    "process_refused": (
        "a mode a file may not take, on a line that names a pool",
        (
            ("PermissionError", "OSError"),
            "[Errno 1] Operation not permitted: 'pool.npz'",
            "os.chmod('pool.npz', 0o4755)",
        ),
    ),
    "sandboxed_write": (
        "a file that is not there",
        (("FileNotFoundError", "OSError"), "[Errno 2] No such file: 'w.npz'", "np.load('w.npz')"),
    ),
    "program_exit": (
        "a check's words about exiting",
        (("AssertionError",), "train() exited before its last step", ""),
    ),
    "key_reuse": (
        "a key error that is not reuse",
        (TYPE, "TypeError: unexpected PRNG key type <class 'NoneType'>", "jax.random.normal(key)"),
    ),
    "in_place_write": (
        "a tuple's item assignment",
        (TYPE, "TypeError: 'tuple' object does not support item assignment", "params[0] = w"),
    ),
    "custom_rule_shape": (
        "a backward rule JAX called with other arguments",
        (TYPE, "TypeError: bwd() takes 2 positional arguments but 3 were given", ""),
    ),
    "optimizer_object": (
        "a method asked of an optimizer's state",
        (ATTRIBUTE, "AttributeError: 'tuple' object has no attribute 'step'", "opt_state.step()"),
    ),
    "arguments_out_of_order": (
        "a while_loop in its order whose body is named `cond`, its test returning a vector",
        (
            TYPE,
            "TypeError: cond_fun must return a boolean scalar, but got output type(s) "
            "[ShapedArray(float32[3])].",
            "return lax.while_loop(keep_going, cond, x)",
        ),
    ),
    "random_in_torch_order": (
        "a random draw whose shape is traced, key first",
        (
            TYPE,
            "TypeError: Shapes must be 1D sequences of concrete values of integer type, got "
            "(Traced<int32[]>,).",
            "jax.random.normal(key, (n,))",
        ),
    ),
    "torch_positional_meaning": (
        "`jnp.max(x, axis)` with an axis out of range",
        (VALUE, "ValueError: axis 2 is out of bounds for array of dimension 2", "jnp.max(x, axis)"),
    ),
    "key_method": (
        "a torch method on an array that is no key",
        (ATTRIBUTE, "AttributeError: 'ArrayImpl' object has no attribute 'normal_'", "x.normal_()"),
    ),
    "keyword_a_library_lacks": (
        "a keyword the learner's own function lacks",
        (TYPE, "TypeError: step() got an unexpected keyword argument 'lr'", "step(p, x, lr=0.1)"),
    ),
    "torch_spelling": (
        "a misspelt name that is no torch name",
        (ATTRIBUTE, "AttributeError: 'ArrayImpl' object has no attribute 'shpe'", "x.shpe"),
    ),
    "module_method": (
        "torch's `.to` asked of a list",
        (ATTRIBUTE, "AttributeError: 'list' object has no attribute 'to'", "layers.to('cuda')"),
    ),
    "module_changed_in_place": (
        "a property with no setter",
        (ATTRIBUTE, "AttributeError: property 'T' of 'ArrayImpl' object has no setter", "x.T = y"),
    ),
    "module_without_call": (
        "a tuple called",
        (TYPE, "TypeError: 'tuple' object is not callable", "loss = out(x)"),
    ),
    "dropout_without_key": (
        "the learner's dropout function without its key",
        (TYPE, "TypeError: dropout() missing 1 required positional argument: 'key'", "dropout(x)"),
    ),
    "grad_of_a_non_float": (
        "jax.grad of an integer output, not input",
        (
            TYPE,
            "TypeError: grad requires real-valued outputs (output dtype that is a sub-dtype of "
            "np.floating), but got int32.",
            "jax.grad(count)(x)",
        ),
    ),
    "sizes_as_separate_numbers": (
        "torch's mean and std by position after a whole shape",
        (
            TYPE,
            "TypeError: normal() takes from 2 to 4 positional arguments but 5 were given",
            "jax.random.normal(key, shape, 0.0, 1.0, 2.0)",
        ),
    ),
    "pytorch_habit": (
        "a custom_vjp backward rule named `backward`, called by JAX",
        (TYPE, "TypeError: backward() takes 2 positional arguments but 3 were given", ""),
    ),
    "dtype_mismatch": (
        "a number read as a dtype",
        (TYPE, "TypeError: Cannot interpret '3' as a data type", "jnp.zeros(2, 3)"),
    ),
    "scalar_type_as_dtype": (
        "a class of the learner's own, which has no such attribute",
        (
            ATTRIBUTE,
            "AttributeError: type object 'MLP' has no attribute 'itemsize'",
            "n = MLP.itemsize",
        ),
    ),
    "update_without_method": (
        "torch's `accumulate=True` on `.at[i].set`",
        (
            TYPE,
            "TypeError: _IndexUpdateRef.set() got an unexpected keyword argument 'accumulate'",
            "x.at[i].set(v, accumulate=True)",
        ),
    ),
    "transform_of_a_value": (
        "an array called",
        (TYPE, "TypeError: 'ArrayImpl' object is not callable", "g = grads(x)"),
    ),
    "pytree_class_methods": (
        "a missing field of the learner's class",
        (ATTRIBUTE, "AttributeError: 'Params' object has no attribute 'w'", "p.w"),
    ),
    "block_on_container": (
        "`.block_until_ready()` on a Python float",
        (ATTRIBUTE, "AttributeError: 'float' object has no attribute 'block_until_ready'", "y"),
    ),
    "container_as_array": (
        "an Optax state's field asked of the state's tuple",
        (ATTRIBUTE, "AttributeError: 'tuple' object has no attribute 'mu'", "state.mu"),
    ),
    "optimizer_state_field": (
        "an array's attribute asked of a tuple of parameters",
        (ATTRIBUTE, "AttributeError: 'tuple' object has no attribute 'shape'", "params.shape"),
    ),
    "leaked_tracer": (
        "a NumPy call of the learner's on a traced value",
        (
            ("TracerArrayConversionError", "TypeError"),
            "TracerArrayConversionError: The numpy.ndarray conversion method __array__() was "
            "called on traced array with shape float32[3]",
            "y = np.asarray(x)",
        ),
    ),
    "numpy_conversion": (
        "a NumPy array as a dict key",
        (TYPE, "TypeError: unhashable type: 'numpy.ndarray'", "cache[x] = y"),
    ),
    "python_loop_count": (
        "a traced index, no loop",
        (("TracerIntegerConversionError", "ConcretizationTypeError"), "index", "x[n]"),
    ),
    "integer_from_tracer": (
        "a traced bool in a loop's range line",
        (("TracerBoolConversionError", "ConcretizationTypeError"), "bool", "range(n) if x else 0"),
    ),
    "python_while": (
        "a traced test in an `if`",
        (("TracerBoolConversionError", "ConcretizationTypeError"), "bool", "if x > 0:"),
    ),
    "python_operator_on_tracer": (
        "a plain traced `if`",
        (("TracerBoolConversionError", "ConcretizationTypeError"), "bool", "if x > 0:"),
    ),
    "python_control_flow": (
        "`int(x)` of a traced value",
        (CONCRETE, "ConcretizationTypeError: Abstract tracer value", "n = int(x)"),
    ),
    "squeeze_of_a_longer_axis": (
        "a squeeze of an axis out of range",
        (VALUE, "ValueError: axis 3 is out of bounds for array of dimension 2", "x.squeeze(3)"),
    ),
    "matrix_product_sizes": (
        "a batch-dimension mismatch of dot_general",
        (
            TYPE,
            "TypeError: dot_general requires lhs batch dimensions and rhs batch dimensions to "
            "have the same shape, got (2,) and (3,).",
            "y = a @ b",
        ),
    ),
    "layer_without_key": (
        "the learner's own initialiser without its key",
        (TYPE, "TypeError: init() missing 1 required keyword-only argument: 'key'", "init(sizes)"),
    ),
    "layer_on_a_batch": (
        "vmap's own sizes error on a line computing a norm",
        (
            VALUE,
            "ValueError: vmap got inconsistent sizes for array axes to be mapped; use jax.vmap "
            "with in_axes",
            "norm = jnp.linalg.norm(x)",
        ),
    ),
    "grad_of_a_non_scalar": (
        "jax.grad of an integer output",
        (TYPE, "TypeError: grad requires real-valued outputs, but got int32.", "jax.grad(f)(x)"),
    ),
    "cross_entropy_labels": (
        "a shape error of the integer-label form",
        (
            VALUE,
            "ValueError: Incompatible shapes for broadcasting: shapes=[(4,), (4, 3)]",
            "optax.softmax_cross_entropy_with_integer_labels(logits, labels)",
        ),
    ),
    "device_by_name": (
        "JAX's own backend name, absent here",
        (("RuntimeError",), "RuntimeError: Unknown backend: 'gpu' requested", "jax.devices('gpu')"),
    ),
    "einsum_operands_in_a_list": (
        "an einsum of separate operands with a wrong equation",
        (
            VALUE,
            "ValueError: Number of einsum subscripts must be equal to the number of operands.",
            'jnp.einsum("ij,jk,kl->il", a, b)',
        ),
    ),
    "torch_pair_unpacked": (
        "a dict of three parameters unpacked as two",
        (VALUE, "ValueError: too many values to unpack (expected 2)", "w, b = params"),
    ),
    "data_dependent_size": (
        "a traced shape, no size argument",
        (CONCRETE, "ConcretizationTypeError: Abstract tracer value", "jnp.zeros(n)"),
    ),
    "concrete_scalar": (
        "a NumPy call on a tracer",
        (("TracerArrayConversionError", "TypeError"), "numpy", "np.sum(x)"),
    ),
    "boolean_mask": (
        "too many indices",
        (("IndexError",), "IndexError: Too many indices", "x[0, 1, 2]"),
    ),
    "static_not_hashable": (
        "an unhashable dict key",
        (TYPE, "TypeError: unhashable type: 'dict'", "seen[params] = 1"),
    ),
    "not_a_pytree": (
        "a string made into an array",
        (
            TYPE,
            "TypeError: JAX only supports number and bool dtypes, got dtype <U3",
            "jnp.array('a')",
        ),
    ),
    "static_name_unknown": (
        "a positional-only parameter named in static_argnames: it has a name, not by keyword",
        (
            VALUE,
            "ValueError: Jitted function has invalid argnames {'x'} in static_argnames. These "
            "are positional-only",
            "jax.jit(f, static_argnames='x')",
        ),
    ),
    "static_position_counted_from_one": (
        "donate_argnums past the end: nothing marked static",
        (
            VALUE,
            "ValueError: Jitted function has donate_argnums=(2,), but only accepts 2 "
            "positional arguments.",
            "jax.jit(f, donate_argnums=2)",
        ),
    ),
    "vmap_axes": (
        "vmap's in_axes of another kind",
        (VALUE, "ValueError: vmap in_axes must be an int, None, or a tuple of entries", "vmap(f)"),
    ),
    "loop_carry_type": (
        "scan over an argument with no leading axis",
        (TYPE, "TypeError: scan got value with no leading axis to scan over", "lax.scan(f, c, x)"),
    ),
    "loop_body_signature": (
        "a helper of the learner's, called wrongly inside a scan step",
        (
            TYPE,
            "TypeError: helper() takes 1 positional argument but 2 were given",
            "h = helper(h, x)",
            ("jax.lax.scan(step, h0, xs)", "h = helper(h, x)"),
        ),
    ),
    "fori_body_order": (
        "a scalar error on the fori_loop line itself",
        (
            TYPE,
            "TypeError: ndim 0 array given",
            "jax.lax.fori_loop(0, n, body, x)",
            ("jax.lax.fori_loop(0, n, body, x)",),
        ),
    ),
    "missing_key": (
        "a jax.debug.print format slip",
        (("KeyError", "LookupError"), "KeyError: 'norm'", 'jax.debug.print("norm={norm}", v)'),
    ),
    "format_field_without_value": (
        "a params dict read by a key it lacks",
        (("KeyError", "LookupError"), "KeyError: 'w1'", "return params['w1']"),
    ),
    "custom_rule_arguments": (
        "the learner's `forward(params, x)` called by a check with other arguments",
        (TYPE, "TypeError: forward() takes 2 positional arguments but 3 were given", ""),
    ),
    "jvp_rule_given_tuples": (
        "an array's attribute asked of a tuple of parameters",
        (ATTRIBUTE, "AttributeError: 'tuple' object has no attribute 'shape'", "params.shape"),
    ),
    "branches_given_values": (
        "jax.grad given a value",
        (TYPE, "TypeError: Expected a callable value, got 3.0", "jax.grad(f(x))"),
    ),
    "value_where_argnums_goes": (
        "jax.grad given positions by name, out of range",
        (
            VALUE,
            "ValueError: jax.grad argnums 3 out of bounds for a function of 2 positional "
            "arguments (index 3)",
            "jax.grad(loss, argnums)(w, x)",
        ),
    ),
    "gradient_indexed_as_a_tuple": (
        "jax.grad of a non-scalar function, indexed",
        (
            TYPE,
            "TypeError: Gradient only defined for scalar-output functions. Output had shape: (3,).",
            "g = jax.grad(f)(x)[0]",
        ),
    ),
    "arithmetic_on_containers": (
        "an update reference multiplied",
        (
            TYPE,
            "TypeError: unsupported operand type(s) for *: '_IndexUpdateRef' and 'int'",
            "m.at[0] * 2",
        ),
    ),
    "jit_member_on_a_function": (
        "an array's attribute asked of a function",
        (ATTRIBUTE, "AttributeError: 'function' object has no attribute 'shape'", "f.shape"),
    ),
    "replace_through_init": (
        "a module built without its key",
        (TYPE, "TypeError: __init__() missing 1 required positional argument: 'key'", "MLP(sizes)"),
    ),
    "size_as_a_shape": (
        "a shape entry indexed again",
        (TYPE, "TypeError: 'int' object is not subscriptable", "n = x.shape[0][1]"),
    ),
    "model_leaves_in_an_update": (
        "a function added to None on the learner's own line",
        (
            TYPE,
            "TypeError: unsupported operand type(s) for +: 'custom_jvp' and 'NoneType'",
            "y = act + bias",
        ),
    ),
    "multi_transform_given_a_mask": (
        "multi_transform's labels strings, one misspelt",
        (
            VALUE,
            "ValueError: Some parameters have no corresponding transformation.\nParameter "
            "labels: ['frozen', 'train'] \nTransforms keys: ['freeze', 'train'] \n",
            "state = opt.init(params)",
        ),
    ),
    "update_without_params": (
        "another of Optax's errors in `update`",
        (VALUE, "ValueError: Expected dict, got list.", "u, s = opt.update(g, s)"),
    ),
    "optimizer_function_arguments": (
        "the learner's own update function called without its gradients",
        (TYPE, "TypeError: update() missing 1 required positional argument: 'g'", "update(p)"),
    ),
    "name_in_another_module": (
        "a torch name no module of JAX's has",
        (ATTRIBUTE, "AttributeError: module 'jax' has no attribute 'no_grad'", "jax.no_grad()"),
    ),
    "dict_iterated_for_its_arrays": (
        "a string method no array has, asked of a string",
        (ATTRIBUTE, "AttributeError: 'str' object has no attribute 'decode'", "name.decode()"),
    ),
    "bool_inside_a_call": (
        "a traced `if` on the learner's own line, which also calls a function",
        (("TracerBoolConversionError", "ConcretizationTypeError"), "bool", "if f(x) > 0:"),
    ),
    "in_place_update": (
        "a name with a trailing underscore that torch has not: no in-place method",
        (
            ATTRIBUTE,
            "AttributeError: 'ArrayImpl' object has no attribute 'reshape_'",
            "x.reshape_(6)",
        ),
    ),
    "flatten_without_aux_data": (
        "the learner's own unpacking of a pair, one value short",
        (
            VALUE,
            "ValueError: not enough values to unpack (expected 2, got 1)",
            "children, aux_data = node.tree_flatten()",
        ),
    ),
    "unflatten_arguments_swapped": (
        "None iterated where a function of the learner's returned nothing",
        (TYPE, "TypeError: 'NoneType' object is not iterable", "for child in children_of(node):"),
    ),
    "pytree_where_an_array_goes": (
        "jnp.sqrt of a string, no container",
        (
            TYPE,
            "TypeError: sqrt requires ndarray or scalar arguments, got <class 'str'> at "
            "position 0.",
            "r = jnp.sqrt('4')",
        ),
    ),
    "state_of_another_optimizer": (
        "the learner's own update function reading a field of the state's tuple",
        (
            ATTRIBUTE,
            "AttributeError: 'tuple' object has no attribute 'mu'",
            "new = update(s.mu, g)",
        ),
    ),
    "spec_splits_another_axis": (
        "rows split over more devices than there are rows: axis 0, the rows, as meant",
        (
            ("IndivisibleError", "ValueError"),
            "IndivisibleError: Sharding NamedSharding(mesh=Mesh('devices': 8, axis_types="
            "(Auto,)), spec=P('devices',), memory_kind=device) implies that array axis 0 is "
            "partitioned 8 times, but the dimension size is 3 (full shape: (3, 16), "
            "per-dimension tiling factors: [8, 1] should evenly divide the shape)",
            "return jax.device_put(x, NamedSharding(mesh, P('devices')))",
        ),
    ),
    "in_axes_structure": (
        "vmap's axes in the right structure over arguments of different batch sizes",
        (
            VALUE,
            "ValueError: vmap got inconsistent sizes for array axes to be mapped:\n  * one axis "
            "had size 4: axis 0 of argument p['w'] of type float32[4,3];\n  * one axis had "
            "size 3: axis 0 of argument x of type float32[3,3]",
            "return jax.vmap(f, in_axes=({'w': 0, 'b': None}, 0))(p, x)",
        ),
    ),
    "gradients_in_a_tuple": (
        "a shape, a tuple, multiplied by a float",
        (
            TYPE,
            "TypeError: can't multiply sequence by non-int of type 'float'",
            "h = x.shape * 0.5",
        ),
    ),
    "library_call": (
        "a layer object called on an array JAX made",
        (TYPE, "TypeError: 'NoneType' object is not subscriptable", "y = layer(jnp.ones(3))[0]"),
    ),
}

RULE_NAMES = [rule_name(rule) for rule in RULES]


def test_every_rule_has_a_look_alike():
    assert sorted(LOOK_ALIKES) == sorted(RULE_NAMES)


def test_every_rule_is_tried_once_in_the_order_error_rules_toml_writes():
    """The table is the order's one home: its rows and the functions it names, each once."""
    assert [name for name, _ in error_rules.order()] == RULE_NAMES
    assert len(set(RULE_NAMES)) == len(RULE_NAMES)
    assert [name for name in RULE_NAMES if name in KNOWN] == list(KNOWN)


@pytest.mark.parametrize("rule", RULES, ids=RULE_NAMES)
def test_a_rule_stays_silent_on_its_look_alike(rule):
    what, (types, message, line, *lines) = LOOK_ALIKES[rule_name(rule)]
    failure = Failure(types, message, line, lines[0] if lines else (line,))
    assert rule(failure) is None, what


@pytest.mark.parametrize(
    "line",
    ["a, b = split(key, num=2)", "total = np.split(x, num=2)", "parts = random.split(key, num=2)"],
)
def test_a_function_named_like_jaxs_is_read_as_jaxs_only_where_spelled_so(line):
    """A learner's own `split`, NumPy's or Python's `random` module are no `jnp.split` or
    `jax.random.split`: their keywords are not read from JAX's signatures."""
    import jax  # noqa: F401  (imported, so that JAX's signatures could be read)

    failure = Failure(TYPE, "TypeError: split() got an unexpected keyword argument 'num'", line)
    assert next((r for r in RULES if r(failure)), None) is None


# (what the call is, its failure: types, message, failing line[, learner lines]): a call of
# one of JAX's functions that take functions, in its order, or no call of JAX's at all.
IN_ORDER = [
    (
        "keywords in an order of their own, which is legal",
        (
            TYPE,
            "TypeError: cond_fun must return a boolean scalar, but got output type(s) "
            "[ShapedArray(float32[3])].",
            "return lax.while_loop(body_fun=body, cond_fun=cond, init_val=x)",
        ),
    ),
    (
        "the learner's own function named while_loop",
        (TYPE, "TypeError: 'float' object is not callable", "return while_loop(body, cond, 0.0)"),
    ),
    (
        "a module of the learner's own with a while_loop",
        (TYPE, "TypeError: 'float' object is not callable", "loops.while_loop(body, cond, 0.0)"),
    ),
    (
        "a fori_loop body in its place that is not callable",
        (
            TYPE,
            "TypeError: lax.fori_loop: body_fun argument should be callable.",
            "return lax.fori_loop(0, n, body, x)",
        ),
    ),
    (
        "jax.tree.map in its order, its function a dict by mistake",
        (TYPE, "TypeError: 'dict' object is not callable", "return jax.tree.map(fn, params)"),
    ),
    (
        "a scan in its order whose step fails inside",
        (
            TYPE,
            "TypeError: dot_general requires contracting dimensions to have the same shape",
            "return carry @ x, carry",
            ("return lax.scan(step, init, xs)", "return carry @ x, carry"),
        ),
    ),
    (
        "a fori_loop whose bound is an expression",
        (TYPE, "TypeError: x", "return lax.fori_loop(0, jnp.sum(mask), body, jnp.zeros(3))"),
    ),
    (
        "jax.tree.map over updates, a name a function could have",
        (TYPE, "TypeError: x", "return jax.tree.map(f, params, updates)"),
    ),
    (
        "a gradient named `grad`, as JAX's function is, among the trees",
        (TYPE, "TypeError: x", "return jax.tree.map(update, params, grad)"),
    ),
    (
        "jax.jit's settings by name",
        (VALUE, "ValueError: x", "return jax.jit(f, static_argnums=1)(x, 2)"),
    ),
    (
        "a fori_loop missing its start value: no order mends that",
        (
            TYPE,
            "TypeError: fori_loop() missing 1 required positional argument: 'init_val'",
            "return lax.fori_loop(5, body, jnp.zeros(3))",
        ),
    ),
]


@pytest.mark.parametrize("case", IN_ORDER, ids=[what for what, _ in IN_ORDER])
def test_a_call_in_its_order_is_never_said_to_be_out_of_order(case):
    import jax  # noqa: F401  (imported, so that JAX's signatures could be read)

    from kata.diagnosis.argument_order import arguments_out_of_order

    what, (types, message, line, *lines) = case
    failure = Failure(types, message, line, lines[0] if lines else (line,))
    assert arguments_out_of_order(failure) is None, what


def test_a_lambda_jax_tree_map_calls_with_a_tree_too_many_is_no_custom_vjp_rule():
    """`<lambda>() takes 2 positional arguments but 3 were given` with no line of the
    learner's calling it reads as a backward rule under `nondiff_argnums`; a learner's
    `jax.tree.map` over three trees with a lambda of two gives the same words."""
    failure = Failure(
        TYPE,
        "TypeError: <lambda>() takes 2 positional arguments but 3 were given",
        "return jax.tree.map(lambda p, g: p - g, params, grads, extra)",
    )
    assert KNOWN_RULES["custom_rule_arguments"](failure) is None


def test_a_value_in_another_functions_place_gets_no_advice_on_lax_cond():
    """`lax.fori_loop(0, n, 1.0, x)`: a value where the body goes, and no argument to put
    there instead. JAX's words are lax.cond's, "should be callable", but the place is
    fori_loop's: lax.cond's paragraph would be advice on the wrong function."""
    failure = Failure(
        TYPE,
        "TypeError: lax.fori_loop: body_fun argument should be callable.",
        "return lax.fori_loop(0, n, 1.0, x)",
    )
    assert KNOWN["branches_given_values"](failure) is None


KNOWN_RULES = {rule_name(rule): rule for rule in RULES}
