"""JAX-aware diagnosis: what an exception from learner code means to a PyTorch user.

Works on the exception's class names (its whole MRO, so subclasses match) and message,
plus the learner's line that raised, so it runs without importing JAX and across JAX
versions whose messages differ (match short, stable substrings only).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from kata.diagnosis import diagnose_calls, library_api, torch_to_jax
from kata.diagnosis.diagnose_types import Diagnosis, Failure

__all__ = ["Diagnosis", "Failure", "RULES", "diagnose"]


def _in_place_write(f: Failure) -> Diagnosis | None:
    jax_array = f.says("JAX arrays are immutable") or (
        f.says("does not support item assignment") and f.says("ArrayImpl", "Tracer", "Array'")
    )
    if f.is_a("TypeError") and jax_array:
        return Diagnosis(
            "an in-place write on a JAX array: `x[i] = v` (or `x[i] += v`) works on a "
            "torch.Tensor, but JAX arrays never change.",
            "build a new array instead: `x = x.at[i].set(v)` (or `.add`, `.multiply`).",
        )
    return None


# `torch.cat(...)`, `F.relu(...)`, `nn.functional.relu(...)` written with no torch imported.
TORCH_NAME = re.compile(r"name '(torch|F|nn)' is not defined")


def _pytorch_habit(f: Failure) -> Diagnosis | None:
    if f.is_a("ModuleNotFoundError", "ImportError") and f.says("'torch'"):
        return Diagnosis(
            "the code imports torch, which this course does not use (and may not be installed).",
            "use `jax.numpy as jnp` for tensors and `jax.grad` for gradients.",
        )
    unimported = TORCH_NAME.search(f.message) if f.is_a("NameError") else None
    if unimported:
        module = unimported.group(1)
        # `torch.cat`, `F.relu`, `torch.nn.functional.relu`, `torch.linalg.inv`, `nn.Linear`:
        # the folders between the module and the name, and the name.
        called = re.search(rf"\b{module}((?:\.\w+)*)\.(\w+)", f.source_line)
        spelled = f"`{called.group(0)}`" if called else f"`{module}`"
        advice = called and _torch_submodule_advice(module + called.group(1), called.group(2))
        return Diagnosis(
            f"{spelled} is PyTorch's; this course's code runs on JAX, and `{module}` is not "
            "imported here.",
            f"in JAX: {advice}."
            if advice
            else "use `jax.numpy as jnp` (arrays), "
            "`jax.nn` (activations), `jax.grad` (gradients); `kata rules NAME` finds a "
            "torch name's JAX spelling.",
        )
    if AUTOGRAD_NAME.search(f.message) and f.is_a("AttributeError", "TypeError"):
        return Diagnosis(
            "a PyTorch autograd habit (`requires_grad`, `.backward()`, `.grad`): JAX arrays "
            "carry no gradient tape.",
            "differentiate the function instead: `grads = jax.grad(loss_fn)(params, x, y)` "
            "returns the gradient as a value.",
        )
    return None


# An autograd name asked of an array or passed as a keyword (a learner's own callback
# named `backward` that JAX calls with other arguments is another mistake).
AUTOGRAD_NAME = re.compile(
    r"(?:no attribute|unexpected keyword argument) '(?:backward|requires_grad|grad|zero_grad|"
    r"grad_fn|retain_grad|requires_grad_)'"
)
# torch's folders whose names JAX keeps, in a folder of its own.
SAME_NAMES_IN = {"linalg": "jnp.linalg", "fft": "jnp.fft", "special": "jax.scipy.special"}
# torch's folders whose names JAX does not keep: where their work is done.
OTHER_HOMES = {
    "distributions": "`jax.random`'s functions (`jax.random.normal(key, shape)`) and "
    "`jax.scipy.stats` (densities)",
    "optim": "Optax (`optax.sgd`, `optax.adam`)",
    "autograd": "`jax.grad`",
}
# torch.optim's classes and Optax's functions for them.
OPTIMIZERS = {
    "SGD": "sgd", "Adam": "adam", "AdamW": "adamw", "RMSprop": "rmsprop",
    "Adagrad": "adagrad", "Adadelta": "adadelta", "Adamax": "adamax", "NAdam": "nadam",
    "RAdam": "radam", "LBFGS": "lbfgs", "SparseAdam": "adam", "ASGD": "sgd",
}  # fmt: skip
SCHEDULERS = ("lr_scheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
              "OneCycleLR", "LambdaLR", "ReduceLROnPlateau", "LinearLR", "CyclicLR")  # fmt: skip
# torch.nn's activation classes: in JAX (and in an `eqx.nn.Sequential`) a function.
ACTIVATION_CLASSES = {
    "ReLU": "relu", "GELU": "gelu", "SiLU": "silu", "Sigmoid": "sigmoid", "Tanh": "tanh",
    "Softmax": "softmax", "LogSoftmax": "log_softmax", "LeakyReLU": "leaky_relu",
    "ELU": "elu", "Softplus": "softplus", "Mish": "mish", "Hardtanh": "hard_tanh",
}  # fmt: skip


def _torch_home(name: str) -> str | None:
    """Where JAX keeps torch's `name` typed on a JAX module that lacks it (`optax.SGD`,
    `optax.lr_scheduler`, `jnp.special`, `eqx.nn.ReLU`), or None."""
    if name in SAME_NAMES_IN:
        return f"`{SAME_NAMES_IN[name]}`"
    if name in OTHER_HOMES:
        return OTHER_HOMES[name]
    if name in ACTIVATION_CLASSES:
        return (
            f"an activation is a function, `jax.nn.{ACTIVATION_CLASSES[name]}`; in an "
            f"`eqx.nn.Sequential`, `eqx.nn.Lambda(jax.nn.{ACTIVATION_CLASSES[name]})`"
        )
    if name in OPTIMIZERS or name in SCHEDULERS or name.startswith("clip_grad_"):
        return _torch_submodule_advice("torch", name)
    return None


def _torch_submodule_advice(path: str, name: str) -> str | None:
    """JAX's spelling of `path.name` (`torch.linalg.inv`, `F.relu`, `torch.optim.SGD`,
    `nn.Linear`), or None."""
    folders = path.split(".")[1:]
    if "cuda" in folders:  # `torch.cuda.is_available()`: the table's row for torch.cuda
        name = "cuda"
    if name.startswith("clip_grad_"):
        return (
            "`optax.clip_by_global_norm(max_norm)` (`optax.clip(max_value)` for values), "
            "chained before the optimizer: `optax.chain(optax.clip_by_global_norm(1.0), "
            "optax.adam(1e-3))`"
        )
    if name in OPTIMIZERS or name in SCHEDULERS or "optim" in folders:
        if "lr_scheduler" in folders or name in SCHEDULERS:
            return (
                "a schedule is a function of the step count, passed as the learning rate: "
                "`optax.adam(optax.exponential_decay(1e-3, 1000, 0.5))` "
                "(`optax.cosine_decay_schedule`, `optax.warmup_cosine_decay_schedule`)"
            )
        spelled = OPTIMIZERS.get(name, name.lower())
        return f"`optax.{spelled}(learning_rate)`, a pair of pure functions `init` and `update`"
    if "autograd" in folders:
        return "`jax.grad(loss_fn)(params)`: the gradient of a function, returned as a value"
    for folder in folders:
        if folder in SAME_NAMES_IN:
            return f"`{SAME_NAMES_IN[folder]}.{name}`"
        if folder in OTHER_HOMES:
            return OTHER_HOMES[folder]
    if path in ("nn", "torch.nn") and name[:1].isupper():
        return (
            f"the course's layers are Equinox's (`eqx.nn.Linear`, `eqx.nn.Dropout`, "
            f"`eqx.nn.MLP`; `kata rules {name}` for `nn.{name}`), a model of your own is a "
            "class of `eqx.Module`, and an activation is a function (`jax.nn.relu`)"
        )
    row = torch_to_jax.lookup("function", name) or torch_to_jax.lookup("method", name)
    return row.jax if row and row.jax else None


# What JAX says when a name is missing: "'jaxlib._jax.ArrayImpl' object has no attribute
# 'to'" (an array), "DynamicJaxprTracer has no attribute to" (a tracer under jit; BatchTracer
# under vmap, JVPTracer/LinearizeTracer under grad), "module 'jax.numpy' has no attribute
# 'cat'" (jnp, jax.random, jax.nn, jax.lax ...).
MISSING_ON_ARRAY = re.compile(r"(?:ArrayImpl'?|Tracer'?)(?: object)? has no attribute '?(\w+)")
MISSING_IN_MODULE = re.compile(
    r"module '((?:jax|optax|equinox)(?:\.\w+)*)' has no attribute '(\w+)'"
)
# Too many numbers by position: torch's `x.view(2, 3, 4)`, `x.flatten(0, 1)`,
# `jax.random.normal(key, shape, mean, std)` ("_view() takes from 1 to 3 positional
# arguments but 4 were given").
TOO_MANY_POSITIONAL = re.compile(r"_?(\w+)\(\) takes (?:from \d+ to )?\d+ positional")
UNEXPECTED_KEYWORD = re.compile(r"(?:(\w+)\(\) )?got an unexpected keyword argument '(\w+)'")
IN_PLACE = (
    " A trailing underscore marks a torch.Tensor method that changes the tensor in place; "
    "JAX arrays never change, so they have none."
)


def _torch_spelling(f: Failure) -> Diagnosis | None:
    """A torch function, Tensor method or keyword that JAX spells otherwise: the
    translation table's row for it (kata/diagnosis/torch_to_jax.toml)."""
    on_array = MISSING_ON_ARRAY.search(f.message) if f.is_a("AttributeError") else None
    in_module = MISSING_IN_MODULE.search(f.message) if f.is_a("AttributeError") else None
    keyword = UNEXPECTED_KEYWORD.search(f.message) if f.is_a("TypeError") else None
    positional = TOO_MANY_POSITIONAL.search(f.message) if f.is_a("TypeError") else None
    if positional and (
        not f.line_has(rf"\.{positional.group(1)}\(")  # a function of the learner's own
        or f.line_has(r"[(,]\s*\*\w")  # `*shape`: sizes as separate numbers, a rule of its own
    ):
        positional = None
    if on_array:
        name = on_array.group(1)
        row = torch_to_jax.lookup("method", name) or torch_to_jax.lookup("function", name)
        member = (
            f"`.{name}` is a torch.Tensor attribute"
            if name in torch_to_jax.attributes()
            else f"`.{name}()` is a torch.Tensor method"
        )
        cause = (
            f"{member}; JAX arrays (and the tracers that stand for them under `jit`, `grad` "
            f"and `vmap`) have no `.{name}`." + (IN_PLACE if name.endswith("_") else "")
        )
    elif in_module:
        module, name = in_module.groups()
        row = torch_to_jax.lookup("function", name) or torch_to_jax.lookup("method", name)
        cause = f"`{module}.{name}` does not exist: `{name}` is PyTorch's name (`torch.{name}`)."
        home = row is None and _torch_home(name)
        if home:
            return Diagnosis(
                f"`{module}.{name}` does not exist: `{name}` is PyTorch's.", f"in JAX: {home}."
            )
    elif positional:
        name = positional.group(1)
        kinds = ("method", "function")
        if f.line_has(rf"\b(?:jnp|np|jax(?:\.\w+)*)\.{name}\("):  # `jnp.transpose(x, 0, 1)`
            kinds = ("function", "method")
        row = torch_to_jax.lookup(kinds[0], name) or torch_to_jax.lookup(kinds[1], name)
        if row and row.same and not (row.note or row.error):  # nothing to say: `jnp.ones(2,
            return None  # 3)` is torch's sizes as separate numbers, a rule of its own
        cause = (
            f"more numbers by position than JAX's `{name}()` takes: torch's `{name}` reads "
            "them otherwise." + (f" {row.note}." if row and row.note else "")
        )
    elif keyword:
        function, name = keyword.groups()
        row = torch_to_jax.lookup("keyword", name)
        # `ufunc.__call__() got an unexpected keyword` (`jnp.add(x, y, alpha=2)`) names no
        # function of the learner's.
        named = function and not function.startswith("__")
        called = f"`{function.lstrip('_')}()`" if named else "the function called"
        cause = f"`{name}=` is PyTorch's keyword; in JAX {called} takes no `{name}`."
        if name == "dtype":  # the row is for a number read as a dtype, not this
            return Diagnosis(
                cause + " torch's `dtype=` casts the input first.",
                "cast it yourself before the call: `jax.nn.softmax(x.astype(jnp.float32), "
                "axis=-1)`.",
            )
    else:
        row = next(
            (
                r
                for r in torch_to_jax.rows_by_error()
                if torch_to_jax.matches_error(r, f.message, f.source_line)
            ),
            None,
        )
        # A row found by its error says why in `why` (naming every cause the message
        # cannot tell apart), else in its note.
        cause = f"{row.note}." if row and row.note and not row.why else ""
    # A spelling JAX shares raises nothing, unless typed on a module that lacks it
    # (`jax.nn.where`: JAX's is `jnp.where`).
    # A keyword JAX shares on other functions was refused by this one: the row says where.
    if row is None or (row.same and not row.error and not (in_module or positional or keyword)):
        return None
    why = f" {row.why[0].upper()}{row.why[1:]}." if row.why else ""
    fix = f"in JAX: {row.jax}." if row.jax else f"JAX has no equivalent: {row.none}."
    return Diagnosis((cause + why).strip(), fix)


