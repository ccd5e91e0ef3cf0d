"""Rules for PyTorch's spellings in JAX code: a torch name, method, keyword or order of
arguments that JAX spells otherwise, and torch's nn.Module, optimizers and random draws
written the torch way.

Each rule states its evidence: the error's type and text, and what the failing line
shows. The rule table is kata.diagnosis.diagnose.RULES.
"""

from __future__ import annotations

import operator
import re
from functools import cache

from kata.diagnosis import library_api, torch_to_jax
from kata.diagnosis.diagnose_types import Diagnosis, Failure

# `torch.cat(...)`, `F.relu(...)`, `nn.functional.relu(...)` written with no torch imported.
TORCH_NAME = re.compile(r"name '(torch|F|nn)' is not defined")


def pytorch_habit(f: Failure) -> Diagnosis | None:
    """PyTorch itself in JAX code: torch imported or named (`torch.cat`, `F.relu`),
    or autograd's names (`.backward()`, `requires_grad`) asked of an array."""
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


@cache
def in_place_spellings() -> dict[str, tuple[str, str]]:
    """Every in-place update a torch.Tensor takes and a JAX array lacks, by the name an
    error gives it: (torch's method, Python's operator). Torch's methods whose names end in
    `_` (its documented surface, torch_surface.json: `sub_`, `zero_`, `clamp_`), and
    Python's in-place operators (the `operator` module's `__isub__`: `-=`), each with
    torch's method of the same name (`sub_`) where torch has one."""
    methods = {
        name for name in torch_to_jax.surface()["methods"] if re.fullmatch(r"[a-z]\w*_", name)
    }
    found = {name: (name, "") for name in methods}
    for name in dir(operator):
        said = re.match(r"Same as a (\S+)= b", getattr(operator, name).__doc__ or "")
        if re.fullmatch(r"__i\w+__", name) and said:
            torch_name = f"{name[3:-2]}_"
            found[name] = (torch_name if torch_name in methods else "", said.group(1))
    return found


# An in-place method asked of what `x.at[i]` returns: `x.at[i].add_(v)`.
AT_METHOD = re.compile(r"'_IndexUpdate(?:Ref|Helper)' object has no attribute '(\w+)_'")
# A dict's arrays updated one by one, torch's `for p in model.parameters(): p.sub_(...)`.
DICT_OF_ARRAYS = (
    " Where the array came from a dict of them (`for p, g in zip(params.values(), "
    "grads.values())`, torch's `p.sub_(lr * g)`, or `p -= lr * p.grad` under "
    "`torch.no_grad()`), a new array given the loop's name leaves the dict as it was."
)
NEW_DICT = (
    "; for a dict of them, build the new dict: `params = jax.tree.map(lambda p, g: p - lr * "
    "g, params, grads)`."
)


def in_place_update(f: Failure) -> Diagnosis | None:
    """An in-place update asked of a JAX array: torch's `p.sub_(v)`, `p.zero_()`, or
    Python's `p.__isub__(v)` (what `p -= v` is on a torch.Tensor), derived from torch's
    methods and Python's operators; `x.at[i].add_(v)` too."""
    at_method = AT_METHOD.search(f.message) if f.is_a("AttributeError") else None
    if at_method and library_api.method_of_class(f"_IndexUpdateRef.{at_method.group(1)}"):
        name = at_method.group(1)
        return Diagnosis(
            f"`.at[i].{name}_()` with torch's trailing underscore: JAX's `.at[i].{name}` "
            "has none, since it changes nothing in place; it returns the new array.",
            f"`x = x.at[i].{name}(v)`.",
        )
    on_array = MISSING_ON_ARRAY.search(f.message) if f.is_a("AttributeError") else None
    spelling = on_array and in_place_spellings().get(on_array.group(1))
    if not spelling or AUTOGRAD_NAME.search(f.message):  # `requires_grad_`: autograd's
        return None
    name, (torch_name, symbol) = on_array.group(1), spelling
    row = torch_to_jax.lookup("method", torch_name) if torch_name else None
    if symbol:
        torch_said = f", torch's `x.{torch_name}(y)`" if torch_name else ""
        cause = (
            f"`x.{name}(y)` is `x {symbol}= y` written out, an update in place{torch_said}: JAX "
            "arrays (and the tracers of `jit`, `grad`, `vmap`) never change, so they have no "
            f"`{name}`; written as an operator, `x {symbol}= y` makes a new array and gives "
            "it the name `x`."
        )
    else:
        cause = (
            f"`.{name}()` is a torch.Tensor method. A trailing underscore marks one that "
            "changes the tensor in place; JAX arrays (and the tracers of `jit`, `grad`, "
            f"`vmap`) never change, so they have no `.{name}`."
        )
    why = f" {row.why[0].upper()}{row.why[1:]}." if row and row.why else ""
    if row is None:
        fix = f"in JAX: `x = x {symbol} y`" if symbol else "in JAX: make a new array, `x = ...`"
    else:
        fix = f"in JAX: {row.jax}" if row.jax else f"JAX has no equivalent: {row.none}"
    return Diagnosis(cause + why + DICT_OF_ARRAYS, fix + NEW_DICT)


def torch_spelling(f: Failure) -> Diagnosis | None:
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
            f"and `vmap`) have no `.{name}`."
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


def module_method(f: Failure) -> Diagnosis | None:
    """A torch.nn.Module method asked of an Equinox model (`model.eval()`,
    `model.parameters()`): what Equinox does instead."""
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


def module_without_call(f: Failure) -> Diagnosis | None:
    """A model called whose class defines torch's `forward`, not `__call__`."""
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


def key_method(f: Failure) -> Diagnosis | None:
    """A PRNG key used as a torch.Generator (`key.split()`, `key.normal(...)`): a key
    has no methods, jax.random has them."""
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


def random_in_torch_order(f: Failure) -> Diagnosis | None:
    """A random draw in torch's order: `randint(low, high, size)`, `normal(size)`,
    the bounds or mean and std by position after the key."""
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


def torch_positional_meaning(f: Failure) -> Diagnosis | None:
    """A second number by position read as torch reads it: `jnp.max(a, b)`
    (torch's elementwise max), `x.max(1, True)` (keepdim), `x.std(1, True)` (unbiased)."""
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


def device_by_name(f: Failure) -> Diagnosis | None:
    """A device named by a string, torch's way (`device='cuda'`, `x.to('cuda')`):
    JAX's devices are objects."""
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
