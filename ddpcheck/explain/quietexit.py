"""What torchrun's failure summary says of a rank that left quietly, and of a one-node job.

Runs wherever ``ddpcheck explain`` runs (no torch). Written from real runs of stop 30's
second batch (``bench/explain_real_runs.py``, list ``STOP30B``, torch 2.13, gloo, CPU):

- a rank that exited with a positive status and printed no traceback (``sys.exit(1)``,
  ``exit(2)``, ``os._exit(1)`` in the user's code or a library's). torchelastic's ``@record``
  wrapper re-raises a ``SystemExit`` whose code is not 0 without writing an error file
  (torch/distributed/elastic/multiprocessing/errors/__init__.py ``record``: ``except
  SystemExit as se: ... raise``), so torchrun's summary shows that rank with ``exitcode : 1``,
  ``error_file: <N/A>`` and ``traceback : To enable traceback see: https://pytorch.org/docs/
  stable/elastic/errors.html`` (``ProcessFailure.__post_init__``, the message of a failure
  without an error file). Its peers raise gloo's ``Connection closed by peer`` and one of
  them, whose error.json is the only one, is what the Root Cause block names
  (runs/s30b-rank-sys-exit-1). When that rank is the only quiet one and every traceback of
  the others is a lost peer or a timeout, it is where the job failed: ``rank-exited``.
- a one-node job: every rank torchrun's summary lists has ``rank`` equal to its
  ``local_rank`` on one host (torch/distributed/elastic/multiprocessing/errors/__init__.py
  ``ChildFailedError.format_msg``), covering gloo's ``size=N``. There a gloo peer dialled
  at a loopback address is no misconfigured host name (loopback reaches every rank of one
  node); a refusal there means the process that published the address was gone: a peer that
  exited, or an address an earlier run left in a store that outlived it (a file:// init
  file, runs/s30b-stale-init-file). The loopback hint becomes the symptom it is. (Not read
  from the --log-dir tree alone: a rank ended by torchrun's SIGTERM leaves empty files, so
  the tree does not show every local rank.)
- srun starting the ranks itself (no torchrun: its task N is rank N, which env:// reads from
  RANK=$SLURM_PROCID) reports each task that ended non-zero: "srun: error: node1: task 1:
  Exited with exit code 1" (src/srun, 17.x-25.x). Under --kill-on-bad-exit it then ends the
  step ("srun: launch/slurm: _step_signal: Terminating StepId=1.0", slurmstepd's "*** STEP
  1.0 ON node0 CANCELLED AT ... ***", "task 0: Terminated": real run
  s33f-slurm-kill-on-bad-exit), without it the peers exit non-zero too. The one task with a
  positive status and no traceback of its rank, while every rank's traceback is a lost peer
  or a timeout, is the rank that left quietly, as in torchrun's summary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import load_catalogue
from ddpcheck.explain import tracebacks
from ddpcheck.explain.causality import CAUSE, HINT, SYMPTOM, Explained
from ddpcheck.explain.failurewords import WAITED
from ddpcheck.explain.families.slurm import SRUN_TASK, TORCHRUN_AGENT
from ddpcheck.explain.globalranks import SUMMARY_RANK
from ddpcheck.explain.reader import Record

ENTRY_HOST = re.compile(r"^\s*host\s*:\s*(?P<host>\S+)")
ENTRY_EXIT = re.compile(r"^\s*exitcode\s*:\s*(?P<code>-?\d+)\b")
ENTRY_NO_FILE = re.compile(r"^\s*error_file\s*:\s*<N/A>")
ENTRY_NO_TRACE = re.compile(r"^\s*traceback\s*:\s*To enable traceback see")
GLOO_SIZE = re.compile(r"\bsize=(?P<size>\d+),")
LOOPBACK_DIALLED = re.compile(r"remote=\[127\.\d+\.\d+\.\d+\]|"
                              r"(?:\bconnect|Connect timeout) \[127\.\d+\.\d+\.\d+\]:\d")


def summary_entries(records: Sequence[Record]) -> list[dict[str, str]]:
    """torchrun's summary entries (Failures and Root Cause blocks) as read: rank, local,
    host, code, quiet ("1" when no error file and no traceback)."""
    out: list[dict[str, str]] = []
    host = ""
    for r in records:
        text = r.text
        if m := ENTRY_HOST.match(text):
            host = m["host"]
        elif m := SUMMARY_RANK.match(text):
            out.append({"rank": m["rank"], "local": m["local"], "host": host, "code": "",
                        "source": r.source, "no_file": "", "quiet": ""})
        elif out and out[-1]["source"] == r.source:
            if m := ENTRY_EXIT.match(text):
                out[-1]["code"] = m["code"]
            elif ENTRY_NO_FILE.match(text):
                out[-1]["no_file"] = "1"
            elif ENTRY_NO_TRACE.match(text) and out[-1]["no_file"]:
                out[-1]["quiet"] = "1"
    return out


# srun ending the step after a task's bad exit (src/srun: "_step_signal: Terminating
# StepId=1.0"; slurmstepd: "*** STEP 1.0 ON node0 CANCELLED AT ...")
STEP_ENDED = re.compile(r"_step_signal: Terminating StepId=|\*\*\* STEP \S+ .*CANCELLED AT")


def srun_quiet_exit(records: Sequence[Record]) -> Explained | None:
    """The one task srun reports with a positive status whose rank printed no traceback,
    when every rank's traceback is a lost peer or a timeout and srun started the ranks
    itself: ``rank-exited`` on it (None when the log does not say so)."""
    exits = {int(m["task"]): (r, m) for r in records
             if (m := SRUN_TASK.search(r.text)) and m["code"] and int(m["code"]) > 0}
    if not exits or any(TORCHRUN_AGENT.search(r.text) for r in records):
        return None
    crashed = tracebacks.job_crashes(records)
    # no traceback at all: the others were ended by srun's step signal before they printed
    # one (--kill-on-bad-exit; runs-torch2.15/s33f-slurm-kill-on-bad-exit)
    if not crashed and not any(STEP_ENDED.search(r.text) for r in records):
        return None
    if any(c.rank is None or not WAITED.search(c.exception) for c in crashed):
        return None
    quiet = [t for t in exits if not any(c.rank == t for c in crashed)]
    if len(quiet) != 1:
        return None
    (rank,) = quiet
    first, m = exits[rank]
    lost = crashed[0] if crashed else None
    peers = f"rank {lost.rank}: {lost.exception[:160]}" if lost else \
        "srun then ended the step, before any other rank printed an error"
    problem = load_catalogue()["rank-exited"].problem(
        f"{first.text.strip()} (srun; no traceback of rank {rank}) | {peers}",
        cause=f"rank {rank} (srun's task {rank}, on {m['node']}) exited with status "
              f"{m['code']} without raising: a sys.exit(N), exit(N) or os._exit(N) in your "
              "code or a library's; the other ranks then lost it (and srun "
              "--kill-on-bad-exit, if set, ended the step)",
        fix=f"find what ends rank {rank} with status {m['code']} (grep your code and its "
            f"libraries for sys.exit/exit(/os._exit, read rank {rank}'s last lines); make "
            "every rank leave the same way",
        ranks=(rank,), hosts=(m["node"],))
    seen = (f"{first.source}:{first.lineno}",) + (
        (f"{lost.record.source}:{lost.record.lineno}",) if lost else ())
    return Explained(problem, first, True, "ddpcheck run --nodes N --stages ddp", seen, CAUSE,
                     pinned=True)


def quiet_exit(found: Sequence[Explained], records: Sequence[Record]) -> Explained | None:
    """The one rank torchrun lists with a positive exit status and no error file or
    traceback, when it raised nothing and every other rank's traceback is a lost peer or a
    timeout: ``rank-exited`` on it (None when the log does not say so); the same told by
    srun's task reports (``srun_quiet_exit``)."""
    if not any(ENTRY_EXIT.match(r.text) for r in records):
        return srun_quiet_exit(records)
    entries = summary_entries(records)
    quiet = {int(e["rank"]) for e in entries if e["quiet"] and e["code"].isdigit()
             and int(e["code"]) > 0}
    if len(quiet) != 1:
        return None
    (rank,) = quiet
    crashed = [c for c in tracebacks.job_crashes(records) if c.rank is not None]
    if not crashed or any(c.rank == rank for c in crashed) or not all(
            WAITED.search(c.exception) for c in crashed):
        return None
    entry = next(e for e in entries if int(e["rank"]) == rank)
    first = next(r for r in records if r.source == entry["source"]
                 and ENTRY_EXIT.match(r.text) and r.rank in (rank, None))
    lost = crashed[0]
    problem = load_catalogue()["rank-exited"].problem(
        f"rank {rank}: exitcode {entry['code']}, error_file <N/A>, no traceback (torchrun's "
        f"summary) | rank {lost.rank}: {lost.exception[:160]}",
        cause=f"rank {rank} exited with status {entry['code']} without raising: a "
              "sys.exit(N), exit(N) or os._exit(N) in your code or a library's (SystemExit "
              "leaves no error file); the other ranks then lost it",
        fix=f"find what ends rank {rank} with status {entry['code']} (grep your code and its "
            "libraries for sys.exit/exit(/os._exit, read rank "
            f"{rank}'s last lines); make every rank leave the same way",
        ranks=(rank,), hosts=(entry["host"],) if entry["host"] else ())
    # the rank and the way it left are settled (pinned): EXPLAINED, not "a symptom"
    return Explained(problem, first, True, "ddpcheck run --nodes N --stages ddp",
                     (f"{first.source}:{first.lineno}", f"{lost.record.source}:"
                      f"{lost.record.lineno}"), CAUSE, pinned=True)


