"""The c10d store helpers: open torch's TCPStore, gather keys with a deadline, hold the store.

Runs in the launcher (check-in, peer probes, the end of a run) and in every torchrun worker
(``worker.world``'s agreement). This is the one place on the launcher side that imports
torch, and only inside :func:`host_store`, :func:`join_store` and :func:`torch_would_host`,
so ``ddpcheck`` starts, and the worker imports :func:`gather_keys`, without loading torch
here.
The helpers work on any object with the c10d store API (``TCPStore``, ``PrefixStore``,
``HashStore``, tests' counting store).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Hashable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

CONNECT_TIMEOUT = 3.0  # one TCP connect to the endpoint or a peer, before calling it lost

K = TypeVar("K", bound=Hashable)


def host_store(port: int, timeout: float) -> Any:
    """Start the TCPStore server on the rendezvous port (this node owns the endpoint)."""
    _quiet_torch_logs()
    from torch.distributed import TCPStore

    return TCPStore("0.0.0.0", port, is_master=True, wait_for_workers=False, multi_tenant=True,
                    timeout=timedelta(seconds=timeout))


def join_store(host: str, port: int, timeout: float) -> Any:
    """Connect to the endpoint's store as a client; TimeoutError if no store answers in time.

    A TCPStore client talking to a program that is not a store (a squatter on the port)
    waits forever whatever its timeout, so the connect runs in a daemon thread (the call
    releases the GIL) and is abandoned at the deadline.
    """
    _quiet_torch_logs()
    from torch.distributed import TCPStore

    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            box["store"] = TCPStore(host, port, is_master=False, wait_for_workers=False,
                                    timeout=timedelta(seconds=timeout))
        except Exception as exc:  # reported to the caller below
            box["error"] = exc

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout + 1)
    if "store" in box:
        return box["store"]
    if "error" in box:
        raise box["error"]
    raise TimeoutError(f"no c10d store answered within {timeout + 1:g} s")


def _quiet_torch_logs() -> None:
    """c10d warns on every client connect in a netns without reverse DNS; it is noise here."""
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")


def torch_would_host(host: str) -> bool:
    """Would a user's c10d torchrun on this machine host the store for ``host``? (torch's rule)

    torch's own matcher, ``_matches_machine_hostname`` in
    torch/distributed/elastic/rendezvous/utils.py: the name or FQDN of this machine, or an
    address of ``getaddrinfo(gethostname())``.
    """
    from torch.distributed.elastic.rendezvous.utils import _matches_machine_hostname

    try:
        return bool(_matches_machine_hostname(host))
    except OSError:  # this machine's own name does not resolve: nothing matches
        return False


def gather_keys(store: Any, keys: Mapping[K, str],
                wait: float) -> tuple[dict[K, bytes], list[K]]:
    """The keys' values that exist within ``wait`` seconds, and the names of the missing ones.

    One store ``wait`` for all the keys at once (never past the deadline) and one
    ``multi_get`` of the present ones; only when the wait times out does each key get one
    ``check``, to name who is missing. A store whose host went away raises from ``check`` or
    ``multi_get`` (RuntimeError, DistNetworkError): the caller names the host.
    """
    if not keys:
        return {}, []
    try:
        store.wait(list(keys.values()), timedelta(seconds=max(wait, 0.001)))
        missing: list[K] = []
    except RuntimeError:  # DistStoreError (a subclass): the wait timed out
        missing = [name for name, key in keys.items() if not store.check([key])]
    present = [name for name in keys if name not in missing]
    raw = store.multi_get([keys[name] for name in present]) if present else []
    return {name: bytes(value) for name, value in zip(present, raw)}, missing


def hold(store: Any, key: str, count: int, wait: float, pause: float = 0.1) -> None:
    """Keep this process (and the store it hosts) up until ``count`` clients have added 1 to
    ``key``, saying they have read what they need, or ``wait`` seconds have passed.

    One ``add(key, 0)`` per pause: bounded by time, not by the number of clients.
    """
    end = time.monotonic() + wait
    while int(store.add(key, 0)) < count and time.monotonic() < end:
        time.sleep(pause)
