"""How a protocol's typed requests travel: as documents whose "op" names the kind, their
fields beside it (kata.handoffs.starter_requests, learner_requests, chip_requests)."""

from __future__ import annotations

import dataclasses
from typing import Any


class RequestKinds:
    """A protocol's request classes (frozen dataclasses), by the name each travels under."""

    def __init__(self, **kinds: type) -> None:
        self.kinds = kinds
        self.ops = {kind: op for op, kind in kinds.items()}

    def document(self, request: Any, **extra: Any) -> dict[str, Any]:
        """`request` as it travels, its fields as they are (not copied), with `extra`."""
        fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
        return {"op": self.ops[type(request)], **fields, **extra}

    def read(self, document: Any, extra: tuple[str, ...] = ()) -> Any:
        """The request a `document` holds (its `extra` entries left out); None for one that
        is none of these kinds."""
        if not isinstance(document, dict):
            return None
        kind = self.kinds.get(str(document.get("op")))
        if kind is None:
            return None
        fields = {k: v for k, v in document.items() if k != "op" and k not in extra}
        try:
            return kind(**fields)
        except TypeError:
            return None
