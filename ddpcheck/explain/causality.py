"""Root cause before consequences: order explained problems by time and by what causes what.

Runs wherever ``ddpcheck explain`` runs. One rank's crash, OOM or stop makes every other
rank time out in its next collective, and torchrun then reports each worker it tore down.
So explain names a root cause only on cause-grade evidence, and says so when it cannot:

- evidence has a grade: ``CAUSE`` (the line names the cause in its own words: "Duplicate GPU
  detected", "No space left on device", errno 98), ``HINT`` (the line makes a cause likely
  but other causes print it too: a bare SIGKILL or "Killed", the watchdog's sequence
  numbers), ``WARNING`` (a hit only on warning or INFO lines), and symptoms
  (``Pattern.root`` False, grade ``SYMPTOM``, or a code in ``SYMPTOMS`` / ``GENERIC``: what
  any failure makes the ranks print, or a line that does not say whose name or which rank);
- a hint answers only when no cause-grade evidence stands beside it and no symptom of
  another failure came before it (or beside it, unordered); a warning only when the log
  shows no other failure at all, and a warned network condition (gloo's loopback fallback,
  NCCL on a docker bridge) not even then: with no failure line in the log it is shown,
  undecided (``condition_alone``);
- an exception that no rule explains (and no wrapper such as ChildFailedError or an NCCL
  error summary) printed before the candidate, or unordered with it, may be the first
  failure: explain abstains;
- a cause-grade line printed after a symptom (in one stream's order or by timestamps) is not
  the first failure: explain abstains;
- two candidates of different codes in the same grade are ordered by causality only when
  the log carries the order (one stream's line order, or timestamps of both); otherwise
  explain abstains with ``root-cause-ambiguous`` and lists them;
- everything else becomes a consequence of the root; symptoms alone leave the root cause
  undetermined (the engine quotes the first error lines).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ddpcheck.diagnoses import RANK_EXITED, Problem
from ddpcheck.explain.codes import NCCL_ERROR, ROOT_CAUSE_AMBIGUOUS
from ddpcheck.explain.reader import Record

# Codes too generic to stand next to a specific cause: they follow from it.
GENERIC = frozenset({NCCL_ERROR.code, RANK_EXITED.code})
# Symptoms: what a rank saw when something else went wrong (a collective that timed out, an
# endpoint or NCCL peer that did not answer or refused, a rendezvous that ran out of time, a
# worker ended by a signal other than the OOM killer's, a job Slurm cancelled at its limit).
# The line names no cause: a peer that crashed or never started, a firewall, a wrong address,
# a long step of one rank all print the same. They give way to any specific cause, and alone
# they leave the root cause undetermined.
SYMPTOMS = frozenset({"collective-timeout", "endpoint-unreachable", "endpoint-refused",
                      "rendezvous-timeout", "rank-killed", "peer-unreachable",
                      "slurm-job-cancelled"})
# First causes that say the log cannot tell why: explain abstains and quotes the first errors.
UNDETERMINED = frozenset({"unexplained", ROOT_CAUSE_AMBIGUOUS.code, *GENERIC, *SYMPTOMS})
CAUSE = "cause"  # the evidence names the cause in its own words
HINT = "hint"  # the evidence makes the cause likely; other causes print it too
WARNING = "warning"  # a hint only warning or INFO lines show: the job may have gone on
SYMPTOM = "symptom"  # the line does not say which of several causes (whose name, which rank)
# Two timestamps closer than this do not order two failures (clocks of different nodes,
# lines of one second printed by different processes).
CLOCK_SLACK_S = 1.0
MAX_CANDIDATES = 4
AMBIGUOUS_NEXT = ("ddpcheck explain on every rank's log with its timestamps (torchrun "
                  "--log-dir DIR --tee 3, then ddpcheck explain DIR)")
# What one cause makes the ranks print, documented where it is printed: two ranks on one GPU
# share its memory (NCCL init.cc checks for duplicates only at communicator creation, the
# allocator fails first when the model is loaded twice); /dev/shm that cannot be written
# makes NCCL's "Error while creating shared memory segment" follow its "Call to shm_open
# failed : Permission denied" (misc/shmutils.cc); a CUDA_VISIBLE_DEVICES that hides GPUs
# makes any index beyond it an invalid ordinal.
LEADS_TO = {
    "duplicate-device": frozenset({"cuda-out-of-memory"}),
    "dev-shm-unwritable": frozenset({"dev-shm-too-small"}),
    "cuda-visible-devices-invalid": frozenset({"invalid-device-ordinal"}),
}
# What a condition that torch or NCCL only warns about makes the ranks print later: gloo's
# "Unable to resolve hostname to a (local) address. Using the loopback address as fallback"
# (ProcessGroupGloo.cpp) makes this node advertise 127.x, so its peers' connections are
# refused, closed or time out; NCCL_SOCKET_IFNAME left to a docker or loopback interface
# (NCCL INFO "NET/Socket : Using [0]docker0") does the same to NCCL's connections. Neither
# touches c10d's store connection (to MASTER_ADDR, made before either is set up): a refused
# or timed-out store connection is no consequence of theirs. A warning
# printed before such symptoms, in one stream, is their cause; before any other failure it
# stays a hint (the job may have gone on and failed for another reason).
WARNED_LEADS_TO = {
    "hostname-loopback": frozenset({"peer-unreachable", "collective-timeout"}),
    "nccl-wrong-interface": frozenset({"peer-unreachable", "collective-timeout"}),
    # Lightning's srun hint (lightning/fabric/plugins/environments/slurm.py:204, 2.6.6),
    # a warning every run on a host with srun prints: it explains only the store's wait for
    # ranks that were never started (DistStoreError "... 4/8 clients joined", a log that ends
    # in init); families/slurm.py drops it once the world formed
    "slurm-without-srun": frozenset({"rendezvous-timeout", "world-not-formed"}),
}
# Conditions NCCL prints at start-up on INFO lines (a docker bridge in its interface list, a
# net plugin it could not load, sockets instead of InfiniBand) act only through NCCL's own
# calls, whose failures NCCL and torch print in words the rules read (NCCL WARN, "NCCL error
# in:", the watchdog's timeout): a Python exception no rule reads is no consequence of them,
# wherever it comes (gloo's loopback fallback is not one: its connectFullMesh error is read by
# no rule and follows it).
NCCL_CONDITIONS = frozenset({"nccl-wrong-interface", "nccl-net-plugin-unusable",
                             "nccl-socket-fallback"})
# Such a warning with none of those failures in the log (no refused or timed-out connection,
# no error line at all) decides nothing: the job may have run (NCCL listed a docker bridge it
# never used; a one-node job on loopback) or hung without a line. It is shown, undecided.
UNFAILED_CONDITION = ("the log shows no failure this leads to (a refused, closed or timed-out "
                      "connection): the job may have run, or hung without an error line")
# Causes read from a report that torch prints after the symptom it analyses: the desync
# report of TORCH_NCCL_DESYNC_DEBUG (TraceUtils.h, "ranks [1, 3] are the lagging ranks that
# caused this timeout") follows the watchdog's timeout line by construction.
# torchrun's c10d rendezvous wraps what its store raised ("RendezvousConnectionError: The
# connection to the C10d store has failed. See inner exception", c10d_rendezvous_backend.py),
# and users paste the wrapper above the inner line (stop-31 dev gh31-aionek-240).
REPORTS_ON = {
    "rank-never-joined": frozenset({"collective-timeout"}),
    "endpoint-unresolvable": frozenset({"endpoint-unreachable"}),
    # an agent beyond --nnodes, read from the agents' store waits (rendezvous.
    # agent_rank_beyond), whose socket timeouts were printed just before them
    "node-rank-invalid": frozenset({"collective-timeout", "world-not-formed",
                                    "rendezvous-timeout"}),
}
# gloo's lost peer (gloo/transport/tcp/pair.cc, torch 1.13 to 2.13): "[...pair.cc:598]
# Connection closed by peer [127.0.0.1]:60310", "Read error [127.0.0.1]:36255: Connection
# reset by peer".
LOST_PEER = re.compile(r"pair\.cc:\d+\].*Connection (?:closed|reset) by peer")
# a gloo pair's connect, which dials the address a peer published in the store after making
# its device (and warning): pair.cc "connect [127.0.0.1]:16798: Connection refused" (1.13.1),
# "Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.h:301]
# Connect timeout [none]" (2.1.2, ProcessGroupGloo.cpp:138; no address printed)
MESH_CONNECT = re.compile(r"connectFullMesh failed with \[[^\]]*pair\.(?:h|cc):\d+\] "
                          r"Connect timeout")
GLOO_PAIR_CONNECT = re.compile(r"(?:\bconnect|Connect timeout) \[127\.\d+\.\d+\.\d+\]:\d+|"
                               + MESH_CONNECT.pattern)
UNORDERED = ("the log shows failures that each name a cause, printed by different files or "
             "ranks without timestamps that order them: either may be the root and the other "
             "its consequence")
SYMPTOM_FIRST = ("the log shows {seen} before {hint}, or beside it where it does not order "
                 "them, and {hint} rests on a hint{why}")
TEARDOWN = (": a SIGKILL after a hang or another rank's exit is torchrun's teardown (SIGTERM, "
            "then SIGKILL after 30 s), not the OOM killer")
NOISE = ": a warning or INFO line, which a job that failed for another reason prints too"
# Lines of the kernel's or the scheduler's own log (dmesg, slurmstepd), which users paste
# beside the job's output: their place in a paste is no time order.
HOST_LOG = re.compile(r"^\s*\[\s*\d+\.\d+\]|NVRM:|slurmstepd|oom-kill|oom_kill|invoked "
                      r"oom-killer|Killed process|Memory cgroup out of memory")
# Python's own exceptions that a rank's code raises (Lib/exceptions: a missing key, a bad
# value, a wrong type, a failed assert, a missing module), never what a network condition
# that torch, gloo or NCCL warn about makes a process raise (their errors are RuntimeError,
# DistNetworkError, DistStoreError, TimeoutError, ConnectionError: OSError's family). A
# rank that raised one was running: a warning-grade hint printed before or after it is no
# cause of it (runs/user-exception-console with gloo's loopback warning before: the
# warning led, the KeyError was a consequence; tests/unit/explain/families/
# test_stop30_restarts.py).
RAISED_BY_RANK = re.compile(r"^\s*(?:[\w.]+\.)?(?:KeyError|ValueError|IndexError|TypeError|"
                            r"AttributeError|NameError|UnboundLocalError|AssertionError|"
                            r"ZeroDivisionError|FileNotFoundError|ModuleNotFoundError|"
                            r"ImportError|NotImplementedError|RecursionError|"
                            r"UnicodeDecodeError|JSONDecodeError)(?::|$)")
CAUSE_AFTER_SYMPTOM = ("the log shows {seen} before {cause}: something failed before "
                       "{cause} was printed, and {cause} may be its consequence (an NCCL or "
                       "transport error after a peer aborted, an error of a rank torn down)")
NOT_FIRST_RANK = ("torchrun's Root Cause block names rank {rank} as the first failure, and "
                  "{hint} on other ranks rests on a hint (a SIGKILL there is most often "
                  "torchrun's teardown after rank {rank} failed): look at rank {rank}'s own "
                  "lines")
UNREAD_FIRST = ("a failure line that no rule reads was printed before {hint}, or where the log "
                "does not order them, and {hint} rests on a hint: that line may be the first "
                "failure")
UNCLAIMED_FIRST = ("an exception that no rule explains was printed before {hint}, or where "
                   "the log does not order them: that exception may be the first failure and "
                   "{hint} its consequence")


@dataclass(frozen=True)
class Explained:
    """A problem with what ordering needs: first line, whether it can be a root, next run."""

    problem: Problem
    first: Record
    root: bool
    next_run: str
    evidence: tuple[str, ...] = ()  # "file:line" of the lines that showed it, first first
    grade: str = CAUSE  # CAUSE, HINT, WARNING or SYMPTOM (see the module's story)
    # a symptom's code whose rank and reason the log's structure settles (teardown: the
    # rank torchrun had to SIGKILL is the one the others waited for): the root is determined
    pinned: bool = False


def tier(e: Explained) -> int:
    """0: cause-grade, 1: a hint, 2: a specific code only peers' lines show, 3: a symptom,
    4: a generic code, 5: a consequence a refinement already named."""
    code = e.problem.code
    if e.problem.consequence_of:
        return 5
    if code in GENERIC:
        return 4
    if code in UNDETERMINED or e.grade == SYMPTOM:
        return 3
    if not e.root:
        return 2
    return 0 if e.grade == CAUSE else 1


def before(a: Record, b: Record) -> bool | None:
    """Whether ``a`` was printed before ``b``; None when the log does not say."""
    if a.time is not None and b.time is not None and abs(a.time - b.time) > CLOCK_SLACK_S:
        return a.time < b.time
    if a.source == b.source:  # one stream: its line order is the order things happened
        return a.lineno < b.lineno
    return None


def order(found: Sequence[Explained], unclaimed: Sequence[Explained] = (),
          first_rank: int | None = None,
          unread: Sequence[Explained] = ()) -> list[Explained]:
    """The root first, then the rest as its consequences; an ambiguity first when the log
    shows candidates of one grade that it does not order, or a hint that an exception no
    pattern explains may have preceded (``unclaimed``: the first failure may be that one).
    ``first_rank`` is the rank torchrun's "Root Cause (first observed failure)" names;
    ``unread`` the failure lines no pattern read (not exceptions): a hint gives way to them
    when they came first or the log does not order them."""
    if not found:
        return []
    best = min(tier(e) for e in found)
    top = sorted((e for e in found if tier(e) == best), key=lambda e: e.first.order)
    if best < 3 and len({e.problem.code for e in top}) > 1:
        root = _earliest(top, first_rank)
        if root is None:
            return _ambiguous(top, [e for e in found if e not in top], UNORDERED)
        top = [root, *(e for e in top if e is not root)]
    if (ended := _absence_explained(top[0], found, unclaimed)) is not None:
        return [replace(ended, root=True), *_echoes([e for e in found if e is not ended],
                                                    ended.problem.code)]
    if top[0].grade == WARNING and (own := [u for u in unclaimed
                                            if RAISED_BY_RANK.match(u.first.text)]):
        root = min(own, key=lambda u: u.first.order)  # the job went on past the warning
        return [root, *_echoes(found, root.problem.code)]
    if best <= 2:  # an exception no rule explains may have been the first failure (beside
        # a condition NCCL printed at start-up, wherever it came: see NCCL_CONDITIONS)
        earlier = [u for u in unclaimed if before(top[0].first, u.first) is not True
                   or (top[0].grade == WARNING and top[0].problem.code in NCCL_CONDITIONS)]
        if earlier:
            return _ambiguous([earlier[0], *top], [e for e in found if e not in top],
                              UNCLAIMED_FIRST.format(hint=top[0].problem.code))
    hint = top[0]
    if best == 0:  # the first failure is the root: a symptom printed before a cause came first
        seen = [e for e in found if tier(e) == 3 and e.grade != WARNING
                and e.problem.code != hint.problem.code and before(e.first, hint.first)
                and not _survivors_lost_peer(e, hint)
                and e.problem.code not in REPORTS_ON.get(hint.problem.code, ())
                and not (HOST_LOG.search(hint.first.text) and None in (e.first.time,
                                                                        hint.first.time))]
        if seen:
            return _ambiguous([seen[0], *top], [e for e in found if e not in top and
                                                e is not seen[0]],
                              CAUSE_AFTER_SYMPTOM.format(seen=seen[0].problem.code,
                                                         cause=hint.problem.code))
    if (best == 1 and first_rank is not None and hint.problem.ranks
            and first_rank not in hint.problem.ranks):
        return _ambiguous([hint], [e for e in found if e is not hint], NOT_FIRST_RANK.format(
            hint=hint.problem.code, rank=first_rank))
    if best == 1 and (earlier := [u for u in unread if before(hint.first, u.first) is not True
                                  or (hint.grade == WARNING
                                      and hint.problem.code in NCCL_CONDITIONS)]):
        return _ambiguous([earlier[0], *top], [e for e in found if e not in top],
                          UNREAD_FIRST.format(hint=hint.problem.code))
    if best == 1:  # a hint is no root when another failure's symptom may have come first;
        # a warning none when the log shows another failure at all (it warned, the job went on)
        failures = (2, 3, 4) if hint.grade == WARNING else (3, 4)
        seen = [e for e in found if tier(e) in failures and e.problem.code != hint.problem.code
                and (hint.grade == WARNING or before(hint.first, e.first) is not True)
                and not _warned_consequence(hint, e)
                and not _on_first_rank(hint, e, first_rank)]
        if seen:
            return _ambiguous([seen[0], *top], [e for e in found if e not in top and
                                                e is not seen[0]],
                              SYMPTOM_FIRST.format(
                                  hint=hint.problem.code, seen=seen[0].problem.code,
                                  why=NOISE if hint.grade == WARNING else TEARDOWN
                                  if "SIGKILL" in hint.problem.observed else ""))
    cause = top[0].problem.code
    roots = [e for e in top if e.problem.code == cause]
    rest = [e for e in found if e not in roots]
    return [*roots, *_echoes(rest, cause)]


# What a rank prints when it waited for others or was ended by the launcher's teardown: no
# end of its own (an absent rank's SIGKILL is: the OOM killer's or a user's).
WAITING = (SYMPTOMS - {"rank-killed"}) | GENERIC


def _absence_explained(lead: Explained, found: Sequence[Explained],
                       unclaimed: Sequence[Explained]) -> Explained | None:
    """The failure of its own of a rank that the lead names as never joining: it ended (an
    exception no rule explains, a SIGKILL, a crash a rule names) and so never came.
    ProcessGroupGloo's monitoredBarrier (TORCH_DISTRIBUTED_DEBUG=DETAIL runs one before every
    collective) names the ranks that did not arrive whether they were busy, stuck or dead;
    a real run here (rank 1 raising in the user's code under DETAIL) read ambiguous, and
    rank 1 SIGKILLed read rank-never-joined with the kill as its consequence."""
    if lead.problem.code != "rank-never-joined" or not lead.problem.ranks:
        return None
    absent = set(lead.problem.ranks)
    own = [*unclaimed, *(e for e in found if e.root and e.problem.code not in WAITING
                         and e.problem.code != lead.problem.code)]
    return min((e for e in own if e.problem.ranks and set(e.problem.ranks) <= absent
                and not e.problem.consequence_of), key=lambda e: e.first.order, default=None)


def condition_alone(ordered: list[Explained]) -> list[Explained]:
    """For a log with no failure line at all: a warned network condition that would stand as
    its root (``WARNED_LEADS_TO``) is shown but decides nothing (grade ``SYMPTOM``)."""
    head = ordered[0] if ordered else None
    if (head is None or head.grade != WARNING or head.problem.code not in WARNED_LEADS_TO
            or any(e.problem.consequence_of for e in ordered)):
        return ordered
    return [replace(e, grade=SYMPTOM, problem=e.problem.where(
                cause=f"{e.problem.cause}; {UNFAILED_CONDITION}"))
            if e.problem.code == head.problem.code else e for e in ordered]


def _survivors_lost_peer(symptom: Explained, cause: Explained) -> bool:
    """gloo's ``Connection closed by peer`` / ``Connection reset by peer`` (gloo/transport/
    tcp/pair.cc ``Pair::read``: the remote end closed its socket) is printed by the process
    that stayed, after the other one left; that one prints its own traceback only after its
    ``finally`` blocks ran (``dist.destroy_process_group()`` closes the sockets first) and
    the interpreter unwound. So a cause on another rank (or where no line gives a rank) is
    not after it in causality, though it is in the console's text. Recorded with torch
    1.13.1 (tests/data/explain/runs-torch1.13/fresh-disk-full-console: "RuntimeError:
    [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer" six lines
    before the other rank's "OSError: [Errno 28] No space left on device")."""
    return (symptom.problem.code == "peer-unreachable"
            and LOST_PEER.search(symptom.problem.observed) is not None
            and not set(symptom.problem.ranks) & set(cause.problem.ranks))


def _on_first_rank(hint: Explained, other: Explained, first_rank: int | None) -> bool:
    """The hint is on the rank torchrun's Root Cause block names (across nodes, the strictly
    earliest block: ``reader.first_failed_rank``) and the other failure is not: the other
    came later, though no timestamp of its own line says so. torch 1.13 logs the
    agent's "failed (exitcode: 1) local_rank: 0 (pid: N) of binary: ..." with logging's
    default format, no time (recorded with 1.13.1: tests/data/explain/runs-torch1.13/
    netns-hostname-loopback, node1's line beside node0's "connect [127.0.1.1]:41875:
    Connection refused"); 2.13's glog prefix dates it."""
    return (first_rank is not None and first_rank in hint.problem.ranks
            and first_rank not in other.problem.ranks)


def _warned_consequence(hint: Explained, symptom: Explained) -> bool:
    """The symptom is what the warned condition makes peers print, and came after it."""
    if symptom.problem.code not in WARNED_LEADS_TO.get(hint.problem.code, ()):
        return False
    said = before(hint.first, symptom.first)
    # Unordered (torch 1.13 and 2.1 print "[W ProcessGroupGloo.cpp:694] Warning: Unable to
    # resolve hostname to a (local) address. Using the loopback address as fallback" with no
    # time): gloo warns when it makes its device, before it publishes the address a peer
    # dials (connectFullMesh reads every peer's address from the store, then connects), so a
    # peer's pair connect that failed came after the warning by construction. Recorded:
    # tests/data/explain/runs-torch1.13/netns-own-hostname-not-in-hosts (node0's "connect
    # [127.0.0.1]:16798: Connection refused"), runs-torch2.1/ the same ("Gloo connectFullMesh
    # failed with [...pair.h:301] Connect timeout [none]").
    return said is True or (said is None and hint.problem.code == "hostname-loopback"
                            and GLOO_PAIR_CONNECT.search(symptom.problem.observed) is not None)


def _earliest(candidates: Sequence[Explained], first_rank: int | None) -> Explained | None:
    """The candidate that precedes every candidate of another code, if the log says so: in
    time or one stream's line order, as the rank torchrun saw fail first, or as a known
    cause of the other (``LEADS_TO``)."""
    for e in candidates:
        others = [o for o in candidates if o.problem.code != e.problem.code]
        if all(_precedes(e, o, first_rank) for o in others):
            return e
    return None


def _precedes(a: Explained, b: Explained, first_rank: int | None) -> bool:
    if b.problem.code in LEADS_TO.get(a.problem.code, ()):
        return True
    if a.problem.code in LEADS_TO.get(b.problem.code, ()):
        return False
    said = before(a.first, b.first)
    if said is not None:
        return said
    return (first_rank is not None and first_rank in a.problem.ranks
            and first_rank not in b.problem.ranks)


def _echoes(rest: Sequence[Explained], cause: str) -> list[Explained]:
    return [Explained(e.problem.where(consequence_of=cause), e.first, e.root, e.next_run,
                      e.evidence, e.grade)
            for e in sorted(rest, key=lambda e: e.first.order)]


def _ambiguous(candidates: Sequence[Explained], rest: Sequence[Explained],
               why: str) -> list[Explained]:
    """Abstain: name the candidates, each with where it was seen, and keep their blocks."""
    by_code: dict[str, Explained] = {}
    for e in candidates:
        by_code.setdefault(e.problem.code, e)
    shown = list(by_code.values())[:MAX_CANDIDATES]
    names = "; ".join(f"{e.problem.code} ({e.first.source}:{e.first.lineno})" for e in shown)
    ranks = tuple(sorted({r for e in shown for r in e.problem.ranks}))
    hosts = tuple(sorted({h for e in shown for h in e.problem.hosts}))
    first = min((e.first for e in shown), key=lambda r: r.order)
    problem = ROOT_CAUSE_AMBIGUOUS.problem(
        f"candidates: {names}", cause=why, ranks=ranks, hosts=hosts)
    head = Explained(problem, first, True, AMBIGUOUS_NEXT,
                     tuple(e.evidence[0] for e in shown if e.evidence))
    return [head, *candidates, *_echoes(rest, ROOT_CAUSE_AMBIGUOUS.code)]
