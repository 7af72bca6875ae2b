"""Sockets: port already in use (errno 98), privileged port (errno 13), bad *_SOCKET_IFNAME.

Bind messages come from torch/csrc/distributed/c10d/socket.cpp ("The server socket has
failed to bind to [::]:29500 (errno: 98 - Address already in use)"); the interface ones
from gloo/transport/tcp/device.cc ("Unable to find address for: eth9") and NCCL's
misc/socket.cc (NCCL_SOCKET_IFNAME set to ..., no socket interface found).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.cluster.lifecycle import HOSTNAME_LOOPBACK
from ddpcheck.cluster.peerprobe import PEER_UNREACHABLE
from ddpcheck.cluster.userjob import ENDPOINT_NOT_RECOGNISED
from ddpcheck.diagnoses import BAD_SOCKET_IFNAME
from ddpcheck.explain.causality import SYMPTOM, Explained
from ddpcheck.explain.codes import (
    HOSTNAME_UNRESOLVABLE,
    NCCL_ERROR,
    NCCL_NO_SOCKET_INTERFACE,
    NCCL_WRONG_INTERFACE,
)
from ddpcheck.explain.families import addresses, device, nccl, ncclresult
from ddpcheck.explain.matching import pattern
from ddpcheck.explain.reader import Record
from ddpcheck.launcher.spawn.mastercheck import MASTER_NOT_RANK0
from ddpcheck.node.netprobe import ENDPOINT_BIND_FAILED, ENDPOINT_PORT_IN_USE

RDZV = "ddpcheck run --nodes N --stages rendezvous (the preflight binds the port first)"
IFACE = "ddpcheck run --nodes N (preflight checks every *_SOCKET_IFNAME on every node)"

# An interface name, as opposed to a host name (gloo prints both as "find address for").
IFACE_NAME = (r"\^?(?:eth|en[opsx]?|ib|bond|lo|docker|br|veth|wl|em|hsn|team|vlan|p\d)"
              r"[\w-]*(?:\.\d+)?")
HOSTS = "ddpcheck run --nodes N (check-in resolves every node's name and address)"

PATTERNS = [
    # c10d's warning (torch/csrc/distributed/c10d/socket.cpp) and gloo's fallback
    # (ProcessGroupGloo.cpp createDefaultDevice): the host name resolves to nothing usable.
    pattern(HOSTNAME_LOOPBACK,
            r"Unable to resolve hostname to a \(local\) address\. Using the loopback", HOSTS),
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
            r"\(gai error: -[235]", HOSTS, grade="symptom",
            cause="this node could not resolve {host}, the address it dials (MASTER_ADDR or the "
                  "rendezvous endpoint): this node's own name missing from /etc/hosts, another "
                  "node's name (torchrun advertises the rank-0 node's FQDN) missing from this "
                  "node's DNS, or a misspelt name"),
    pattern(HOSTNAME_UNRESOLVABLE,
            r"rp != nullptr\. Unable to find address for:|"
            # socket.cpp's listen path: "The local IPv6 network addresses cannot be retrieved
            # (gai error: -2 - Name or service not known)" (the node's own name)
            r"The local (?:IPv[46] )?network addresses cannot be retrieved \(gai error: -[235]|"
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
    # error:". A peer address on Docker's default bridge (172.17.0.0/16) or link-local
    # (169.254.0.0/16, fe80::) is most often an interface the other node cannot reach: NCCL
    # advertised the wrong one. A hint, not a cause: containers of one host on Docker's
    # bridge reach each other at 172.17.x.x (a failed connect there is a peer that died), a
    # site network may use 172.17.0.0/16 (RFC 1918 space), and fe80:: with its scope id
    # works between hosts on one link.
    pattern(NCCL_WRONG_INTERFACE,
            r"(?:WARN |^\s*(?:Last error:\s*)?)(?:\w+: )?(?:Net : )?[Cc]onnect to \[?"
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


IFNAME_SET = re.compile(r"NCCL_SOCKET_IFNAME set (?:by environment )?to")
# The variable set by the job's own script as pasted beside its output: an assignment at the
# start of a line ("NCCL_SOCKET_IFNAME=eth0 torchrun ...", an env listing, a "$ "/"+ "
# prompt), after "export" (DeepSpeed's pdsh line "...; export NCCL_SOCKET_IFNAME=eno1; ...")
# or "env". A value must follow; advice in prose ("set NCCL_SOCKET_IFNAME=eth0") is none.
# Evidence that NCCL had a filter, read only for "no socket interface found": unlike NCCL's
# INFO line it says nothing about NCCL_DEBUG, so no absent INFO line may be read beside it.
SHELL_IFNAME = re.compile(r"(?:^\s*(?:[$#+>]\s*)?(?:export\s+)?|\bexport\s+|\benv\s+(?:\w+=\S*"
                          r"\s+)*)NCCL_SOCKET_IFNAME=(?P<value>[^\s;'\"]+)")


# NCCL misc/socket.cc ncclFindInterfaces: with NCCL_SOCKET_IFNAME unset it tries ib*, then
# any interface but docker*/lo, then docker*, then lo, so "Bootstrap : no socket interface
# found" means a filter the user set (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY) excluded them all.
NO_INTERFACE = re.compile(r"no socket interface found|NET/Socket : no interface found")


def _no_interface(e: Explained, ifname_set: bool) -> Explained:
    """NCCL's interface search found nothing. With the variable in the log (NCCL's INFO line,
    or the job's own export) it is the variable (cause). Without it, the same holds unless
    NCCL_SOCKET_FAMILY (or a node with no IP interface at all, NVIDIA/nccl#210) excluded
    them: socket-ifname-invalid shown as a symptom (explain abstains, naming the likely code
    and where to look)."""
    p = e.problem
    if ifname_set:
        return replace(e, problem=BAD_SOCKET_IFNAME.problem(
            p.observed, ranks=p.ranks, hosts=p.hosts,
            cause="NCCL_SOCKET_IFNAME names no interface of this node that has an address "
                  "(NCCL finds at least lo when it is unset)"))
    return replace(e, grade=SYMPTOM, problem=BAD_SOCKET_IFNAME.problem(
        p.observed, ranks=p.ranks, hosts=p.hosts,
        cause="NCCL found no interface for its bootstrap: unset, NCCL falls back to docker "
              "and lo, so a filter set outside this log excludes every interface: most often "
              "NCCL_SOCKET_IFNAME naming interfaces this node lacks (or that have no address), "
              "else NCCL_SOCKET_FAMILY; the log does not show which value",
        fix="look for NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY in the job's environment (env | "
            "grep NCCL_, /etc/nccl.conf, ~/.nccl.conf, the launcher's scripts) and set it to an "
            "interface that exists and reaches the other nodes (ip -4 addr), or unset it"))


# DDP's parameter-count check (torch/csrc/distributed/c10d/comm.cpp via
# _verify_param_shape_across_processes) exchanges the counts with a collective. A count of 0
# is either a rank that really has no trainable parameter (PEFT/LoRA set up on one rank) or
# the count lost in transit by NCCL (a P2P or network setting): with NCCL's own transport
# lines in the log both remain, and the log cannot tell them apart.
ZERO_PARAMS = re.compile(r"has (?:inconsistent )?0 params")
NCCL_TRANSPORT = re.compile(r"NCCL (?:INFO|WARN) (?:NET/|Channel|Ring|Trees|P2P|Connected|"
                            r"Bootstrap)|\bNCCL_(?:SOCKET_IFNAME|IB_\w+|P2P_\w+|NET\w*)=")


def _zero_params(e: Explained, records: Sequence[Record]) -> Explained:
    p = e.problem
    if p.code != "ddp-model-mismatch" or not ZERO_PARAMS.search(p.observed) or not any(
            NCCL_TRANSPORT.search(r.text) for r in records):
        return e
    return replace(e, problem=NCCL_ERROR.problem(
        p.observed, ranks=p.ranks, hosts=p.hosts,
        cause="a rank reported 0 parameters to DDP's first collective while NCCL's transport "
              "is in the log: either that rank built no trainable parameter, or NCCL lost the "
              "count in transit (a P2P or network setting); the log does not say which"))


# torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py _create_tcp_store: the
# agent hosts the store only when utils._matches_machine_hostname(endpoint host) is true;
# otherwise it connects as a client. A node whose own log shows it timing out while
# connecting to its *own* name or address, under the c10d backend, is the endpoint node
# that did not recognise itself (an alias, a second NIC's address, a container's name).
C10D_BACKEND = re.compile(r"c10d_rendezvous_backend|rdzv[_-]backend[= ]+c10d|"
                          r"C10d rendezvous backend|dynamic_rendezvous")
CONNECT_TARGET = re.compile(r"connect to \(?\[?(?P<host>[\w.:-]+?)\]?(?:, |:)(?P<port>\d+)")
LOCAL_NAME = re.compile(r"^\s*host\s+: (?P<host>\S+)\s*$|\baddr=\[(?P<addr>[^\]]+)\]:\d+")
LOOPBACK_NAMES = re.compile(r"^(?:localhost|127\.|::1$|::ffff:127\.)")
# The same client wait on the endpoint node's own name follows an agent that did recognise
# itself but could not bind the port (another process holds it): _create_tcp_store then
# retries as a client. socket.cpp's bind warning (errno 98) tells that case apart.
PORT_TAKEN = re.compile(r"\(errno: 98\b|EADDRINUSE|Address already in use")


def _own_endpoint(e: Explained, records: Sequence[Record]) -> Explained:
    p = e.problem
    if p.code != "endpoint-unreachable" or not (m := CONNECT_TARGET.search(p.observed)):
        return e
    target = m["host"]
    if LOOPBACK_NAMES.match(target) or not any(C10D_BACKEND.search(r.text) for r in records):
        return e
    local = {r.host for r in records if r.host}
    local |= {n["host"] or n["addr"] for r in records if (n := LOCAL_NAME.search(r.text))}
    if target not in local or any(PORT_TAKEN.search(r.text) for r in records):
        return e
    return replace(e, problem=ENDPOINT_NOT_RECOGNISED.problem(
        f"{p.observed} | {target} is this node's own name or address, and its agent "
        "connected to it as a client", ranks=p.ranks, hosts=p.hosts or (target,)))


# A name lookup whose traceback shows the node looking up its own name: Python's socket
# module (gethostbyname(gethostname()), getfqdn()) as torch's elastic agent
# (agent/server/api.py _get_fq_hostname), accelerate and user scripts call it.
OWN_NAME_LOOKUP = re.compile(r"gethostbyname\((?:socket\.)?gethostname\(\)\)|"
                             r"getaddrinfo\((?:socket\.)?gethostname\(\)|getfqdn\(|"
                             r"_get_fq_hostname")
LOOKUP_FRAMES = 8  # lines of traceback above the gaierror that may hold the call


def _own_name(e: Explained, records: Sequence[Record]) -> Explained:
    p = e.problem
    if p.code != "endpoint-unresolvable":
        return e
    f = e.first
    if not any(r.source == f.source and 0 <= f.lineno - r.lineno <= LOOKUP_FRAMES
               and OWN_NAME_LOOKUP.search(r.text) for r in records):
        return e
    return replace(e, problem=HOSTNAME_UNRESOLVABLE.problem(
        f"{p.observed} | raised while the node looked up its own host name",
        ranks=p.ranks, hosts=p.hosts))


def refine(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    ifname_set = any(IFNAME_SET.search(r.text) for r in records)
    out = []
    for e in found:
        e = _own_name(_own_endpoint(_zero_params(e, records), records), records)
        p = e.problem
        if p.code == NCCL_NO_SOCKET_INTERFACE.code and NO_INTERFACE.search(p.observed):
            e = _no_interface(e, ifname_set or any(SHELL_IFNAME.search(r.text)
                                                   for r in records))
        out.append(e)
    out = addresses.gloo_wrapper(out)
    out = ncclresult.quoted_tail(ncclresult.bootstrap_interface(out, records), records)
    out = ncclresult.one_node_interfaces(out, records)
    found = _conditions_yield(ncclresult.odd_family(out, ifname_set, records))
    return device.shared_gpu(nccl.version_mismatch(found, records), records)


# A setting read from a warning or an INFO line (gloo's loopback fallback, c10d's "[W ...]
# cannot be retrieved", NCCL INFO "NET/Socket : Using [1]docker0") is a condition, printed
# at start-up whether or not it matters. Next to a failure of its own kind (a CUDA error,
# an OOM) it is not the cause: it yields, as a consequence would.
CONDITION_CODES = frozenset({HOSTNAME_LOOPBACK.code, NCCL_WRONG_INTERFACE.code,
                             HOSTNAME_UNRESOLVABLE.code, "nccl-net-plugin-unusable",
                             "slurm-without-srun"})
CONDITION_LINE = re.compile(r"Using the loopback|NET/Socket : Using|Bootstrap : Using|"
                            r"^\s*\[\d+\](?:br-|veth|docker|virbr)|\[W[\s\d]|\bWarning:|"
                            r"NCCL INFO|PossibleUserWarning|The `srun` command is available")
# Problems that the conditions above can explain: failures to connect, wait or resolve.
CONNECTION_CODES = frozenset({"endpoint-unreachable", "endpoint-refused", "peer-unreachable",
                              "rendezvous-timeout", "collective-timeout", "nccl-error",
                              "nccl-net-error", "unexplained", "rank-exited", "rank-killed",
                              "endpoint-unresolvable", "slurm-job-cancelled",
                              "rank-zero-only-step-timeout", "rank-never-joined",
                              *CONDITION_CODES})


def _conditions_yield(found: list[Explained]) -> list[Explained]:
    other = any(e.root and e.problem.code not in CONNECTION_CODES for e in found)
    if not other:
        return found
    return [replace(e, root=False) if e.problem.code in CONDITION_CODES
            and CONDITION_LINE.search(e.first.text) else e for e in found]
