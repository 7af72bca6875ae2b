"""Gloo peers that advertise addresses of different IP families (one IPv4, one IPv6).

Runs inside ``ddpcheck explain`` (a pure reader of log lines). Gloo's TCP transport decides
which side of a pair connects by comparing the two sockaddrs, and first enforces that both
have one family (gloo/transport/tcp/device.cc ``Device::isInitiator``:
``GLOO_ENFORCE_EQ(ss1.ss_family, ss2.ss_family)``), which torch prints as
``[enforce fail at .../gloo/transport/tcp/device.cc:276] ss1.ss_family == ss2.ss_family. 2 vs
10`` (2 = AF_INET, 10 = AF_INET6 on Linux).

``gloo_wrapper`` (called by the network family's ``refine``): torch's "Gloo connectFullMesh
failed with [...]" wraps the gloo error that follows it; when that error is read as a
problem of its own, the wrapper is its consequence, not an earlier failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.cluster.peerprobe import PEER_UNREACHABLE
from ddpcheck.diagnoses import register
from ddpcheck.explain.causality import Explained
from ddpcheck.explain.matching import pattern

ADDRESS_FAMILY_MISMATCH = register(
    "address-family-mismatch",
    "gloo peers advertised addresses of different IP families (one IPv4, one IPv6)",
    "the address each rank takes for itself (its host name, MASTER_ADDR, or the interface's "
    "first address) resolves to IPv6 on some nodes and IPv4 on others (an AAAA record, "
    "MASTER_ADDR=0.0.0.0 or '::', IPv6 enabled on only some nodes); gloo uses what "
    "getaddrinfo returns first",
    "give every node an address of one family: set MASTER_ADDR to rank 0's IPv4 address (not "
    "0.0.0.0), pin GLOO_SOCKET_IFNAME to the interface the nodes share, or enable or disable "
    "IPv6 the same way on every node; ddpcheck run --nodes N --stages rendezvous checks it")

FAMILY_NAMES = {"2": "IPv4 (AF_INET)", "10": "IPv6 (AF_INET6)"}

PATTERNS = [
    pattern(ADDRESS_FAMILY_MISMATCH,
            r"ss1\.ss_family == ss2\.ss_family\. (?P<a>\d+) vs (?P<b>\d+)",
            "ddpcheck run --nodes N --stages rendezvous (check-in compares every node's "
            "address)",
            cause="one rank's address has socket family {a} and its peer's {b} (2 = IPv4, 10 "
                  "= IPv6): the nodes resolve their own addresses to different IP versions"),
]


# torch's ProcessGroupGloo wraps gloo's exception: "Gloo connectFullMesh failed with
# [.../gloo/transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused,
# remote=[127.0.0.1]:port", one message that users' pastes wrap over a few lines.
WRAPPER = re.compile(r"connectFullMesh failed with")
MESSAGE_LINES = 2  # lines of one wrapped message after the wrapper's


def gloo_wrapper(found: Sequence[Explained]) -> list[Explained]:
    """The peer-unreachable read from torch's connectFullMesh wrapper becomes the consequence
    of the problem read from the gloo error it wraps (same file, the next lines)."""
    out = []
    for e in found:
        if e.problem.code == PEER_UNREACHABLE.code and WRAPPER.search(e.first.text) and (
                inner := next((o for o in found if o is not e and o.root
                               and o.first.source == e.first.source
                               and 0 < o.first.lineno - e.first.lineno <= MESSAGE_LINES
                               and not o.problem.consequence_of), None)):
            e = _consequence(e, inner.problem.code)
        out.append(e)
    return out


def _consequence(e: Explained, of: str) -> Explained:
    return Explained(e.problem.where(consequence_of=of), e.first, e.root, e.next_run,
                     e.evidence, e.grade)
