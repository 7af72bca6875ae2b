"""Judge every node's payload exchanges: name the paths that drop large frames, with MTUs.

Runs in the launcher of the node hosting the rendezvous store, once, after the peer probes
(:func:`ddpcheck.cluster.nodeflow.decide_peers`), on the results :mod:`bulkprobe` put in each
node's peer row. A pair whose small payload went both ways while a larger one stalled has
the signature of an MTU mismatch on the path: TCP's handshake and small segments fit any
MTU, a full segment of the hosts' MTU does not fit a smaller hop, and a layer-2 hop (a
switch, a bridge) drops it silently. The problem names each pair, the interface and MTU at
both ends (from each end's own row, or the interface of its advertised address on its card),
and the fix. The MTUs of the nodes' cluster interfaces are compared too: nodes that differ
are named in the same problem, since they make the likely cause.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.diagnoses import Problem, register

LARGE_FRAMES_DROPPED = register(
    "large-frames-dropped", "nodes connect and small payloads pass, but large payloads between "
    "them stall", "an MTU mismatch on the path: the hosts send frames of their interface's MTU "
    "(jumbo frames, e.g. 9000) and a switch, bridge or tunnel on the way passes fewer bytes "
    "(e.g. 1500) and drops the rest without a word; gloo/NCCL connect, then their first large "
    "message never arrives (a collective timeout blamed on a peer)",
    "use one MTU end to end: lower the hosts' interface (ip link set dev IF mtu 1500 on every "
    "node) or raise the switch ports' MTU to the hosts'")
PEER_DATA_STALLED = register(
    "peer-data-stalled", "nodes connect, but even a small payload between them does not arrive",
    "the connection is accepted and then its data is dropped: a firewall or proxy that "
    "passes SYNs only, a broken NIC offload, or a node too loaded to answer",
    "check the named nodes' firewall (iptables -L -v) and NIC offloads (ethtool -k IF); rerun "
    "to see whether it repeats")

SHOWN = 16  # pairs listed in one problem
# A payload this large crosses in full-size frames at any MTU (jumbo: 9216 at most): once it
# went both ways, a later stall is a slow or busy link, which the bandwidth stage measures,
# not a path that drops frames; it is not named here (no false NOT READY on a 100 Mbit link).
FULL_FRAMES = 64 << 10


def judge_bulk(results: Mapping[str, Mapping[str, Mapping[str, Any]]],
               cards: Sequence[NodeCard]) -> list[Problem]:
    """Problems from every node's payload exchanges: {from host: {to host: peer outcome}}."""
    fails = [(s, d, r["bulk"]) for s, row in sorted(results.items())
             for d, r in sorted(row.items())
             if isinstance(r.get("bulk"), dict) and r["bulk"].get("outcome") != "ok"
             and r["bulk"].get("largest_ok", 0) < FULL_FRAMES]
    if not fails:
        return []
    by_host = {c.host: c for c in cards}
    large = [f for f in fails if f[2].get("largest_ok", 0) > 0]
    small = [f for f in fails if f[2].get("largest_ok", 0) == 0]
    problems = []
    if large:
        problems.append(LARGE_FRAMES_DROPPED.problem(
            _observed(large, results, by_host) + _mtu_note(cards),
            fix=_fix(large, results, by_host), hosts=_blamed(large)))
    if small:
        problems.append(PEER_DATA_STALLED.problem(
            _observed(small, results, by_host), hosts=_blamed(small)))
    return problems


def end_of(host: str, peer: str, results: Mapping[str, Mapping[str, Mapping[str, Any]]],
           by_host: Mapping[str, NodeCard]) -> tuple[str, int]:
    """(interface, MTU) at ``host``'s end of its path to ``peer``: its own row if it probed
    ``peer`` and recorded the route, else the interface of its advertised address."""
    bulk = results.get(host, {}).get(peer, {}).get("bulk") or {}
    if bulk.get("dev"):
        return str(bulk["dev"]), int(bulk.get("mtu", 0))
    card = by_host.get(host)
    if card is None:
        return "", 0
    dev = next((i for i, addrs in card.addresses.items() if card.advertised in addrs), "")
    return dev, int(card.mtus.get(dev, 0))


def cluster_mtus(cards: Sequence[NodeCard]) -> dict[str, tuple[str, int]]:
    """Each node's (interface of its advertised address, that interface's MTU)."""
    out = {}
    for c in cards:
        dev = next((i for i, addrs in c.addresses.items() if c.advertised in addrs), "")
        if dev and c.mtus.get(dev):
            out[c.host] = (dev, int(c.mtus[dev]))
    return out


def _side(host: str, peer: str, results: Mapping[str, Any], by_host: Mapping[str, Any]) -> str:
    dev, mtu = end_of(host, peer, results, by_host)
    return f"{host} ({dev or '?'}, MTU {mtu or '?'})"


def _observed(fails: Sequence[tuple[str, str, dict]], results: Mapping[str, Any],
              by_host: Mapping[str, NodeCard]) -> str:
    parts = []
    for s, d, b in fails[:SHOWN]:
        ok = f"{_size(b.get('largest_ok', 0))} went both ways, " if b.get("largest_ok") else ""
        what = "stalled" if b.get("outcome") == "stalled" else f"failed ({b.get('error', '')})"
        parts.append(f"{_side(s, d, results, by_host)} -> {_side(d, s, results, by_host)}: "
                     f"{ok}{_size(b.get('failed_size', 0))} {what} after "
                     f"{b.get('elapsed', 0):g} s (sent {_size(b.get('sent', 0))}, "
                     f"{_size(b.get('received', 0))} came back)")
    more = f"; and {len(fails) - SHOWN} more pairs" if len(fails) > SHOWN else ""
    return "; ".join(parts) + more


def _mtu_note(cards: Sequence[NodeCard]) -> str:
    mtus = cluster_mtus(cards)
    values = Counter(m for _, m in mtus.values())
    if len(values) > 1:
        common = values.most_common(1)[0][0]
        odd = sorted(f"{h} ({d} MTU {m})" for h, (d, m) in mtus.items() if m != common)
        return (f". The nodes' cluster interfaces differ: most have MTU {common}, "
                f"{', '.join(odd[:SHOWN])} do not")
    if values:
        return (f". Every node's cluster interface has MTU {next(iter(values))}: a hop between "
                "them (switch, bridge, tunnel) passes less")
    return ""


def _fix(fails: Sequence[tuple[str, str, dict]], results: Mapping[str, Any],
         by_host: Mapping[str, NodeCard]) -> str:
    ends = sorted({end_of(h, p, results, by_host) + (h,) for s, d, _ in fails
                   for h, p in ((s, d), (d, s))}, key=lambda e: e[2])
    cmds = "; ".join(f"on {h}: ip link set dev {dev or 'IF'} mtu 1500" for dev, _, h in ends[:8])
    return (f"use one MTU end to end: {cmds} (or the switch's MTU, if it is meant to pass "
            "jumbo frames: raise its ports' MTU to the hosts'); make it permanent in the "
            "node's network configuration")


def _blamed(fails: Sequence[tuple[str, str, dict]]) -> list[str]:
    """The end every failing pair has in common, else every node in a failing pair."""
    ends = Counter(h for s, d, _ in fails for h in {s, d})
    pairs = {frozenset((s, d)) for s, d, _ in fails}
    common = [h for h, k in ends.items() if all(h in p for p in pairs)]
    if len(pairs) >= 2 and len(common) == 1:
        return common
    return sorted(ends)


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):g} MiB"
    return f"{n / (1 << 10):g} KiB" if n >= 1 << 10 else f"{n} B"