def _sizes_as_separate_numbers(f: Failure) -> Diagnosis | None:
    # `jax.random.normal(key, *shape)` or `jnp.ones(2, 3, 4)`: torch's size varargs, one
    # more number than JAX's shape and dtype places hold.
    too_many = f.is_a("TypeError") and f.says("positional argument") and f.says("were given")
    jax_call = r"\b(jnp|random|jax\.random|jax\.numpy)\.\w+\("
    if too_many and f.line_has(jax_call) and f.line_has(r"\*\w|\(\s*\w+\s*(,\s*\d+\s*){2,}\)"):
        return Diagnosis(
            "torch's sizes as separate numbers (`torch.randn(*shape)`, `torch.ones(2, 3, 4)`): "
            "JAX takes the shape as one tuple, in one place.",
            "pass the shape itself: `jax.random.normal(key, shape)`, `jnp.ones((2, 3, 4))`.",
        )
    return None


def _optimizer_object(f: Failure) -> Diagnosis | None:
    # Optax names the class in the message: "'GradientTransformationExtraArgs' object has no
    # attribute 'step'" (optax 0.2.x), "'GradientTransformation' object ..." before.
    if f.is_a("AttributeError", "TypeError") and f.says("'GradientTransformation"):
        return Diagnosis(
            "an Optax optimizer used like a torch.optim object (`opt.step()`, "
            "`opt.zero_grad()`, `opt(params)`): it holds no parameters and no state, only two "
            "pure functions, `init` and `update`.",
            "make the state once, `opt_state = opt.init(params)`; each step "
            "`updates, opt_state = opt.update(grads, opt_state, params)` and "
            "`params = optax.apply_updates(params, updates)`.",
        )
    return None


# nn.Module's own methods, and what an Equinox module does instead (16_modules).
MODULE_METHODS = {
    "eval": "`eqx.nn.inference_mode(model)` returns a copy with dropout off",
    "train": "`eqx.nn.inference_mode(model, value=False)` returns a copy in training mode",
    "parameters": "`eqx.filter(model, eqx.is_array)` is the model's arrays, as a pytree",
    "named_parameters": "`jax.tree_util.tree_leaves_with_path(eqx.filter(model, eqx.is_array))`",
    "zero_grad": "nothing to clear: `eqx.filter_grad(loss)(model)` returns the gradients",
    "state_dict": "`eqx.tree_serialise_leaves(path, model)` saves the arrays",
    "load_state_dict": "`model = eqx.tree_deserialise_leaves(path, model)` returns a loaded copy",
    "requires_grad_": "`eqx.partition(model, filter)` splits what trains from what does not",
    "to": "nothing: JAX puts arrays on its default device; `jax.device_put(model, device)` "
    "moves a copy, `jax.tree.map(lambda a: a.astype(jnp.float16), model)` casts one",
    "cuda": "nothing: JAX puts arrays on the GPU by itself when there is one",
    "cpu": "`jax.device_put(model, jax.devices('cpu')[0])` returns a copy there",
    "half": "`jax.tree.map(lambda a: a.astype(jnp.float16), eqx.filter(model, eqx.is_array))` "
    "casts a copy (`eqx.combine` puts it back together)",
    "float": "`jax.tree.map(lambda a: a.astype(jnp.float32), eqx.filter(model, eqx.is_array))` "
    "casts a copy",
    "double": "`jax.tree.map(lambda a: a.astype(jnp.float64), eqx.filter(model, eqx.is_array))` "
    "casts a copy (with `jax_enable_x64` on)",
    "forward": "call the model, `model(x)`: Equinox runs `__call__`, where torch runs `forward`",
    "modules": "`jax.tree.leaves(model, is_leaf=lambda m: isinstance(m, eqx.Module))` lists "
    "the modules inside",
    "children": "the fields of the model (`model.linear1`, ...) are its layers",
    "apply": "`jax.tree.map(fn, eqx.filter(model, eqx.is_array))` applies `fn` to every "
    "array and returns a new model's arrays",
}
MODULE_METHOD = re.compile(r"'(\w+)' object has no attribute '(" + "|".join(MODULE_METHODS) + r")'")


def _module_method(f: Failure) -> Diagnosis | None:
    found = MODULE_METHOD.search(f.message) if f.is_a("AttributeError") else None
    if found is None or NOT_A_MODULE.match(found.group(1)):
        return None
    kind, name = found.groups()
    return Diagnosis(
        f"`model.{name}()` is a torch.nn.Module method; an Equinox model (`{kind}`) is a "
        "frozen pytree of arrays with no methods that change it or hand out its parameters.",
        f"{MODULE_METHODS[name]}; a changed model is always a new one.",
    )


