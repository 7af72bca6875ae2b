"""What the rest of a log says of a network line's reading: the context network.py's
patterns cannot see from their own line.

Runs inside ``ddpcheck explain``, after the families matched and before the failures are
ordered. Each step reads the whole log for one fact: whether the job set
NCCL_SOCKET_IFNAME (NCCL's INFO line or its own export) when NCCL found no interface; NCCL's
transport lines beside DDP's "0 params"; an endpoint the node could not reach that is its
own name under the c10d backend; a name lookup of the node's own name; and warned
conditions (loopback, docker bridges) that yield to a failure of another kind. It then hands
over to the NCCL and gloo refinements (``addresses``, ``ncclresult``, ``ncclshm``, ``nccl``,
``device``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.cluster.lifecycle import HOSTNAME_LOOPBACK
from ddpcheck.cluster.userjob import ENDPOINT_NOT_RECOGNISED
from ddpcheck.diagnoses import BAD_SOCKET_IFNAME, Problem, load_catalogue
from ddpcheck.explain.causality import CAUSE, MESH_CONNECT, SYMPTOM, Explained
from ddpcheck.explain.codes import (
    HOSTNAME_UNRESOLVABLE,
    NCCL_ERROR,
    NCCL_NO_SOCKET_INTERFACE,
    NCCL_WRONG_INTERFACE,
)
from ddpcheck.explain.families import (
    addresses,
    device,
    nccl,
    ncclinterfaces,
    ncclresult,
    ncclshm,
    rendezvous,
)
from ddpcheck.explain.prefilter import records_for
from ddpcheck.explain.reader import Record
from ddpcheck.explain.stores import RDZV_STORE

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
# net_ib.cc's "NET/IB : No IP interface found." runs the same search for IB's out-of-band
# socket.
NO_INTERFACE = re.compile(r"no socket interface found|NET/Socket : no interface found|"
                          r"NET/IB ?: ?No IP interface found")


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
        cause="NCCL found no interface for its bootstrap (or IB's out-of-band socket): unset, "
              "NCCL falls back to docker and lo, so a filter set outside this log excludes "
              "every interface: most often "
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
# that did not recognise itself (an alias, a second NIC's address, a container's name); the
# c10d backend is seen as ``stores`` sees it.
CONNECT_TARGET = re.compile(r"connect to \(?\[?(?P<host>[\w.:-]+?)\]?(?:, |:)(?P<port>\d+)")
LOCAL_NAME = re.compile(r"^\s*host\s+: (?P<host>\S+)\s*$|\baddr=\[(?P<addr>[^\]]+)\]:\d+")
LOOPBACK_NAMES = re.compile(r"^(?:localhost|127\.|::1$|::ffff:127\.)")
# The same client wait on the endpoint node's own name follows an agent that did recognise
# itself but could not bind the port (another process holds it): _create_tcp_store then
# retries as a client. socket.cpp's bind warning (errno 98) tells that case apart.
# Who else (stop 28, c10d_rendezvous_backend.py _create_tcp_store, torch 1.9-2.13): the agent
# that recognised itself retries as a client after *any* failure to create the server
# (ValueError, RuntimeError, TimeoutError): a privileged port (errno 13) or the thrown "failed
# to listen on any local network address" too, not only a port in use. A bind warning on
# [::] with errno 97/99 alone is IPv6 turned off, after which the IPv4 bind succeeds.
PORT_TAKEN = re.compile(r"\(errno: (?:98|48|10048|13)\b|EADDRINUSE|Address already in use|"
                        r"Only one usage of each socket address|"
                        r"failed to listen on any local network address")
# The agent that did host the store says so (logger.info in _create_tcp_store): then its own
# client wait is not the endpoint going unrecognised.
HOSTED = re.compile(r"hosts the TCP store for the C10d rendezvous backend")


def _own_endpoint(e: Explained, records: Sequence[Record]) -> Explained:
    p = e.problem
    if p.code != "endpoint-unreachable" or not (m := CONNECT_TARGET.search(p.observed)):
        return e
    target = m["host"]
    if LOOPBACK_NAMES.match(target) or not any(RDZV_STORE.search(r.text) for r in records):
        return e
    local = {r.host for r in records if r.host}
    local |= {n["host"] or n["addr"] for r in records if (n := LOCAL_NAME.search(r.text))}
    if target not in local or any(PORT_TAKEN.search(r.text) for r in records) or any(
            r.source == e.first.source and HOSTED.search(r.text) for r in records):
        return e
    return replace(e, problem=ENDPOINT_NOT_RECOGNISED.problem(
        f"{p.observed} | {target} is this node's own name or address, and its agent "
        "connected to it as a client", ranks=p.ranks, hosts=p.hosts or (target,)))


# GLOO_SOCKET_IFNAME=lo exported by the job's own script (its `set -x` trace "+ export
# GLOO_SOCKET_IFNAME=lo", an env listing) beside a gloo peer dialled at 127.0.0.1: gloo bound
# the interface it was told to (ProcessGroupGloo.cpp createDeviceForInterface) and
# advertised loopback, whatever /etc/hosts says. Recorded: runs/netns-socket-ifname-lo.
SHELL_GLOO_LO = re.compile(r"(?:^\s*(?:[$#+>]\s*)?(?:export\s+)?|\bexport\s+|\benv\s+)"
                           r"GLOO_SOCKET_IFNAME=['\"]?lo['\"]?(?=[\s;]|$)")


# A gloo pair dialled at lo's address: torch 2.x's gloo logs each try ("[...debug_logger.cc:9]
# ERROR failed to connect, ... remote=[127.0.0.1]:N"), torch 1.13.1's gloo only raises
# (pair.cc:799 "connect [127.0.0.1]:33175: Connection refused", pair.h:324 "Connect timeout
# [127.0.0.1]:N"), which the rules read as peer-unreachable (recorded: tests/data/explain/
# runs-torch1.13/netns-socket-ifname-lo).
LO_DIALED = re.compile(r"remote=\[127\.0\.0\.1\]|(?:\bconnect|Connect timeout) \[127\.0\.0\.1\]:\d")


def _dialled_lo(p: Problem) -> bool:
    """A gloo peer dialled at lo's address; torch 2.1.2's gloo names no address ("Gloo
    connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.h:301] Connect
    timeout [none]", ProcessGroupGloo.cpp:138, causality.MESH_CONNECT): with the failure on
    two hosts, lo (which reaches no other host) is still the interface it bound (recorded:
    tests/data/explain/runs-torch2.1/netns-socket-ifname-lo)."""
    return bool(LO_DIALED.search(p.observed)
                or len(p.hosts) > 1 and MESH_CONNECT.search(p.observed))


def _gloo_ifname_lo(e: Explained, records: Sequence[Record]) -> Explained:
    p = e.problem
    if p.code not in (HOSTNAME_LOOPBACK.code, "peer-unreachable") or not _dialled_lo(p):
        return e
    if not any(SHELL_GLOO_LO.search(r.text) for r in records_for(records, SHELL_GLOO_LO)):
        return e
    return replace(e, root=True, grade=CAUSE, problem=load_catalogue()[
        "socket-ifname-unreachable"].problem(
        f"the job exports GLOO_SOCKET_IFNAME=lo, and a gloo peer was dialled at 127.0.0.1 | "
        f"{p.observed}", ranks=p.ranks, hosts=p.hosts))


# A name lookup whose traceback shows the node looking up its own name: Python's socket
# module (gethostbyname(gethostname()), getfqdn()) as torch's elastic agent
# (agent/server/api.py _get_fq_hostname), accelerate and user scripts call it.
# torch elastic rendezvous/utils.py _matches_machine_hostname (1.9-2.13, c10d backend's
# is-this-node-the-host test): its lookup of the endpoint is in a try (2.x), its
# socket.getaddrinfo(socket.gethostname(), ...) is not, so a gaierror raised in that frame is
# this node's own name (the call spans lines: the frame name, not the code line, says so).
OWN_NAME_LOOKUP = re.compile(r"gethostbyname\((?:socket\.)?gethostname\(\)\)|"
                             r"getaddrinfo\((?:socket\.)?gethostname\(\)|getfqdn\(|"
                             r"_get_fq_hostname|in _matches_machine_hostname\s*$")
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


# The launch line of a c10d-rendezvous job ("torchrun --rdzv_backend=c10d
# --rdzv_endpoint=leader ..."), as a job script's trace or a pasted command shows it.
C10D_LAUNCH = re.compile(r"--rdzv[-_]backend[= ]['\"]?c10d\b")
ENDPOINT_HOST = re.compile(r"--rdzv[-_]endpoint[= ]['\"]?(?P<host>\[[^\]]+\]|[^\s:'\"]+)")
ADDRESS = re.compile(r"^(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F:]*:[0-9a-fA-F:.]*)$")
# The worker's store client giving up (c10d socket.cpp / TCPStore.cpp, torch 2.x).
STORE_GAVE_UP = re.compile(r"DistNetworkError|DistStoreError|The client socket has (?:timed "
                           r"out|failed to connect)")
DIALLED = re.compile(r"network addresses of \((?P<host>[^,]+), \d+\) cannot be retrieved")


def _advertised_name(e: Explained, records: Sequence[Record]) -> Explained:
    """A name the workers cannot resolve that is not the rendezvous endpoint the launch line
    gives: the rank-0 agent's own name, which it advertised. torch/distributed/elastic/
    rendezvous/api.py RendezvousStoreInfo.build (2.4-2.13): the agent of rank 0 publishes
    ``local_addr or socket.getfqdn()`` with a free port as the workers' MASTER_ADDR/PORT; the
    static backend uses the endpoint itself, so only c10d's is read."""
    p = e.problem
    if p.code not in (HOSTNAME_UNRESOLVABLE.code, "endpoint-unresolvable") or not (
            d := DIALLED.search(p.observed)):
        return e
    launch = [r for r in records if C10D_LAUNCH.search(r.text)]
    ends = {m["host"].strip("[]") for r in launch if (m := ENDPOINT_HOST.search(r.text))}
    name = d["host"].strip()
    if len(ends) != 1 or name in ends or LOOPBACK_NAMES.match(name) or ADDRESS.match(name):
        return e
    endpoint = next(iter(ends))
    # c10d tries each address family and warns for each that fails: a name unknown in IPv4
    # too, or a store connection that then failed, decides; the IPv6 warning alone may be a
    # name with only an IPv4 address (the job goes on), so it stays what the log shows.
    failed = any(f"IPv4 network addresses of ({name}," in r.text or STORE_GAVE_UP.search(r.text)
                 for r in records)
    return replace(e, root=e.root or failed, grade=CAUSE if failed else e.grade,
                   problem=load_catalogue()[
        "advertised-name-unresolvable"].problem(
        f"{p.observed} | the launch line's rendezvous endpoint is {endpoint}, so {name} is "
        "the name the rank-0 agent advertised",
        cause=f"the c10d rendezvous agent of rank 0 advertised its own name {name} "
              "(socket.getfqdn()) as the workers' MASTER_ADDR, and this node cannot resolve "
              "it: that name is missing from this node's DNS or /etc/hosts (a pod or host "
              "name only its own node knows)",
        fix=f"make {name} resolve on every node (DNS, /etc/hosts, a headless service for "
            "pods), or pass torchrun --local-addr <that node's reachable IP> on the rank-0 "
            "node so it advertises an address", ranks=p.ranks, hosts=p.hosts))


