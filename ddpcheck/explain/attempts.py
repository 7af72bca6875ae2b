"""torchrun ``--max-restarts``: which attempt each line belongs to, and the first failed one.

Runs inside ``ddpcheck explain`` after ``globalranks`` and before any rule reads the records.
With restarts every attempt fails on its own and torchrun's summary reports only the last
(torch/distributed/elastic/agent/server/api.py ``_invoke_run``: on FAILED or UNHEALTHY with
restarts left, ``"[default] Worker group FAILED. 2/2 attempts left; will restart worker
group"``, logged at INFO, then ``_restart_workers``; the summary is raised after the last).
Later attempts often fail of the first one's leftovers (a peer's stale address, a port still
held), so the first failed attempt is the one that started the trouble: explain diagnoses it
and reports the later attempts' ends as its consequences. Where an attempt's lines start:

- the ``--log-dir`` tree: ``<log_dir>/<run_id>/attempt_<N>/<local_rank>/...``
  (elastic/multiprocessing/api.py ``_make_log_dir``, ``attempt_{restart_count}``);
- a console: the agent's ``failed (exitcode: C) local_rank: L (pid: P) of binary: ...``
  (multiprocessing/api.py ``SubprocessContext._poll``, logged once when an attempt's workers
  have failed and been stopped: its tee threads are drained first, so no line of that
  attempt follows it) ends an attempt; it is a restart when the worker group starts again
  after it: a line of a worker (``[default1]:``, ``[rank1]:``) or the INFO restart line
  follows before the next such line, or the summary after the last of K + 1 such lines
  names ``attempt_K`` (its ``error_file``; torchrun keeps a temporary log dir without
  ``--log-dir``). Several agents in one file (two nodes' torchrun in one
  Slurm output, told apart by the pid in torch's log header ``E1124 16:51:03.221000 11838``)
  leave that file unsplit, and without that pid (torch 1.13's logging format) only the
  restart line or the summary's count says a restart; a console whose summary names
  ``attempt_K`` (its ``error_file``) while its restarts count another K is trimmed at its
  start and is numbered from K.

When the first attempt's own lines show only symptoms (a rank lost its peer) and a later
attempt shows the same symptoms on the same ranks together with their cause on a rank that
showed none (a SIGKILL before torchrun's teardown), the failure repeated and that attempt
tells what the first one's lines leave unsaid; otherwise explain says what the first attempt
shows, and abstains where it abstains.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ddpcheck.explain.causality import SYMPTOM, UNDETERMINED, Explained
from ddpcheck.explain.globalranks import LOG_DIR_FILE
from ddpcheck.explain.reader import Record

AGENT_FAILED = re.compile(r"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\) of binary")
RESTARTING = re.compile(r"Worker group (?:FAILED|UNHEALTHY)\. \d+/\d+ attempts left; "
                        r"will restart worker group")
# torch's log header (torch/distributed/elastic/utils/logging.py, torch >= 2.2):
# "E1124 16:51:03.221000 11838 site-packages/...": level, date, time, the agent's pid
AGENT_PID = re.compile(r"^\s*[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +(?P<pid>\d+) ")
WORKER_LINE = re.compile(r"^\s*\[(?:default|rank)\d+\]:")
SUMMARY_ATTEMPT = re.compile(r"error_file\s*:\s*\S*?attempt_(?P<n>\d+)[/\\]\d+[/\\]error\.json")
# a lead that says what failed, as opposed to a symptom or an ambiguity
UNSETTLED = UNDETERMINED - {"unexplained"}


@dataclass(frozen=True)
class Attempts:
    """The records of the first attempt (with those no attempt can be told for), and each
    later attempt's, by its number."""

    first: list[Record]
    later: list[tuple[int, list[Record]]]
    first_number: int = 0


def split(records: Sequence[Record], texts: dict[str, str]) -> Attempts | None:
    """The attempts the records show, or None when they show one (or cannot be told)."""
    numbers: dict[str, list[int] | int] = {}  # source -> its attempt, or each line's
    for src, text in texts.items():
        if m := LOG_DIR_FILE.search(src):
            numbers[src] = int(m["attempt"].split("_")[1])
        elif "of binary" in text:
            per_line = _console(text.splitlines())
            if per_line is not None:
                numbers[src] = per_line
    def attempt(r: Record) -> int | None:
        n = numbers.get(r.source)
        if isinstance(n, list):
            return n[r.lineno - 1] if 0 < r.lineno <= len(n) else None
        return n
    by_attempt: dict[int | None, list[Record]] = {}
    for r in records:
        by_attempt.setdefault(attempt(r), []).append(r)
    seen = sorted(k for k in by_attempt if k is not None)
    if len(seen) < 2:
        return None
    first = [r for r in records if attempt(r) in (seen[0], None)]
    return Attempts(first, [(k, by_attempt[k]) for k in seen[1:]], seen[0])


