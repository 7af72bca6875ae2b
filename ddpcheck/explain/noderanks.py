"""Two nodes that both took node rank 0: what torchrun's agents print when --node-rank repeats.

Runs inside ``ddpcheck explain`` (a pure reader of log lines), before the ordering
(``firstfailure.refine``). Source: torch/distributed/elastic/agent/server/api.py
``_assign_worker_ranks`` (torch 2.x): every agent writes ``torchelastic/role_info/<group
rank>`` to the store, and only the agent of group rank 0 (``if group_rank == 0``) gathers
``role_info/0`` .. ``role_info/<nnodes-1>`` with ``store.multi_get``; a key that never comes
ends that wait with c10d's ``DistStoreError: wait timeout after Nms, keys: /<run id>/
torchelastic/role_info/0, /<run id>/torchelastic/role_info/1`` (TCPStore.cpp).

Under the static rendezvous (``--master-addr``/``--master-port``, no ``--rdzv-backend``;
torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py) the group rank IS
``--node-rank``, and both agents connect to the store at the master address. So that gather
timing out in the consoles of two different nodes means two agents were group rank 0: two
nodes were started with the same ``--node-rank`` (a job script that hard-codes it, or reads a
variable that is 0 everywhere). A real run: tests/data/explain/runs/s30-netns-same-node-rank.

One console alone does not tell: the node whose key is missing may have used another rank,
or died between the rendezvous and that write; nothing is said then. Nor do two copies of
one console (the same lines under two names: a file given twice, a Slurm .out copied beside
its original).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import load_catalogue
from ddpcheck.explain.causality import CAUSE, Explained
from ddpcheck.explain.reader import Record

NEXT = ("echo the launch line on every node before it runs (set -x): each node's --node-rank "
        "must differ")
# The group-rank-0 agent's gather: the key list starts at role_info/0, or the traceback shows
# the gather's own line (torch 2.5 ends that wait in "DistNetworkError: failed to format addr,
# unknown family=0", recorded: runs-torch2.5/s30-netns-same-node-rank). torch <= 2.2 gathered
# on every agent (``_share_and_gather``): nothing of theirs is read here.
GATHER = re.compile(r"wait timeout after \d+ ?ms, keys: \S*torchelastic/role_info/0\b|"
                    r"^\s*role_infos_bytes = store\.multi_get\(")


def refine(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """The collective/store timeout that the gather printed, read as two nodes at rank 0."""
    gathers = [r for r in records if GATHER.search(r.text)]
    if len({r.source for r in gathers}) < 2 or len(_distinct_logs(records, gathers)) < 2:
        return found
    at = {f"{r.source}:{r.lineno}" for r in gathers}
    timeout = next((e for e in found if not e.problem.consequence_of
                    and at & set(e.evidence)), None)
    files = sorted({r.source for r in gathers})
    problem = load_catalogue()["rank-overlap"].problem(
        f"{len(files)} launchers each waited as node rank 0 for every node's role_info "
        f"({', '.join(files)}): {gathers[0].text.strip()[:200]}",
        cause="two nodes were started with the same --node-rank (0): under torchrun's static "
              "rendezvous (--master-addr/--master-port) the node rank is the agent's group "
              "rank, and only group rank 0 gathers torchelastic/role_info/0..N-1, so two "
              "agents waited for a role_info/1 that no node writes; their workers would have "
              "had the same global ranks",
        fix="give each node its own --node-rank, 0 to nnodes-1 (Slurm: --node-rank "
            "$SLURM_NODEID; PBS/LSF: the node's index in the host file), or use --rdzv-backend "
            "c10d --rdzv-endpoint HOST:PORT, which numbers the nodes itself",
        hosts=timeout.problem.hosts if timeout else ())
    evidence = tuple(f"{r.source}:{r.lineno}" for r in gathers)[:4]
    if timeout is None:  # the wait ended in an error no rule reads: the gather is the root
        return [*found, Explained(problem, gathers[0], True, NEXT, evidence, CAUSE)]
    return [replace(e, problem=problem, root=True, grade=CAUSE, next_run=NEXT,
                    evidence=evidence) if e is timeout else e for e in found]


def _distinct_logs(records: Sequence[Record], gathers: Sequence[Record]) -> set[tuple[str, ...]]:
    """The different texts among the files that printed the gather: two names for the same
    lines are one node's console."""
    sources = {r.source for r in gathers}
    lines: dict[str, list[str]] = {s: [] for s in sources}
    for r in records:
        if r.source in lines:
            lines[r.source].append(r.text)
    return {tuple(v) for v in lines.values()}
