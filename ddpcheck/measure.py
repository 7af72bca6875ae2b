"""Timed loops for the bandwidth probes: all-reduce on a group, one-way point-to-point.

Runs inside every worker. Only measures (seconds); ddpcheck.bandwidth and ddpcheck.links
turn times into rates and verdicts. Every rank of a group runs the same deterministic
schedule, so the ranks always enter the same collectives.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

MIN_P2P_BYTES = 1 << 20
MAX_P2P_BYTES = 64 << 20
P2P_TARGET_S = 0.15  # size a transfer so the link, not the per-call overhead, sets its time


def iterations(nbytes: int) -> int:
    """More iterations for small messages so each trial lasts long enough to time."""
    return max(2, min(50, (8 << 20) // max(nbytes, 1)))


def time_all_reduce(t: torch.Tensor, iters: int, backend: str, group: Any | None = None
                    ) -> float:
    """Seconds per all_reduce of t over iters calls; the slowest rank's time."""
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=group)
    if backend == "nccl":
        torch.cuda.synchronize()
    local = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64,
                         device=t.device)
    dist.all_reduce(local, op=dist.ReduceOp.MAX, group=group)  # as slow as the slowest rank
    return float(local.item())


def _signal(peer: int, device: torch.device, value: int = 0) -> None:
    dist.send(torch.tensor([value], dtype=torch.int64, device=device), peer)


def _wait(peer: int, device: torch.device) -> int:
    got = torch.zeros(1, dtype=torch.int64, device=device)
    dist.recv(got, peer)
    return int(got.item())


def one_way(rank: int, src: int, dst: int, nbytes: int, device: torch.device) -> float:
    """Time one transfer src -> dst, as seen by src (0.0 on dst).

    The receive is posted before the sender starts (MEASURING.md: an isend posted first
    halves per-direction throughput); the sender stops its clock at the receiver's ack.
    """
    buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
    if rank == dst:
        req = dist.irecv(buf, src)
        _signal(src, device)
        req.wait()
        _signal(src, device)
        return 0.0
    _wait(dst, device)
    start = time.perf_counter()
    dist.send(buf, dst)
    _wait(dst, device)
    return time.perf_counter() - start


def link_gbps(rank: int, src: int, dst: int, trials: int, device: torch.device) -> float:
    """Best one-way rate src -> dst over the trials, in GB/s (known on src; 0.0 on dst).

    A 1 MiB transfer first estimates the rate; the timed size is then chosen so that one
    transfer lasts about P2P_TARGET_S, and src tells dst the size before the trials. The
    fastest trial is the link's figure: a link never runs faster than it can, while a slower
    trial measures CPU contention on the hosts (gloo is CPU-bound), which would otherwise
    pass for a slow link.
    """
    first = one_way(rank, src, dst, MIN_P2P_BYTES, device)
    if rank == src:
        wanted = int(MIN_P2P_BYTES / max(first, 1e-6) * P2P_TARGET_S)
        size = min(MAX_P2P_BYTES, max(MIN_P2P_BYTES, 1 << max(wanted, 1).bit_length() - 1))
        _signal(dst, device, size)
    else:
        size = _wait(src, device)
    times = sorted(one_way(rank, src, dst, size, device) for _ in range(trials))
    if rank != src:
        return 0.0
    return size / times[0] / 1e9
