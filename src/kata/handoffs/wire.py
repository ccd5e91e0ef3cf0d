"""What crosses between the judge and the learner's process: data, never objects.

A message is a JSON document plus the raw bytes of the arrays it names. Arrays travel as
dtype, shape and bytes (numeric dtypes only); a JAX key array as its words and the name of
its generator (`jax.random.key_data`, `key_impl`), and is a key again on the other side;
scalars, strings and None as JSON; lists, tuples and dicts with string keys as tagged JSON (a
JAX array on several devices with the block each holds: `Placed`); from the learner's
process, any other pytree node JAX knows (an Equinox module, an Optax state) as a `Tree`:
a handle and its children as data, which the judge reads, passes back as that object, or
has rebuilt there with children of its own (`Tree.replaced`); anything else the learner's
process holds (a function, a class instance) as an `Opaque` handle the judge can pass back
but never look inside. Nothing is unpickled: a hostile learner process can send wrong
values, never code.

Frame: 8 bytes (header length, number of arrays), the JSON header, then each array as
8 bytes of length and its bytes.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# Numeric dtypes only: an object array would be a way to smuggle objects.
DTYPES = frozenset(
    [
        "bool",
        *(f"int{bits}" for bits in (8, 16, 32, 64)),
        *(f"uint{bits}" for bits in (8, 16, 32, 64)),
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
        "bfloat16",
    ]
)
# The generators a key may name (jax.random.key_impl): a name is never looked up freely.
KEY_IMPLS = frozenset(["threefry2x32", "rbg", "unsafe_rbg"])
MAX_HEADER_BYTES = 16 * 2**20
MAX_ARRAY_BYTES = 512 * 2**20
_FRAME = struct.Struct(">II")
_LENGTH = struct.Struct(">Q")


class WireError(Exception):
    """A message that breaks the format: the other side is broken or hostile."""


class Placed(np.ndarray):
    """An array that came back from several devices (a `jax.Array` sharded or replicated
    over them), with `placement`: for each device's shard, the device's id and the block
    it holds, as a (start, stop) pair per axis. Arrays on one device come as plain ones."""

    placement: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = ()


def _placement(item: Any) -> list[list[Any]] | None:
    """Where each shard of a JAX array on more than one device lies, else None. Read off
    JAX's own array class only: an object that merely looks like one tells nothing."""
    from jax._src.array import ArrayImpl

    if type(item) is not ArrayImpl or len(item.sharding.device_set) < 2:
        return None
    blocks = []
    for shard in item.addressable_shards:
        spans = [
            [int(index.start or 0), int(size if index.stop is None else index.stop)]
            for index, size in zip(shard.index, item.shape, strict=True)
        ]
        blocks.append([int(shard.device.id), spans])
    return blocks


@dataclass(frozen=True)
class Opaque:
    """An object that stays in the learner's process, named by a handle, with its type's
    name for messages."""

    handle: int
    type_name: str


@dataclass(frozen=True, eq=False)
class Tree(Opaque):
    """An object that stays in the learner's process and is a pytree node JAX knows (an
    Equinox module, an Optax state, a registered dataclass or named tuple): its children
    cross as data, each under its name (a field, a key, a position), readable here as
    `tree.name`, `tree["name"]` or `tree[i]`. Passed back, it is that very object again;
    `replaced` makes one that is rebuilt there with other children, by JAX's own unflatten
    (as `eqx.tree_at` would), so the judge can put its own numbers into the learner's
    object without running code there."""

    children: tuple[tuple[str, Any], ...] = ()
    changed: bool = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("children", "changed"):
            raise AttributeError(name)
        return self[name]

    def __getitem__(self, index: int | str) -> Any:
        if isinstance(index, int):
            return self.children[index][1]
        for name, value in self.children:
            if name == index:
                return value
        raise AttributeError(f"the learner's {self.type_name} has no {index!r}")

    def __len__(self) -> int:
        return len(self.children)

    def __iter__(self) -> Any:
        return iter(value for _, value in self.children)

    def names(self) -> list[str]:
        return [name for name, _ in self.children]

    def replaced(self, changes: dict[str, Any]) -> Tree:
        """This object with the children `changes` names set anew; a dict given for a child
        that is a Tree changes that child's children in turn."""
        unknown = set(changes) - set(self.names())
        if unknown:
            raise KeyError(f"the learner's {self.type_name} has no {sorted(unknown)}")
        children = tuple(
            (name, _changed(value, changes[name]) if name in changes else value)
            for name, value in self.children
        )
        return Tree(self.handle, self.type_name, children, changed=True)


