"""Every key ddpcheck sets in a torch store, in one place.

Shared by both sides. The launchers meet on the store the first node hosts (``cluster``):
check-in cards and the check-in decision, the init-file token, the peer-probe results and
their verdict, the end-of-run outcomes and the "settled" count that keeps the host's store
up until every node has read. The ranks of one world meet under their own prefix
(``world_prefix``) in the store torchrun or the init method gives them; the keys of their
exchanges are named by the code that exchanges (``World.decide("hello", ...)``).
"""

from __future__ import annotations

ROOT = "ddpcheck"

# --- check-in (cluster.board): one card per node, then the host's decision ------------------
CHECKIN = f"{ROOT}/checkin"
CHECKIN_COUNT = f"{CHECKIN}/count"
CHECKIN_DECISION = f"{CHECKIN}/verdict"


def checkin_card(index: int) -> str:
    """The card the index-th node to check in posted."""
    return f"{CHECKIN}/{index}"


# --- peer probes (cluster.board, cluster.nodeflow) ------------------------------------------
PEERS = f"{ROOT}/peers"
PEER_COUNT = f"{PEERS}/count"
PEER_DECISION = f"{PEERS}/verdict"


def peer_result(index: int) -> str:
    return f"{PEERS}/{index}"


# --- spawn launches with a file:// init method (launcher.spawn.initfile) ---------------------
INITFILE_TOKEN = f"{ROOT}/initfile/token"


# --- the end of a run (cluster.ending, cluster.nodeflow, cluster.lifecycle) ------------------
def final(run_id: str) -> str:
    """The prefix of one run's end: each node's outcome, the adopted verdict, the reads."""
    return f"{ROOT}/final/{run_id}"


def final_node(run_id: str, host: str) -> str:
    return f"{final(run_id)}/node/{host}"


def final_verdict(run_id: str) -> str:
    return f"{final(run_id)}/verdict"


def final_read(run_id: str) -> str:
    return f"{final(run_id)}/read"


def settled(run_id: str) -> str:
    """Counted up by every node that has read what it needs; the host waits for all."""
    return f"{ROOT}/settled/{run_id}"


# --- the ranks' world (worker.world) ----------------------------------------------------------
def world_prefix(run_id: str, restart: str) -> str:
    """The PrefixStore of one torchrun run's ranks (a restart gets fresh keys)."""
    return f"{ROOT}/{run_id}/{restart}"
