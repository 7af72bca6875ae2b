"""Form the world the way the user's ``init_process_group(init_method=...)`` does.

Runs inside every rank started by ``ddpcheck run --launch spawn`` (the launcher passes
WorkerSettings.init_method: env://, tcp://HOST:PORT, or file:// with a fresh file next to the
user's). init_process_group with an init_method calls torch's rendezvous handler for the
URL's scheme and takes the store it yields (torch/distributed/distributed_c10d.py:
``rendezvous_iterator = rendezvous(init_method, rank, world_size, timeout=timeout)``,
``store, rank, world_size = next(rendezvous_iterator)``, ``store.set_timeout(timeout)``).
The handlers (torch/distributed/rendezvous.py) are: env:// and tcp:// a TCPStore that rank
0 hosts on the master port (``is_master = rank == 0``, ``wait_for_workers`` left at its
default, so rank 0 waits for every rank to connect), file:// a FileStore on the path. The
same call here makes the control store and the process group form exactly as the job's.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any


def open_store(url: str, rank: int, world_size: int, timeout: float) -> Any:
    """The store the init method's rendezvous handler gives this rank (bounded by timeout)."""
    import torch.distributed as dist

    wait = timedelta(seconds=timeout)
    store, _, _ = next(dist.rendezvous(url, rank=rank, world_size=world_size, timeout=wait))
    store.set_timeout(wait)  # file:// takes no timeout in its handler: FileStore's is 300 s
    return store


def describe(url: str | None, env: Mapping[str, str]) -> str:
    """Where this rank forms its world, for messages: the URL, or MASTER_ADDR:MASTER_PORT."""
    master = f"{env.get('MASTER_ADDR', '?')}:{env.get('MASTER_PORT', '?')}"
    if not url:
        return master
    return f"{url} ({master})" if url.startswith("env://") else url
