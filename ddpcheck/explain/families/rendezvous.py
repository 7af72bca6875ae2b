"""Rendezvous and store connection failures: timeouts, unreachable endpoints, names.

Messages from torch/csrc/distributed/c10d/socket.cpp and TCPStore.cpp ("The client socket
has timed out after ...", "failed to connect to ... (errno: 110 ...)") and from
torch/distributed/elastic/rendezvous (RendezvousTimeoutError, RendezvousConnectionError).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.cluster.checkin import ENDPOINT_NOT_A_STORE
from ddpcheck.cluster.lifecycle import TWO_LAUNCHERS
from ddpcheck.cluster.namecheck import DIAL_WRONG_ADDRESS
from ddpcheck.diagnoses import Problem
from ddpcheck.explain.causality import Explained
from ddpcheck.explain.codes import RENDEZVOUS_TIMEOUT
from ddpcheck.explain.families.slurm import SRUN_TASK, TORCHRUN_AGENT
from ddpcheck.explain.matching import Hit, observed_lines, pattern, where
from ddpcheck.explain.prefilter import records_for
from ddpcheck.explain.reader import Record, last_lines
from ddpcheck.judgements.ranklayout import RANK_OUT_OF_RANGE, RANK_OVERLAP, WORLD_SIZE_DIFFERS
from ddpcheck.launcher.spawn.mastercheck import MASTER_LOOPBACK, MASTER_NOT_RANK0
from ddpcheck.node.netprobe import (
    ENDPOINT_NO_ROUTE,
    ENDPOINT_REFUSED,
    ENDPOINT_UNREACHABLE,
    ENDPOINT_UNRESOLVABLE,
)
from ddpcheck.scheduler.contradictions import NODE_RANK_INVALID

RDZV = "ddpcheck run --nodes N --stages rendezvous (on every node, same --rdzv-endpoint)"
# Evidence the log alone cannot split: say which candidates remain.
# socket.cpp SocketConnectOp (1.10-2.13) retries a refused or reset connect and a name
# getaddrinfo cannot resolve until the deadline, then throws "timed out": so the timeout is
# printed alike for a store host not started yet (or gone), a dropped SYN (firewall), a name
# that does not resolve, and a c10d endpoint node that did not recognise itself (its agent
# waits as a client of its own address).
UNREACHABLE_CAUSE = (
    "nothing answered at {addr} in time: the host node (or rank 0) had not started, was "
    "still busy before init_process_group (with env:// or tcp://, rank 0's own process hosts "
    "the store: a dataset download or preprocessing there first), or had crashed, a firewall "
    "drops the port, the name does not resolve here, or the address is wrong or on a network "
    "this node does not reach")
# C10D_WARNING's prefix: "[W1124 08:52:25.123 socket.cpp:697] [c10d] " (2.2+), "[W
# socket.cpp:558] [c10d] " (1.10-2.1). socket.cpp warns once per address and per retry, and
# goes on: only the thrown error (C10D_ERROR "[E ...]", or the exception) ends the connect.
# TCPStore.cpp's client loop (2.3+) warns "TCP client failed to connect/validate to host
# h:p - retrying (try=0, timeout=..., delay=...): <socket.cpp's error>" and tries again (a
# store host that comes up later ends it); its last word is "- timed out (try=N, ...): ...".
NOT_A_SOCKET_WARNING = r"^(?!.*\[W[\s\d][^\]]*socket\.cpp)(?!.* - retrying \(try=)"
NO_ROUTE_CAUSE = ("the kernel or a router answered that no route leads to {addr} (EHOSTUNREACH"
                  " / ENETUNREACH): the address is on a network this node is not connected to "
                  "(often a name that resolves to a management or admin network), or the host "
                  "is down, or a firewall rejects with host-unreachable")
NO_ROUTE_FIX = ("set MASTER_ADDR (or --rdzv-endpoint) to an address on a network every node "
                "has (ip -o addr; a name that resolves to the cluster network's address), or "
                "fix the routing")
# A name (not an address) every address of which has no route at all (101 ENETUNREACH; 113,
# EHOSTUNREACH, is also a host that is down on a network this node has): this node resolves
# the name to an address on no network it has, a stale /etc/hosts or DNS entry (a real run:
# runs/s32d-netns-stale-hosts-entry, node1's /etc/hosts mapping node0 to 10.77.0.1; torch
# 2.13 prints the per-address sockaddr garbled, so the wrong address is not in the log).
IP_LITERAL = re.compile(r"^(?:\d{1,3}(?:\.\d{1,3}){3}|\[?[0-9A-Fa-f:]*:[0-9A-Fa-f:.]*\]?)$")
NAME_NO_ROUTE_CAUSE = (
    "this node resolves {name} to addresses it has no route to at all (ENETUNREACH for each): "
    "a stale or wrong /etc/hosts or DNS entry for {name} here, or a name that resolves to "
    "another network (a management or IPv6 address without a route)")
NAME_NO_ROUTE_FIX = (
    "on this node, check getent hosts {name} against {name}'s cluster address (ip -o addr on "
    "{name}) and correct /etc/hosts or DNS; or dial an address every node reaches "
    "(MASTER_ADDR / --rdzv-endpoint set to rank 0's cluster IP)")


def _host_port(endpoint: str) -> str:
    """socket.cpp's "(host, port)" as host:port."""
    host, _, port = endpoint.partition(", ")
    return f"{host}:{port}" if port else endpoint


