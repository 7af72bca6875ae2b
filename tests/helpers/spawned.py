"""Two spawned ranks for the point-to-point tests (world tier on gloo, GPU tier on NCCL).

Test side only. ``run_ranks`` starts ``worker(rank, port, out)`` in spawned processes, waits
with a deadline, kills what is still running, and returns what each rank put in ``out``;
ranks still running at the deadline are a deadlock and fail the test.
"""

from __future__ import annotations

import socket
from typing import Any, Callable

import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(worker: Callable[..., None], timeout: float, nprocs: int = 2) -> dict[int, Any]:
    with mp.Manager() as manager:
        out = manager.dict()
        ctx = mp.start_processes(worker, args=(free_port(), out), nprocs=nprocs, join=False,
                                 start_method="spawn")
        for p in ctx.processes:
            p.join(timeout=timeout)
        alive = [p.pid for p in ctx.processes if p.is_alive()]
        for p in ctx.processes:
            if p.is_alive():
                p.kill()
        assert not alive, f"ranks {alive} still running after {timeout:g} s: a p2p deadlock"
        return dict(out)
