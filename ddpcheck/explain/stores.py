"""Whose store failed: the master's (MASTER_ADDR / MASTER_PORT) or the c10d rendezvous
endpoint's (``--rdzv-endpoint``).

Runs inside ``ddpcheck explain`` (a pure reader of log lines), after the families matched and
before the failures are ordered. The rules read the same line (``Address already in use``,
``Name or service not known``) as the rendezvous endpoint's problem; torch says which store
it was:

- torchrun's default rendezvous is static (torch/distributed/run.py: ``--rdzv-backend``
  defaults to ``static``, ``--master-port`` to 29500) and its agent opens the master's store
  (``elastic/rendezvous/static_tcp_rendezvous.py``). ``init_process_group``'s env:// and
  tcp:// (``distributed/rendezvous.py``: ``_env_rendezvous_handler``,
  ``_tcp_rendezvous_handler``, ``_create_c10d_store``) open MASTER_ADDR:MASTER_PORT too, and
  mp.spawn, ``torch.distributed.launch``, Accelerate, DeepSpeed and Lightning all end there.
- Only an explicit c10d rendezvous (``--rdzv-backend=c10d``, ``--standalone``) opens the
  endpoint's store (``elastic/rendezvous/c10d_rendezvous_backend.py`` ``_create_tcp_store``,
  whose ``DEFAULT_PORT = 29400`` is bound when ``--rdzv-endpoint`` names no port).

So an EADDRINUSE is the master port in use unless the log shows the c10d rendezvous: its
modules in a traceback, ``rdzv_backend=c10d`` in a command line, or port 29400 bound (NCCL's
own bind of a fixed ``NCCL_COMM_ID`` port is neither store's, and stays as it was read). A
name that does not resolve is the master's when its traceback shows the master's store and
not the c10d rendezvous. A dialed name that getaddrinfo does not know (c10d socket.cpp
``SocketConnectOp::tryConnect``: "The IPv6 network addresses of (H, P) cannot be retrieved
(gai error: -2 ...)" with ``AI_V4MAPPED | AI_ALL``, so an IPv4-only name would resolve),
followed by the connect's own timeout to (H, P), is that name not resolving, whose by the
traceback.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import load_catalogue
from ddpcheck.explain.causality import CAUSE, Explained
from ddpcheck.explain.prefilter import records_for
from ddpcheck.explain.reader import Record

MASTER_STORE = re.compile(r"static_tcp_rendezvous\.py|rendezvous\.py\", line \d+, in "
                          r"_(?:env_rendezvous_handler|tcp_rendezvous_handler|"
                          r"create_c10d_store)")
# torchft's lighthouse (torchft_lighthouse, its quorum server for fault-tolerant replica
# groups, stop-33 dev gh40-torchft-30) binds its own port, not MASTER_PORT: a rendezvous
# service like the c10d endpoint.
RDZV_STORE = re.compile(r"c10d_rendezvous_backend|dynamic_rendezvous|"
                        r"rdzv[_-]backend[= ]+['\"]?c10d|C10d rendezvous backend|"
                        r"torchrun\b.*\s--standalone\b|"  # --standalone: c10d on localhost
                        r"\btorchft_lighthouse\b")
# c10d_rendezvous_backend.DEFAULT_PORT, bound (socket.cpp's listen/bind lines, the
# DistNetworkError's "port: 29400") when --rdzv-endpoint names no port.
RDZV_DEFAULT_PORT = re.compile(r"[\]:]29400\b|\bport: 29400\b")
# NCCL misc/socket.cc's bind of a fixed NCCL_COMM_ID port: neither store's.
NCCL_BIND = re.compile(r"Call to bind failed")
# EAI_NONAME (-2) or EAI_AGAIN (-3) for the dialed name, and the connect that then gave up
# on it. -3 is glibc's "Temporary failure in name resolution": the name is not in /etc/hosts
# and no DNS server answered (recorded: tests/data/explain/runs/netns-master-addr-not-in-hosts,
# a namespace whose /etc/hosts lacks --master-addr node0 and has no nameserver, torch 2.13:
# "The IPv6 network addresses of (node0, 56241) cannot be retrieved (gai error: -3 -
# Temporary failure in name resolution)." then "The client socket has timed out after 8000ms
# while trying to connect to (node0, 56241)."). Either way the dialed name did not resolve.
NO_NAME = re.compile(r"network addresses of \((?P<host>[^,()]+), (?P<port>\d+)\) cannot be "
                     r"retrieved \(gai error: (?P<gai>-[23]) - (?P<why>[^)]*)")
# socket.cpp formats the timeout as a std::chrono duration ("The client socket has timed out
# after {} while trying to connect to ({}, {})."): torch 2.13 prints "8000ms", torch 1.13.1 and
# 2.1.2 "8s" (strings of their libtorch_cpu.so; recorded: tests/data/explain/runs-torch1.13/
# master-addr-unresolvable, "[E socket.cpp:860] [c10d] The client socket has timed out after
# 8s while trying to connect to (no-such-host.invalid, 39891).").
GAVE_UP = re.compile(r"(?:timed out after \d+(?:ms|s|min|h) while trying to connect to|"
                     r"failed to connect "
                     r"to any network address (?:of|on)) \((?P<host>[^,()]+), (?P<port>\d+)\)")
# Said when the log names neither store: torchrun's flag, and where the c10d port lives.
PORT_FIX = ("stop the process holding the port (ss -ltnp | grep {port}), or pick another "
            "MASTER_PORT (torchrun --master-port, e.g. 29501); with --rdzv-backend=c10d the "
            "port is the one in --rdzv-endpoint")
PRIVILEGED_FIX = ("port {port} was refused: pick a MASTER_PORT from 1024 to 65535 (torchrun "
                  "--master-port, e.g. 29500; ports below 1024 need root, and a security "
                  "policy such as SELinux may refuse others); with --rdzv-backend=c10d the "
                  "port is the one in --rdzv-endpoint")
# The rendezvous endpoint's code -> the master's twin, whether the master's store must be
# seen (True) or is the default unless the c10d rendezvous is seen (False), and the fix said
# when the log names neither store. A bind refused with EACCES (socket.cpp "failed to bind to
# [::]:520 (errno: 13 - Permission denied)") is the same store's bind as an EADDRINUSE one:
# the master's by default.
TWINS = {"endpoint-port-in-use": ("master-port-in-use", False, PORT_FIX),
         # a port that answers, but not as a store: held by another program
         "endpoint-not-a-store": ("master-port-in-use", False, PORT_FIX),
         "endpoint-bind-failed": ("master-port-unavailable", False, PRIVILEGED_FIX),
         "endpoint-unresolvable": ("master-addr-unresolvable", True, "")}
# The port the line names: socket.cpp's "[::]:29500 (errno: 98" (13: EACCES) and >= 2.3's
# "port: 29500,".
# (errno 48 on macOS, 10048 WSAEADDRINUSE on Windows: network.py)
# TCPStore's client naming the host it validated ("to host 127.0.0.1:30325 - ... Ping failed").
BOUND_PORT = re.compile(r":(?P<a>\d+) \(errno: (?:98|48|10048|13)\b|\bport: (?P<b>\d+)\b|"
                        r"to host \S+?:(?P<c>\d+) - ")


def refine(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """The master's twin for an endpoint code the log does not tie to the c10d rendezvous,
    and a dialed name that does not resolve named by whose store dialed it."""
    return _master_store(_unresolved_dial(found, records), records)


def _master_store(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """Each twin by the evidence in its own file: another job's or node's log beside it (a
    healthy run launched with --rdzv-backend c10d) says nothing of this store."""
    if not any(e.problem.code in TWINS for e in found):
        return found
    out = []
    for e in found:
        twin, needs_master, unseen_fix = TWINS.get(e.problem.code, ("", False, ""))
        if not twin or NCCL_BIND.search(e.first.text):
            out.append(e)
            continue
        texts = [r.text for r in records if r.source == e.first.source]
        master = any(MASTER_STORE.search(t) for t in texts)
        rdzv = any(RDZV_STORE.search(t) or RDZV_DEFAULT_PORT.search(t) for t in texts)
        if rdzv or (needs_master and not master):
            out.append(e)
            continue
        p = e.problem
        port = BOUND_PORT.search(p.observed)
        # neither store seen: a fix naming both flags; the master's store seen: the rule's
        # own fix (a port out of range) or the catalogue's. A rule's own cause is kept.
        catalogue = load_catalogue()
        own = catalogue[p.code]
        fix = unseen_fix.format(port=(port["a"] or port["b"] or port["c"]) if port
                                else "<port>") if not master \
            else p.fix if p.fix != own.fix else ""
        cause = p.cause if p.cause != own.cause else ""
        out.append(replace(e, problem=catalogue[twin].problem(
            p.observed, cause=cause, fix=fix, ranks=p.ranks, hosts=p.hosts)))
    return out


def _unresolved_dial(found: list[Explained], records: Sequence[Record]) -> list[Explained]:
    """A name getaddrinfo does not know, which the connect then gave up on: the master's
    or the rendezvous endpoint's name does not resolve (whose, by the traceback)."""
    names: dict[tuple[str, str], Record] = {}
    for r in records_for(records, NO_NAME):
        if m := NO_NAME.search(r.text):
            names.setdefault((m["host"], m["port"]), r)  # the first, which came before all
    gave_up = {(m["host"], m["port"]) for r in records_for(records, GAVE_UP)
               if (m := GAVE_UP.search(r.text))}
    dialed = [k for k in names if k in gave_up]
    if not dialed:
        return found
    # the name the c10d rendezvous's rank-0 agent advertised, not the endpoint the launch
    # line gives (families/netcontext._advertised_name): the connect giving up decides it
    host = dialed[0][0]
    if any(e.problem.code == "advertised-name-unresolvable" and f"({host}," in e.problem.observed
           for e in found):
        return [replace(e, root=True, grade=CAUSE)
                if e.problem.code == "advertised-name-unresolvable" else e for e in found]
    texts = [r.text for r in records]
    master = any(MASTER_STORE.search(t) for t in texts)
    rdzv = any(RDZV_STORE.search(t) for t in texts)
    if master == rdzv:
        return found  # the traceback does not say whose store it dialed
    code = "master-addr-unresolvable" if master else "endpoint-unresolvable"
    (host, port), first = dialed[0], names[dialed[0]]
    problem = load_catalogue()[code].problem(
        f"{host}:{port} was dialed and does not resolve (getaddrinfo: "
        f"{NO_NAME.search(first.text)['why']}), then the connect gave up | "
        f"{first.text.strip()[:200]}",
        ranks=(first.rank,) if first.rank is not None else (),
        hosts=(first.host,) if first.host else ())
    hit = Explained(problem, first, True, "ddpcheck run --nodes N --stages rendezvous (every "
                    "node resolves the master and endpoint names)",
                    (f"{first.source}:{first.lineno}",), CAUSE)
    # the warning rule read the same lines as this node's own name (hostname-unresolvable)
    return [hit, *(e for e in found if not (e.problem.code == "hostname-unresolvable"
                                            and host in e.problem.observed))]
