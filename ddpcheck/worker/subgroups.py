"""Communicators the probes share, made once per run, and the bounded set of broadcast roots.

Runs inside every worker. At 1,024 nodes a probe must never make one blocking communicator
per pair or per node on every rank: every ``new_group`` called by all ranks is a store barrier
over the whole world (and, with ``device_id``, an NCCL split over all ranks). So:

- the node groups and the leader group (lowest rank of each node) are made once, on first
  use, and reused by the link stage and the intra/cross-node all-reduce;
- under NCCL with a device bound to the default group they come from ``split_group`` (one
  split for all nodes, one for the leaders: 2 communicator creations whatever N);
- otherwise each rank calls ``new_group`` only for the groups it belongs to, with
  ``use_local_synchronization=True`` (torch: "non-member ranks don't need to call into API
  and don't join the barrier"): 1 node group per rank, +1 leader group per leader;
- every group gets the run's probe deadline as its timeout (torch's default is 10 or 30
  minutes, far past any ddpcheck deadline).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch.distributed as dist

BROADCAST_ROOTS_CAP = 64  # broadcast roots at most: first, last, then node leaders in order


@dataclass(frozen=True)
class Layout:
    """The nodes in leader order and each node's ranks (from the hello's layout)."""

    hosts: tuple[str, ...]
    ranks: dict[str, tuple[int, ...]]

    @property
    def leaders(self) -> list[int]:
        return [self.ranks[h][0] for h in self.hosts]


def layout(world: Any) -> Layout:
    """Hosts in leader order and {host: its ranks}; the leader of a host is its lowest rank."""
    by_host: dict[str, list[int]] = {}
    for rank in range(world.world_size):
        by_host.setdefault(world.hosts_by_rank.get(rank, f"rank{rank}"), []).append(rank)
    hosts = tuple(sorted(by_host, key=lambda h: by_host[h][0]))
    return Layout(hosts, {h: tuple(by_host[h]) for h in hosts})


@dataclass(frozen=True)
class NodeGroups:
    """This rank's node group and, on a leader, the leader group (None elsewhere)."""

    node: Any
    leaders: Any


_MADE: dict[tuple[int, int, int], NodeGroups] = {}


def node_groups(world: Any, lay: Layout) -> NodeGroups:
    """This rank's node group and the leader group, made once per process and reused."""
    key = (id(world), world.rank, world.world_size)
    if key not in _MADE:
        _MADE[key] = _make(world, lay)
    return _MADE[key]


def _make(world: Any, lay: Layout) -> NodeGroups:
    timeout = timedelta(seconds=world.timeout)
    mine = next(h for h in lay.hosts if world.rank in lay.ranks[h])
    leaders = lay.leaders
    if _can_split():
        node = dist.split_group(split_ranks=[list(lay.ranks[h]) for h in lay.hosts],
                                timeout=timeout)
        lead = dist.split_group(split_ranks=[leaders], timeout=timeout)
        return NodeGroups(node, lead)
    node = member_group(world.rank, list(lay.ranks[mine]), timeout)
    return NodeGroups(node, member_group(world.rank, leaders, timeout))


def member_group(rank: int, ranks: list[int], timeout: timedelta) -> Any:
    """The group of ``ranks`` (None on a rank outside it), made with a group-local barrier.

    Every rank calls this for every group, in the same order. Members call ``new_group``
    with ``use_local_synchronization=True``; the others make a group of themselves alone
    (no peer, no barrier) in its place, because torch names a locally synchronised group
    from its ranks *and the number of groups this process has made* (``_hash_ranks_to_str``
    in torch/distributed/distributed_c10d.py): without the stand-in, the members of a later
    group would have made different numbers of groups and name it differently.
    """
    if rank in ranks:
        return dist.new_group(ranks, timeout=timeout, use_local_synchronization=True)
    dist.new_group([rank], timeout=timeout, use_local_synchronization=True)
    return None


def _can_split() -> bool:
    """split_group needs a device bound to the default group (NCCL with device_id)."""
    if not hasattr(dist, "split_group") or not dist.is_initialized():
        return False
    pg = dist.distributed_c10d._get_default_group()
    return getattr(pg, "bound_device_id", None) is not None


def broadcast_roots(world_size: int, leaders: list[int], cap: int = BROADCAST_ROOTS_CAP
                    ) -> list[int]:
    """The ranks the broadcast probe sends from: first, last, then node leaders, up to cap.

    One broadcast per root, in this order on every rank: O(min(nodes, cap)) broadcasts
    instead of one per rank (8,192 sequential broadcasts at 8,192 ranks). Every node's
    path out is tried up to ``cap`` nodes; above it the leaders are taken evenly spaced.
    """
    roots = [0, world_size - 1] if world_size > 1 else [0]
    rest = [r for r in leaders if r not in roots]
    room = max(cap - len(roots), 0)
    if len(rest) > room:
        step = len(rest) / room if room else 0
        rest = [rest[int(i * step)] for i in range(room)]
    return sorted(set(roots + rest))