def _changed(value: Any, change: Any) -> Any:
    if isinstance(value, Tree) and isinstance(change, dict):
        return value.replaced(change)
    return change


def _dtype(name: str) -> np.dtype:
    if name not in DTYPES:
        raise WireError(f"an array of dtype {name!r}")
    if name == "bfloat16":
        import ml_dtypes  # JAX's own dependency; only needed where bfloat16 travels

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def encode(value: Any, keep: Callable[[Any], Opaque] | None = None) -> tuple[Any, list[bytes]]:
    """(JSON-able document, array bytes) for `value`. `keep` turns an object that is not
    data into an `Opaque` (on the learner's side); without it such an object is an error."""
    arrays: list[bytes] = []

    def walk(item: Any) -> Any:
        if item is None or isinstance(item, bool | int | float | str):
            return item
        if isinstance(item, Tree) and item.changed:
            return {"rebuild": item.handle, "children": [[k, walk(v)] for k, v in item.children]}
        if isinstance(item, Opaque):
            return {"opaque": item.handle, "type": item.type_name}
        if keep is not None and type(item) not in (list, tuple, dict):
            children = _children(item)
            if children is not None:
                kept = keep(item)
                described = [[k, walk(v)] for k, v in children]
                return {"tree": kept.handle, "type": kept.type_name, "children": described}
        if isinstance(item, list | tuple):
            return {"list" if isinstance(item, list) else "tuple": [walk(i) for i in item]}
        if isinstance(item, dict) and all(isinstance(k, str) for k in item):
            return {"dict": [[k, walk(v)] for k, v in item.items()]}
        if is_key(item):
            import jax

            return {"key": walk(np.asarray(jax.random.key_data(item))),
                    "impl": str(jax.random.key_impl(item))}  # fmt: skip
        if isinstance(item, np.ndarray | np.generic) or _is_jax_array(item):
            array = np.asarray(item)
            if array.dtype.name not in DTYPES:
                return walk_other(item)
            arrays.append(array.tobytes())
            entry = {"array": len(arrays) - 1, "dtype": array.dtype.name, "shape": array.shape}
            placement = _placement(item) if _is_jax_array(item) else None
            return entry if placement is None else entry | {"placement": placement}
        return walk_other(item)

    def walk_other(item: Any) -> Any:
        if keep is None:
            raise WireError(f"a {type(item).__name__} cannot cross to the learner's process")
        return walk(keep(item))

    return walk(value), arrays


def _children(item: Any) -> list[tuple[str, Any]] | None:
    """`item`'s children, by name, where it is a pytree node JAX knows (None where it is a
    leaf: an array, a function, an unregistered object)."""
    if isinstance(item, np.ndarray | np.generic) or _is_jax_array(item):
        return None
    names, children, structure = _one_level(item)
    if structure.num_nodes == 1 and structure.num_leaves == 1:
        return None
    return list(zip(names, children, strict=True))


def _rebuilt(original: Any, changed: dict[str, Any]) -> Any:
    """`original` (a pytree node) with the children named in `changed` replaced: JAX's own
    unflatten, so what is built is the learner's own class again."""
    import jax

    names, children, structure = _one_level(original)
    if set(changed) - set(names):
        raise WireError(f"no child {sorted(set(changed) - set(names))[:3]} to replace")
    leaves = [changed.get(name, child) for name, child in zip(names, children, strict=True)]
    return jax.tree_util.tree_unflatten(structure, leaves)


def _one_level(node: Any) -> tuple[list[str], list[Any], Any]:
    """`node`'s children one level down: their names (a field, a dict key or a position),
    themselves, and JAX's structure of them."""
    import jax

    found, structure = jax.tree_util.tree_flatten_with_path(
        node, is_leaf=lambda child: child is not node
    )
    names = [_key_name(path[0]) if path else "" for path, _ in found]  # "": node is a leaf
    return names, [child for _, child in found], structure


