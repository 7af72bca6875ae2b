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
PORT_OUT_OF_RANGE_CAUSE = ("the port {port} is not a TCP port (1-65535): the job script "
                           "computed it (a base port plus a job or array id) or it was mistyped")
PORT_OUT_OF_RANGE_FIX = ("set a port from 1024 to 65535 (MASTER_PORT / torchrun --master-port, "
                         "or the port in --rdzv-endpoint), e.g. MASTER_PORT=$((20000 + "
                         "SLURM_JOB_ID % 20000))")

# getaddrinfo's "no such name" / "try again" codes as socket.cpp prints them ("gai error: N
# - <gai_strerror>"): glibc EAI_NONAME -2, EAI_AGAIN -3, EAI_NODATA -5; macOS EAI_NONAME 8
# ("nodename nor servname provided, or not known"); Windows WSAHOST_NOT_FOUND 11001,
# WSATRY_AGAIN 11002, WSANO_DATA 11004 (localised text, so by number).
GAI_NO_NAME = r"(?:-[235]\b|8 - nodename nor servname|1100[124]\b)"

PATTERNS = [
    # c10d's warning (torch/csrc/distributed/c10d/socket.cpp) and gloo's fallback
    # (ProcessGroupGloo.cpp createDefaultDevice): the host name resolves to nothing usable.
    # Who prints it (stop 28): only ProcessGroupGloo::createDefaultDevice (torch 1.x-2.13,
    # TORCH_WARN_ONCE), when doesHostnameResolveToUsableAddress(gethostname()) is false:
    # getaddrinfo of the name failed, or bind() failed on every address it resolved to. A
    # name at 127.0.1.1 binds (lo holds 127.0.0.0/8) and prints nothing, so the cause is the
    # name not resolving to an address of this node; the effect is the code's: gloo binds
    # and advertises loopback. Recorded: tests/data/explain/runs/netns-own-hostname-not-in-hosts
    # (node1's name missing from its /etc/hosts).
    pattern(HOSTNAME_LOOPBACK,
            r"Unable to resolve hostname to a \(local\) address\. Using the loopback", HOSTS,
            cause="this node's host name does not resolve to an address of its own (missing "
                  "from /etc/hosts and DNS, or an entry for another address), so gloo fell "
                  "back to loopback and advertises it: in a multi-node job the other nodes "
                  "cannot connect to it"),
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
            # gloo error.cc prints "remote=[127.0.1.1]:port" with no space after "=" (the
            # rule wanted one until stop 28: "SO_ERROR: Connection timed out, remote=[...]"
            # was missed)
            r"(?:(?:Connection closed by peer|Read error|Connect timeout|connect|"
            r"Timed out .* from) |remote=)\[127\.0\.1\.1\]:\d+", HOSTS, grade="hint",
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
    # gloo device.cc lookupAddrForHostname: before gloo 575bf30 (2025-04) getaddrinfo's
    # result was checked with GLOO_ENFORCE_NE(rv, -1), so a name that does not resolve
    # (EAI_NONAME is -2) left no address and failed "rp != nullptr. Unable to find address
    # for: <host>"; since then the check is GLOO_ENFORCE_EQ(rv, 0): "[enforce fail at
    # .../gloo/transport/tcp/device.cc:99] rv == 0. -2 vs 0" (torch builds with that gloo).
    pattern(HOSTNAME_UNRESOLVABLE,
            r"rp != nullptr\. Unable to find address for:|"
            r"device\.cc:\d+\] rv == 0\. -[235] vs 0|"
            r"Unable to find address for: ?(?!" + IFACE_NAME + r"\s*$)\S*[.-]\S*\s*$", HOSTS),
    # gloo device.cc lookupAddrForHostname (gloo 1ff2d84, 2019-07, onwards): the name
    # resolved, but bind(2) failed for every address it resolved to: "Unable to find address
    # for node01; bind(2) for [10.1.2.3]:0 failed with: Cannot assign requested address".
    # EADDRNOTAVAIL: the name resolves to an address no interface of this node has (a stale
    # /etc/hosts entry, a name that resolves to another machine). torch's default device
    # checks the name first (ProcessGroupGloo doesHostnameResolveToUsableAddress) and falls
    # back to loopback instead, so this is a name given to gloo explicitly: a hint.
    pattern(HOSTNAME_UNRESOLVABLE,
            r"Unable to find address for (?P<host>[^;\s]+); bind\(2\) for (?P<addr>\S+) "
            r"failed with: (?P<err>Cannot assign requested address|.+)", HOSTS, grade="hint",
            cause="gloo was given the host name {host}, which resolves to {addr}, and bind(2) "
                  "there failed ({err}): that address is not one of this node's (a stale "
                  "/etc/hosts entry, or a name of another machine)"),
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
    # Who else (stop 28): torch's store never binds MASTER_ADDR. socket.cpp's listen
    # (1.10-2.13) binds what getaddrinfo(nullptr, port, AI_PASSIVE) gives ([::] and 0.0.0.0),
    # and the libuv store (TCPStoreLibUvBackend.cpp makeWithPort, 2.4+) binds "::", then
    # "0.0.0.0": with MASTER_ADDR naming another node, rank 0 binds fine and then times out
    # connecting to it. So a bind of a named address failing with EADDRNOTAVAIL comes from
    # another program: NCCL's bootstrap root binding NCCL_COMM_ID ("Call to bind failed :
    # Cannot assign requested address"), a launcher or script binding MASTER_ADDR itself
    # (socket.bind): a hint, not a cause. gloo's own "bind(2) for ... failed" is a host
    # name's (above).
    pattern(MASTER_NOT_RANK0,
            r"failed to bind to (?P<addr>(?!\[::\]|0\.0\.0\.0)\S+) \(errno: 99|"
            r"^(?!.*bind\(2\) for)(?!.*\bfailed to listen on\b).*"
            r"bind(?!.*(?:\[::\]|0\.0\.0\.0)).*Cannot assign requested address", RDZV,
            grade="hint",
            cause="a bind() of an address that is not this machine's failed (EADDRNOTAVAIL): "
                  "torch's store binds only wildcard addresses, so it is a program binding "
                  "MASTER_ADDR or NCCL_COMM_ID itself, whose address names another node"),
    # The libuv store's "The server socket has failed to listen on any local network
    # address. port: 29500, useIpv6: 0, code: -99, name: EADDRNOTAVAIL" (2.4+) is the
    # wildcard 0.0.0.0 (after "::" failed): no address of MASTER_ADDR's is involved. A
    # symptom (was master-addr-not-rank0-node, cause, until stop 28).
    pattern(MASTER_NOT_RANK0, r"failed to listen on .*code: -99, name: EADDRNOTAVAIL", RDZV,
            grade="symptom",
            cause="the store could not bind its wildcard address (EADDRNOTAVAIL): torch binds "
                  "'::' and '0.0.0.0', not MASTER_ADDR, so the line does not say MASTER_ADDR "
                  "names another node; an IP stack without that family, or a network "
                  "namespace without addresses, prints it"),
    # Python's OSError without the call: a bind() of an address this machine lacks, or a
    # connect() that found no free local port (EADDRNOTAVAIL: ephemeral ports used up by
    # many connections in TIME_WAIT) print it alike: a symptom.
    pattern(MASTER_NOT_RANK0, r"\[Errno 99\] Cannot assign requested address", RDZV,
            grade="symptom",
            cause="EADDRNOTAVAIL: a bind() of an address that is not this machine's (MASTER_ADDR "
                  "naming another node) or a connect() that found no free local port; the "
                  "line does not say which call"),
    # Who else (stop 28): torch's store is C++ (socket.cpp "(errno: 98 - ...)", libuv
    # "EADDRINUSE", torch 1.x tcputils "RuntimeError: Address already in use"); Python's own
    # OSError ("[Errno 98]", macOS "[Errno 48]", Windows "[WinError 10048]") comes from a
    # Python bind: a web or metrics server of the job (TensorBoard, a serving API, a
    # dashboard) as well as a script that binds MASTER_PORT itself. A hint.
    pattern(ENDPOINT_PORT_IN_USE,
            r"^(?!.*\(errno: )(?!.*EADDRINUSE)"
            r".*(?:\[Errno (?:98|48)\] Address already in use|\[WinError 10048\])", RDZV,
            grade="hint",
            cause="a Python program's bind() found its port taken (OSError EADDRINUSE): the "
                  "store's port when the job's own code binds MASTER_PORT, else another server "
                  "of the job (TensorBoard, a serving API); torch's store prints socket.cpp's "
                  "words instead"),
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
    # A port number that is no TCP port, from a job script's arithmetic (a base port plus the
    # job id) or a typo: init_process_group's env:// and tcp:// stores (distributed/
    # rendezvous.py _create_c10d_store: "ValueError: port must have value from 0 to 65535 but
    # was 70000.", real run s33-env-master-port-out-of-range) and torchrun's endpoint parser
    # (elastic/rendezvous/utils.py parse_rendezvous_endpoint, for --master-port as for
    # --rdzv-endpoint: "The port number of the rendezvous endpoint '127.0.0.1:70000' must be
    # an integer between 0 and 65536."). Whose port it is, stores.refine tells.
    pattern(ENDPOINT_BIND_FAILED,
            r"ValueError: port must have value from 0 to 65535 but was (?P<port>-?\d+)", RDZV,
            cause=PORT_OUT_OF_RANGE_CAUSE, fix=PORT_OUT_OF_RANGE_FIX),
    pattern(ENDPOINT_BIND_FAILED,
            r"port number of the rendezvous endpoint '[^']*?:(?P<port>[^':]*)' must be an "
            r"integer between", RDZV,
            cause=PORT_OUT_OF_RANGE_CAUSE, fix=PORT_OUT_OF_RANGE_FIX),
    # socket.cpp's listen path (SocketListenOp::tryListen, torch 1.10-2.13) calls
    # getaddrinfo(nullptr, port, AI_PASSIVE | AI_NUMERICSERV): it looks up no name (the
    # wildcard address), so "The local IPv6 network addresses cannot be retrieved (gai
    # error: -2 ...)" does not say this node's name fails to resolve (it was read as that
    # until stop 28): the resolver itself failed (nsswitch, gai.conf, a libc without the
    # family). A symptom: the line names no cause. After the bind rules: the thrown error joins
    # every family's error in one line, and an errno 98 there is the cause.
    pattern(HOSTNAME_UNRESOLVABLE,
            r"The local (?:IPv[46] )?network addresses cannot be retrieved \(gai error: "
            + GAI_NO_NAME, HOSTS, grade="symptom",
            cause="getaddrinfo failed for the store's wildcard listen address, which looks up "
                  "no host name: the resolver configuration of this node (nsswitch.conf, "
                  "gai.conf) or its libc failed, not a name"),
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
    # (not gloo's "Unable to find address for node01; bind(2) for ..." host-name form)
    pattern(BAD_SOCKET_IFNAME, r"(?<!rp != nullptr\. )Unable to find address for: ?"
            r"(?P<iface>[^;\s]+)(?!;)(?!\S)",
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
    # gloo's pair connect that got no reply at all (gloo/transport/tcp/pair.h / pair.cc
    # "Connect timeout [none]" or "Connect timeout [ip]:port", under torch's "Gloo
    # connectFullMesh failed with"): a firewall that DROPs the job's ports but the rendezvous
    # port (recorded: runs/s30-netns-peer-ports-dropped, iptables -j DROP) and an advertised
    # address on a network the other node does not reach print it alike; a REJECT's reset
    # reads "Connection refused" instead (runs/netns-peer-ports-rejected). A symptom.
    pattern(PEER_UNREACHABLE, r"connectFullMesh failed with .*Connect timeout",
            "ddpcheck run --nodes N --stages rendezvous", root=False,
            cause="gloo's connection to a peer got no reply at all: the address the peer "
                  "advertised is on a network this node does not reach (a wrong interface, a "
                  "host name resolving elsewhere), or a firewall silently drops the job's ports "
                  "other than the rendezvous port (iptables DROP, a security group)",
            fix="check both on every node: GLOO_SOCKET_IFNAME (NCCL_SOCKET_IFNAME) set to the "
                "interface of the network the nodes share, and TCP open between the nodes on "
                "all ports (iptables -L -n -v; at least the ephemeral range, "
                "net.ipv4.ip_local_port_range)"),
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
    #
    # torch's TCPStore client (Utils.hpp recvBytes / sendBytes): "failed to recv, got 0
    # bytes" (2.x up to 2.6), "Failed to recv, got 0 bytes. Connection was likely closed.
    # Did the remote server shutdown or crash?" and "Failed to send, sent 0 bytes. ..." (2.7+),
    # and SYSCHECK's strerror, "DistNetworkError: Broken pipe" / "Connection reset by peer"
    # (the store's host is gone). Who else (stop 28): TCPStore.cpp's teardown warning
    # "[W... TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(...): failed to recv,
    # got 0 bytes" is printed by healthy jobs whose store host exits first: a [W] TCPStore
    # line is no failure. gloo's other words for a peer that went away or never answered:
    # pair.cc <= 2022 "connect [ip]:port: Connection refused", "Socket unexpectedly closed
    # [ip]:port", "Socket closed [ip]:port", "writev [ip]:port: Broken pipe"; gloo >= 2023
    # helpers.h/error.cc "timed out connecting: SO_ERROR: No route to host, remote=[ip]:port".
    pattern(PEER_UNREACHABLE,
            r"^(?!.*\[W[\s\d][^\]]*TCPStore\.cpp)(?:.*(?:"
            r"Connection closed by (?:remote )?peer|Connection reset by peer|"
            r"remote process exited or there was a network error|"
            # torch's detail line for it (NCCLUtils getNcclErrorDetailStr, NCCL >= 2.13)
            r"ncclRemoteError: A call failed possibly due to a network error|"
            r"[Ff]ailed to recv, got 0 bytes|Failed to send, sent 0 bytes|"
            r"DistNetworkError: Broken pipe|"
            r"Socket (?:unexpectedly )?closed \[[^\]]+\]:\d+|"
            r"(?:connect|writev) \[[^\]]+\]:\d+: [A-Z]|"
            r"timed out connecting: SO_ERROR: .*remote=\[))|"
            # NCCL proxy.cc: 2.12-2.16 "Proxy Call to rank 3 failed (Connect)", later
            # "[Proxy Service 3] Failed to execute operation Connect from rank 1, retcode 3"
            r"Proxy Call to rank \d+ failed|\[Proxy Service \d+\] Failed to execute operation",
            "ddpcheck run --nodes N --stages rendezvous",
            root=False,
            cause="a peer closed its connection: that process exited (crashed, OOM-killed, "
                  "stopped by the launcher) or the network between the nodes dropped it; the "
                  "peer's own log says which"),
]