def one_node(records: Sequence[Record]) -> bool:
    """torchrun's summary shows every rank of the world on one host, as its local rank."""
    entries = summary_entries(records)
    if not entries or len({e["host"] for e in entries}) != 1 or any(
            e["rank"] != e["local"] for e in entries):
        return False
    sizes = {int(m["size"]) for r in records if "size=" in r.text
             and (m := GLOO_SIZE.search(r.text))}
    return len(sizes) == 1 and {int(e["rank"]) for e in entries} == set(range(sizes.pop()))


def loopback_in_one_node(found: list[Explained], records: Sequence[Record]
                         ) -> list[Explained]:
    """A hostname-loopback hint read from a peer dialled at loopback, in a one-node job:
    the symptom peer-unreachable (a peer gone, or a stale address), not a host name."""
    if not any(e.problem.code == "hostname-loopback" and e.grade == HINT for e in found) \
            or not one_node(records):
        return found
    out = []
    for e in found:
        p = e.problem
        if p.code == "hostname-loopback" and e.grade == HINT and LOOPBACK_DIALLED.search(
                p.observed):
            e = replace(e, grade=SYMPTOM, root=False, problem=load_catalogue()[
                "peer-unreachable"].problem(
                    p.observed, ranks=p.ranks, hosts=p.hosts,
                    cause="a gloo peer of this one-node job was dialled at a loopback "
                          "address and refused: in one node loopback reaches every rank, so "
                          "the process that published that address was gone (a rank that "
                          "exited, or an address an earlier run left in a store that outlived "
                          "it, such as a file:// init file nobody removed)",
                    fix="read the other ranks' last lines; with init_method='file://...', "
                        "delete the file before each run (or use env:// under torchrun)"))
        out.append(e)
    return out
