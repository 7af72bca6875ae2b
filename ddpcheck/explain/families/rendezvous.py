"""Rendezvous and store connection failures: timeouts, unreachable endpoints, names.

Messages from torch/csrc/distributed/c10d/socket.cpp and TCPStore.cpp ("The client socket
has timed out after ...", "failed to connect to ... (errno: 110 ...)") and from
torch/distributed/elastic/rendezvous (RendezvousTimeoutError, RendezvousConnectionError).
"""

from __future__ import annotations

from ddpcheck.explain.codes import RENDEZVOUS_TIMEOUT
from ddpcheck.explain.matching import pattern
from ddpcheck.node.netprobe import ENDPOINT_REFUSED, ENDPOINT_UNREACHABLE, ENDPOINT_UNRESOLVABLE

RDZV = "ddpcheck run --nodes N --stages rendezvous (on every node, same --rdzv-endpoint)"
# Evidence the log alone cannot split: say which candidates remain.
UNREACHABLE_CAUSE = (
    "nothing answered at {addr} in time: the host node (or rank 0) had not started or had "
    "crashed, a firewall drops the port, or the address is wrong or on a network this node "
    "does not reach")

PATTERNS = [
    pattern(ENDPOINT_UNREACHABLE,
            r"client socket has timed out after \S+ while trying to connect to "
            r"\(?(?P<addr>[^)]+?)\)?\.?$",
            RDZV, cause=UNREACHABLE_CAUSE),
    pattern(ENDPOINT_UNREACHABLE,
            r"client socket has failed to connect to (?:any network address of )?"
            r"\(?(?P<addr>[^ )]+(?:, \d+)?)\)?.*(?:errno: 110|Connection timed out|\.$)",
            RDZV, cause=UNREACHABLE_CAUSE),
    pattern(ENDPOINT_REFUSED,
            r"client socket has failed to connect to (?P<addr>\S+) \(errno: 111", RDZV),
    # The resolver's words do not say whose name failed: the endpoint's, or this node's own
    # host name missing from /etc/hosts (hostname-unresolvable) print the same (a symptom).
    pattern(ENDPOINT_UNRESOLVABLE,
            r"host not found: Name or service not known|Name or service not known|"
            r"gaierror: \[Errno -[23]\]", RDZV, grade="symptom"),
    pattern(RENDEZVOUS_TIMEOUT, r"RendezvousTimeoutError", RDZV),
]