def _console(lines: list[str]) -> list[int] | None:
    """Each line's attempt in one console, or None when it shows no restart."""
    ends = [i for i, line in enumerate(lines) if AGENT_FAILED.search(line)]
    agents = {(m["pid"] if (m := AGENT_PID.match(lines[i])) else "") for i in ends}
    if len(agents) > 1:
        return None  # several agents' lines in one file: whose attempt is whose is not told
    # without the pid (torch 1.13's "ERROR:torch.distributed.elastic...:failed ..."), a
    # worker line after it may be another agent's: only the restart line itself says so
    restarted = WORKER_LINE.pattern + "|" + RESTARTING.pattern if agents != {""} else \
        RESTARTING.pattern
    bounds = [i for n, i in enumerate(ends)
              if any(re.search(restarted, line)
                     for line in lines[i + 1:ends[n + 1] if n + 1 < len(ends) else None])]
    if ends and len(bounds) < len(ends) - 1 and [
            int(m["n"]) for line in lines[ends[-1]:]
            if (m := SUMMARY_ATTEMPT.search(line))][-1:] == [len(ends) - 1]:
        # no worker line says so (no --tee, torch 1.13's unprefixed output), but the summary
        # after the last agent line names attempt_K of K + 1 such lines: each ended one
        bounds = ends[:-1]
    if not bounds:
        return None
    named = [int(m["n"]) for line in lines[bounds[-1]:] if (m := SUMMARY_ATTEMPT.search(line))]
    start = named[-1] - len(bounds) if named else 0
    if start < 0:
        return None  # the summary's attempt contradicts the restarts counted
    out, n = [], start
    pending = iter(bounds)
    nxt = next(pending, None)
    for i in range(len(lines)):
        out.append(n)
        if i == nxt:
            n, nxt = n + 1, next(pending, None)
    return out


def settled(found: Sequence[Explained]) -> bool:
    """Whether ``found``'s lead names what failed (not a symptom, an ambiguity)."""
    causes = [e for e in found if not e.problem.consequence_of]
    return bool(causes) and causes[0].grade != SYMPTOM and \
        causes[0].problem.code not in UNSETTLED


def combine(first: list[Explained], later: Sequence[tuple[int, list[Explained]]],
            first_number: int = 0) -> list[Explained]:
    """The first failed attempt's explanation, with every later attempt's causes as its
    consequences; a later attempt that repeats the first one's symptoms and names their
    cause leads when the first attempt's lines do not."""
    lead, rest = first, [(k, f) for k, f in later]
    if not any(not e.problem.consequence_of for e in first):
        # the first attempt's lines show no failure (cut from the log): the earliest attempt
        # that shows one leads, said to be a later one
        k, found = next(((k, f) for k, f in later
                         if any(not e.problem.consequence_of for e in f)), (None, []))
        if k is None:
            return first
        lead = [_relabel(e, f"attempt {k} (the first failed attempt's lines show no "
                            "failure): ") for e in found]
        rest = [(j, f) for j, f in later if j != k]
    elif not settled(first):
        for k, found in later:
            if settled(found) and _repeats(first, found):
                lead = _adopted(found, k, first_number)
                rest = [(first_number, first)] + [(j, f) for j, f in later if j != k]
                break
    causes = [e for e in lead if not e.problem.consequence_of]
    if not causes:
        return lead
    code = causes[0].problem.code
    echoes = [_echo(e, j, code) for j, found in rest for e in found
              if not e.problem.consequence_of and e.problem.code != "root-cause-ambiguous"]
    return [*lead, *echoes]


def _repeats(first: Sequence[Explained], found: Sequence[Explained]) -> bool:
    """``found`` shows each of the first attempt's problems (but the agent's own SIGTERMs) on
    the same ranks, and leads with a rank none of those showed anything on (the first
    attempt's silent one)."""
    shown = {(e.problem.code, e.problem.ranks) for e in found}
    told = [e for e in first if e.problem.code != "root-cause-ambiguous" and not _teardown(e)]
    lead = next(e for e in found if not e.problem.consequence_of)
    seen_ranks = {r for e in told for r in e.problem.ranks}
    return bool(told) and bool(lead.problem.ranks) and all(
        (e.problem.code, e.problem.ranks) in shown for e in told) and \
        not seen_ranks & set(lead.problem.ranks)


def _teardown(e: Explained) -> bool:
    """A worker the agent itself ended: SIGTERM (multiprocessing/api.py ``_close``, "Sending
    process N closing signal SIGTERM"), which every attempt's survivors get."""
    return e.problem.code == "rank-killed" and "killed by SIGTERM" in e.problem.observed


def _adopted(found: Sequence[Explained], k: int, first_number: int) -> list[Explained]:
    return [_relabel(e, f"attempt {k} (restart {k - first_number}), whose symptoms repeat "
                        f"attempt {first_number}'s, shows how that rank ended: "
                     if not e.problem.consequence_of else f"attempt {k}: ") for e in found]


def _relabel(e: Explained, said: str) -> Explained:
    return replace(e, problem=e.problem.where(observed=said + e.problem.observed))


def _echo(e: Explained, k: int, cause: str) -> Explained:
    return replace(e, problem=e.problem.where(consequence_of=cause,
                                              observed=f"attempt {k}: {e.problem.observed}"))