# What a call of an object that is not callable names: JAX's and Python's own types are
# other mistakes; a class of the learner's is a module written the torch way.
NOT_CALLABLE = re.compile(r"'(\w+)' object is not callable")
NOT_A_MODULE = re.compile(
    r"^(?:int|float|complex|bool|str|bytes|list|tuple|dict|set|NoneType|module|function|"
    r"ArrayImpl|Array|ndarray|PRNGKeyArray|.*Tracer|GradientTransformation.*|ShapeDtypeStruct|"
    r"generator|property|staticmethod|classmethod|numpy\..*|float\d+|int\d+|Lowered|Traced|"
    r"Compiled|Exported|Jaxpr|ClosedJaxpr|Mesh|PartitionSpec|.*Sharding|.*Device|.*State)$"
)


def _module_without_call(f: Failure) -> Diagnosis | None:
    """`model(x)` where the class defines torch's `forward`, not `__call__`."""
    found = NOT_CALLABLE.search(f.message) if f.is_a("TypeError") else None
    if found is None or NOT_A_MODULE.match(found.group(1)):
        return None
    kind = found.group(1)
    return Diagnosis(
        f"an object of the class `{kind}` was called, and the class defines no `__call__`: "
        "torch's `nn.Module` runs `forward` when called, Equinox's `eqx.Module` (any Python "
        "class) runs `__call__`.",
        f"name the method `__call__` in `{kind}` (`def __call__(self, x): ...`).",
    )


def _module_changed_in_place(f: Failure) -> Diagnosis | None:
    if f.is_a("FrozenInstanceError") or (
        f.is_a("AttributeError") and f.says("cannot assign to field")
    ):
        return Diagnosis(
            "an assignment to a field of a frozen dataclass, such as an `eqx.Module` "
            "(`model.dropout.inference = True`, `model.linear1.weight = w`): a model never "
            "changes in place, as `model.eval()` or `p.data = ...` change an nn.Module. In "
            "`__init__`, where fields are set, the field was not declared in the class "
            "body.",
            "build a new model: `eqx.tree_at(lambda m: m.dropout.inference, model, True)`, "
            "`eqx.nn.inference_mode(model)` for dropout off, `eqx.apply_updates(model, "
            "updates)` after an optimizer step; in `__init__`, declare each field in the "
            "class body first (`linear1: eqx.nn.Linear`), as a dataclass does.",
        )
    return None


def _grad_of_a_non_float(f: Failure) -> Diagnosis | None:
    if f.is_a("TypeError") and f.says("grad requires real- or complex-valued inputs"):
        return Diagnosis(
            "`jax.grad` differentiates every leaf of the argument it is given, and one is not "
            "a float: an integer array, or a model's setting (an `eqx.Module`'s flags and "
            "sizes, such as a dropout's `inference`). PyTorch trains only what "
            "`model.parameters()` holds.",
            "differentiate the floating-point arrays alone: "
            "`eqx.filter_value_and_grad(loss)(model)` (or `eqx.filter_grad`), or split first, "
            "`params, static = eqx.partition(model, eqx.is_inexact_array)`.",
        )
    return None


def _dropout_without_key(f: Failure) -> Diagnosis | None:
    if f.says("dropout requires a key"):
        return Diagnosis(
            "`eqx.nn.Dropout` in training mode got no PRNG key: PyTorch's dropout draws from "
            "a global generator, Equinox's masks come from the key you pass.",
            "pass one per example: `jax.vmap(lambda x, k: model(x, key=k))(xs, "
            "jax.random.split(key, len(xs)))`; to evaluate, switch dropout off with "
            "`eqx.nn.inference_mode(model)`.",
        )
    return None


def _dtype_mismatch(f: Failure) -> Diagnosis | None:
    if f.is_a("TypeError") and f.says("requires arguments to have the same dtypes"):
        return Diagnosis(
            "a `jax.lax` operation on arrays of two different dtypes (bfloat16 and float32, "
            "say): unlike torch and `jnp`, the `lax` functions never promote one to the other.",
            "cast one side to the other's dtype first (`s.astype(x.dtype)`), or use the `jnp` "
            "function, which promotes by JAX's rules.",
        )
    return None


def _numpy_conversion(f: Failure) -> Diagnosis | None:
    if f.is_a("TracerArrayConversionError"):
        return Diagnosis(
            "a NumPy call on a traced value: inside `jax.jit`/`grad`/`vmap` an array is an "
            "abstract tracer with no numbers in it yet, so `np.…` cannot read it.",
            "use the `jax.numpy` (jnp) version of the operation, and keep `np` for "
            "constants outside the traced function.",
        )
    return None


def _integer_from_tracer(f: Failure) -> Diagnosis | None:
    if f.is_a("TracerIntegerConversionError"):
        return Diagnosis(
            "a traced value used as a Python int (`range(n)`, an index, a shape): under "
            "`jax.jit` the argument is abstract, so Python cannot count with it.",
            "mark the argument static (`jax.jit(f, static_argnums=...)` / "
            "`static_argnames=...`) or loop with `jax.lax.fori_loop`.",
        )
    return None


def _python_loop_count(f: Failure) -> Diagnosis | None:
    if f.is_a("TracerIntegerConversionError") and f.line_has(r"\brange\("):
        return Diagnosis(
            "a Python `for` loop over `range(n)` with `n` traced: under `jax.jit` the count "
            "has no value yet, so Python cannot unroll the loop.",
            "loop inside the compiled program: `jax.lax.fori_loop(0, n, body, init)` with "
            "`body(i, carry) -> carry` takes a traced `n` (making `n` static would compile "
            "a new program for every count).",
        )
    return None


def _python_while(f: Failure) -> Diagnosis | None:
    if f.is_a("TracerBoolConversionError", "ConcretizationTypeError") and f.line_has(
        r"^\s*while\b"
    ):
        return Diagnosis(
            "a Python `while` whose test is a traced value: under `jax.jit`/`vmap` Python "
            "cannot know when to stop, since the numbers exist only when the program runs.",
            "use `jax.lax.while_loop(cond, body, init)`: `cond(carry)` returns the traced "
            "test, `body(carry)` the next carry, and the loop runs inside the program.",
        )
    return None


def _loop_carry_type(f: Failure) -> Diagnosis | None:
    if f.is_a("TypeError") and f.says(
        "carry input and carry output must have equal types", "must have identical types"
    ):
        return Diagnosis(
            "a `jax.lax` loop whose carry changes shape or dtype from one round to the next "
            "(a list that grows, a float64 or int start value, a different shape out).",
            "return a carry exactly like the one you start with: start from an array of the "
            "final shape and dtype (e.g. `jnp.zeros((T, d), x.dtype)`, filled with "
            "`.at[t].set(...)`), or let `jax.lax.scan` stack the per-step outputs.",
        )
    if f.is_a("TypeError") and f.says("must have the same pytree structure"):
        return Diagnosis(
            "a `jax.lax` loop whose carry changes structure: it went in as a tuple (or dict) "
            "and the body returned something else, often one part of it.",
            "return the whole carry, in the same structure: `return (c + 1, total)` for a "
            "carry `(c, total)`.",
        )
    return None


def _loop_body_signature(f: Failure) -> Diagnosis | None:
    if f.is_a("TypeError") and f.says("scan body output must be a pair"):
        return Diagnosis(
            "a `jax.lax.scan` step that returns one value: scan's step is `step(carry, x)` "
            "and must return a pair, the carry for the next row and what to stack for this "
            "one.",
            "`return new_carry, output` (for a recurrent cell that stacks its states: "
            "`return h, h`); scan then returns `(final_carry, stacked_outputs)`.",
        )
    if f.is_a("TypeError") and f.says("cond_fun must return a boolean scalar"):
        return Diagnosis(
            "a `jax.lax.while_loop` test that returns an array of booleans: `cond(carry)` "
            "must return one bool, the answer to 'go on?'.",
            "reduce it: `jnp.any(err > tol)` or `jnp.all(...)`, or compare a scalar.",
        )
    # JAX called the function with other arguments than it takes: the learner's lines
    # never call it by the name the message gives (a call of theirs is an ordinary error).
    callee = diagnose_calls.CALLBACK_ARITY.search(f.message)
    wrong_arity = callee is not None and not f.any_line_has(rf"\b{callee.group(1)}\(")
    if f.is_a("TypeError") and wrong_arity and f.any_line_has(r"\bfori_loop\("):
        return Diagnosis(
            "a `jax.lax.fori_loop` body with the wrong arguments: fori_loop calls "
            "`body(i, value)`, the round's index first, then the value it carries.",
            "define `def body(i, v): ...` returning the new `v` (ignore `i` if the rounds "
            "are all alike).",
        )
    if f.is_a("TypeError") and wrong_arity and f.any_line_has(r"\bwhile_loop\("):
        return Diagnosis(
            "a `jax.lax.while_loop` function with the wrong arguments: while_loop calls "
            "`cond(carry)` and `body(carry)` with one argument each, the carry.",
            "pack what changes into one carry, `(i, x)`, and unpack it inside: "
            "`def body(carry): i, x = carry; return i + 1, x * 2`.",
        )
    if f.is_a("TypeError") and wrong_arity and f.any_line_has(r"\bscan\("):
        return Diagnosis(
            "a `jax.lax.scan` step with the wrong arguments: scan calls `step(carry, x)`, the "
            "carry first, then this round's slice of `xs`.",
            "define `def step(carry, x): ...` returning `(new_carry, output)`.",
        )
    return None


