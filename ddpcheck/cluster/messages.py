"""The launchers' messages to each other, in one typed, versioned JSON form.

Runs in the launcher of every node of a multi-node run. Like the ranks' events
(``ddpcheck.results``), a message is a frozen dataclass with a ``KIND``; on the wire it is
``{"message": KIND, "version": VERSION, **fields}`` with its problems as Problem dicts.
Reading is lenient the same way: unknown fields are ignored and missing ones take their
defaults, so a node of an older or newer ddpcheck still reads; a message of another kind
is refused (ValueError), never read as this one. The messages: this node's check-in card
(``checkin.NodeCard``), the endpoint node's check-in decision (``board.CheckinDecision``)
and each node's run outcome (``ending.Outcome``). Fields are encoded by the same function
as the rank events' (``results.record_fields``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, TypeVar

from ddpcheck.diagnoses import Problem
from ddpcheck.results import record_fields

VERSION = 1
T = TypeVar("T")


def encode(message: Any) -> str:
    """The message as its JSON text on the store."""
    return json.dumps({"message": message.KIND, "version": VERSION, **record_fields(message)})


def decode(cls: type[T], text: str | bytes,
           convert: Mapping[str, Callable[[Any], Any]] | None = None) -> T:
    """The typed message of ``cls`` read from ``text``; ``convert`` maps a field's JSON value
    to its type (problems are converted always). Raises ValueError on another kind."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"not a {cls.KIND} message")  # type: ignore[attr-defined]
    kind = data.get("message", cls.KIND)  # type: ignore[attr-defined]
    if kind != cls.KIND:  # type: ignore[attr-defined]
        raise ValueError(f"expected a {cls.KIND} message, got {kind!r}")  # type: ignore
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in data or data[f.name] is None:
            continue
        value = data[f.name]
        if f.name == "problems":
            value = tuple(Problem.from_dict(p) for p in value if isinstance(p, dict))
        elif convert and f.name in convert:
            value = convert[f.name](value)
        values[f.name] = value
    return cls(**values)
