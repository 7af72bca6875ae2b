"""NCCL's result codes as NCCL and torch print them: the back trace and the error strings.

Runs inside ``ddpcheck explain`` (a pure reader of log lines). Two wordings carry an
``ncclResult_t`` (nccl.h: 1 unhandled CUDA error, 2 system error, 3 internal error, 4
invalid argument, 5 invalid usage, 6 remote error, 7 in progress) without its reason:

- NCCL's back trace (include/checks.h NCCLCHECK, NCCLCHECKGOTO, SYSCHECKGOTO, EQCHECK):
  when a call fails, each frame prints at INFO level ``<file>:<line> -> <ret>`` (2.4 to
  2.30.3), ``... -> <ret> (<strerror>)`` (SYSCHECKGOTO/EQCHECK, 2.19 on), ``... [Async
  thread]`` (group.cc), ``<file>:<line> (<func>) -> <ret>`` (2.30.7 INFO_LOC); NCCL <= 2.3
  wrote ``INFO <file>.cu:<line> -> <ret>`` without "NCCL". The first frame of a chain is
  where it failed (misc/socket.cc a socket call, bootstrap.cc the communicator's TCP
  set-up, transport/shm.cc or include/shm.h shared memory, net_ib.cc the IB verbs, ...).
  NCCL prints these only on failure, but also at teardown: ``misc/socket.cc:47 -> 3`` is
  socketProgressOpt's "abort called" (ncclInternalError, misc/socket.cc 2.19-2.2x) when
  ncclCommDestroy/Abort stops the proxy's service thread, which a healthy job prints too.
- The result string (init.cc ncclGetErrorString: "unhandled system error", "internal
  error", "invalid usage", ..., with "(run with NCCL_DEBUG=INFO for details)" from 2.13)
  in torch's ``NCCL error in: <file>:<line>, <string>, NCCL version X`` (ProcessGroupNCCL
  C10D_NCCL_CHECK), its detail line (NCCLUtils getNcclErrorDetailStr: "ncclSystemError:
  System call (e.g. socket, malloc) or external library call failed or device error.";
  torch <= 1.10 "System call (socket, malloc, munmap, etc) failed."), nccl-tests' ``Test
  NCCL failure common.cu:777 'unhandled system error'`` and Horovod's ``ncclCommInitRank
  failed: ...``. torch appends NCCL's last WARN after "Last error:" (ncclGetLastError);
  the families that read WARN lines read that tail too.

Neither names a cause on its own: both are ``nccl-error`` (generic: explain abstains when
nothing else in the log names the cause), with a cause and fix that list what the file or
the result code points at, so the user knows what to check. "remote process exited or
there was a network error" (ncclRemoteError) is the network family's peer-unreachable.

The network family's ``refine`` (``netcontext``) also asks this module whether torch's
summary is the consequence of the WARN it quotes after "Last error:" (``quoted_tail``);
what NCCL's INFO lines say of its interfaces and transports is ``ncclinterfaces``'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.cluster.peerprobe import PEER_UNREACHABLE
from ddpcheck.diagnoses import Problem
from ddpcheck.explain.causality import CAUSE, SYMPTOM, Explained
from ddpcheck.explain.codes import NCCL_ERROR
from ddpcheck.explain.matching import Hit, observed_lines, pattern, where
from ddpcheck.explain.prefilter import records_for
from ddpcheck.explain.reader import Record

COLL = "ddpcheck run --nodes N --backend nccl --stages node,collectives"
# Where the text of an NCCL WARN starts. NCCL's debug.cc prints "host:pid:tid [dev]
# file:line NCCL WARN <text>" (only with NCCL_DEBUG set) and, from 2.13, always keeps the
# last WARN's <text> (without that prefix) for ncclGetLastError; torch's NCCLUtils.cpp
# getNcclErrorDetailStr (torch >= 2.0 built with NCCL >= 2.13) appends it to its exception
# as "\nLast error:\n<text>": on a line of its own, on the same line where a paste joined
# the lines, or after a literal "\n" where a wrapper printed the exception's repr. ("Last
# error" holds the process's latest WARN, not the first: NCCL overwrites it at each WARN.)
# nccl-tests (common.h, built with NCCL >= 2.13) quote it on their own line: "host: Test NCCL
# failure common.cu:958 'unhandled system error (run with NCCL_DEBUG=INFO for details) /
# <text>'".
TAIL_START = r"(?:^\s*|Last error:(?:\s|\\n)*|Test NCCL failure \S+ '[^']*? / )"
WARN_START = r"(?:NCCL WARN |" + TAIL_START[3:]
TRACE = (r"(?:NCCL INFO|\]\s+INFO) (?:[\w.+-]*/)*(?P<file>[\w+-]+\.(?:cc|cu|cpp|h)):\d+"
         r"(?: \([\w:~<>]+\))? -> (?P<ret>[1-6])\b")
TRACE_LINE = re.compile(TRACE)
# socketProgressOpt's "abort called" (ncclInternalError) and the proxy's service thread that
# it ends: what ncclCommDestroy / ncclCommAbort make NCCL print, in healthy jobs too.
TEARDOWN = {("socket.cc", "3"), ("proxy.cc", "3")}
# Frames that only pass an error up: the first informative frame is the origin.
PASS_UP = {"init.cc", "group.cc", "transport.cc", "enqueue.cc", "net.h", "net.cc",
           "proxy.cc", "channel.cc", "collectives.cc"}
RESULTS = {"1": "ncclUnhandledCudaError (a CUDA call failed)",
           "2": "ncclSystemError (a system call failed)",
           "3": "ncclInternalError (an internal check failed)",
           "4": "ncclInvalidArgument", "5": "ncclInvalidUsage",
           "6": "ncclRemoteError (a peer closed or the network failed)"}
SHM = ("/dev/shm too small or not shared (containers get 64 MB: docker --shm-size=8g or "
       "--ipc=host, Kubernetes an emptyDir with medium: Memory at /dev/shm)")
IFNAME = ("an interface NCCL picked that cannot reach the other nodes (set NCCL_SOCKET_IFNAME "
          "to the NIC the nodes share: ip -4 addr)")
# What the frame's file says about where it failed (NCCL src/ layout, 2.4 to 2.2x).
WHERE = {
    "bootstrap": ("NCCL's bootstrap (the TCP exchange that builds the communicator) failed",
                  f"{IFNAME}, a firewall dropping NCCL's ports between the nodes, or a rank "
                  "that never started or exited"),
    "socket": ("a socket call of NCCL (connect, accept, send or recv) failed",
               f"{IFNAME}, a firewall, or a peer that exited"),
    "shm": ("NCCL's shared-memory transport failed", f"{SHM}, or /dev/shm not writable"),
    "ib": ("NCCL's InfiniBand/RoCE transport (IB verbs) failed",
           "an IB/RoCE port down or misconfigured (GID index), the locked-memory limit "
           "(ulimit -l), or a peer that exited; NCCL_IB_DISABLE=1 tests the sockets path"),
    "p2p": ("NCCL's GPU peer-to-peer (P2P/IPC) transport failed",
            "GPUs that cannot map each other's memory (PCIe ACS/IOMMU, a VM, consumer GPUs; "
            "NCCL_P2P_DISABLE=1 tests it), or containers without a shared IPC namespace "
            "(--ipc=host)"),
    "nvls": ("NCCL's NVLink SHARP (NVLS) transport failed",
             "the NVSwitch fabric not set up (nvidia-fabricmanager not running or of another "
             "version; NCCL_NVLS_ENABLE=0 avoids NVLS)"),
}
FILES = {"bootstrap.cc": "bootstrap", "bootstrap.cu": "bootstrap", "socket.cc": "socket",
         "socket.h": "socket", "net_socket.cc": "socket", "net_socket.cu": "socket",
         "shm.cc": "shm", "shm.h": "shm", "shmutils.cc": "shm", "net_ib.cc": "ib",
         "ibvwrap.cc": "ib", "p2p.cc": "p2p", "nvls.cc": "nvls"}
TRACE_FIX = ("rerun with NCCL_DEBUG=WARN (or INFO) so NCCL's WARN line names the failing call; "
             "check the likely causes above on the node that printed it")


def _is(hit: Hit, regex: re.Pattern[str]) -> bool:
    return hit.pattern.regex.pattern == regex.pattern


def _trace(frames: Sequence[Hit]) -> str:
    """Where the back trace says NCCL failed: its first frame that does more than pass up."""
    origin = next((h for h in frames if h.match["file"] not in PASS_UP), frames[0])
    name, ret = origin.match["file"], origin.match["ret"]
    kind = FILES.get(name, "")
    if kind == "socket" and any(FILES.get(h.match["file"]) == "bootstrap" for h in frames):
        kind = "bootstrap"  # a socket call of the bootstrap: the bootstrap says which one
    what, likely = WHERE.get(kind, (
        f"an NCCL call failed in {name}", "the NCCL WARN line (if any) names the call"))
    return (f"{what}: NCCL's INFO back trace '{name}:line -> {ret}' ({RESULTS[ret]}) shows "
            f"where, without the WARN line that would say why; likely: {likely}")


# ncclGetErrorString's words (init.cc, 2.4 onwards) and torch's detail names for them.
RESULT_WORDS = {
    "system": r"unhan?d?led system error|ncclSystemError:",
    "cuda": r"unhandled cuda error|ncclUnhandledCudaError:",
    "internal": r"\binternal error\b|ncclInternalError:",
    "usage": r"\binvalid usage\b|ncclInvalidUsage:",
    "argument": r"\binvalid argument\b|ncclInvalidArgument:",
}
RESULT_LIKELY = {
    "system": ("NCCL reported a failed system call (ncclSystemError) without naming it here. "
               f"Most often: {SHM}; {IFNAME}; a firewall dropping NCCL's ports; on NCCL "
               "< 2.13 a peer that exited"),
    "cuda": ("a CUDA call inside NCCL failed (ncclUnhandledCudaError): most often the GPU "
             "out of memory, GPU peer-to-peer that the machine does not support "
             "(NCCL_P2P_DISABLE=1 tests it), or a driver / Fabric Manager problem"),
    "internal": ("an internal check of NCCL failed (ncclInternalError): most often a "
                 "connection to a peer lost, an interface filter (NCCL_SOCKET_IFNAME) that "
                 "matches no interface, or ranks on different NCCL versions"),
    "usage": ("NCCL rejected how it was called (ncclInvalidUsage): most often two ranks on "
              "one GPU (set_device(LOCAL_RANK)), or an NCCL_* variable that leaves it no "
              "algorithm"),
    "argument": ("NCCL rejected an argument (ncclInvalidArgument): a tensor on the wrong "
                 "device or of an unsupported type, or an NCCL_* variable with a bad value"),
}
RESULT_FIX = ("rerun with NCCL_DEBUG=WARN (NCCL_DEBUG=INFO for the back trace): NCCL's WARN "
              "line (torch also quotes it after 'Last error:') names the failing call; "
              "ddpcheck run --stages node,collectives measures /dev/shm, the interfaces and "
              "NCCL on the same nodes")
RESULT_LINE = re.compile(
    r"(?:NCCL (?:error|failure)|nccl\w+ failed|ncclCommInit\w*\(?.*failed)[^\n]*?(?P<res>"
    + "|".join(f"(?P<{k}>{v})" for k, v in RESULT_WORDS.items()) + ")"
    r"|^\W*(?P<detail>nccl(?:SystemError|UnhandledCudaError|InternalError|InvalidUsage|"
    r"InvalidArgument)): ")


def combine(hits: Sequence[Hit]) -> Problem | None:
    """One nccl-error for NCCL's back trace and result strings (and any other nccl-error
    line of the log, which the engine groups with them), with what they point at. None
    when the log shows only teardown frames."""
    hits = sorted(hits, key=lambda h: h.record.order)
    frames = [h for h in hits if _is(h, TRACE_LINE)
              and (h.match["file"], h.match["ret"]) not in TEARDOWN]
    results = [h for h in hits if _is(h, RESULT_LINE)]
    others = [h for h in hits if not _is(h, TRACE_LINE) and not _is(h, RESULT_LINE)]
    shown = sorted([*frames, *results, *others], key=lambda h: h.record.order)
    if not shown:
        return None
    kinds: list[str] = []
    for h in results:
        m = h.match
        kind = next((k for k in RESULT_WORDS if m[k]), None) or _detail_kind(m["detail"] or "")
        if kind and kind not in kinds:
            kinds.append(kind)
    causes = [h.pattern.cause for h in others[:1] if h.pattern.cause]
    causes += [_trace(frames)] if frames else []
    causes += [RESULT_LIKELY[k] for k in kinds]
    fix = TRACE_FIX if frames and not results else RESULT_FIX
    return NCCL_ERROR.problem(observed_lines(shown), cause="; ".join(causes) or "",
                              fix=fix, **where(shown))


def _detail_kind(detail: str) -> str | None:
    return {"ncclSystemError": "system", "ncclUnhandledCudaError": "cuda",
            "ncclInternalError": "internal", "ncclInvalidUsage": "usage",
            "ncclInvalidArgument": "argument"}.get(detail)


PATTERNS = [
    pattern(NCCL_ERROR, TRACE, COLL, combine=combine, grade=SYMPTOM),
    pattern(NCCL_ERROR, RESULT_LINE.pattern, COLL, combine=combine, grade=SYMPTOM),
]


# torch's NCCL error (ProcessGroupNCCL getNcclErrorDetailStr) quotes NCCL's last WARN after
# "Last error:", on the next line (torch >= 2.0) or the same one: the exception is torch's
# summary of that WARN, not a failure before it.
LAST_ERROR = re.compile(r"^\s*Last error:")
TAIL_LINES = 3  # the quoted WARN follows within a few lines (interleaved ranks, a blank)


# torch's summary of ncclRemoteError (NCCLUtils getNcclErrorDetailStr, NCCL >= 2.13), read as
# peer-unreachable: its "Last error:" tail says which connection failed, and how.
REMOTE_SUMMARY = re.compile(r"remote process exited or there was a network error|"
                            r"ncclRemoteError: A call failed")


def _yields_to(e: Explained, q: Explained) -> bool:
    """Whether ``e``, read from torch's or NCCL's result string, is the consequence of ``q``
    read in its "Last error:" tail: nccl-error always; torch's ncclRemoteError summary only to
    a tail that names the cause (a hint there, an IB retry-exceeded completion or a connect to
    a bridge address, is also what a peer that exited leaves, as the summary's own words say:
    both stay, and explain abstains)."""
    if e.problem.consequence_of or q.problem.code == e.problem.code:
        return False
    if e.problem.code == NCCL_ERROR.code:
        return True
    return (e.problem.code == PEER_UNREACHABLE.code and q.grade == CAUSE
            and bool(REMOTE_SUMMARY.search(e.first.text)))


def quoted_tail(found: Sequence[Explained], records: Sequence[Record]) -> list[Explained]:
    """nccl-error read from torch's or NCCL's result string (and peer-unreachable read from
    torch's ncclRemoteError summary) becomes the consequence of the problem read in its
    "Last error:" tail (a hint there would otherwise give way to it): one paste of the
    exception tells one story whether its lines were joined or not."""
    tails: dict[str, list[int]] = {}
    for r in records_for(records, LAST_ERROR):
        if LAST_ERROR.match(r.text):
            tails.setdefault(r.source, []).append(r.lineno)
    if not tails:
        return list(found)

    def in_tail(rec: Record) -> bool:
        return any(0 <= rec.lineno - n <= TAIL_LINES for n in tails.get(rec.source, ()))

    quoted = [e for e in found if e.problem.code != NCCL_ERROR.code
              and not e.problem.consequence_of and in_tail(e.first)]
    out = []
    for e in found:
        q = next((q for q in quoted if q.first.source == e.first.source
                  and e.first.lineno < q.first.lineno and _yields_to(e, q)), None)
        if q is not None:
            e = replace(e, problem=e.problem.where(consequence_of=q.problem.code))
        out.append(e)
    return out