def _fori_body_order(f: Failure) -> Diagnosis | None:
    # A body written `(carry, i)`, the order of a torch loop's variables, gets the index as
    # its carry: the error is about a scalar where an array was expected, on a body line.
    scalar_trouble = f.says(
        "ndim 0", "0-dimensional", "ndim at least 1", "rank 0", "scalar", "shape ()"
    )
    if scalar_trouble and f.any_line_has(r"\bfori_loop\(") and not f.line_has(r"fori_loop\("):
        return Diagnosis(
            "a `jax.lax.fori_loop` body whose carry arrived as a scalar: fori_loop calls "
            "`body(i, carry)`, the index first; a body written `(carry, i)` gets the round's "
            "index as its carry. (If its order is `(i, carry)` already, the carry lost its "
            "shape in an earlier round: return the same shape you start with.)",
            "`def body(i, carry): ...` returning the new carry.",
        )
    return None


def _block_on_container(f: Failure) -> Diagnosis | None:
    on_container = re.search(r"'(dict|list|tuple)' object has no attribute 'block_until_ready'",
                             f.message)  # fmt: skip
    if f.is_a("AttributeError") and on_container:
        return Diagnosis(
            "`.block_until_ready()` called on a tuple, list or dict: only a single array has "
            "that method, and the function returned a container of arrays.",
            "wait on the whole result with `jax.block_until_ready(result)`, which walks any "
            "pytree and waits for every array in it.",
        )
    return None


def _python_operator_on_tracer(f: Failure) -> Diagnosis | None:
    if not f.is_a("TracerBoolConversionError"):
        return None
    branches = f.line_has(r"^\s*(if|elif|while)\b")
    also = (
        " The `if`/`while` on the same line needs a bool too: choose with `jnp.where(cond, a, "
        "b)` or `jax.lax.cond`."
        if branches
        else ""
    )
    if f.line_has(r"(?<![.\w])(max|min)\("):
        return Diagnosis(
            "Python's built-in `max`/`min` on a traced value: they compare with `>`/`<` and ask "
            "Python for a bool, which a tracer under `jit`/`grad`/`vmap` cannot give." + also,
            "`jnp.maximum(a, b)` / `jnp.minimum(a, b)` elementwise, `jnp.max(x)` / "
            "`jnp.min(x)` for the largest or smallest element.",
        )
    if f.line_has(r"\b(and|or|not)\b"):
        return Diagnosis(
            "Python's `and`/`or`/`not` on a traced value: they ask Python for a bool, which "
            "a tracer under `jit`/`grad`/`vmap` cannot give." + also,
            "`jnp.logical_and(a, b)`, `jnp.logical_or`, `jnp.logical_not` (or `&`, `|`, `~` "
            "with each comparison in parentheses: `(x > 0) & (x < 1)`).",
        )
    return None


# What asks Python for a bool on the learner's own line.
BRANCHES = r"^\s*(if|elif|while|assert)\b|\bbool\(|\bif\b.*\belse\b|\b(and|or|not)\b"


def _bool_inside_a_call(f: Failure) -> Diagnosis | None:
    """A traced bool asked for inside a function the line calls, the line itself asking
    none: a setting passed as an argument, traced with it (a model's flag under jax.jit)."""
    if not f.is_a("TracerBoolConversionError") or not f.source_line or f.line_has(BRANCHES):
        return None
    if not f.line_has(r"\w\s*\("):
        return None
    model = f.any_line_has(r"\beqx\.|\bmodel\b|\bmodel\(")
    return Diagnosis(
        "a Python `if` on a traced value inside a function this line calls, not on the line "
        "itself: a setting handed in as an argument was traced with the arrays, as `jax.jit` "
        "traces every argument"
        + (", a model's flags too (an `eqx.nn.Dropout`'s `inference`)." if model else "."),
        (
            "jit the model's function with `eqx.filter_jit`, which traces its arrays alone, "
            "or mark the setting static."
            if model
            else "mark the setting static (`jax.jit(f, static_argnames='training')`), or keep "
            "it out of the traced arguments."
        ),
    )


def _python_control_flow(f: Failure) -> Diagnosis | None:
    converts = f.line_has(r"\b(float|int)\(|\.item\(\)")
    if f.is_a("TracerBoolConversionError") or (
        f.is_a("ConcretizationTypeError")
        and not converts
        and f.line_has(r"^\s*(if|elif|while)\b|\bbool\(")
    ):
        return Diagnosis(
            "a Python `if`/`while` (or `bool(...)`) on a traced value: under `jax.jit` "
            "the value is not known while the function is traced, so Python cannot branch "
            "on it.",
            "compute both sides and choose with `jnp.where(cond, a, b)` (or `jax.lax.cond`), "
            "or mark the argument static if it really is a Python setting.",
        )
    return None


# torch's reductions that return a (values, indices) pair, unpacked as torch allows.
PAIR_RETURNING = r"=\s*.*\b(max|min|sort|topk|kthvalue|median|mode)\("


KEY_METHOD = re.compile(r"'PRNGKeyArray' object has no attribute '(\w+)'")
# jax.random's functions a torch.Generator has as methods, called on a key.
RANDOM_FUNCTIONS = (
    "split|fold_in|normal|uniform|randint|bernoulli|categorical|permutation|choice|"
    "shuffle|exponential|gamma|beta|poisson|truncated_normal|multivariate_normal"
)
# A legacy uint32 key is an array, whose error names no key: `key.split(2)`,
# `jax.random.PRNGKey(0).normal(...)`.
KEY_METHOD_ON_LINE = re.compile(
    rf"(?:\b(?:\w*key\w*|rng|prng)|PRNGKey\([^)]*\)|\.key\([^)]*\))\.({RANDOM_FUNCTIONS})\("
)


def _key_method(f: Failure) -> Diagnosis | None:
    """`key.split()`, `key.normal(...)`: a key has no methods, jax.random has them."""
    found = KEY_METHOD.search(f.message) if f.is_a("AttributeError") else None
    if found is None and f.is_a("AttributeError") and MISSING_ON_ARRAY.search(f.message):
        found = KEY_METHOD_ON_LINE.search(f.source_line)
    if found is None:
        return None
    name = found.group(1)
    return Diagnosis(
        f"`key.{name}` on a PRNG key: a key is a value, like torch's seed, not a generator "
        "object with methods (`torch.Generator`).",
        f"call `jax.random`'s function with the key first: `jax.random.{name}(key, ...)` "
        "(`keys = jax.random.split(key, n)`, `jax.random.normal(key, shape)`).",
    )


RANDOM_ORDER = (
    "JAX's random functions take the key, then the shape, then (for `randint` and "
    "`uniform`) `minval` and `maxval`; the rest by name"
)


def _random_in_torch_order(f: Failure) -> Diagnosis | None:
    """torch's order for a draw: `randint(low, high, size)`, `normal(size)`, the bounds or
    mean and std by position after the key."""
    call = re.search(r"\brandom\.(\w+)\(", f.source_line)
    if call is None or not f.is_a("TypeError", "ValueError", "TracerArrayConversionError"):
        return None
    name = call.group(1)
    # A number, a shape or a size where the key goes: `randint(0, 10, (3,))`, `normal((2, 3))`.
    key_not_first = f.line_has(rf"\brandom\.(?:{RANDOM_FUNCTIONS})\(\s*(?:[-+]?\d|\(|\[)")
    # What JAX got where the key goes, when the line's first argument is a name.
    given = re.search(r"PRNG key type <class '(\w+)'>|key data: .*\. Got (\S+)", f.message)
    given = given and (given.group(1) or given.group(2))
    if not key_not_first and given == "NoneType":
        return Diagnosis(
            "the key passed first is None: a key that was never made (a `key=None` "
            "default, torch's optional `generator=`) or a function that did not return the "
            "key it split.",
            "make one and pass it down: `key = jax.random.key(0)`, then "
            "`key, sub = jax.random.split(key)` before each draw.",
        )
    if not key_not_first and given and re.fullmatch(r"-?\d+|int", given):
        return Diagnosis(
            "a plain int where the key goes: a seed (`torch.manual_seed(0)`'s) or a size. "
            "JAX's random functions take a key, first.",
            "make the key from the seed once: `key = jax.random.key(seed)`, then "
            "`jax.random.normal(key, shape)`.",
        )
    if key_not_first or f.says("unexpected PRNG key type", "invalid PRNG key data"):
        return Diagnosis(
            "a random function called in torch's order (`torch.randint(low, high, size)`, "
            "`torch.randn(size)`): JAX's random functions take the key first, there is no "
            "global generator to draw from.",
            "pass a key first: `jax.random.normal(key, shape)`, "
            "`jax.random.randint(key, shape, minval, maxval)`, `jax.random.uniform(key, shape)`.",
        )
    if f.says("required positional argument: 'maxval'"):
        return Diagnosis(
            "`jax.random.randint` without its upper bound: torch's `randint(high, size)` "
            "starts at 0 by itself, JAX's takes both bounds.",
            "`jax.random.randint(key, shape, 0, high)`.",
        )
    # A number read as the dtype after a shape given whole: bounds (or mean and std) by
    # position. After a bare number it is torch's sizes one by one, a cause of its own.
    shape_whole = f.line_has(rf"\brandom\.{name}\(\s*[^,]+,\s*[(\[]")
    bounds_as_dtype = f.says("as a data type") and shape_whole
    spread = f.line_has(r"[(,]\s*\*\w")  # `normal(key, *shape)`: sizes as separate numbers
    if bounds_as_dtype or f.says(f"_{name}") or (f.says(f"{name}() takes") and not spread):
        mean_std = name == "normal"
        return Diagnosis(
            f"`jax.random.{name}` read torch's arguments in its own places: {RANDOM_ORDER}.",
            "`mean + std * jax.random.normal(key, shape)` for torch's `normal(mean, std, size)`."
            if mean_std
            else "`jax.random.uniform(key, shape, minval=low, maxval=high)`."
            if name == "uniform"
            else "`jax.random.randint(key, shape, minval, maxval)`.",
        )
    return None