def no_route_problem(observed: str, endpoint: str | None, addr: str, unreachable_net: bool,
                     **where_: tuple) -> Problem:
    """No route to the endpoint: ``dial-name-wrong-address`` when the endpoint is a name and
    every address said ENETUNREACH (``unreachable_net``), else ``endpoint-no-route`` naming
    the endpoint (else ``addr``, the address a line names)."""
    name = endpoint.partition(", ")[0] if endpoint else ""
    if name and not IP_LITERAL.match(name) and unreachable_net:
        return DIAL_WRONG_ADDRESS.problem(observed, cause=NAME_NO_ROUTE_CAUSE.format(name=name),
                                          fix=NAME_NO_ROUTE_FIX.format(name=name), **where_)
    return ENDPOINT_NO_ROUTE.problem(
        observed, cause=NO_ROUTE_CAUSE.format(addr=_host_port(endpoint) if endpoint else addr),
        fix=NO_ROUTE_FIX, **where_)


def no_route(hits: Sequence[Hit]) -> Problem:
    """The no-route problem of these lines (the endpoint the thrown error names)."""
    found = [h.match.groupdict() for h in hits]
    endpoint = next((g["endpoint"] for g in found if g.get("endpoint")), None)
    addr = next((g["addr"] for g in found if g.get("addr")), "the address dialled")
    return no_route_problem(observed_lines(hits), endpoint, addr,
                            not any("errno: 113" in h.record.text for h in hits), **where(hits))


