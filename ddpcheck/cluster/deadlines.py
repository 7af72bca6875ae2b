"""Deadlines that grow with the world: what ranks wait on, modelled from its cost.

Pure arithmetic, no torch: imported by every worker (``worker.world``, ``worker.plugin``) and
by the launcher's end of run (``cluster.ending``). A deadline fixed
in seconds is wrong at one end of the scale: too long to report a dead rank quickly in a
small world, too short for rank 0 to read 8,192 payloads in a large one, which ended runs
``verdict-unknown`` merely because the world was large. Every agreement deadline is

    base + ranks x PER_RANK_S + ranks x bytes_per_rank / STORE_BYTES_PER_S

and the probe deadline adds ``rounds x ROUND_S`` for the link stage and
``nodes x PER_NODE_S`` for the node/leader communicators. At the end of the run the
launchers wait ``base + nodes x PER_NODE_S`` for each other's outcomes, and the nodes other
than rank 0's wait for its verdict ``base + nodes x PER_NODE_S + final_gather(ranks) +
ranks x REPORT_PER_RANK_S`` (rank 0's node gathers and reads every rank's events and builds
the report after the others have ended). The whole run's default deadline (``--timeout`` not
given) is ``whole_run``: the 300 s base plus, for each of at most PROBES_BOUND probes, its
agreement and communicators, plus the link rounds and the end of run. The constants are the rank 0
costs measured by bench/world_scale.py (json decode, one multi_get, the store's rate) with
a 4x margin; docs/scale.md quotes the formula.
"""

from __future__ import annotations

PER_RANK_S = 0.002  # rank 0's work per rank of one agreement (wait check, decode), 4x margin
STORE_BYTES_PER_S = 20e6  # what rank 0 reads from one TCPStore per second, 4x margin
PER_NODE_S = 0.01  # communicator set-up per node (leader group, node groups)
ROUND_S = 10.0  # one round of link pair tests, as checks/test_links.py budgets it
EVENTS_BYTES_PER_RANK = 64 << 10  # a rank file's events at the final gather, upper bound
REPORT_PER_RANK_S = 0.004  # the launcher reads a rank file and builds its rows, 4x margin
PROBES_BOUND = 32  # probes one session may run (checks/ holds 30; a unit test keeps the bound)


def agreement(base: float, ranks: int, bytes_per_rank: int = 1024) -> float:
    """How long rank 0 waits for one agreement of ``ranks`` payloads of that size."""
    return base + ranks * PER_RANK_S + ranks * bytes_per_rank / STORE_BYTES_PER_S


def probe(base: float, ranks: int, nodes: int, rounds: int = 0) -> float:
    """A probe's hard limit: its own deadline, its agreement, its communicators and rounds."""
    return agreement(base, ranks) + nodes * PER_NODE_S + rounds * ROUND_S


def final_gather(base: float, ranks: int) -> float:
    """Rank 0's wait for every rank's events at the end of the session."""
    return agreement(base, ranks, EVENTS_BYTES_PER_RANK)


def outcomes(base: float, nodes: int) -> float:
    """The rank-0 node's wait for every other node's outcome at the end of the run."""
    return base + nodes * PER_NODE_S


def verdict(base: float, nodes: int, ranks: int) -> float:
    """The other nodes' wait for the rank-0 node's verdict, which it gives after gathering
    every rank's events and building the report: a large world never ends verdict-unknown
    merely for being large."""
    return outcomes(base, nodes) + final_gather(0.0, ranks) + ranks * REPORT_PER_RANK_S


def whole_run(base: float, ranks: int, nodes: int, rounds: int) -> float:
    """The whole run's default deadline: ``base`` (what a small world needs) plus what the world
    adds to each probe (its agreement and communicators), the link stage's ``rounds`` and the
    end of the run. A user's ``--timeout`` replaces it: it is the budget they give the run."""
    per_probe = agreement(0.0, ranks) + nodes * PER_NODE_S
    return base + PROBES_BOUND * per_probe + rounds * ROUND_S + verdict(0.0, nodes, ranks)


def round_budget(rounds: int, per_round_s: float, base_s: float) -> float:
    """A deadline that grows with the link stage's rounds: the waits of ranks that lead no
    node (checks/test_links.py)."""
    return base_s + rounds * per_round_s