# torch's meaning of a second number by position, where JAX's is another.
# The second argument a name, and not one for an axis (`jnp.max(x, axis)` is JAX's own).
MAX_OF_TWO = re.compile(
    r"\b(?:jnp|np|numpy)\.(max|min)\(\s*[^,()]+,\s*(?!(?:axis\w*|dims?\w*|ax|d)\b)[A-Za-z_]"
)
KEEPDIM_BY_POSITION = re.compile(r"\.(\w+)\((?:\s*[^,()]+,){1,2}\s*True\s*\)")
# Arrays by position where a sequence goes: `jnp.stack(a, b)`, `jnp.concatenate(a, b)`.
ARRAYS_NOT_IN_A_LIST = re.compile(
    r"\b(?:jnp|np)\.(stack|concatenate|hstack|vstack|column_stack)\(\s*[A-Za-z_]\w*\s*,\s*[A-Za-z_]"
)
# torch's sizes as separate numbers to reshape: `jnp.reshape(x, 2, 6)`.
RESHAPE_SIZES = re.compile(r"\b(?:jnp|np)\.reshape\(.+,\s*-?\d+\s*(?:,\s*-?\d+\s*)+\)")


def _torch_positional_meaning(f: Failure) -> Diagnosis | None:
    """`jnp.max(a, b)` (torch's elementwise max), `x.max(1, True)` (keepdim),
    `x.std(1, True)` (unbiased)."""
    pair = MAX_OF_TWO.search(f.source_line)
    if pair and f.says("integer scalar arrays can be converted", "axis", "not a valid"):
        name = pair.group(1)
        return Diagnosis(
            f"`torch.{name}(a, b)` compares two tensors element by element; `jnp.{name}`'s "
            "second argument is the axis to reduce over.",
            f"`jnp.{name}imum(a, b)`.",
        )
    listed = ARRAYS_NOT_IN_A_LIST.search(f.source_line)
    if listed and f.says("integer scalar arrays can be converted", "axis"):
        name = listed.group(1)
        return Diagnosis(
            f"arrays passed to `jnp.{name}` one by one: it takes one sequence of arrays, and "
            "its second argument is the axis.",
            f"put them in a list: `jnp.{name}([a, b], axis=0)` (torch's `torch.cat((a, b))`).",
        )
    if RESHAPE_SIZES.search(f.source_line) and f.says("cannot reshape"):
        return Diagnosis(
            "torch's sizes as separate numbers to `jnp.reshape(x, 2, 6)`: JAX's `reshape` "
            "function takes the shape as one tuple (the method takes either).",
            "`jnp.reshape(x, (2, 6))`, or `x.reshape(2, 6)`.",
        )
    flag = KEEPDIM_BY_POSITION.search(f.source_line)
    # A number read as a dtype has several torch causes, named by the table's row; std and
    # var's is none of them.
    if flag and f.says("as a data type") and flag.group(1) not in ("std", "var"):
        return None
    if flag and (f.says("as a data type", "'out' argument", "out argument")):
        name = flag.group(1)
        if name in ("std", "var"):
            return Diagnosis(
                f"torch's `x.{name}(dim, True)` passes `unbiased=True` by position; JAX's "
                "second place is the dtype, and JAX divides by n unless told.",
                f"`x.{name}(axis=dim, ddof=1)` (torch divides by n - 1 by default too).",
            )
        return Diagnosis(
            f"torch's `x.{name}(dim, True)` passes `keepdim=True` by position; JAX's "
            f"`{name}` takes other things there (a dtype, an output array).",
            f"`x.{name}(axis=dim, keepdims=True)`.",
        )
    return None


# `a @ b`, `jnp.dot(a, b)`, `jnp.matmul(a, b)`: the learner's own product, operands named.
PRODUCT = re.compile(
    r"([\w.\[\]]+(?:\.T)?)\s*@\s*([\w.\[\]]+)|\b(?:dot|matmul)\(\s*([\w.\[\]]+)\s*,\s*([\w.\[\]]+)"
)
WEIGHT_NAME = re.compile(r"^(?:\w+\.)?(?:w\w*|W\w*|weight\w*|kernel\w*)$")


def _matrix_product_sizes(f: Failure) -> Diagnosis | None:
    """A product whose summed axes differ: inside a scan step, in the learner's own
    `a @ b`, or inside a library layer the learner called."""
    found = re.search(r"contracting dimensions to have the same shape, got (\S+) and (\S+?)\.?$",
                      f.message.splitlines()[0] if f.message else "")  # fmt: skip
    if not found:
        return None
    left, right = (size.strip("(,)") for size in found.groups())
    sizes = f"a matrix product whose summed axes differ in length ({left} against {right})"
    loop = re.search(r"\b(scan|fori_loop)\(", " ".join(f.learner_lines[:-1]))
    if loop and not f.line_has(rf"\b{loop.group(1)}\("):
        first = "`step(carry, x)`, the carry first" if loop.group(1) == "scan" else (
            "`body(i, carry)`, the index first")  # fmt: skip
        return Diagnosis(
            f"{sizes}, inside the function `jax.lax.{loop.group(1)}` calls: it calls "
            f"{first}; a step whose arguments are in the other order multiplies the wrong "
            "one.",
            "check the step's argument order against that, and that `xs` holds its steps "
            "along axis 0 (`xs.swapaxes(0, 1)` if they run along another).",
        )
    product = PRODUCT.search(f.source_line)
    if product is None and not re.search(r"\w\s*\(", f.source_line):  # no line of theirs
        return Diagnosis(
            f"{sizes}.", "print the shapes of the operands and multiply (n, k) by (k, m)."
        )
    if product is None:  # the product ran inside a function the line called, not the learner's
        library = diagnose_calls.outermost_library_call(f.source_line)
        if library:
            return Diagnosis(
                f"{sizes}, inside `{library[0]}`, which this line calls.",
                f"print the shapes of what it is given: {library_api.shown(*library)}.",
            )
        return Diagnosis(
            f"{sizes}, inside the layer this line calls: an Equinox layer (`eqx.nn.Linear`, "
            "`eqx.nn.MLP`) takes one example, not a batch, as torch's layers do.",
            "call the layer on each example: `jax.vmap(model)(xs)`.",
        )
    a, b = (name for name in product.groups() if name)
    weight = (
        f" If `{b}` is a weight stored torch's way, (out, in), it multiplies as "
        f"`{a} @ {b}.T`; if `{a}` holds its examples along its last axis, `{a}.T @ {b}`."
        if WEIGHT_NAME.match(b)
        else ""
    )
    return Diagnosis(
        f"{sizes}: `{a} @ {b}` sums the last axis of `{a}` ({left} long) against the first "
        f"of `{b}` ({right} long).{weight}",
        f"print the shapes (`{a}.shape`, `{b}.shape`) and multiply (n, k) by (k, m).",
    )


def _layer_without_key(f: Failure) -> Diagnosis | None:
    if not (f.says("required keyword-only argument: 'key'") and f.line_has(r"\beqx\.")):
        return None
    return Diagnosis(
        "an Equinox layer made without a key: it draws its first weights from the key you "
        "pass, where torch's layers draw from a global generator.",
        "`eqx.nn.Linear(4, 2, key=jax.random.key(0))`; split a key for each layer "
        "(`k1, k2 = jax.random.split(key)`).",
    )


def _layer_on_a_batch(f: Failure) -> Diagnosis | None:
    """Equinox's own messages for a layer given a batch: LayerNorm, Embedding, Conv."""
    equinox_says = f.says("`LayerNorm(", "eqx.nn.", "Embedding()") and f.says("jax.vmap")
    if not (equinox_says or (f.says("Input to `Conv`") and f.says("needs to have rank"))):
        return None
    return Diagnosis(
        "an Equinox layer given a batch: each layer takes one example (a convolution one "
        "(channels, height, width) image, an embedding one index), where torch's take a "
        "batch.",
        "map it over the batch: `jax.vmap(layer)(xs)` (`jax.vmap(model)(xs)` for a model).",
    )


