"""Timed loops for the bandwidth probes: all-reduce on a group, one-way point-to-point.

Runs inside every worker. Only measures (seconds); ddpcheck.judgements.bandwidth and
ddpcheck.judgements.links turn times into rates and verdicts. Every rank of a group runs the
same deterministic schedule, so the ranks always enter the same collectives.

Point-to-point follows NCCL's documented semantics, and the same code runs on gloo:

- ncclSend/ncclRecv "is blocking for the GPU. If multiple ncclSend() and ncclRecv()
  operations need to progress concurrently to complete, they must be fused within a
  ncclGroupStart()/ncclGroupEnd() section"
  (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/api/p2p.html, and
  .../docs/usage/p2p.html: "merge calls that need to progress concurrently to avoid
  deadlocks"). So every exchange of tensors goes through :func:`exchange`, one
  ``batch_isend_irecv`` call (torch wraps it in ncclGroupStart/End), and no rank ever
  posts a receive and then blocks on a send to the same peer.
- Coordination that is not data (ready, the chosen size) goes through the c10d store, never
  through the backend under test: a store wait has a deadline and cannot deadlock a stream.
- torch's ProcessGroupNCCL runs a *batched* p2p on the group's own communicator ("For batch
  P2P, we need to treat it like a collective when selecting communicator"), while a lone
  send/recv creates a 2-rank communicator per pair (pytorch/pytorch,
  torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, pointToPoint): batching also keeps a
  leader at one communicator instead of N-1.
- torch's batch_isend_irecv docstring: with NCCL the current device must be set, and a
  batch that involves only some ranks is allowed once the group's communicator exists;
  World.init_process_group creates it eagerly (``device_id``) and the collectives stage
  runs on it first.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

MIN_P2P_BYTES = 1 << 20
MAX_P2P_BYTES = 64 << 20
P2P_TARGET_S = 0.15  # size a transfer so the link, not the per-call overhead, sets its time
STORE_WAIT_S = 120.0  # a peer that never says "ready" fails the probe instead of hanging it


NCCL_ITERS, NCCL_WARMUP = 20, 5  # nccl-tests' defaults (-n 20, -w 5)
MIN_TIMED_ITERS = 5  # judgements.bandwidth.NCCL_JUDGE_RULE.min_iters
TRIAL_BUDGET_S = 1.0  # fewer than NCCL_ITERS when one iteration is slow (sockets)


def iterations(nbytes: int, backend: str = "gloo", one_iter_s: float | None = None) -> int:
    """Iterations per timed trial of an all-reduce of nbytes.

    gloo (CPU): more iterations for small messages so each trial lasts long enough to time,
    2 from 4 MiB up (the CPU suite stays fast). NCCL: nccl-tests' 20, or fewer (never under
    MIN_TIMED_ITERS) when one iteration (one_iter_s, timed in the warm-up and agreed by every
    rank) is so slow that 20 would last over TRIAL_BUDGET_S: a 1 GB/s socket fallback.
    """
    if backend != "nccl":
        return max(2, min(50, (8 << 20) // max(nbytes, 1)))
    if not one_iter_s or one_iter_s <= 0:
        return NCCL_ITERS
    return max(MIN_TIMED_ITERS, min(NCCL_ITERS, int(TRIAL_BUDGET_S / one_iter_s)))


def warm_up(t: torch.Tensor, backend: str, group: Any | None = None) -> float:
    """Untimed warm-up all-reduces (5 on NCCL as nccl-tests, 2 on gloo), then one timed
    iteration: seconds, the slowest rank's, the same on every rank of the group."""
    for _ in range(NCCL_WARMUP if backend == "nccl" else 2):
        dist.all_reduce(t, group=group)
    return time_all_reduce(t, 1, backend, group)


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


def exchange(sends: Sequence[tuple[torch.Tensor, int]],
             recvs: Sequence[tuple[torch.Tensor, int]]) -> None:
    """Send and receive tensors (global peer ranks) as one group, and wait for all of it.

    One batch_isend_irecv: under NCCL the sends and receives progress together (no order
    between them can deadlock); on gloo it posts the same isend/irecv pairs. Waiting on a
    CUDA request only orders the current stream, so a CUDA receive is synchronised too.
    """
    ops = [dist.P2POp(dist.irecv, t, peer) for t, peer in recvs]
    ops += [dist.P2POp(dist.isend, t, peer) for t, peer in sends]
    if not ops:
        return
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    if ops[0].tensor.is_cuda:
        torch.cuda.synchronize(ops[0].tensor.device)


def _store_wait(store: Any, key: str) -> None:
    store.wait([key], timedelta(seconds=STORE_WAIT_S))


def one_way(rank: int, src: int, dst: int, nbytes: int, device: torch.device, store: Any,
            key: str) -> float:
    """Time one transfer src -> dst, as seen by src (0.0 on dst).

    dst posts its receive and says "ready" through the store (a receive posted before the
    send keeps gloo at full rate: measured on veth at a 1 Gbit/s limit, posting the send
    first halved the rate, 0.52 vs 0.96 Gbit/s); src starts its clock at "ready" and stops it
    when dst's ack arrives. The transfer and the ack are two separate batches in one order
    on both ranks, so neither rank waits for something queued behind its own operation.
    """
    buf = torch.empty(nbytes, dtype=torch.uint8, device=device)
    ack = torch.zeros(1, dtype=torch.int64, device=device)
    if rank == dst:
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.irecv, buf, src)])
        store.set(f"{key}/ready", "1")
        for req in reqs:
            req.wait()
        exchange([(ack, src)], [])
        return 0.0
    _store_wait(store, f"{key}/ready")
    start = time.perf_counter()
    exchange([(buf, dst)], [])
    exchange([], [(ack, dst)])
    return time.perf_counter() - start


def link_gbps(rank: int, src: int, dst: int, trials: int, device: torch.device, store: Any,
              key: str) -> float:
    """Best one-way rate src -> dst over the trials, in GB/s (known on src; 0.0 on dst).

    A 1 MiB transfer first estimates the rate; the timed size is then chosen so that one
    transfer lasts about P2P_TARGET_S, and src tells dst the size through the store. The
    fastest trial is the link's figure: a link never runs faster than it can, while a slower
    trial measures CPU contention on the hosts (gloo is CPU-bound), which would otherwise
    pass for a slow link. `key` must be unique to this (src, dst) measurement.
    """
    first = one_way(rank, src, dst, MIN_P2P_BYTES, device, store, f"{key}/probe")
    if rank == src:
        wanted = int(MIN_P2P_BYTES / max(first, 1e-6) * P2P_TARGET_S)
        size = min(MAX_P2P_BYTES, max(MIN_P2P_BYTES, 1 << max(wanted, 1).bit_length() - 1))
        store.set(f"{key}/size", str(size))
    else:
        _store_wait(store, f"{key}/size")
        size = int(store.get(f"{key}/size"))
    times = sorted(one_way(rank, src, dst, size, device, store, f"{key}/{i}")
                   for i in range(trials))
    if rank != src:
        return 0.0
    return size / times[0] / 1e9
