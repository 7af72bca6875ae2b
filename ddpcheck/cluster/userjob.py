"""Conditions the user's own torchrun would hit where ddpcheck's launch differs from it.

Runs in the launcher of every node, during check-in (cluster.lifecycle, cluster.nodeflow).
ddpcheck's launcher hosts the rendezvous store itself (torchrun agents join it with
``is_host=false``), and its agents advertise names the way the user's do. Two things of
the user's job are therefore checked here rather than exercised (docs/user-job.md lists
every difference):

- Who hosts the store. A user's c10d torchrun hosts it on the agent whose machine
  "matches" the endpoint host, by torch's own rule
  (``_matches_machine_hostname``, called through ``cluster.store.torch_would_host``: the name or
  FQDN of this machine, or an address of ``getaddrinfo(gethostname())``). An alias, a
  virtual IP or an address of a second NIC matches no node: every agent joins as a client
  and the job waits out the join timeout. Exactly the endpoint node must match.
- The name rank 0 advertises. The rank-0 agent publishes ``socket.getfqdn()`` as
  MASTER_ADDR (``RendezvousStoreInfo.build``, ``_NodeDescGenerator.generate`` in
  torch/distributed/elastic/rendezvous), and every worker of every node connects to it.
  Any node can become rank 0, so every node's FQDN must resolve, on the other nodes,
  to an address of that node: every node resolves them (``cluster.namecheck``), the
  codes for a name that is broken everywhere are registered here.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from ddpcheck.cluster.store import torch_would_host
from ddpcheck.diagnoses import Problem, register

ENDPOINT_NOT_RECOGNISED = register(
    "endpoint-not-recognised", "torchrun on the endpoint node would not host the rendezvous store",
    "torch decides which agent hosts the c10d store by matching the endpoint host with the "
    "machine's name, FQDN or the addresses its hostname resolves to; an alias, a virtual IP or "
    "a second NIC's address matches no node, so every agent waits as a client",
    "pass --rdzv-endpoint with the endpoint node's hostname (or an address its hostname "
    "resolves to), or add is_host=true to --rdzv-conf on that node only")
ENDPOINT_MATCHES_TWICE = register(
    "endpoint-matches-other-node", "torchrun on a node that is not the endpoint would host the "
    "rendezvous store", "the endpoint name also matches this node (a shared alias or an address "
    "this node also has), so two agents try to host the store",
    "pass --rdzv-endpoint with a name or address only the endpoint node has")
NAME_UNRESOLVABLE = register(
    "advertised-name-unresolvable", "a node's FQDN, which torchrun advertises, does not resolve "
    "on another node", "torchrun's rank-0 agent publishes socket.getfqdn() as MASTER_ADDR; "
    "a name missing from DNS or /etc/hosts on the other nodes leaves their workers unable to "
    "connect to the store",
    "add the node's FQDN to DNS or /etc/hosts on every node, or fix the node's hostname/domain")
NAME_WRONG_ADDRESS = register(
    "advertised-name-wrong-address", "a node's FQDN resolves, on another node, to an address "
    "that node does not have", "stale DNS or /etc/hosts entries, or a name shared by several "
    "machines: workers would connect to the wrong machine",
    "correct DNS or /etc/hosts so the FQDN resolves to the node's cluster address everywhere")

def hosting_problem(endpoint: str, node: str, endpoint_is_here: bool,
                    would_host: Callable[[str], bool] = torch_would_host) -> Problem | None:
    """The problem when torch's choice of store host differs from the endpoint node."""
    torch_says = would_host(endpoint)
    if endpoint_is_here and not torch_says:
        return ENDPOINT_NOT_RECOGNISED.problem(
            f"{endpoint} is an address of {node}, but torch does not recognise it as {node} "
            f"itself (not its name, FQDN {socket.getfqdn()!r} or an address its hostname "
            "resolves to): a c10d torchrun here would not host the store", hosts=[node])
    if torch_says and not endpoint_is_here:
        return ENDPOINT_MATCHES_TWICE.problem(
            f"torch on {node} matches the endpoint {endpoint} with this machine, though the "
            "endpoint's address is not on it: its torchrun would try to host the store too",
            hosts=[node])
    return None