def _squeeze_of_a_longer_axis(f: Failure) -> Diagnosis | None:
    if not f.says("cannot select an axis to squeeze out"):
        return None
    return Diagnosis(
        "`squeeze` of an axis whose size is not 1: torch's `x.squeeze(d)` leaves such an "
        "axis as it is, JAX's raises.",
        "squeeze only an axis of size 1 (`x.squeeze(d) if x.shape[d] == 1 else x`), or "
        "`x.reshape(...)` to the shape you mean.",
    )


def _grad_of_a_non_scalar(f: Failure) -> Diagnosis | None:
    if not f.says("Gradient only defined for scalar-output functions"):
        return None
    return Diagnosis(
        "`jax.grad` of a function that returns an array: it differentiates one number. A "
        "loss per example is the usual cause: torch's losses average by default "
        "(`reduction='mean'`), Optax's (`optax.l2_loss`, `optax.softmax_cross_entropy`) "
        "return one per example.",
        "reduce it inside the function, `return losses.mean()`; for the gradient of each "
        "output, `jax.jacobian(f)` or `jax.vmap(jax.grad(f_of_one_example))`.",
    )


def _cross_entropy_labels(f: Failure) -> Diagnosis | None:
    """Integer labels to `softmax_cross_entropy`, one-hot ones to its integer twin."""
    integer_twin = f.line_has(r"softmax_cross_entropy_with_integer_labels\(")
    if integer_twin and f.says("subdtype of") and f.says("integer"):
        return Diagnosis(
            "`optax.softmax_cross_entropy_with_integer_labels` takes each label as a class "
            "index (an integer array, torch's `F.cross_entropy(logits, target)`); these "
            "labels are floats, one-hot or probabilities.",
            "`optax.softmax_cross_entropy(logits, one_hot_labels)` for these, or pass "
            "`labels.argmax(-1)` (integers) to the integer form.",
        )
    if (
        not integer_twin
        and f.line_has(r"softmax_cross_entropy\(")
        and f.says("Incompatible shapes", "broadcast")
    ):
        return Diagnosis(
            "`optax.softmax_cross_entropy` takes labels shaped like the logits (one-hot or "
            "probabilities); these are one class index per example, as torch's "
            "`F.cross_entropy(logits, target)` takes them.",
            "`optax.softmax_cross_entropy_with_integer_labels(logits, labels)` for class indices.",
        )
    return None


def _device_by_name(f: Failure) -> Diagnosis | None:
    """torch's `device='cuda'`, `x.to('cuda')`: JAX's devices are objects."""
    named = re.search(r"'?(cuda|cpu|gpu|mps|tpu)(?::\d+)?'?", f.message)
    if named and f.says("Unknown backend") and named.group(1) in ("cuda", "mps"):
        return Diagnosis(
            f"`'{named.group(1)}'` is torch's name for the device; JAX calls its backends "
            "`'gpu'`, `'tpu'` and `'cpu'`.",
            "`jax.devices('gpu')`, or `jax.devices()` for the default backend's devices.",
        )
    if not (
        named
        and f.is_a("ValueError", "TypeError")
        and f.says("must be an instance of jax.sharding", "device_put` only accepts", "Sharding")
    ):
        return None
    return Diagnosis(
        f"a device named by a string (`'{named.group(1)}'`), torch's way: JAX's devices "
        "are objects, and JAX puts arrays on its default device (a GPU when there is one) "
        "by itself.",
        "leave it out, or name the device: `jax.device_put(x, jax.devices('gpu')[0])` "
        "(`jax.devices('cpu')[0]`).",
    )


def _einsum_operands_in_a_list(f: Failure) -> Diagnosis | None:
    if not (
        f.says("Number of einsum subscripts", "correct number of indices for operand")
        and f.line_has(r"einsum\(\s*([\"']).*?\1\s*,\s*\[")
    ):
        return None
    return Diagnosis(
        "the operands of `einsum` in one list, as torch also allows "
        "(`torch.einsum(eq, [a, b])`): JAX reads the list as one operand.",
        "pass them as separate arguments: `jnp.einsum(eq, a, b)` (or `jnp.einsum(eq, *ops)`).",
    )


def _torch_pair_unpacked(f: Failure) -> Diagnosis | None:
    unpacking = f.is_a("ValueError") and f.says("values to unpack")
    if not unpacking or not f.line_has(r"^\s*\w+\s*,\s*\w+\s*" + PAIR_RETURNING):
        return None
    return Diagnosis(
        "torch's `x.max(dim)`, `x.min(dim)`, `x.sort(dim)`, `x.topk(k)` return a (values, "
        "indices) pair; JAX's `max`, `min` and `sort` return the values alone, an array "
        "that Python then unpacks along its first axis.",
        "ask for each: `values, indices = x.max(axis=d), x.argmax(axis=d)`; "
        "`jnp.sort(x, axis=d), jnp.argsort(x, axis=d)`; `jax.lax.top_k(x, k)` returns both.",
    )


def _data_dependent_size(f: Failure) -> Diagnosis | None:
    """jnp.nonzero, unique, argwhere, one-argument where, bincount: JAX's own message asks
    for `size=` or `length=`."""
    if not f.is_a("ConcretizationTypeError") or not (
        f.says("size argument") or f.says("static `length`")
    ):
        return None
    return Diagnosis(
        "an operation whose result's size depends on the data (`jnp.nonzero`, "
        "`jnp.argwhere`, `jnp.unique`, `jnp.where(cond)` with one argument, `jnp.bincount`; "
        "torch's `x.nonzero()`): under `jax.jit` every shape is fixed while the function "
        "is traced, before the data exists.",
        "give the size: `jnp.nonzero(x, size=n, fill_value=0)`, `jnp.unique(x, size=n, "
        "fill_value=...)`, `jnp.bincount(x, length=n)`; or keep the shape with a mask, "
        "`jnp.where(x > 0, x, 0)`.",
    )


def _concrete_scalar(f: Failure) -> Diagnosis | None:
    if not f.is_a("ConcretizationTypeError"):
        return None
    if f.line_has(r"\.item\(\)"):
        return Diagnosis(
            "`.item()` on a traced value, the PyTorch way to read a number: under "
            "`jax.jit` there is no number to read yet.",
            "keep it an array inside the traced function; call `float(...)` on the "
            "result outside it, after the step returns.",
        )
    if f.line_has(r"\b(?:float|int|complex|bool)\("):
        return Diagnosis(
            "a traced value turned into a Python number (`float(t)`, `int(t)`): under "
            "`jax.jit` there is no number yet, only a tracer.",
            "keep values as JAX arrays inside the function (return the array; convert "
            "outside), or mark the argument static if it is a Python setting.",
        )
    return Diagnosis(
        "a traced value used where JAX needs a concrete one (a shape, a size, a count, a "
        "Python number): under `jax.jit` the value is not known while the function is "
        "traced.",
        "pass such settings as static arguments (`jax.jit(f, static_argnames='n')`), or "
        "compute them from shapes (`x.shape[0]`), which are known while tracing.",
    )


def _boolean_mask(f: Failure) -> Diagnosis | None:
    if f.is_a("NonConcreteBooleanIndexError"):
        return Diagnosis(
            "boolean-mask indexing (`x[x > 0]`) under `jax.jit`: its result has a size "
            "that depends on the data, and compiled shapes must be fixed.",
            "keep the shape: `jnp.where(x > 0, x, 0)`.",
        )
    return None


def _key_reuse(f: Failure) -> Diagnosis | None:
    if not f.is_a("KeyReuseError"):
        return None
    # JAX's checker speaks of a "jit-compiled function" even when the learner never jitted:
    # jax.random's own functions are compiled.
    checker = (
        " (JAX's key-reuse checker caught it; it says 'jit-compiled function' because "
        "jax.random's own functions are compiled, whether or not you used jit)"
        if f.says("jit-compiled")
        else " (JAX's key-reuse checker caught it)"
    )
    if f.line_has(r"\w\(\s*(_[A-Za-z]\w*|[A-Z][A-Z0-9_]+)\s*[,)]"):
        return Diagnosis(
            "a key made once at module level, the `torch.manual_seed` habit: every call draws "
            "from the same key, so every call gives the same numbers" + checker + ".",
            "take randomness only from the `key` argument: split it for each draw.",
        )
    split = re.search(
        r"^\s*([\w\s,]+?)\s*=\s*(?:jax\.)?(?:random\.)?split\(\s*(\w+)", f.source_line
    )
    if split and split.group(2) not in re.split(r"\s*,\s*", split.group(1)):
        return Diagnosis(
            f"`{split.group(2)}` was used before this split (by a draw or an earlier split), "
            f"and this split gives no new `{split.group(2)}` back (its pieces go to "
            f"`{split.group(1).strip()}`): in a loop, every round splits the same used key"
            + checker
            + ".",
            f"carry the key forward: `{split.group(2)}, sub = jax.random.split("
            f"{split.group(2)})`, and draw from `sub`.",
        )
    if f.line_has(r"\bsplit\("):
        return Diagnosis(
            "a key split after it was already used for a draw: JAX stops at this `split`, "
            "but the mistake is the earlier draw from the key itself instead of from the "
            "piece split off it" + checker + ".",
            "draw only from the new piece: `key, sub = jax.random.split(key)`, then "
            "`jax.random.normal(sub, ...)`, and carry `key` forward.",
        )
    return Diagnosis(
        "a PRNG key used twice: the same key always gives the same numbers, so two draws "
        "from one key are not independent" + checker + ".",
        "split before every use: `key, sub = jax.random.split(key)`; use `sub` once and "
        "carry `key` forward.",
    )