def refine(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    ifname_set = any(IFNAME_SET.search(r.text) for r in records_for(records, IFNAME_SET))
    out = []
    for e in found:
        e = _own_name(_own_endpoint(_zero_params(e, records), records), records)
        e = _advertised_name(_gloo_ifname_lo(e, records), records)
        p = e.problem
        if p.code == NCCL_NO_SOCKET_INTERFACE.code and NO_INTERFACE.search(p.observed):
            e = _no_interface(e, ifname_set or any(SHELL_IFNAME.search(r.text)
                                                   for r in records_for(records, SHELL_IFNAME)))
        out.append(e)
    out = rendezvous.retried_through(addresses.gloo_wrapper(out), records)
    out = rendezvous.agent_rank_beyond(rendezvous.no_route_behind(out, records), records)
    out = rendezvous.master_not_rank0_under_srun(
        rendezvous.loopback_elsewhere(out, records), records)
    out = rendezvous.agents_sharing_a_host(out, records)
    out = ncclresult.quoted_tail(ncclinterfaces.bootstrap_interface(out, records), records)
    out = ncclinterfaces.one_node_interfaces(out, records)
    found = _conditions_yield(ncclinterfaces.odd_family(out, ifname_set, records))
    found = ncclshm.created(found, records)
    return device.shared_gpu(nccl.version_mismatch(found, records), records)


# A setting read from a warning or an INFO line (gloo's loopback fallback, c10d's "[W ...]
# cannot be retrieved", NCCL INFO "NET/Socket : Using [1]docker0") is a condition, printed
# at start-up whether or not it matters. Next to a failure of its own kind (a CUDA error,
# an OOM) it is not the cause: it yields, as a consequence would.
CONDITION_CODES = frozenset({HOSTNAME_LOOPBACK.code, NCCL_WRONG_INTERFACE.code,
                             HOSTNAME_UNRESOLVABLE.code, "advertised-name-unresolvable",
                             "nccl-net-plugin-unusable", "slurm-without-srun"})
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
