"""Every node resolves the names its ranks will dial, under a deadline, before torchrun starts.

Runs in the launcher of every node of a multi-node ``--launch torchrun`` run, during the peer
probes (:mod:`ddpcheck.cluster.nodeflow`); the node hosting the store judges every node's
answers (:func:`judge_resolutions`). Under c10d torchrun the workers' MASTER_ADDR is the name
rank 0's agent advertises: ``local_addr or socket.getfqdn()`` (``_NodeDescGenerator.generate``
and ``RendezvousStoreInfo.build`` in torch/distributed/elastic/rendezvous), and any node can
get rank 0. So each node resolves its own FQDN and those of the peers it probes (every peer
up to FULL_MESH_MAX nodes, a sample above: :func:`pairing.peer_targets`); the endpoint node
alone resolving them (as before) missed the node whose own resolver lacks a name.
Under spawn and srun every rank dials the master host (MASTER_ADDR or the tcp:// host):
every node resolves it, and it must give an address of the node that starts rank 0
(``launcher.spawn.mastercheck`` checks it there). Static torchrun dials the endpoint host, which
every node has resolved to join the check-in.

A name that fails on most of the nodes that tried it is the name's fault (its owner is named:
``advertised-name-unresolvable`` / ``-wrong-address``); the others are the resolving node's
(``dial-name-unresolvable`` / ``dial-name-wrong-address``), named with the name, the
resolver's answer and the fix.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ddpcheck.cluster.userjob import NAME_UNRESOLVABLE, NAME_WRONG_ADDRESS
from ddpcheck.diagnoses import Problem, register
from ddpcheck.node.interfaces import is_loopback
from ddpcheck.node.netprobe import Resolution, resolve

RESOLVE_TIMEOUT = 3.0  # all of a node's lookups; the workers' own lookup gets no longer
SHOWN = 16

DIAL_UNRESOLVABLE = register(
    "dial-name-unresolvable", "a node cannot resolve the name its ranks would dial",
    "under c10d torchrun the workers connect to the name rank 0's agent advertises (its FQDN, "
    "socket.getfqdn()); this node's resolver (/etc/hosts, DNS, its search domains) does not "
    "know that name, so its workers fail at init_process_group when that node gets rank 0",
    "add the name with the node's cluster address to /etc/hosts on the named node, or add the "
    "name's domain to its DNS search list (resolv.conf `search`); or start your torchrun with "
    "--local-addr <each node's IP> so the agents advertise an address (ddpcheck's own torchrun "
    "advertises the name, as a plain torchrun does)")
DIAL_WRONG_ADDRESS = register(
    "dial-name-wrong-address", "a node resolves the name its ranks would dial to an address "
    "the name's node does not have", "a stale or wrong /etc/hosts or DNS entry on this node, "
    "or a loopback entry for another node's name: its workers would connect to the wrong "
    "machine when that node gets rank 0",
    "correct the entry on the named node (/etc/hosts or its DNS) so the name resolves to "
    "the node's cluster address")


def resolve_all(names: Sequence[str], timeout: float = RESOLVE_TIMEOUT,
                resolver: Callable[[str], Resolution] = resolve) -> dict[str, dict[str, Any]]:
    """Resolve every name at once; a lookup still running at the deadline is a timeout.

    Daemon threads, not a pool: a lookup stuck in a DNS retry must not hold up the exit."""
    got: dict[str, dict[str, Any]] = {}
    start = time.monotonic()

    def one(name: str) -> None:
        res = resolver(name)
        got[name] = {"addresses": list(res.addresses), "error": res.error,
                     "elapsed": round(time.monotonic() - start, 3)}

    threads = [threading.Thread(target=one, args=(n,), daemon=True) for n in dict.fromkeys(names)]
    for t in threads:
        t.start()
    deadline = start + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return {n: dict(got.get(n) or {"addresses": [], "elapsed": timeout,
                                   "error": f"no answer within {timeout:g} s"})
            for n in dict.fromkeys(names)}


def names_to_resolve(me: str, names: Mapping[str, str], targets: Sequence[str]) -> dict[str, str]:
    """{owner host: advertised name} this node resolves: its own and its targets'."""
    return {h: names[h] for h in [me, *targets] if names.get(h)}