# "The leaked intermediate value was created on line /…/07_train_step.py:41:8 (step)."
LEAK_ORIGIN = re.compile(r"created on line (?:\S*/)?([^/\s]+\.py):(\d+)(?::\d+)? \(([\w.<>]+)\)")
# "The error occurred while tracing the function step at /…/07_train_step.py:37 for jit."
TRACED_FUNCTION = re.compile(r"tracing the function (\S+) at (?:\S*/)?([^/\s]+\.py):(\d+)")
# `np.asarray(x)`, `_np.asarray(x)` (a module imported under a private name), `onp.`.
NUMPY_CALL = r"\b_*(np|numpy|onp)\.|__array__"
LEAK_FIX = (
    "return every value you need from the transformed function (`return new_params, loss`) "
    "and keep logs outside it: append what it returned, after the call."
)


def _leaked_tracer(f: Failure) -> Diagnosis | None:
    if f.is_a("UnexpectedTracerError"):
        origin = LEAK_ORIGIN.search(f.message)
        where = (
            f" It was made at line {origin.group(2)} of {origin.group(1)}, in "
            f"`{origin.group(3)}`: whatever stores it there (a global, a list's `.append`, a "
            "closure's variable, `self.…`) is the leak."
            if origin
            else ""
        )
        return Diagnosis(
            "a leaked tracer: a value from inside `jax.jit`/`grad`/`vmap` was stored outside "
            "the function (a global, a list, a closure, `self.…`) and used after tracing "
            "ended, when it no longer stands for any number." + where,
            LEAK_FIX,
        )
    traced = TRACED_FUNCTION.search(f.message)
    if f.is_a("TracerArrayConversionError") and not f.line_has(NUMPY_CALL) and traced:
        # The grader reads the result with NumPy: a tracer in it was kept from an
        # earlier trace (JAX names the function traced then, not a NumPy call of yours).
        return Diagnosis(
            f"a leaked tracer: your result holds a value kept from inside `{traced.group(1)}` "
            f"(line {traced.group(3)}) while it was traced, stored in a global, a list, a "
            "closure or `self.…`; it stands for no number, so it cannot be read. (If you did "
            "call NumPy on a traced value, that is the other cause: use `jnp` inside.)",
            LEAK_FIX,
        )
    return None


def _static_not_hashable(f: Failure) -> Diagnosis | None:
    if f.is_a("ValueError") and f.says("non-hashable static"):
        return Diagnosis(
            "an array passed as a static argument: static arguments must be hashable "
            "Python values (ints, strings, tuples).",
            "keep arrays as ordinary (traced) arguments; mark static only Python settings.",
        )
    return None


def _not_a_pytree(f: Failure) -> Diagnosis | None:
    not_jax = f.says("not a valid jax type", "error interpreting argument")
    if f.is_a("TypeError") and not_jax and f.says("<class 'function'>", "functools.partial"):
        return Diagnosis(
            "a function returned where a value was expected: `jax.grad(f)` (or `jit`, "
            "`vmap`) builds a new function, and nothing has called it yet.",
            "call it on the arguments, `return jax.grad(f)(x)`, or define the name as the "
            "function itself at module level: `df = jax.grad(f)`.",
        )
    python_value = re.search(r"type <class '(str|NoneType|bytes|set|frozenset|range)'>", f.message)
    if f.is_a("TypeError") and not_jax and python_value:
        return Diagnosis(
            f"a Python value (a `{python_value.group(1)}`) passed as an argument of a "
            "transformed function: JAX traces arguments as arrays, and this one is none.",
            "mark the argument static, `jax.jit(f, static_argnames='mode')`, or keep it out "
            "of the arguments (a closure or a default).",
        )
    if f.is_a("TypeError") and not_jax:
        return Diagnosis(
            "JAX was handed an object it cannot see inside (a class it does not know is a "
            "container of arrays).",
            "register the class as a pytree: `jax.tree_util.register_dataclass` or "
            "`register_pytree_node`.",
        )
    return None


def _program_exit(f: Failure) -> Diagnosis | None:
    if f.is_a("SystemExit"):
        return Diagnosis(
            "the code called `sys.exit()` (or `exit()`/`quit()`), which ends the whole "
            "program, grader included.",
            "return the result from your function instead of exiting.",
        )
    return None


# A lookup by a key written out, or by a name holding one: `params['w1']`,
# `state["layer1"]["w"]`, `params[name] for name in NAMES`.
KEY_WRITTEN_OUT = re.compile(r"\w\]?\s*\[\s*(?:(['\"])\w+\1|[A-Za-z_]\w*)\s*\]")
# A format string's field: `jax.debug.print("norm={norm}", v)`, `"{loss:.3f}".format(l)`.
FORMAT_CALL = re.compile(r"\b(?:debug\.print|debug\.callback|format|print)\(")


def _missing_key(f: Failure) -> Diagnosis | None:
    """A params dict read the state_dict way: the line looks a key up by its name."""
    missing = re.search(r"KeyError: '(\w+)'", f.message)
    if not (f.is_a("KeyError") and missing and f.line_has(KEY_WRITTEN_OUT.pattern)):
        return None
    literal = re.search(r"\[\s*(['\"])(\w+)\1\s*\]", f.source_line)
    if literal and not f.line_has(rf"(['\"]){missing.group(1)}\1"):  # another lookup raised
        return None
    return Diagnosis(
        f"the code looks up `'{missing.group(1)}'`, a key the input does not have: keys "
        "written out for one model (`params['w1']`, the way a state_dict is read) fail on "
        "any other.",
        "let JAX walk the structure: `jax.tree.map(fn, tree)`, `jax.tree.leaves(tree)`.",
    )


def _format_field_without_value(f: Failure) -> Diagnosis | None:
    """`jax.debug.print("norm={norm}", v)`: a named field, the value passed by position."""
    missing = re.search(r"KeyError: '(\w+)'", f.message)
    field = missing and f.line_has(r"\{" + missing.group(1) + r"[:!}]")
    if not (f.is_a("KeyError") and field and f.line_has(FORMAT_CALL.pattern)):
        return None
    name = missing.group(1)
    return Diagnosis(
        f"the format string names a field `{{{name}}}` and no `{name}=` was passed: "
        "`jax.debug.print` (like `str.format`) fills a named field from a keyword, a value "
        "passed by position fills `{}`.",
        f'pass it by name, `jax.debug.print("{name}={{{name}}}", {name}=value)`, or use '
        'an empty field: `jax.debug.print("value={}", value)`.',
    )


def _vmap_axes(f: Failure) -> Diagnosis | None:
    if (
        f.is_a("ValueError")
        and f.says("vmap")
        and f.says("inconsistent sizes", "requested to map its argument")
    ):
        if f.line_has(r"vmap\(\s*(jax\.)?vmap\("):
            return Diagnosis(
                "two nested `jax.vmap`s with the default `in_axes` both map every argument "
                "along axis 0 together: row i of one with row i of the other, like `zip`, "
                "never every pair.",
                "say which argument each map holds still: the inner "
                "`jax.vmap(f, in_axes=(None, 0))` takes one `a` against every row of `B`, "
                "and the outer `jax.vmap(inner, in_axes=(0, None))` runs it for every row "
                "of `A`.",
            )
        return Diagnosis(
            "`jax.vmap` was told to map an argument along an axis it does not have, or "
            "arguments whose batch sizes differ (often: shared `params` mapped too).",
            "give `in_axes` one entry per argument: 0 for batched inputs, None for shared "
            "ones, e.g. `jax.vmap(f, in_axes=(None, 0, 0))(params, xs, ys)`.",
        )
    return None


def _update_without_method(f: Failure) -> Diagnosis | None:
    """`m.at[i] * f`: the update reference itself as an operand, subscripted or called."""
    as_value = f.says(
        "'_IndexUpdateRef'", "'_IndexUpdateHelper'", "_IndexUpdateRef object",
        "_IndexUpdateHelper object",
    )  # fmt: skip
    if not (f.is_a("TypeError") and as_value and f.line_has(r"\.at\[")):
        return None
    return Diagnosis(
        "`x.at[i]` used as a value (`m.at[i] * f`): `.at[i]` only names where to write; "
        "it is not the slice itself.",
        "finish the update with its method: `m.at[i].multiply(f)` (or `.set`, `.add`, "
        "...); to read the slice, index plainly: `m[i]`.",
    )