PATTERNS = [
    pattern(ENDPOINT_UNREACHABLE,
            r"client socket has timed out after \S+ while trying to connect to "
            r"\(?(?P<addr>[^)]+?)\)?\.?$",
            RDZV, cause=UNREACHABLE_CAUSE),
    # c10d socket.cpp's connect, or Python's (torch 1.x store clients, scripts probing
    # MASTER_ADDR), ending in EHOSTUNREACH (113) or ENETUNREACH (101): the kernel or a router
    # answered that no route leads there, which a silent firewall never does.
    # Who else (stop 28): socket.cpp SocketConnectOp::tryConnect tries every address the
    # name resolves to (IPv6 and IPv4, AI_V4MAPPED | AI_ALL) and warns for each one that
    # fails ("[W1124 ... socket.cpp:697] [c10d] The client socket has failed to connect to
    # [node1]:29500 (errno: 101 - Network is unreachable)." with C10D_WARNING), then tries
    # the next: a dual-stack name whose IPv6 address has no route prints it in healthy jobs.
    # Only the thrown error ("failed to connect to any network address of (h, p). ...",
    # which carries the per-address errors) or a line that is not that warning is read.
    # The thrown error names the endpoint first, "(h, p)", then each address's errno; the
    # endpoint is what the user set (torch 2.13 can print the per-address sockaddr garbled:
    # "failed to connect to 119.85.0.0:60280" for 10.123.0.1:41201, runs/s32-netns-rdzv-
    # endpoint-no-route).
    pattern(ENDPOINT_NO_ROUTE,
            NOT_A_SOCKET_WARNING +
            r".*?(?:any network address of \((?P<endpoint>[^)]+)\)\..*?)?"
            r"failed to connect to (?P<addr>\S+?) \(errno: (?:113|101)\b|"
            r"\[Errno (?:113|101)\] (?:No route to host|Network is unreachable)", RDZV,
            combine=no_route),
    # The thrown "failed to connect to any network address of (h, p)." (every address
    # failed), or one address timing out (errno 110). Not the per-address warning with
    # another errno: socket.cpp then tries the next address (a healthy job printing
    # "[W socket.cpp] ... failed to connect to [localhost]:29500 (errno: 99 - Cannot assign
    # requested address)." where localhost is ::1 without IPv6, then connecting over IPv4 was
    # read as endpoint-unreachable until stop 28).
    pattern(ENDPOINT_UNREACHABLE,
            NOT_A_SOCKET_WARNING +
            r".*client socket has failed to connect to any network address of "
            r"\((?P<addr>[^)]+)\)", RDZV, cause=UNREACHABLE_CAUSE),
    pattern(ENDPOINT_UNREACHABLE,
            r"client socket has failed to connect to (?P<addr>\S+) \((?:errno: 110|"
            r"[^)]*Connection timed out)", RDZV, cause=UNREACHABLE_CAUSE),
    # torch >= 2.3 TCPStore.cpp's client retry loop, and torch 1.x tcputils' connect():
    # "TCP client failed to connect/validate to host h:29500 - timed out (try=7, ...)",
    # "RuntimeError: connect() timed out. Original timeout was 1800000 ms."
    pattern(ENDPOINT_UNREACHABLE,
            r"TCP client failed to connect/validate to host (?P<addr>\S+?) - timed out|"
            r"connect\(\) timed out\. Original timeout was", RDZV, cause=UNREACHABLE_CAUSE,
            root=False),
    # c10d socket.cpp, and Python's own ConnectionRefusedError (torch 1.x store clients,
    # scripts probing MASTER_ADDR): nothing listened there
    pattern(ENDPOINT_REFUSED,
            r"client socket has failed to connect to (?P<addr>\S+) \(errno: 111|"
            r"ConnectionRefusedError: \[Errno 111\] Connection refused", RDZV),
    # c10d socket.cpp's "The IPv4 network addresses of (host, port) cannot be retrieved (gai
    # error: -2 - Name or service not known)" is a name the node looks up for itself
    # (torchrun's MASTER_ADDR is the agent's own FQDN): network.py's hostname-unresolvable.
    # The other wordings do not say whose name failed (the endpoint's, or this node's own
    # host name missing from /etc/hosts): a symptom.
    # TCPStore.cpp's client retry loop (torch >= 2.3) names the host it dialed and why it
    # failed: "TCP client failed to connect/validate to host slinky-0:29400 - Name or service
    # not known" (stop-31 dev gh31-aionek-240). A store's host: the endpoint's, or the
    # master's, which stores.refine tells by the log's store.
    pattern(ENDPOINT_UNRESOLVABLE,
            r"TCP client failed to connect/validate to host (?P<addr>\S+?) - (?:Name or "
            r"service not known|No address associated with hostname|nodename nor servname)",
            RDZV),
    pattern(ENDPOINT_UNRESOLVABLE,
            r"^(?!.*network addresses (?:of \(|cannot be retrieved))"
            # glibc's EAI_NONAME text; Python's gaierror with glibc's -2/-3/-5, and macOS's
            # EAI_NONAME 8 ("nodename nor servname provided, or not known", netdb.h)
            r".*(?:Name or service not known|gaierror: \[Errno (?:-[235]|8)\])", RDZV,
            grade="symptom"),
    pattern(RENDEZVOUS_TIMEOUT, r"RendezvousTimeoutError", RDZV),
    # TCPStore.cpp's client validates the server with a ping (a random number it must get
    # back; 2.3+): "TCP client failed to connect/validate to host 127.0.0.1:30325 - retrying
    # (try=0, ...): Ping failed, invalid value returned from server. Expected: 297731, Got:
    # 68681728": something that is no c10d store answers on the port (another program, or a
    # process that took the port between the job's free-port check and its store's bind:
    # stop-32b dev gh37-tensorrt-llm-10366). The master's twin (stores.TWINS) unless the log
    # ties it to the c10d rendezvous.
    pattern(ENDPOINT_NOT_A_STORE,
            r"to host (?P<addr>\S+?) - .*Ping failed, invalid value returned from server|"
            r"Ping failed, invalid value returned from server", RDZV,
            cause="a program that is no c10d store answers on the store's port (it returned "
                  "something else to the store client's ping): another service or job holds "
                  "the port, or took it between the job's free-port check and the store's "
                  "bind"),
    # NCCL bootstrap.cc bootstrapRoot (2.4-2.30): the root receives each rank's address once;
    # "Bootstrap Root : rank 3 of 8 ranks has already checked in" is a second process with
    # the same rank in one communicator (two nodes given one node rank, a RANK computed the
    # same on two nodes), or, with a fixed NCCL_COMM_ID, another job's rank at the same root.
    # torch passes the id through its store (NCCL_COMM_ID unset), so the first: a hint.
    pattern(RANK_OVERLAP,
            r"Bootstrap Root : rank (?P<rank>\d+) of (?P<world>\d+) ranks has already checked "
            r"in", RDZV, grade="hint",
            cause="two processes joined one NCCL communicator as rank {rank} (of {world}): two "
                  "nodes started with the same node rank or rank offset, or (with "
                  "NCCL_COMM_ID set) another job's rank reached the same bootstrap root"),
    # A process given a rank at or beyond the world size (RANK counted from 1, a node rank
    # too large): gloo's context (third_party/gloo/gloo/context.cc, GLOO_ENFORCE(rank < size)
    # when init_process_group builds the group: "RuntimeError: [enforce fail at
    # .../gloo/context.cc:23] rank < size. 2 vs 2", real run s33-env-rank-out-of-range) and
    # NCCL's ncclCommInitRank (init.cc: "NCCL WARN Invalid rank requested : 2/2"). The other
    # ranks then wait for it in the store: their timeouts follow from this.
    pattern(RANK_OUT_OF_RANGE,
            r"gloo/context\.cc:\d+\] rank < size\. (?P<rank>\d+) vs (?P<world>\d+)|"
            r"NCCL WARN Invalid rank requested : (?P<nrank>\d+)/(?P<nworld>\d+)", RDZV,
            cause="a process was started as a rank outside the world (ranks 0 to world size "
                  "- 1): RANK counted from 1, a node rank or rank offset too large, or a "
                  "WORLD_SIZE smaller than the processes started",
            fix="give the processes ranks 0..WORLD_SIZE-1 (RANK=$SLURM_PROCID, "
                "node_rank * nproc_per_node + local_rank with node ranks from 0) and "
                "WORLD_SIZE the number of processes started"),
    # the same root, ranks that disagree on the communicator's size: "Bootstrap Root :
    # mismatch in rank count from procs 8 : 16" (2.4-2.26), "mismatch in info from procs,
    # nranks 8 vs 16, nroots 1 vs 1, iroot 0 vs 0" (2.27+)
    pattern(WORLD_SIZE_DIFFERS,
            r"Bootstrap Root : mismatch in (?:rank count from procs \d+ : \d+|"
            r"info from procs, nranks (?P<a>\d+) vs (?P<b>\d+))", RDZV, grade="hint",
            cause="ranks of one NCCL communicator disagree on its size: the nodes were started "
                  "with different world sizes (or, with NCCL_COMM_ID set, two jobs share one "
                  "bootstrap root)"),
    # The store's host waiting for the others to connect: TCPStore.cpp waitForWorkers (2.2+,
    # init_process_group's env:// and tcp:// stores wait for every rank): "DistStoreError:
    # Timed out after 901 seconds waiting for clients. 1/2 clients joined." The same fact as
    # the store-based barrier below: ranks that never connected, for any reason (not
    # started, crashed first, or cannot reach MASTER_ADDR:MASTER_PORT).
    pattern(RENDEZVOUS_TIMEOUT,
            r"Timed out after (?P<secs>\d+) seconds waiting for clients\. "
            r"(?P<joined>\d+)/(?P<world>\d+) clients joined", RDZV, root=False,
            cause="only {joined} of {world} processes connected to the store hosted here in "
                  "{secs} s: the others were not started, crashed before init_process_group, "
                  "or cannot reach MASTER_ADDR:MASTER_PORT (a firewall, a wrong address)"),
    # c10d_rendezvous_backend.py (torch >= 1.9): "RendezvousConnectionError: The connection to
    # the C10d store has failed. See inner exception for details." wraps whatever the store
    # raised (a connect timeout, a refusal, a name that does not resolve, a store host that
    # went away): the inner exception, printed above it, is read by its own rule.
    pattern(ENDPOINT_UNREACHABLE,
            r"RendezvousConnectionError: The connection to the C10d store has failed", RDZV,
            root=False,
            cause="torchrun's c10d rendezvous lost or could not open its connection to the "
                  "store at --rdzv-endpoint; the inner exception (printed above it) says why"),
    # torch/distributed/distributed_c10d.py _store_based_barrier (torch 1.8-2.0): "Timed out
    # initializing process group in store based barrier on rank: 0, for key:
    # store_based_barrier_key:1 (world_size=8, worker_count=1, timeout=0:30:00)" (2.0:
    # "num_workers_joined="): ranks that never reached init_process_group, for any reason.
    pattern(RENDEZVOUS_TIMEOUT,
            r"Timed out initializing process group in store based barrier on rank:? \d+.*"
            r"world_size=(?P<world>\d+), (?:worker_count|num_workers_joined)=(?P<joined>\d+)",
            RDZV, root=False,
            cause="only {joined} of {world} processes reached init_process_group before the "
                  "timeout: the others were not started (a node without its launcher), "
                  "were still busy (downloading, preprocessing) or crashed first"),
]


