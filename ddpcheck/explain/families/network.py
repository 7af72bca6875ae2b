"""Sockets: port already in use (errno 98), privileged port (errno 13), bad *_SOCKET_IFNAME.

Bind messages come from torch/csrc/distributed/c10d/socket.cpp ("The server socket has
failed to bind to [::]:29500 (errno: 98 - Address already in use)"); the interface ones
from gloo/transport/tcp/device.cc ("Unable to find address for: eth9") and NCCL's
misc/socket.cc (NCCL_SOCKET_IFNAME set to ..., no socket interface found).
"""

from __future__ import annotations

from ddpcheck.cluster.lifecycle import HOSTNAME_LOOPBACK
from ddpcheck.cluster.peerprobe import PEER_UNREACHABLE
from ddpcheck.diagnoses import BAD_SOCKET_IFNAME
from ddpcheck.explain.codes import (
    HOSTNAME_UNRESOLVABLE,
    NCCL_NO_SOCKET_INTERFACE,
    NCCL_WRONG_INTERFACE,
)
from ddpcheck.explain.matching import pattern
from ddpcheck.launcher.spawn.mastercheck import MASTER_NOT_RANK0
from ddpcheck.node.netprobe import ENDPOINT_BIND_FAILED, ENDPOINT_PORT_IN_USE

RDZV = "ddpcheck run --nodes N --stages rendezvous (the preflight binds the port first)"
IFACE = "ddpcheck run --nodes N (preflight checks every *_SOCKET_IFNAME on every node)"

# An interface name, as opposed to a host name (gloo prints both as "find address for").
IFACE_NAME = (r"\^?(?:eth|en[opsx]?|ib|bond|lo|docker|br|veth|wl|em|hsn|team|vlan|p\d)"
              r"[\w-]*(?:\.\d+)?")
HOSTS = "ddpcheck run --nodes N (check-in resolves every node's name and address)"

# getaddrinfo's "no such name" / "try again" codes as socket.cpp prints them ("gai error: N
# - <gai_strerror>"): glibc EAI_NONAME -2, EAI_AGAIN -3, EAI_NODATA -5; macOS EAI_NONAME 8
# ("nodename nor servname provided, or not known"); Windows WSAHOST_NOT_FOUND 11001,
# WSATRY_AGAIN 11002, WSANO_DATA 11004 (localised text, so by number).
GAI_NO_NAME = r"(?:-[235]\b|8 - nodename nor servname|1100[124]\b)"

