"""Parsing of setting values with errors that name where a bad value came from.

Pure; shared by the launcher's config and the worker's settings. Every error is a
UsageError with one line such as "--nodes: expected a positive integer, got 'abc'" or
"DDPCHECK_NODES=abc (environment): expected a positive integer".
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")


class UsageError(ValueError):
    """Bad input from a flag, an environment variable or the job's settings (exit 2)."""


def convert(source: str, raw: str, parse: Callable[[str], T]) -> T:
    """Apply parse to raw, turning any ValueError into a UsageError naming the source."""
    try:
        return parse(raw)
    except ValueError as exc:
        where = source if source.startswith("-") else f"{source}={raw!r} (environment)"
        shown = f", got {raw!r}" if source.startswith("-") else ""
        raise UsageError(f"{where}: {exc}{shown}") from None


def positive_int(raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError("expected a positive integer") from None
    if value < 1:
        raise ValueError("expected a positive integer")
    return value


def non_negative_int(raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError("expected an integer >= 0") from None
    if value < 0:
        raise ValueError("expected an integer >= 0")
    return value


def positive_float(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError("expected a number of seconds > 0") from None
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError("expected a number of seconds > 0")
    return value


def positive_number(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError("expected a number > 0") from None
    if not 0 < value < float("inf"):
        raise ValueError("expected a number > 0")
    return value


def ratio(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError("expected a ratio between 0 and 1") from None
    if not 0 < value < 1:
        raise ValueError("expected a ratio between 0 and 1")
    return value


def choice(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return value
    return parse


def endpoint(raw: str) -> tuple[str, int]:
    """Parse HOST:PORT (IPv6 as [addr]:port); the port must be 1-65535."""
    text = raw.strip()
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise ValueError("expected HOST:PORT")
    if host.startswith("["):
        if not host.endswith("]") or len(host) < 3:
            raise ValueError("expected HOST:PORT (IPv6 as [addr]:PORT)")
        host = host[1:-1]
    elif ":" in host:
        raise ValueError("write an IPv6 address as [addr]:PORT")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("expected HOST:PORT with a port from 1 to 65535")
    return host, int(port)
