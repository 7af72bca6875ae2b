"""After a spawn-style launch: name a world that never formed through the init method.

Runs in the launcher of every node with --launch spawn/srun, after its ranks ended (pure
over the exit files the per-rank wrappers wrote). Without a torchrun agent nothing else
holds the world together at its start: rank 0 hosts the store and waits for every rank
(env:// and tcp://: TCPStore with ``wait_for_workers``), the others connect to the master
address. A dropped master port or a rank that never started ends each rank's connect at
its deadline, and the rank's session records what it saw in its exit file
(``ExitStatus.world_connect``); this turns those exits into one problem per node, with what
each rank saw, instead of bare exit codes.
"""

from __future__ import annotations

from ddpcheck.diagnoses import LAUNCH_FAILED, RANK_EXITED, Problem, register
from ddpcheck.judgements.readiness import SESSION_ERROR
from ddpcheck.ranges import format_ranks
from ddpcheck.results import ExitStatus

GENERIC = (LAUNCH_FAILED.code, RANK_EXITED.code, SESSION_ERROR.code)  # what it replaces

WORLD_NOT_FORMED = register(
    "world-not-formed", "the ranks could not form the world through the init method",
    "rank 0's store at the master address is not reachable from the other ranks (a firewall "
    "drops the master port, or the address is on a network they cannot reach), or ranks of "
    "the world never started (rank 0 waits for every one of them)",
    "open the master port on the node of rank 0 to every node, or set MASTER_ADDR (the "
    "tcp:// host) to an address every node reaches; check that every node started its ranks")


def world_not_formed(exits: dict[int, ExitStatus], node: str,
                     master: tuple[str, int] | None) -> Problem | None:
    """One problem for this node's ranks that ended trying to form the world, or None."""
    failed = {r: ex for r, ex in sorted(exits.items()) if _reason(ex)}
    if not failed:
        return None
    seen = sorted({_reason(ex) for ex in failed.values()})
    who = f"rank{'s' if len(failed) > 1 else ''} {format_ranks(failed)} on {node}"
    fix = (f"open TCP port {master[1]} on {master[0]} (the node of rank 0) to every node, "
           f"or set MASTER_ADDR to an address every node reaches; check that every node "
           "started its ranks") if master else ""
    return WORLD_NOT_FORMED.problem(f"{who} did not form the world: {'; '.join(seen)[:600]}",
                                    fix=fix, hosts=[node], ranks=list(failed),
                                    stage="rendezvous")


def replace_generic(problems: list[Problem], found: Problem) -> list[Problem]:
    """The specific problem first; the generic exits of the same ranks dropped."""
    ranks = set(found.ranks)
    kept = [p for p in problems
            if not (p.code in GENERIC and (not p.ranks or set(p.ranks) <= ranks))]
    return [found, *kept]


def _reason(ex: ExitStatus) -> str:
    """What the rank saw: "env:// (node0:29790) within 8 s: Timed out after ..."."""
    return ex.world_connect