def _key_name(key: Any) -> str:
    for attribute in ("name", "key", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def _is_jax_array(item: Any) -> bool:
    return type(item).__module__.startswith(("jax", "jaxlib")) and hasattr(item, "__array__")


def is_key(item: Any) -> bool:
    """Whether `item` is a JAX key array (`jax.random.key`), not its words."""
    return _is_jax_array(item) and str(getattr(item, "dtype", "")).startswith("key<")


def _key(data: Any, impl: str) -> Any:
    """A JAX key array from its words: both sides hold JAX, and a key is data."""
    if impl not in KEY_IMPLS:
        raise WireError(f"a key of an unknown generator {impl[:40]!r}")
    import jax

    try:
        return jax.random.wrap_key_data(np.asarray(data), impl=impl)
    except (TypeError, ValueError) as error:
        raise WireError(f"a key whose words do not fit {impl}: {error}") from None


def decode(
    document: Any,
    arrays: list[bytes],
    find: Callable[[Opaque], Any] | None = None,
    make_array: Callable[[np.ndarray], Any] = lambda array: array,
) -> Any:
    """The value `encode` described. `find` turns an `Opaque` back into its object (on the
    learner's side); without it an `Opaque` stays a handle. `make_array` turns each NumPy
    array into what the receiver works with (a JAX array, on the learner's side)."""

    def walk(item: Any) -> Any:
        if item is None or isinstance(item, bool | int | float | str):
            return item
        if not isinstance(item, dict) or len(item) not in (1, 2, 3, 4):
            raise WireError(f"an unknown item {str(item)[:80]!r}")
        if "list" in item:
            return [walk(i) for i in item["list"]]
        if "tuple" in item:
            return tuple(walk(i) for i in item["tuple"])
        if "dict" in item:
            return {str(k): walk(v) for k, v in item["dict"]}
        if "key" in item:
            return _key(np.asarray(walk(item["key"])), str(item["impl"]))
        if "opaque" in item:
            opaque = Opaque(int(item["opaque"]), str(item["type"]))
            return find(opaque) if find else opaque
        if "tree" in item:
            children = tuple((str(k), walk(v)) for k, v in item["children"])
            tree = Tree(int(item["tree"]), str(item["type"]), children)
            return find(tree) if find else tree
        if "rebuild" in item:
            if find is None:
                raise WireError("an object to rebuild, sent to the judge")
            original = find(Opaque(int(item["rebuild"]), ""))
            return _rebuilt(original, {str(k): walk(v) for k, v in item["children"]})
        if "array" in item:
            dtype, shape = _dtype(str(item["dtype"])), tuple(int(n) for n in item["shape"])
            data = arrays[int(item["array"])]
            if len(data) != dtype.itemsize * int(np.prod(shape, dtype=np.int64)):
                raise WireError(f"an array whose bytes do not fill shape {shape}")
            array = np.frombuffer(data, dtype).reshape(shape).copy()
            if "placement" in item:
                return _placed(array, item["placement"])
            return make_array(array)
        raise WireError(f"an unknown item {str(item)[:80]!r}")

    return walk(document)


def _placed(array: np.ndarray, placement: Any) -> Placed:
    try:
        blocks = tuple(
            (int(device), tuple((int(start), int(stop)) for start, stop in spans))
            for device, spans in placement
        )
    except (TypeError, ValueError):
        raise WireError(f"a placement {str(placement)[:80]!r}") from None
    placed = array.view(Placed)
    placed.placement = blocks
    return placed


def send(connection: socket.socket, document: Any, arrays: list[bytes]) -> None:
    header = json.dumps(document).encode()
    parts = [_FRAME.pack(len(header), len(arrays)), header]
    for data in arrays:
        parts += [_LENGTH.pack(len(data)), data]
    connection.sendall(b"".join(parts))


def receive(connection: socket.socket) -> tuple[Any, list[bytes]]:
    header_length, count = _FRAME.unpack(_exactly(connection, _FRAME.size))
    if header_length > MAX_HEADER_BYTES:
        raise WireError(f"a header of {header_length:,} bytes")
    document = json.loads(_exactly(connection, header_length))
    arrays = []
    for _ in range(count):
        (length,) = _LENGTH.unpack(_exactly(connection, _LENGTH.size))
        if length > MAX_ARRAY_BYTES:
            raise WireError(f"an array of {length:,} bytes")
        arrays.append(_exactly(connection, length))
    return document, arrays


def _exactly(connection: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = connection.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other process closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


# What the judge raises for what came back ----------------------------------------------


class LearnerError(Exception):
    """What learner code raised, as data: its class names, message and the learner's lines."""

    def __init__(self, types: list[str], message: str, frames: list[list[Any]]) -> None:
        super().__init__(f"{types[0]}: {message}" if message else types[0])
        self.types, self.message = tuple(types), message
        self.frames = [(str(file), int(line), str(text)) for file, line, text in frames]

    def is_a(self, name: str) -> bool:
        """Whether the learner's exception was of class `name` (or a subclass)."""
        return name in self.types


class GraderTampering(Exception):
    """The learner's process changed what kata's probes rely on: its observations are void."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        super().__init__(f"the submission changed the grader's own modules: {', '.join(names)}")
