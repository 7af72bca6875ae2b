"""Parsing of setting values with errors that name where a bad value came from.

Pure; shared by the launcher's config, the scheduler's variables and the worker's settings,
with the one host:port writer (:func:`join_host_port`, the inverse of :func:`endpoint`).
Every error is a UsageError with one line such as "--nodes: expected a positive integer,
got 'abc'" or "DDPCHECK_NODES=abc (environment): expected a positive integer".
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")


class UsageError(ValueError):
    """Bad input from a flag, an environment variable or the job's settings (exit 2)."""


def convert(source: str, raw: str, parse: Callable[[str], T]) -> T:
    """Apply parse to raw, turning any ValueError into a UsageError naming the source."""
    try:
        return parse(raw)
    except ValueError as exc:
        where = source if source.startswith("-") else f"{source}={raw!r} (environment)"
        shown = f", got {raw!r}" if source.startswith("-") and repr(raw) not in str(exc) else ""
        raise UsageError(f"{where}: {exc}{shown}") from None


def _bounded(kind: Callable[[str], Any], expected: str,
             ok: Callable[[Any], bool]) -> Callable[[str], Any]:
    """A parser of int or float values that must satisfy ok; errors say what was expected."""
    def parse(raw: str) -> Any:
        try:
            value = kind(raw.strip())
        except ValueError:
            raise ValueError(f"expected {expected}") from None
        if not ok(value):
            raise ValueError(f"expected {expected}")
        return value
    return parse


def _digits(raw: str) -> int:
    """A plain run of digits, as schedulers write their counts (no sign, no point)."""
    if not raw.isdigit():
        raise ValueError("not digits")
    return int(raw)


INF = float("inf")
positive_int = _bounded(int, "a positive integer", lambda v: v >= 1)
non_negative_int = _bounded(int, "an integer >= 0", lambda v: v >= 0)
positive_float = _bounded(float, "a number of seconds > 0", lambda v: 0 < v < INF)
positive_number = _bounded(float, "a number > 0", lambda v: 0 < v < INF)
ratio = _bounded(float, "a ratio between 0 and 1", lambda v: 0 < v < 1)
# the scheduler's variables (SLURM_NODEID, MASTER_PORT, ...): digits only
whole_number = _bounded(_digits, "a whole number", lambda v: v >= 0)
positive_count = _bounded(_digits, "a positive count", lambda v: v >= 1)
port_number = _bounded(_digits, "a port number 1-65535", lambda v: 0 < v < 65536)


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def byte_size(raw: str) -> int:
    """A size in bytes: 512, 20G, 1.5T, 300MiB (binary units, as df -h writes them)."""
    text = raw.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1:] if text[-1:] in _UNITS and text[-1:] else ""
    number = text[:-1] if unit else text
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        raise ValueError("expected a size such as 512M, 20G or 1.5T") from None
    if not 0 < value < INF:
        raise ValueError("expected a size > 0, such as 512M, 20G or 1.5T")
    return int(value)


def boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("", "0", "false", "no", "off"):
        return False
    raise ValueError("expected 1/0, true/false, yes/no or on/off")


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


def join_host_port(host: str, port: int | None) -> str:
    """"host:port" ("[v6]:port" for IPv6), or the host alone when there is no port: what
    :func:`endpoint` reads back."""
    if port is None:
        return host
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