# socket.cpp's per-address connect warning, refused (111) or timed out (110): "[W
# socket.cpp:558] [c10d] The client socket has failed to connect to [node0]:29500 (errno: 111
# - Connection refused)." SocketConnectOp (torch 1.10-2.13) prints it per address and per
# retry and goes on until its deadline, so it alone does not say the connect failed: a job
# whose workers start before the store host prints it and then runs. What follows it in its
# own file tells the two apart: output after it is the connect that got through; a file
# that ends in such warnings shows a connect that never did (a job that hung retrying, or
# was stopped), and explain reads them as the refused or unreachable store, as at stop 27
# (reading them as nothing made such a log NO FAILURE FOUND, exit 0).
RETRIED_CONNECT = re.compile(r"\[W[\s\d][^\]]*socket\.cpp[^\]]*\].*client socket has failed "
                             r"to connect to \S+ \(errno: 11[01]\b")
RETRIED_CODES = frozenset({"endpoint-refused", "endpoint-unreachable"})


def retried_through(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """Drop a refused or unreachable store read only from per-address connect warnings that
    other output follows in their file: the retry got through."""
    if not any(e.problem.code in RETRIED_CODES and RETRIED_CONNECT.search(e.first.text)
               for e in found):
        return found
    last_output = last_lines(records, skip=RETRIED_CONNECT)  # after the warnings, if any
    by_place = {f"{r.source}:{r.lineno}": r for r in records}
    out = []
    for e in found:
        lines = [by_place[at] for at in e.evidence if at in by_place] or [e.first]
        warned = [r for r in lines if RETRIED_CONNECT.search(r.text)]
        if (e.problem.code in RETRIED_CODES and warned and len(warned) == len(lines)
                and all(r.source in last_output and last_output[r.source].lineno > r.lineno
                        for r in warned)):
            continue
        out.append(e)
    return out


# socket.cpp SocketConnectOp (2.x): each address of the endpoint that fails is warned with its
# errno ("[W... socket.cpp:764] [c10d] The client socket has failed to connect to
# 10.123.0.1:41201 (errno: 101 - Network is unreachable)."), then, when every address failed,
# "[E... socket.cpp:818] [c10d] The client socket has failed to connect to any network
# address of (10.123.0.1, 41201)." is thrown. Alone the thrown line is a symptom
# (endpoint-unreachable); right under warnings that all say no route (101 ENETUNREACH, 113
# EHOSTUNREACH) it is that: no address of the endpoint had a route (a real run:
# runs/s32-netns-rdzv-endpoint-no-route, read as root-cause-ambiguous until stop 32).
THROWN_ANY = re.compile(r"failed to connect to any network address of \((?P<endpoint>[^)]+)\)")
PER_ADDRESS = re.compile(r"\[W[\s\d][^\]]*socket\.cpp[^\]]*\].*client socket has failed to "
                         r"connect to \S+ \(errno: (?P<errno>\d+)")
NO_ROUTE_ERRNOS = frozenset({"101", "113"})
# at most this many lines above the thrown one (an address family each, a hostname warning)
PER_ADDRESS_WINDOW = 4



def no_route_behind(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """An unreachable endpoint whose thrown connect error sits right under per-address
    warnings that all say no route is endpoint-no-route (merged into one already found)."""
    by_place = {(r.source, r.lineno): r for r in records}
    out: list[Explained] = []
    for e in found:
        m = THROWN_ANY.search(e.first.text)
        if e.problem.code != ENDPOINT_UNREACHABLE.code or m is None:
            out.append(e)
            continue
        above = [by_place.get((e.first.source, e.first.lineno - k))
                 for k in range(1, PER_ADDRESS_WINDOW + 1)]
        warned = []
        for r in above:  # the contiguous warnings above the thrown line
            w = PER_ADDRESS.search(r.text) if r is not None else None
            if w is None:
                break
            warned.append((r, w["errno"]))
        if not warned or any(errno not in NO_ROUTE_ERRNOS for _, errno in warned):
            out.append(e)
            continue
        lines = [r.text.strip() for r, _ in reversed(warned)] + [e.first.text.strip()]
        problem = no_route_problem(" | ".join(lines), m["endpoint"], m["endpoint"],
                                   all(errno == "101" for _, errno in warned),
                                   ranks=e.problem.ranks, hosts=e.problem.hosts)
        out.append(replace(e, problem=problem, root=True))
    for code in (ENDPOINT_NO_ROUTE.code, DIAL_WRONG_ADDRESS.code):
        same = [e for e in out if e.problem.code == code]
        if len(same) > 1:  # one problem: the earliest line leads
            lead = min(same, key=lambda e: e.first.order)
            out = [e for e in out if e not in same or e is lead]
    return out


# torchrun's agents share their roles through the rendezvous store (elastic/agent/server/
# api.py _assign_worker_ranks, torch 2.x): each agent sets torchelastic/role_info/<its node
# rank>; the agent of node rank 0 multi_gets role_info/0..G-1 (G: --nnodes) and then sets
# torchelastic/assigned_ranks/<i> for each; every agent gets its own assigned_ranks/<rank>.
# An agent started with --node-rank K >= G (static rendezvous) waits for assigned_ranks/K,
# which nobody sets, while agent 0 waits for the role_info of a node rank nobody took:
# "DistStoreError: wait timeout after 8000ms, keys: /none/torchelastic/assigned_ranks/2"
# beside "... keys: /none/torchelastic/role_info/0, /none/torchelastic/role_info/1" (real
# run s33-netns-node-rank-out-of-range). Either line alone is a node that did not report (not
# started, or a rank out of range): only both together decide.
AGENT_WAIT = re.compile(r"wait timeout after \S+, keys: .*torchelastic/(?:assigned_ranks|"
                        r"role_info)/\d+")
ASSIGNED = re.compile(r"torchelastic/assigned_ranks/(\d+)")
ROLE_INFO = re.compile(r"torchelastic/role_info/(\d+)")


def agent_rank_beyond(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """An agent waiting for its assigned ranks as node rank K while node 0's agent waits for
    the roles of G < K + 1 nodes: ``node-rank-invalid``, a cause, before the timeouts."""
    waits = list(records_for(records, AGENT_WAIT))
    asked = [(int(k), r) for r in waits for k in ASSIGNED.findall(r.text)]
    roles = [len(ROLE_INFO.findall(r.text)) for r in waits if ROLE_INFO.search(r.text)]
    if not asked or not roles:
        return found
    nodes = max(roles)
    beyond = [(k, r) for k, r in asked if k >= nodes]
    if not beyond:
        return found
    rank, first = beyond[0]
    problem = NODE_RANK_INVALID.problem(
        f"{first.text.strip()[:240]} | node 0's agent waits for the roles of {nodes} nodes "
        f"(torchelastic/role_info/0..{nodes - 1})",
        cause=f"an agent was started with --node-rank {rank} in a job of {nodes} nodes (node "
              f"ranks 0..{nodes - 1}): node 0 waits for a node rank nobody took, and nobody "
              f"assigns ranks to node {rank}",
        fix=f"give the nodes --node-rank 0..{nodes - 1} (each once; under Slurm "
            "--node-rank=$SLURM_NODEID), or raise --nnodes to the number of nodes started")
    return [*found, Explained(problem, first, True, RDZV, (f"{first.source}:{first.lineno}",))]


# A rank that dials a loopback address (127.x, localhost, ::1) and gives up, while in another
# file a store's host waits for clients that never came (TCPStore.cpp waitForWorkers: "Timed
# out after 9 seconds waiting for clients. 1/2 clients joined."): the store is up, yet this
# rank's loopback does not reach it, so this rank is on another node, and MASTER_ADDR (or
# --master-addr) is 127.0.0.1 / localhost there, copied from a one-node script (real run
# s33b-netns-master-addr-loopback: both nodes --master-addr 127.0.0.1; node1's connects to
# itself timed out). The dial alone is a rank 0 not up yet, or crashed: a symptom.
LOOPBACK_DIAL = re.compile(r"(?:trying to connect to|any network address of) \((?P<host>127\."
                           r"\d+\.\d+\.\d+|localhost|::1), (?P<port>\d+)\)|"
                           r"to host (?P<host2>127\.\d+\.\d+\.\d+|localhost|\[?::1\]?):"
                           r"(?P<port2>\d+) - (?!.*Ping failed)")
STORE_WAITING = re.compile(r"waiting for clients\. (?P<joined>\d+)/(?P<world>\d+) clients "
                           r"joined")


def _dials_and_waits(records: Sequence[Record], dial: re.Pattern[str]
                     ) -> tuple[list[tuple[Record, re.Match[str]]],
                                list[tuple[Record, re.Match[str]]]]:
    """The failed store dials ``dial`` reads, and the store hosts still waiting for clients."""
    dials = [(r, m) for r in records_for(records, dial) if (m := dial.search(r.text))]
    waits = [(r, m) for r in records_for(records, STORE_WAITING)
             if (m := STORE_WAITING.search(r.text)) and int(m["joined"]) < int(m["world"])]
    return dials, waits


def loopback_elsewhere(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """A loopback dial that failed in one file while the store's host waited for clients
    in another: ``master-addr-loopback``, the cause of both."""
    dials, waits = _dials_and_waits(records, LOOPBACK_DIAL)
    pair = next(((d, dm, w, wm) for d, dm in dials for w, wm in waits
                 if w.source != d.source), None)
    if pair is None:
        return found
    dial, m, wait, wm = pair
    host, port = _dialed(m)
    problem = MASTER_LOOPBACK.problem(
        f"{dial.text.strip()[:200]} ({dial.source}) | {wait.text.strip()[:160]} "
        f"({wait.source})",
        cause=f"a rank dialed the store at {host}:{port}, a loopback address, and never "
              f"reached it, while the store's host waited for clients ({wm['joined']} of "
              f"{wm['world']} joined): on another node {host} is that node itself, so "
              "MASTER_ADDR (--master-addr) was left at a one-node value",
        ranks=(dial.rank,) if dial.rank is not None else ())
    return [_dial_cause(problem, dial, wait), *found]


def _dialed(m: re.Match[str]) -> tuple[str, str]:
    """(host, port) of a store dial read by LOOPBACK_DIAL or NAMED_DIAL."""
    return m["host"] or m["host2"], m["port"] or m["port2"]


def _dial_cause(problem: Problem, dial: Record, wait: Record) -> Explained:
    """The cause read from a failed dial and the store host's wait, led by the dial."""
    return Explained(problem, dial, True, RDZV, (f"{dial.source}:{dial.lineno}",
                                                 f"{wait.source}:{wait.lineno}"))


# srun starting the ranks itself (no torchrun: its task N is rank N, which env:// reads from
# RANK=$SLURM_PROCID) says where rank 0 ran: "srun: error: node0: task 0: Exited with exit code
# 1" (src/srun/ launch, 17.x-25.x). Rank 0 hosts the env:// store; a rank that dialed the store
# at another node's name, while rank 0's store waited for clients, was given a MASTER_ADDR that
# is not rank 0's node: typically MASTER_ADDR=$(hostname) evaluated in each task (real run
# s33d-slurm-master-addr-per-task: node1's rank dialed (node1, P)).
NAMED_DIAL = re.compile(r"(?:trying to connect to|any network address of) \((?P<host>"
                        r"[A-Za-z][\w.-]*), (?P<port>\d+)\)|to host (?P<host2>[A-Za-z][\w.-]*):"
                        r"(?P<port2>\d+) - (?!.*Ping failed)")


def master_not_rank0_under_srun(found: list[Explained], records: Sequence[Record]
                                ) -> list[Explained]:
    """A store dial to a node other than the one srun ran rank 0 (task 0) on, while that
    store waited for clients: ``master-addr-not-rank0-node``."""
    task0 = next((m for r in records_for(records, SRUN_TASK)
                  if (m := SRUN_TASK.search(r.text)) and m["task"] == "0"), None)
    if task0 is None or any(TORCHRUN_AGENT.search(r.text)
                            for r in records_for(records, TORCHRUN_AGENT)):
        return found
    rank0 = task0["node"].split(".")[0]
    dials, waits = _dials_and_waits(records, NAMED_DIAL)
    wrong = [(r, m) for r, m in dials
             if _dialed(m)[0].split(".")[0] != rank0 and _dialed(m)[0] != "localhost"]
    if not wrong or not waits:
        return found
    (dial, m), (wait, wm) = wrong[0], waits[0]
    host, port = _dialed(m)
    problem = MASTER_NOT_RANK0.problem(
        f"{dial.text.strip()[:200]} | {wait.text.strip()[:160]} | srun: task 0 (rank 0) ran "
        f"on {task0['node']}",
        cause=f"a rank dialed the store at {host}:{port}, but rank 0, which hosts it, ran on "
              f"{task0['node']} (srun's task 0) and waited there for clients ({wm['joined']} "
              f"of {wm['world']} joined): MASTER_ADDR names another node, e.g. "
              "MASTER_ADDR=$(hostname) evaluated in each task instead of once",
        fix="set MASTER_ADDR once in the batch script, before srun, to the first node of the "
            "allocation: export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
            "| head -n 1)",
        ranks=(dial.rank,) if dial.rank is not None else ())
    return [_dial_cause(problem, dial, wait), *found]


# torchrun's c10d (dynamic) rendezvous names each agent by its node descriptor
# (elastic/rendezvous/dynamic_rendezvous.py _NodeDesc: "{addr}_{pid}_{local_id}", addr the
# host's FQDN or --local-addr) in its messages: "The node 'node1_11331_0' has failed to
# shutdown the rendezvous 'none' due to an error of type RendezvousConnectionError.", "...
# attempts to join the next round of the rendezvous 'job'.", "... has joined round 0 ...".
# Two agents of one rendezvous on one host, each its own process, are two launchers on that
# node: a bare srun of torchrun under --ntasks-per-node=N starts N (real run
# s33e-slurm-two-torchruns-per-node: two agents formed the world, the other two failed when
# it closed).
AGENT_DESC = re.compile(r"The node '(?P<addr>[^']+?)_(?P<pid>\d+)_\d+' .*?the rendezvous "
                        r"'(?P<rdzv>[^']*)'")


def agents_sharing_a_host(found: list[Explained], records: Sequence[Record]
                          ) -> list[Explained]:
    """Two torchrun agents (two pids) of one rendezvous on one host: ``two-launchers-on-node``,
    a cause before what the surplus agents then printed."""
    pids: dict[tuple[str, str], dict[str, Record]] = {}
    for r in records_for(records, AGENT_DESC):
        if m := AGENT_DESC.search(r.text):
            pids.setdefault((m["addr"], m["rdzv"]), {}).setdefault(m["pid"], r)
    shared = next(((key, seen) for key, seen in pids.items() if len(seen) > 1), None)
    if shared is None:
        return found
    (host, rdzv), seen = shared
    first = min(seen.values(), key=lambda r: r.order)
    problem = TWO_LAUNCHERS.problem(
        f"torchrun agents {', '.join(f'{host}_{pid}' for pid in sorted(seen))} of the "
        f"rendezvous '{rdzv}' all run on {host} | {first.text.strip()[:200]}",
        cause=f"{len(seen)} torchrun launchers run on {host} in one job: the job starts "
              "torchrun once per task, not once per node (a bare srun under "
              "--ntasks-per-node=N starts N), so agents compete for the nodes' places",
        fix="start one torchrun per node and let it start the ranks: srun --ntasks-per-node=1 "
            "torchrun --nproc-per-node=<GPUs per node> ... (or, without torchrun, srun one task "
            "per GPU with RANK=$SLURM_PROCID)",
        hosts=(host,))
    return [Explained(problem, first, True, RDZV,
                      tuple(f"{r.source}:{r.lineno}" for r in seen.values())), *found]