PATTERNS = [
    # c10d's warning (torch/csrc/distributed/c10d/socket.cpp) and gloo's fallback
    # (ProcessGroupGloo.cpp createDefaultDevice): the host name resolves to nothing usable.
    # torch/csrc/distributed/c10d/ProcessGroupGloo.cpp createDefaultDevice warns so when
    # doesHostnameResolveToUsableAddress(gethostname()) is false (the name does not resolve,
    # or to no address this machine can bind); a name resolving to 127.0.1.1 binds and is
    # used without this warning. Recorded: tests/data/explain/runs/
    # netns-own-hostname-not-in-hosts (node1's name missing from its /etc/hosts).
    pattern(HOSTNAME_LOOPBACK,
            r"Unable to resolve hostname to a \(local\) address\. Using the loopback", HOSTS,
            cause="gloo found no address of this machine for its host name (the name is not "
                  "in /etc/hosts or DNS, or resolves to an address this node does not have) "
                  "and fell back to the loopback address, which it advertised to the other "
                  "ranks: on a multi-node run they cannot reach it"),
    # A peer at 127.0.1.1: across nodes, a node advertised its host name's loopback address;
    # within one node 127.0.1.1 is valid and a refused connection there is a peer that exited.
    # The line does not say which job it is: a hint.
    pattern(HOSTNAME_LOOPBACK, r"Connection refused, remote=\[127\.0\.1\.1\]", HOSTS,
            grade="hint",
            cause="a gloo/c10d peer was reached at 127.0.1.1: in a multi-node job a node's "
                  "host name resolves to 127.0.1.1 and it advertised that; in a one-node job "
                  "the peer there has exited instead"),
    # The same for any other loopback address. "SO_ERROR: Connection refused, remote=[...]"
    # is gloo's connect loop (gloo/transport/tcp/helpers.cc ConnectOperation, SystemError's
    # text), not c10d's store, whose connect prints "The client socket has failed to connect
    # to [host]:port (errno: 111 - Connection refused)" (socket.cpp): the remote is the
    # address the gloo peer advertised for itself through the store (so the peer had started
    # and published it). 127.0.0.1 there is a peer whose gloo bound to loopback (its host
    # name resolves to 127.0.0.1: /etc/hosts, a hostNetwork pod; GLOO_SOCKET_IFNAME=lo).
    # Within one node that works, and a refusal is a peer that exited after publishing: a
    # hint, as for 127.0.1.1.
    pattern(HOSTNAME_LOOPBACK,
            r"Connection refused, remote=\[(?P<addr>127\.(?!0\.1\.1\])\d+\.\d+\.\d+)\]", HOSTS,
            grade="hint",
            cause="a gloo peer was dialled at {addr}, the loopback address it advertised for "
                  "itself: in a multi-node job its host name resolves to a loopback address "
                  "(/etc/hosts, a hostNetwork pod) or GLOO_SOCKET_IFNAME=lo, so the other nodes "
                  "connect to themselves; in a one-node job loopback works and the peer there "
                  "exited instead"),
    # 127.0.1.1 is the address Debian/Ubuntu's /etc/hosts gives the machine's own name: a
    # gloo pair (gloo/transport/tcp/pair.cc "Connection closed by peer [127.0.1.1]:port",
    # "Read error [127.0.1.1]:port: ...", "Connect timeout [127.0.1.1]:port", "connect
    # [127.0.1.1]:port: Connection refused") or c10d socket (remote=[127.0.1.1]) talking to it
    # means a node advertised its host name's loopback address to its peers.
    pattern(HOSTNAME_LOOPBACK,
            r"(?:Connection closed by peer|Read error|Connect timeout|connect|remote=|"
            r"Timed out .* from) \[127\.0\.1\.1\]:\d+", HOSTS, grade="hint",
            cause="this node's host name resolves to 127.0.1.1 (the /etc/hosts line Debian and "
                  "Ubuntu add), so gloo advertised a loopback address the other nodes cannot "
                  "reach (in a one-node job, where 127.0.1.1 works, the peer there exited)"),
    # socket.cpp's connect path resolves the host it dials: "The IPv4 network addresses of
    # (host, 29500) cannot be retrieved (gai error: -2 ...)". That host is MASTER_ADDR or the
    # endpoint: this node's own name on the store's node, another node's name (torchrun
    # advertises the rank-0 agent's FQDN) elsewhere, or a misspelt name; -3 (EAI_AGAIN) is
    # a DNS server that did not answer. The line does not say whose name: a symptom.
    pattern(HOSTNAME_UNRESOLVABLE,
            r"network addresses of \((?P<host>[^,]+), \d+\) cannot be retrieved "
            r"\(gai error: " + GAI_NO_NAME, HOSTS, grade="symptom",
            cause="this node could not resolve {host}, the address it dials (MASTER_ADDR or the "
                  "rendezvous endpoint): this node's own name missing from /etc/hosts, another "
                  "node's name (torchrun advertises the rank-0 node's FQDN) missing from this "
                  "node's DNS, or a misspelt name"),
    pattern(HOSTNAME_UNRESOLVABLE,
            r"rp != nullptr\. Unable to find address for:|"
            # socket.cpp's listen path: "The local IPv6 network addresses cannot be retrieved
            # (gai error: -2 - Name or service not known)" (the node's own name)
            r"The local (?:IPv[46] )?network addresses cannot be retrieved \(gai error: "
            + GAI_NO_NAME + "|"
            r"Unable to find address for: ?(?!" + IFACE_NAME + r"\s*$)\S*[.-]\S*\s*$", HOSTS),
    # c10d's reverse lookup of a peer (socket.cpp): healthy jobs print it too (a symptom).
    # socket.cpp prints it with C10D_WARNING ("[W1124 08:52:25.68 socket.cpp:207] [c10d] The
    # hostname of the client socket cannot be retrieved. err=-3", a container without
    # reverse DNS): as printed, a warning and no failure, which must not stand before a
    # hint as another failure's symptom; only a paste without the [W prefix is read.
    pattern(HOSTNAME_UNRESOLVABLE,
            r"^(?!\s*\[W[\s\d]).*hostname of the (?:client|server) socket cannot be retrieved",
            HOSTS, grade="symptom"),
    # gloo/transport/tcp/device.cc sockaddrToInterfaceName: the address this node's name
    # resolved to (or the one it was given) belongs to no local interface.
    pattern(HOSTNAME_UNRESOLVABLE, r"Unable to find interface for: \[(?P<addr>[^\]]+)\]", HOSTS,
            cause="gloo took {addr} as this node's address (what its host name resolves to, "
                  "or the address it was given), and no interface of this node has it: a "
                  "stale /etc/hosts entry, a numeric host name, or a wildcard address"),
    # bootstrap.cc "Bootstrap : no socket interface found" and its data-path twin,
    # transport/net_socket.cc "NET/Socket : no interface found": the same interface search
    # bootstrap.cc with NCCL_COMM_ID set (2.7 onwards, findInterfaceMatchSubnet): the rank
    # that creates the id must listen in NCCL_COMM_ID's subnet and has no interface there.
    pattern(NCCL_NO_SOCKET_INTERFACE, r"No usable listening interface found", HOSTS,
            cause="NCCL_COMM_ID is set and no interface of this node is in its address's "
                  "subnet: NCCL_COMM_ID must be an address of the node where the id is made "
                  "(rank 0's), or this process runs in a network namespace without that "
                  "network",
            fix="set NCCL_COMM_ID to rank 0's node address on the network the nodes share (or "
                "unset it and let torch pass the id); run containers with --network=host"),
    pattern(NCCL_NO_SOCKET_INTERFACE,
            r"Bootstrap : no socket interface found|NET/Socket : no interface found|"
            r"Socket creation failed : Address family not supported", HOSTS),
    pattern(NCCL_WRONG_INTERFACE,
            r"NET/Socket : Using .*\[\d+\](?:br-|veth|docker|virbr)\w*:|"
            r"^\s*\[\d+\](?:br-|veth|docker|virbr)\w*:\S+<\d+>", HOSTS),
    # The store binds MASTER_ADDR on the rank-0 node: errno 99 means that address is not
    # one of this machine's (c10d socket.cpp "failed to bind to ... (errno: 99 - Cannot
    # assign requested address)").
    # A wildcard ([::], 0.0.0.0) is every machine's: EADDRNOTAVAIL there is IPv6 turned off
    # (socket.cpp then binds 0.0.0.0 and goes on), not another node's address.
    pattern(MASTER_NOT_RANK0,
            r"failed to bind to (?P<addr>(?!\[::\]|0\.0\.0\.0)\S+) \(errno: 99|"
            r"bind(?!.*(?:\[::\]|0\.0\.0\.0)).*Cannot assign requested address|"
            # torch >= 2.3 socket.cpp: "The server socket has failed to listen on any local
            # network address. port: 29500, useIpv6: 0, code: -99, name: EADDRNOTAVAIL, ..."
            r"failed to listen on .*code: -99, name: EADDRNOTAVAIL", RDZV),
    # Python's OSError without the call: a bind() of an address this machine lacks, or a
    # connect() that found no free local port (EADDRNOTAVAIL: ephemeral ports used up by
    # many connections in TIME_WAIT) print it alike: a symptom.
    pattern(MASTER_NOT_RANK0, r"\[Errno 99\] Cannot assign requested address", RDZV,
            grade="symptom",
            cause="EADDRNOTAVAIL: a bind() of an address that is not this machine's (MASTER_ADDR "
                  "naming another node) or a connect() that found no free local port; the "
                  "line does not say which call"),
    pattern(ENDPOINT_PORT_IN_USE,
            r"failed to (?:bind to|listen on) (?P<addr>\S+) \(errno: 98|EADDRINUSE|"
            r"RuntimeError: Address already in use|\[Errno 98\] Address already in use|"
            # the same bind on macOS (EADDRINUSE is 48 there: socket.cpp "(errno: 48 - Address
            # already in use)", Python "[Errno 48]") and on Windows (WSAEADDRINUSE 10048,
            # whose FormatMessage text socket.cpp and Python's [WinError 10048] print)
            r"\(errno: 48 - Address already in use|\[Errno 48\] Address already in use|"
            r"\(errno: 10048\b|\[WinError 10048\]|"
            r"Only one usage of each socket address \(protocol/network address/port\)|"
            # NCCL misc/socket.cc SYSCHECK on bind (a fixed NCCL_COMM_ID port)
            r"Call to bind failed ?: ?Address already in use", RDZV),
    pattern(ENDPOINT_BIND_FAILED,
            r"failed to bind to (?P<addr>\S+) \(errno: 13 - Permission denied", RDZV,
            cause="ports below 1024 are privileged: only root may listen on {addr}",
            fix="pick a port >= 1024 for --master-port / --rdzv-endpoint (e.g. 29500)"),
    # gloo/transport/tcp/device.cc prints the same words for an interface (lookupAddrForIface:
    # "ifa != nullptr. Unable to find address for: eth9") and for a host name
    # (lookupAddrForHostname: "rp != nullptr. ..."): the enforce expression, or a name that
    # reads as an interface, tells which; a bare "Unable to find address for: node01" does not.
    pattern(BAD_SOCKET_IFNAME, r"ifa != nullptr\. Unable to find address for: ?(?P<iface>\S+)|"
            r"Unable to find address for: ?(?P<name>" + IFACE_NAME + r")\s*$", IFACE,
            cause="GLOO_SOCKET_IFNAME names an interface that has no IPv4 address on this node "
                  "(or does not exist; gloo takes plain interface names, not NCCL's ^lo "
                  "syntax)",
            fix="set GLOO_SOCKET_IFNAME to an interface that exists on every node (ip -4 "
                "addr), e.g. the one that routes to the master address"),
    # "rp != nullptr." quotes the host-name lookup: never an interface (HOSTNAME_UNRESOLVABLE)
    pattern(BAD_SOCKET_IFNAME, r"(?<!rp != nullptr\. )Unable to find address for: ?(?P<iface>\S+)",
            IFACE, grade="symptom",
            cause="gloo found no address for {iface}: either GLOO_SOCKET_IFNAME names an "
                  "interface this node lacks, or {iface} is a host name that does not resolve "
                  "(gloo prints both alike when its 'ifa'/'rp' check is not quoted)",
            fix="if {iface} is an interface: set GLOO_SOCKET_IFNAME to one that exists (ip -4 "
                "addr); if it is a host name: add it to /etc/hosts or DNS on every node"),
    pattern(BAD_SOCKET_IFNAME,
            r"no socket interface found|"
            r"connecting to address\s+with family \d+ is neither", IFACE),
    # NCCL's connect failure, by version: <= 2.11 include/socket.h "Connect to 10.0.0.2<4242>
    # failed : Connection refused"; 2.12-2.18 misc/socket.cc "Net : Connect to ... failed :
    # ..."; >= 2.19 "socketStartConnect: Connect to ... failed : ...", and os/linux.cc
    # "socketPollConnect: connect to ... returned Connection refused, exceeded error retry
    # count after 35 attempts"; torch >= 2.0 repeats the WARN, unprefixed, after "Last
    # error:" (its own line, the same line in a joined paste, or a repr's literal \n), and
    # nccl-tests (NCCL >= 2.13) after "Test NCCL failure file:line '<result> / ". A
    # peer address on Docker's default bridge (172.17.0.0/16) or link-local (169.254.0.0/16,
    # fe80::) is most often an interface the other node cannot reach: NCCL
    # advertised the wrong one. A hint, not a cause: containers of one host on Docker's
    # bridge reach each other at 172.17.x.x (a failed connect there is a peer that died), a
    # site network may use 172.17.0.0/16 (RFC 1918 space), and fe80:: with its scope id
    # works between hosts on one link.
    pattern(NCCL_WRONG_INTERFACE,
            r"(?:WARN |^\s*|Last error:(?:\s|\\n)*|Test NCCL failure \S+ '[^']*? / )(?:\w+: )?"
            r"(?:Net : )?[Cc]onnect to \[?"
            r"(?P<addr>172\.17\.\d+\.\d+|169\.254\.\d+\.\d+|fe80:[\w:%]*)\]?(?:<\d+>)? "
            r"(?:failed|returned)", HOSTS, grade="hint",
            cause="NCCL connected to {addr}, a Docker-bridge or link-local address that often "
                  "only its own host can reach: with NCCL_SOCKET_IFNAME unset the peer likely "
                  "advertised a non-routable interface (on one host's Docker bridge, the peer "
                  "may instead have exited)"),
    pattern(PEER_UNREACHABLE,
            r"(?:NCCL )?WARN (?:Call to connect failed|(?:\w+: )?(?:Net : )?[Cc]onnect to \S+ "
            r"(?:failed|returned))", "ddpcheck run --nodes N --stages rendezvous"),
    # gloo's full-mesh setup (ProcessGroupGloo / gloo/rendezvous/context.cc): "Gloo
    # connectFullMesh failed with [.../pair.cc:144] no error" names no cause.
    pattern(PEER_UNREACHABLE, r"connectFullMesh failed with", "ddpcheck run --nodes N "
            "--stages rendezvous", root=False),
    # What a rank sees when a peer process went away (the peer's own error, if logged, is
    # the cause): NCCL misc/socket.cc >= 2.19 "socketProgress: Connection closed by remote
    # peer", older "Call to recv failed : Connection reset by peer"; ncclRemoteError (NCCL
    # >= 2.13) "remote process exited or there was a network error"; gloo pair.cc
    # "Connection closed by peer [ip]:port", "Read error [ip]:port: Connection reset by
    # peer"; c10d TCPStore "failed to recv, got 0 bytes" (the store's host died).
    pattern(PEER_UNREACHABLE,
            r"Connection closed by (?:remote )?peer|Connection reset by peer|"
            r"remote process exited or there was a network error|"
            # torch's detail line for it (NCCLUtils getNcclErrorDetailStr, NCCL >= 2.13)
            r"ncclRemoteError: A call failed possibly due to a network error|"
            r"failed to recv, got 0 bytes|"
            # NCCL proxy.cc: 2.12-2.16 "Proxy Call to rank 3 failed (Connect)", later
            # "[Proxy Service 3] Failed to execute operation Connect from rank 1, retcode 3"
            r"Proxy Call to rank \d+ failed|\[Proxy Service \d+\] Failed to execute operation",
            "ddpcheck run --nodes N --stages rendezvous",
            root=False,
            cause="a peer closed its connection: that process exited (crashed, OOM-killed, "
                  "stopped by the launcher) or the network between the nodes dropped it; the "
                  "peer's own log says which"),
]