def _transform_of_a_value(f: Failure) -> Diagnosis | None:
    if f.is_a("TypeError") and f.says("expected a callable value"):
        return Diagnosis(
            "`jax.grad` (or `jit`, `vmap`) was given a value, not a function: `jax.grad(f(x))` "
            "computes `f(x)` first, as if it were `loss.backward()`, and hands grad the "
            "result.",
            "pass the function, then call what comes back: `jax.grad(f)(x)`.",
        )
    return None


CONTAINER_ATTRIBUTE = re.compile(r"'(dict|list|tuple)' object has no attribute '(\w+)'")


def _container_as_array(f: Failure) -> Diagnosis | None:
    """An array's attribute (`.shape`, `.reshape`) asked of a dict, list or tuple."""
    found = CONTAINER_ATTRIBUTE.search(f.message) if f.is_a("AttributeError") else None
    if found is None or found.group(2) not in library_api.array_members():
        return None
    return Diagnosis(
        f"a container treated as an array: `.{found.group(2)}` of a {found.group(1)}. "
        "Parameters nest to any depth (dicts in dicts, lists of layers), so a loop over the "
        "top level, the `state_dict` way, meets a dict or a list where it expects an array.",
        "let JAX walk every level: `jax.tree.map(lambda p: p.shape, params)`, "
        "`jax.tree.leaves(params)`.",
    )


def _dict_iterated_for_its_arrays(f: Failure) -> Diagnosis | None:
    """`for p in params: p.shape`: a string where an array was meant, as a loop over a
    dict gives (the loop's own line, when the traceback holds it)."""
    found = re.search(r"'str' object has no attribute '(\w+)'", f.message)
    if not (f.is_a("AttributeError") and found and found.group(1) in library_api.array_members()):
        return None
    member = found.group(1)
    loop = re.search(r"\bfor\s+(\w+)\s+in\s+(\w+)\s*[:\])]", " ".join(f.learner_lines))
    if loop is None:
        named = re.search(rf"(\w+)\.{member}\b", f.source_line)
        return Diagnosis(
            f"`{named.group(1) if named else 'it'}.{member}` of a string, where an array was "
            "meant: a loop over a dict (`for p in params`) gives its keys, the names, not its "
            "arrays.",
            "loop over `params.values()` (or `.items()`), or let JAX walk every level: "
            "`jax.tree.leaves(params)`.",
        )
    return Diagnosis(
        f"a loop over `{loop.group(2)}`, a dict, gives its keys, strings: `{loop.group(1)}` "
        f"is a name, not an array. A state_dict is read with `.items()`.",
        f"loop over `{loop.group(2)}.values()` (or `.items()`), or let JAX walk every level: "
        f"`jax.tree.leaves({loop.group(2)})`.",
    )


def _optimizer_state_field(f: Failure) -> Diagnosis | None:
    """`state.mu` where `opt.init` returned a tuple of states, one per transformation."""
    found = CONTAINER_ATTRIBUTE.search(f.message) if f.is_a("AttributeError") else None
    if found is None or found.group(1) != "tuple":
        return None
    if found.group(2) not in library_api.optax_state_fields():
        return None
    field = found.group(2)
    return Diagnosis(
        f"`.{field}` asked of a tuple: an Optax optimizer's state is a tuple with one state "
        "per transformation it chains (`optax.adam`'s is `(ScaleByAdamState(count, mu, nu), "
        f"EmptyState())`), and `{field}` belongs to one of them, unlike torch's "
        "`optimizer.state[p]`.",
        f"take the transformation's state first: `opt_state[0].{field}`; print `opt_state` "
        "to see its structure.",
    )


def _pytree_class_methods(f: Failure) -> Diagnosis | None:
    if f.is_a("AttributeError") and f.says("tree_flatten", "tree_unflatten"):
        return Diagnosis(
            "`@register_pytree_node_class` on a class without its two methods: JAX calls "
            "`tree_flatten` to take the object apart and `tree_unflatten` to rebuild it.",
            "define both (`def tree_flatten(self): return (self.w, self.b), None` and "
            "`@classmethod def tree_unflatten(cls, aux, children): return cls(*children)`), "
            "or register a dataclass with `jax.tree_util.register_dataclass`.",
        )
    return None


def _timeout(f: Failure) -> Diagnosis | None:
    if f.is_a("Failed") and f.says("timeout >", "timeout (>"):
        return Diagnosis(
            "the check ran out of time: an endless loop, or far more work than the exercise needs.",
            "look at the loops in your function; the line shown is where it was stopped.",
        )
    return None


def _sandboxed_write(f: Failure) -> Diagnosis | None:
    refused = f.is_a("PermissionError") or (
        f.is_a("OSError") and f.says("permission denied", "errno 13", "file too large")
    )
    if refused:
        return Diagnosis(
            "grading runs sandboxed: your code may only write inside its working folder "
            "(files up to 256 MiB), and may not reach the network.",
            "keep results in memory and return them; write files only under the current "
            "folder or `tempfile.gettempdir()`.",
        )
    return None


def _custom_rule_shape(f: Failure) -> Diagnosis | None:
    """A `jax.custom_vjp`/`custom_jvp` rule that breaks its contract: JAX's texts for these
    are the same from 0.5.3 to 0.10.2."""
    if not f.is_a("TypeError"):
        return None
    if f.says("forward-mode autodiff (jvp) to a custom_vjp"):
        return Diagnosis(
            "forward mode (`jax.jvp`, `jax.jacfwd`) through a `jax.custom_vjp` function: its "
            "rule is for reverse mode only, like a `torch.autograd.Function`'s `backward`.",
            "give the function its derivative as a `jax.custom_jvp` rule (`@f.defjvp`, "
            "returning the output and its tangent): JAX transposes it for `jax.grad` too.",
        )
    if f.says("custom vjp bwd rule must produce"):
        return Diagnosis(
            "a `jax.custom_vjp` backward rule returned something other than a tuple with one "
            "cotangent per input: like `torch.autograd.Function.backward`, `bwd` answers for "
            "every input, even a single one, and leaves out those in `nondiff_argnums`.",
            "return a tuple: `return (g,)` for one input, `return clipped_g, None` for "
            "`(x, limit)` (`None` for an input that gets no gradient).",
        )
    if f.says("custom vjp fwd rule", "custom jvp rule") and f.says("must produce a pair"):
        return Diagnosis(
            "a custom rule returned one value where JAX wants a pair: a `custom_vjp`'s `fwd` "
            "returns the output and the residuals (what `ctx.save_for_backward` keeps), a "
            "`custom_jvp` rule the output and its tangent.",
            "`return y, (x,)` from `fwd` (`None` as residuals when backward needs nothing); "
            "`return y, y_tangent` from a `defjvp` rule.",
        )
    return None


RULES: tuple[Callable[[Failure], Diagnosis | None], ...] = (
    _timeout,
    _sandboxed_write,
    _program_exit,
    _key_reuse,
    _in_place_write,
    _custom_rule_shape,
    _optimizer_object,
    _random_in_torch_order,
    _torch_positional_meaning,
    _key_method,
    diagnose_calls.keyword_a_library_lacks,
    _torch_spelling,
    _module_method,
    _module_changed_in_place,
    _module_without_call,
    _dropout_without_key,
    _grad_of_a_non_float,
    _sizes_as_separate_numbers,
    _pytorch_habit,
    _dtype_mismatch,
    _update_without_method,
    _transform_of_a_value,
    _pytree_class_methods,
    _block_on_container,
    _container_as_array,
    _optimizer_state_field,
    _leaked_tracer,
    _numpy_conversion,
    _python_loop_count,
    _integer_from_tracer,
    _python_while,
    _python_operator_on_tracer,
    _bool_inside_a_call,
    _python_control_flow,
    _squeeze_of_a_longer_axis,
    _matrix_product_sizes,
    _layer_without_key,
    _layer_on_a_batch,
    _grad_of_a_non_scalar,
    _cross_entropy_labels,
    _device_by_name,
    _einsum_operands_in_a_list,
    _torch_pair_unpacked,
    _data_dependent_size,
    _concrete_scalar,
    _boolean_mask,
    _static_not_hashable,
    _not_a_pytree,
    _vmap_axes,
    _loop_carry_type,
    _loop_body_signature,
    _fori_body_order,
    _missing_key,
    _format_field_without_value,
    diagnose_calls.custom_rule_arguments,
    diagnose_calls.jvp_rule_given_tuples,
    diagnose_calls.branches_given_values,
    diagnose_calls.value_where_argnums_goes,
    diagnose_calls.gradient_indexed_as_a_tuple,
    diagnose_calls.arithmetic_on_containers,
    diagnose_calls.jit_member_on_a_function,
    diagnose_calls.replace_through_init,
    diagnose_calls.size_as_a_shape,
    diagnose_calls.model_leaves_in_an_update,
    diagnose_calls.update_without_params,
    diagnose_calls.optimizer_function_arguments,
    diagnose_calls.name_in_another_module,
    _dict_iterated_for_its_arrays,
    diagnose_calls.library_call,
)


def diagnose(failure: Failure) -> Diagnosis | None:
    """The first rule that recognises the failure, or None for an ordinary error."""
    for rule in RULES:
        found = rule(failure)
        if found is not None:
            return dataclasses.replace(found, rule=rule.__name__.lstrip("_"))
    return None
