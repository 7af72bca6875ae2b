"""Node check-in: every node's launcher announces itself on the rendezvous endpoint.

Runs in the launcher of a multi-node run, before torchrun. The node that owns the endpoint
address hosts a c10d TCPStore on the rendezvous port (torchrun's agents then join it as
clients, ``is_host=false``), so only that one port has to be reachable, exactly as for the
real job. Each node publishes a card (host, --nodes, run id, nproc, addresses, its own
preflight problems); the host judges the cards (:func:`judge`) and publishes one decision
(:mod:`ddpcheck.cluster.board`), so the cluster either goes on together or stops with the same
diagnosis on every node, within the rendezvous deadline instead of torchrun's 600 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from ddpcheck.cluster import messages
from ddpcheck.diagnoses import Problem, register
from ddpcheck.judgements.consistency import odd_ranks
from ddpcheck.judgements.ranklayout import NodeRanks, gaps
from ddpcheck.judgements.ranklayout import judge as judge_layout
from ddpcheck.ranges import format_ranks

NODE_MISSING = register(
    "node-missing", "nodes did not join before the rendezvous deadline",
    "the node never started ddpcheck, started it too late, or cannot reach the endpoint",
    "start ddpcheck on every node of the job (Slurm: srun --ntasks-per-node=1), check the "
    "missing node's own report, or raise --rdzv-timeout")
NODES_MISMATCH = register(
    "nodes-mismatch", "nodes were started with different --nodes",
    "the job script passes a different node count on some nodes",
    "pass the same --nodes on every node (Slurm: --nodes \"$SLURM_NNODES\")")
RUN_ID_MISMATCH = register(
    "run-id-mismatch", "nodes were started with different run ids",
    "each node derived its own --rdzv-id (e.g. from a per-node variable or the date)",
    "pass one --rdzv-id to every node (e.g. the job id)")
NPROC_MISMATCH = register(
    "nproc-mismatch", "nodes were started with different numbers of ranks per node",
    "--nproc-per-node differs across nodes (or auto found different GPU counts)",
    "pass the same --nproc-per-node everywhere, or fix the node whose GPU count differs")
LAUNCH_MISMATCH = register(
    "launch-mismatch", "nodes were started with different launch styles or init methods",
    "the job script passes a different --launch or --init-method on some nodes: their ranks "
    "would never meet in one world",
    "pass the same --launch and --init-method on every node (the ones your job uses)")
TOO_MANY_NODES = register(
    "too-many-nodes", "more nodes joined than --nodes says",
    "ddpcheck was started more than once on a node, or on nodes outside the job",
    "start exactly one ddpcheck per node, on the job's nodes only")
ENDPOINT_NOT_A_STORE = register(
    "endpoint-not-a-store", "the rendezvous port answers, but not as a c10d store",
    "another program holds the port on the endpoint host (a stale job, a web server, ...)",
    "pick a free port (--rdzv-endpoint HOST:OTHER_PORT) or stop the program holding it")
ENDPOINT_NODE_STOPPED = register(
    "endpoint-node-stopped", "ddpcheck on the endpoint node stopped before the check-in",
    "the endpoint node found a problem of its own (read its report) or was ended",
    "fix the problem the endpoint node reports, then rerun on every node")


@dataclass(frozen=True)
class NodeCard:
    """What one node's launcher tells the others before torchrun starts (a message)."""

    KIND: ClassVar[str] = "node-card"
    host: str
    nodes: int
    run_id: str
    nproc: int
    pid: int
    node_rank: int | None = None
    advertised: str = ""  # the address peers should use to reach this node
    probe_port: int = 0  # this node's ephemeral test listener (see peerprobe)
    addresses: dict[str, list[str]] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()  # this node's preflight
    fqdn: str = ""  # the name a user's torchrun agent advertises (socket.getfqdn())
    first_rank: int | None = None  # --launch spawn: this node's first rank (else None)
    world_size: int = 0  # --launch spawn: the world size this node starts its ranks with
    launch: str = ""  # how this node starts its ranks: "torchrun", "spawn env://", ...
    mtus: dict[str, int] = field(default_factory=dict)  # interface -> MTU (up interfaces)
    master: str = ""  # --launch spawn/srun: the host its ranks dial (MASTER_ADDR, tcp:// host)

    def to_json(self) -> str:
        return messages.encode(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> NodeCard:
        return messages.decode(cls, text)


def judge(cards: Sequence[NodeCard], me: NodeCard, expected_hosts: Sequence[str] = (),
          final: bool = False) -> list[Problem]:
    """Problems the cards show; ``final`` adds the nodes still missing at the deadline."""
    same = [c for c in cards if c.run_id == me.run_id]
    problems = [p for c in same for p in c.problems]
    others = [c for c in cards if c.run_id != me.run_id]
    if others:
        problems.append(RUN_ID_MISMATCH.problem(
            "; ".join(f"run id {v!r} on {_hosts([c for c in cards if c.run_id == v])}"
                      for v in sorted({c.run_id for c in cards})),
            hosts=_odd_hosts(cards, "run_id")))
    spawned = me.first_rank is not None  # uneven ranks per node are the layout's to judge
    one_launch = len({c.launch for c in same}) == 1
    if spawned and one_launch and len(same) >= me.nodes and not others:
        problems += judge_layout(_layout(same))
    for key, diag, what in (("launch", LAUNCH_MISMATCH, "launch with {}"),
                            ("nodes", NODES_MISMATCH, "started with --nodes {}"),
                            ("nproc", NPROC_MISMATCH, "start {} ranks"))[:2 if spawned else 3]:
        values = {getattr(c, key) for c in same}
        if len(values) > 1:
            problems.append(diag.problem(
                "; ".join(f"{_hosts([c for c in same if getattr(c, key) == v])} "
                          + what.format(v) for v in sorted(values)),
                hosts=_odd_hosts(same, key)))
    if len(same) > me.nodes and not others:
        problems.append(TOO_MANY_NODES.problem(
            f"{len(same)} launchers joined but --nodes is {me.nodes}: {_hosts(same)}",
            hosts=sorted({c.host for c in same})))
    if final and not problems and len(same) < me.nodes:
        problems.append(_missing(same, me, expected_hosts, spawned))
    return problems


def _missing(same: Sequence[NodeCard], me: NodeCard, expected: Sequence[str],
             spawned: bool = False) -> Problem:
    joined = sorted({c.host for c in same})
    short = {h.split(".")[0] for h in joined}
    absent = [h for h in expected if h.split(".")[0] not in short]
    n = me.nodes - len(same)
    who = ", ".join(absent) if absent else f"{n} node{'s' if n != 1 else ''} (names unknown)"
    ranks: list[int] = []
    if spawned:  # the ranks no node that joined starts: the missing nodes' share
        ranks = gaps(sorted(_layout(same), key=lambda n: n.first), me.world_size)
        who += f" (their ranks: {format_ranks(ranks)})" if ranks else ""
    return NODE_MISSING.problem(
        f"{len(same)} of {me.nodes} nodes joined within the rendezvous deadline "
        f"(joined: {', '.join(joined)}); missing: {who}", hosts=absent, ranks=ranks[:64])


def _layout(cards: Sequence[NodeCard]) -> list[NodeRanks]:
    return [NodeRanks(c.host, c.node_rank, c.first_rank or 0, c.nproc, c.world_size)
            for c in cards]


def _odd_hosts(cards: Sequence[NodeCard], key: str) -> list[str]:
    """Hosts whose value differs from the majority's: the same answer on every node."""
    _, others = odd_ranks({i: getattr(c, key) for i, c in enumerate(cards)})
    return sorted({cards[i].host for idx in others.values() for i in idx})


def _hosts(cards: Sequence[NodeCard]) -> str:
    return ", ".join(sorted({c.host for c in cards})) or "no node"