def judge_resolutions(answers: Mapping[str, Mapping[str, Mapping[str, Any]]],
                      names: Mapping[str, str],
                      addresses: Mapping[str, Sequence[str]]) -> list[Problem]:
    """Problems from {resolver: {owner: answer}}; each answer must give an owner's address."""
    bad: dict[str, list[tuple[str, str, str, str]]] = defaultdict(list)  # owner -> fails
    tried: dict[str, int] = defaultdict(int)
    for resolver, row in sorted(answers.items()):
        for owner, ans in sorted(row.items()):
            if owner not in names:
                continue
            tried[owner] += 1
            verdict = _verdict(resolver, owner, ans, addresses.get(owner, ()))
            if verdict:  # the name this node dialed: its own master under spawn/srun
                bad[owner].append((resolver, *verdict, str(ans.get("name") or names[owner])))
    problems: list[Problem] = []
    per_resolver: list[tuple[str, str, str, str, str]] = []
    for owner, fails in sorted(bad.items()):
        if len(fails) >= 2 and 2 * len(fails) >= tried[owner]:  # the name itself is broken
            kinds = {k for _, k, _, _ in fails}
            diag = NAME_UNRESOLVABLE if "unresolvable" in kinds else NAME_WRONG_ADDRESS
            problems.append(diag.problem(
                f"{owner} advertises {names[owner]!r}; {len(fails)} of {tried[owner]} nodes "
                f"that resolved it got no address of {owner}: "
                + "; ".join(f"on {r}: {n!r} {text}" for r, _, text, n in fails[:SHOWN]),
                hosts=[owner]))
        else:
            per_resolver += [(r, owner, k, text, n) for r, k, text, n in fails]
    for kind, diag in (("unresolvable", DIAL_UNRESOLVABLE), ("wrong", DIAL_WRONG_ADDRESS)):
        rows = [f for f in per_resolver if f[2] == kind]
        if not rows:
            continue
        resolvers = sorted({r for r, _, _, _, _ in rows})
        problems.append(diag.problem(
            "; ".join(f"on {r}, the name {n!r} its ranks dial to reach {o} {text}"
                      for r, o, _, text, n in rows[:SHOWN])
            + (f"; and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""),
            fix=_fix(kind, rows, addresses), hosts=resolvers))
    return problems


def _verdict(resolver: str, owner: str, ans: Mapping[str, Any],
             owned: Sequence[str]) -> tuple[str, str] | None:
    got = [str(a) for a in ans.get("addresses", [])]
    if not got:
        return "unresolvable", f"does not resolve ({ans.get('error') or 'no address'})"
    if resolver == owner and any(is_loopback(a) for a in got):
        return None  # its own workers reach it there (hostname-loopback names the rest)
    if set(got) & {a for a in owned if not is_loopback(a)}:
        return None
    why = " (loopback, on another node)" if resolver != owner and all(
        is_loopback(a) for a in got) else ""
    return "wrong", (f"resolves to {', '.join(got)}{why}, not an address of {owner} "
                     f"({', '.join(dict.fromkeys(a for a in owned if not is_loopback(a))) or '?'})")


def _fix(kind: str, rows: Sequence[tuple[str, str, str, str, str]],
         addresses: Mapping[str, Sequence[str]]) -> str:
    lines = []
    for r, o, _, _, name in rows[:4]:
        addr = next((a for a in addresses.get(o, ()) if not is_loopback(a)), "<its IP>")
        lines.append(f"on {r}: add `{addr} {name}` to /etc/hosts")
    tail = (", or add the name's domain to the DNS search list there (resolv.conf `search`); "
            "or start your own torchrun with --local-addr <each node's IP> so the agents "
            "advertise addresses" if kind == "unresolvable"
            else " in place of the wrong entry (or correct the DNS record)")
    return "; ".join(lines) + tail
