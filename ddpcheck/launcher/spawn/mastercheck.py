"""Before a spawn-style launch: can the ranks reach rank 0's store at the master address?

Runs in the launcher of every node with --launch spawn (env:// and tcp://), before any rank
starts; its problems go on the node's check-in card, so every node names them. Under
mp.spawn with env:// or tcp://, rank 0 hosts a TCPStore on MASTER_PORT and every other rank
connects to MASTER_ADDR:MASTER_PORT (torch/distributed/rendezvous.py, _create_c10d_store:
``is_master = rank == 0``); nothing else tells a rank where rank 0 is. So the address must
resolve on every node, not be loopback when ranks run on several nodes, be an address of
the node that starts rank 0, and the port must be free there.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from ddpcheck.diagnoses import Problem, register
from ddpcheck.launcher.spawn.launchspec import LaunchSpec
from ddpcheck.node.interfaces import is_loopback
from ddpcheck.node.netprobe import BindResult, Resolution, bind_check, resolve

MASTER_UNRESOLVABLE = register(
    "master-addr-unresolvable", "the master address does not resolve on this node",
    "MASTER_ADDR (or the tcp:// host) is misspelled, or not in DNS / /etc/hosts here",
    "set MASTER_ADDR to the IP address of the node that starts rank 0, or a name every "
    "node resolves")
MASTER_LOOPBACK = register(
    "master-addr-loopback", "the master address is loopback on a multi-node run",
    "MASTER_ADDR=localhost/127.0.0.1 (copied from a one-node script) only reaches the node "
    "itself: the ranks on the other nodes connect to themselves and wait",
    "set MASTER_ADDR to the cluster address of the node that starts rank 0")
MASTER_NOT_RANK0 = register(
    "master-addr-not-rank0-node", "the master address is not the node that starts rank 0",
    "rank 0 hosts the store on the node with node rank 0 (the first rank offset); "
    "MASTER_ADDR or the tcp:// host names another machine, where nobody serves the port",
    "set MASTER_ADDR (or the tcp:// host) to the node started with node rank 0")
MASTER_PORT_IN_USE = register(
    "master-port-in-use", "the master port is already in use on the node that starts rank 0",
    "another job, or a leftover process of an earlier run, listens on MASTER_PORT; rank 0's "
    "store fails with EADDRINUSE",
    "stop the process holding the port, or pick another MASTER_PORT")
MASTER_PORT_UNAVAILABLE = register(
    "master-port-unavailable", "rank 0 cannot listen on the master port",
    "the port needs privileges (below 1024) or the system refuses the bind",
    "pick a MASTER_PORT from 1024 to 65535 that is free on the node starting rank 0")


def master_problems(spec: LaunchSpec, nodes: int, node: str, own_addresses: Collection[str],
                    resolver: Callable[[str], Resolution] = resolve,
                    binder: Callable[[int], BindResult] = bind_check) -> list[Problem]:
    """This node's problems with the master address and port (none for file://)."""
    if spec.master is None:
        return []
    host, port = spec.master
    name = f"{spec.master_source}={host}" if spec.master_source == "MASTER_ADDR" \
        else spec.master_source
    res = resolver(host)
    if not res.ok:
        return [MASTER_UNRESOLVABLE.problem(f"{name} does not resolve on {node}: {res.error}",
                                            hosts=[node])]
    ip = res.addresses[0]
    loop = is_loopback(ip)
    if loop and nodes > 1:
        return [MASTER_LOOPBACK.problem(
            f"{name} resolves to {ip} on {node}, a loopback address, on a run of {nodes} "
            "nodes", hosts=[node])]
    mine = loop or ip in own_addresses
    problems = []
    if spec.hosts_rank0 and not mine:
        problems.append(MASTER_NOT_RANK0.problem(
            f"rank 0 starts on {node} and hosts the store on port {port}, but {name} "
            f"resolves to {ip}, not an address of {node}: every other rank would connect to "
            f"{ip}:{port}, where nobody serves it", hosts=[node]))
    elif not spec.hosts_rank0 and mine and nodes > 1:
        problems.append(MASTER_NOT_RANK0.problem(
            f"{name} resolves to {ip}, an address of {node}, but {node} starts ranks "
            f"{spec.first_rank}-{spec.first_rank + spec.nproc - 1}, not rank 0: nobody "
            f"serves {ip}:{port}", hosts=[node]))
    if spec.hosts_rank0:
        problems += _port_problems(binder(port), port, node)
    return problems


def _port_problems(bound: BindResult, port: int, node: str) -> list[Problem]:
    if bound.ok:
        return []
    if bound.errno_name == "EADDRINUSE":
        holder = bound.holder or "a process ddpcheck cannot see (run as root, or " \
                                 f"`ss -ltnp 'sport = :{port}'`)"
        fix = (f"stop {bound.holder}, or " if bound.holder else "free the port, or ") + \
            f"pick another MASTER_PORT (e.g. {port + 2}: ddpcheck's check-in uses the " \
            "master port + 1)"
        return [MASTER_PORT_IN_USE.problem(
            f"rank 0 on {node} cannot listen on port {port}: in use by {holder}", fix=fix,
            hosts=[node])]
    return [MASTER_PORT_UNAVAILABLE.problem(
        f"rank 0 on {node} cannot listen on port {port}: {bound.error}", hosts=[node])]
