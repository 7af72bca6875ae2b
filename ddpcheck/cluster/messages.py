"""The launchers' messages to each other, in one typed, versioned JSON form.

Runs in the launcher of every node of a multi-node run. Like the ranks' events
(``ddpcheck.results``), a message is a frozen dataclass with a ``KIND``; on the wire it is
``{"message": KIND, "version": VERSION, **fields}`` with its problems as Problem dicts.
Reading is lenient the same way: unknown fields are ignored and missing ones take their
defaults, so a node of an older or newer ddpcheck still reads; a message of another kind
is refused (ValueError), never read as this one. The messages: this node's check-in card
(``checkin.NodeCard``), the endpoint node's check-in decision (``board.CheckinDecision``)
and each node's run outcome (``ending.Outcome``). Fields are encoded by the same function
as the rank events' (``results.record_fields``) and read by the same one
(``results.read_fields``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ddpcheck.results import read_fields, record_fields

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
    return cls(**read_fields(cls, data, convert))
