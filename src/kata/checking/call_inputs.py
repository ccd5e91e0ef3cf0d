"""What each learner call was given, kept with the arrays it returned, so that a value check
can tell a learner "your result is your input" (`unchanged_input_note`).

A dropped `x.at[0].set(v)` result, an updated copy of `m.diagonal()`, a `p -= lr * g` on a
loop variable: each returns the argument as it came, and a bare "wrong value" hides that.
`remember` is called by every learner call (kata.checking.learner_calls), so each check
knows the inputs behind a result without naming them; a result the check built itself, or
took apart before comparing, is found in no call, and nothing is claimed about it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import jax
import numpy as np

# Results of the latest calls only: a check compares what it just got, and each entry keeps
# its arrays alive (id() is reused once an object is freed, so the object is kept and
# compared by identity too).
REMEMBERED_RESULTS = 256
_inputs_by_result: OrderedDict[int, tuple[Any, list[tuple[str, Any]]]] = OrderedDict()

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")

# Said as JAX's rules, under an "if": the equality is seen, the code that made it is not.
WHY_UNCHANGED = (
    "if your code updates it, keep what the update returns. JAX arrays never change in "
    "place: `x.at[i].set(v)` returns a new array and leaves `x` as it was (keep it: "
    "`x = x.at[i].set(v)`); `p -= lr * g` rebinds the "
    "local name `p` only, never the array in the dict or list it came from; and a slice or "
    "`m.diagonal()` is a new array, not a view of `m`, so updating it leaves `m` as it was"
)


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray | jax.Array) and np.ndim(value) > 0


def _labelled_arrays(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[tuple[str, Any]]:
    """Each array among the arguments, named as the learner knows it: `your second
    argument`, `your argument lr`, `your first argument's ['w1']`."""
    named = [
        (f"your {ORDINALS[i]} argument" if i < len(ORDINALS) else f"your argument {i + 1}", a)
        for i, a in enumerate(args)
    ] + [(f"your argument {name}", value) for name, value in kwargs.items()]
    found = []
    for label, value in named:
        leaves = jax.tree_util.tree_flatten_with_path(value)[0]
        for path, leaf in leaves:
            if _is_array(leaf):
                found.append((label + (f"'s {jax.tree_util.keystr(path)}" if path else ""), leaf))
    return found


def remember(args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
    """Keep the arrays `args` and `kwargs` held with each array of `result`."""
    try:  # a JAX array never changes: read only when a check's value is wrong; a NumPy
        # one the check may change after the call: copied now
        inputs = [
            (label, leaf.copy() if isinstance(leaf, np.ndarray) else leaf)
            for label, leaf in _labelled_arrays(args, kwargs)
        ]
        outputs = [leaf for leaf in jax.tree.leaves(result) if _is_array(leaf)]
    except Exception:  # an explanation is extra: what cannot be read is not remembered
        return
    if not inputs:
        return
    for output in outputs:
        _inputs_by_result[id(output)] = (output, inputs)
        _inputs_by_result.move_to_end(id(output))
    while len(_inputs_by_result) > REMEMBERED_RESULTS:
        _inputs_by_result.popitem(last=False)


def inputs_of(result: Any) -> list[tuple[str, Any]]:
    """The labelled input arrays of the call that returned `result`; none for a value no
    remembered call returned."""
    entry = _inputs_by_result.get(id(result))
    return entry[1] if entry is not None and entry[0] is result else []


def _informative(values: np.ndarray) -> bool:
    """Whether an equality with these input values can be no coincidence: some value is
    not a whole number (zeros, ones and counts are what wrong code computes too; a random
    float copied bit for bit is not)."""
    finite = values[np.isfinite(values)]
    return bool(np.any(finite != np.round(finite)))


def unchanged_input_note(
    result: Any, got: np.ndarray, want: np.ndarray, rtol: float, atol: float
) -> str:
    """What `got` (a wrong value, `result` as returned) keeps of its call's inputs, if it is
    exactly one of them, or holds one's values, bit for bit, wherever the answer differs
    from it and is right wherever the answer is that input's; else "". Only equality is
    claimed, never a cause: the causes follow as JAX's rules (WHY_UNCHANGED), or, where it
    also changed what the answer keeps, that the change went elsewhere."""
    for label, array in inputs_of(result):
        if np.shape(array) != got.shape:
            continue
        try:
            given = np.asarray(array, dtype=np.float64)
        except Exception:  # a donated array is deleted: nothing to compare
            continue
        if np.array_equal(got, given) and _informative(given):
            return f". Your result is {label}, unchanged: {WHY_UNCHANGED}"
        to_change = ~np.isclose(want, given, rtol=rtol, atol=atol, equal_nan=True)
        kept = given[to_change]
        if kept.size and np.array_equal(got[to_change], kept) and _informative(kept):
            return _kept_where_it_changes(label, got, want, given, to_change, rtol, atol)
    return ""


def _kept_where_it_changes(
    label: str,
    got: np.ndarray,
    want: np.ndarray,
    given: np.ndarray,
    to_change: np.ndarray,
    rtol: float,
    atol: float,
) -> str:
    """`got` holds `given`'s values wherever the answer changes them: a result that is right
    everywhere else was not updated in place (WHY_UNCHANGED); one that also changed what the
    answer keeps made its change elsewhere (an inverted mask, another index), where the
    paragraph on updating in place would name the wrong cause."""
    first = tuple(int(i) for i in np.argwhere(to_change)[0])
    where = (
        f"Wherever the answer differs from {label} ({int(to_change.sum())} of {given.size} "
        f"elements, the first at index {first}), your result still holds its values"
    )
    moved = ~to_change & ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    if not moved.any():
        return f". {where}, unchanged: {WHY_UNCHANGED}"
    elsewhere = tuple(int(i) for i in np.argwhere(moved)[0])
    return (
        f". {where}; and it changed {int(moved.sum())} elements the answer keeps as they "
        f"were (the first at index {elsewhere}): the change went to other elements than the "
        "answer's. Is a condition or mask inverted, or an index or row off by one?"
    )
