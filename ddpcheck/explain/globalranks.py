"""Global ranks for lines that torchrun labels with a node's local rank.

Runs inside ``ddpcheck explain``, after the reader split the input into records and before
any rule compares ranks. torchrun names a worker by its *local* rank in two places:

- the ``--log-dir`` tree (torch/distributed/elastic/multiprocessing/api.py:
  ``<log_dir>/<run_id>/attempt_<n>/<local_rank>/{stdout,stderr}.log, error.json``);
- the ``--tee`` console prefix, ``[${role_name}${local_rank}]:`` by default
  (elastic/agent/server/local_elastic_agent.py; ``[default3]:``), which the reader takes for
  the rank.

On one node local is global; with one file per node every node has a local rank 0. torch's
own prefix on a rank's uncaught exception, ``[rankN]:``, is global, so one line
``[default1]:[rank9]: Traceback ...`` fixes that node's offset (8) for every line of the
file (the console) or of the attempt (the tree). Where a file shows no such line, or two
offsets, its ranks stay as they are. Three more labels are local (stop 30): the agent's
``failed (exitcode: C) local_rank: L`` line (the console's offset is added), Lightning's
observer ``[rank: L] Child process with PID ...`` (the node's offset from its GLOBAL_RANK
lines, else no rank), and one agent's tree given alone with no global rank in it (torch 1.13
and 2.1 files): its local ranks are compared as they are, and explain says they are local
(``local_note``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.explain.reader import Record

LOG_DIR_FILE = re.compile(r"(?P<attempt>attempt_\d+)[/\\](?P<local>\d+)[/\\]"
                          r"(?:stdout\.log|stderr\.log|error\.json)$")
# torch's own prefix on a rank's uncaught exception ("[rank1]: Traceback ..."): global rank.
OWN_RANK = re.compile(r"^\s*(?:\[\w+?\d+\]:)?\[rank(?P<rank>\d+)\]:")
# torchrun's summary entry: "rank      : 1 (local_rank: 1)", then "error_file: /x/<run_id>/
# attempt_0/1/error.json" (errors/__init__.py ``_format_failure``).
SUMMARY_RANK = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d+)\s*\(local_rank:\s*(?P<local>\d+)\)")
SUMMARY_FILE = re.compile(r"^\s*error_file\s*:\s*(?P<prefix>.*?attempt_\d+)[/\\]"
                          r"(?P<local>\d+)[/\\]error\.json\s*$")
# torchrun --tee's default prefix (role "default"), then torch's own global one if any.
TEE = re.compile(r"^\s*\[default(?P<local>\d+)\]:(?:\[rank(?P<rank>\d+)\]:)?")
# The agent's end of an attempt, naming the node's first failed worker by its local rank
# (elastic/multiprocessing/api.py ``SubprocessContext._poll``, 2.0 to 2.13: "failed
# (exitcode: -9) local_rank: 1 (pid: 12001) of binary: ..."); its rank is the node's offset
# plus that, where the console's tee prefixes show the offset.
AGENT_FAILED = re.compile(r"failed \(exitcode: -?\d+\) local_rank: (?P<local>\d+) \(pid: \d+\)")


# Lightning's launcher (lightning/fabric/strategies/launchers/subprocess_script.py
# _ChildProcessObserver._run, 2.1 to 2.6.6) prefixes its line with rank=(i + 1), i the index of
# the child among the processes it started on this node: a LOCAL rank, though the prefix
# ("[rank: 1] Child process with PID 4242 terminated with code -9. ...", rank_prefixed_message)
# reads like the global one of its other lines. So does its SIGTERM notifier
# (lightning/pytorch/trainer/connectors/signal_connector.py _sigterm_notifier_fn:
# rank_prefixed_message(f"Received SIGTERM: {signum}", self.trainer.local_rank)).
OBSERVER = re.compile(r"^\s*\[rank: (?P<local>\d+)\]\s?(?:Child process with PID \d+ "
                      r"terminated|Received SIGTERM: \d)")
# Each of its processes says its global rank as it joins (lightning/fabric/utilities/
# distributed.py _init_dist_connection): "Initializing distributed: GLOBAL_RANK: 2, MEMBER:
# 3/4"; a node's are node_rank * num_processes + local rank (strategies/ddp.py
# set_world_ranks), so one console's run from its node's offset.
MEMBER = re.compile(r"(?i)initializing (?:ddp|distributed): GLOBAL_RANK: (?P<rank>\d+), "
                    r"MEMBER: \d+/(?P<world>\d+)")


def apply(records: Sequence[Record], texts: dict[str, str]) -> list[Record]:
    """``records`` with the global rank where a local one was read and the node's offset is
    known (``texts``: each source's raw text)."""
    return _observer_lines(_tee_consoles(_log_dir_files(records, texts), texts), texts)


def _observer_lines(records: list[Record], texts: dict[str, str]) -> list[Record]:
    """Lightning's observer line: its local rank plus the node's offset, which the console's
    GLOBAL_RANK lines show when they are one node's whole run of ranks (contiguous, from a
    multiple of their count, which divides the world); otherwise no rank at all."""
    fixed: dict[tuple[str, int], int | None] = {}
    for src, text in texts.items():
        if "Child process with PID" not in text and "Received SIGTERM: " not in text:
            continue
        lines = text.splitlines()
        members = [m for line in lines if (m := MEMBER.search(line))]
        ranks = sorted({int(m["rank"]) for m in members})
        worlds = {int(m["world"]) for m in members}
        whole = bool(ranks) and ranks == list(range(ranks[0], ranks[0] + len(ranks))) and \
            ranks[0] % len(ranks) == 0 and len(worlds) == 1 and next(iter(worlds)) % len(ranks) == 0
        for i, line in enumerate(lines, 1):
            if m := OBSERVER.match(line):
                local = int(m["local"])
                fixed[(src, i)] = ranks[0] + local if whole and local < len(ranks) else None
    if not fixed:
        return records
    return [replace(r, rank=fixed[(r.source, r.lineno)]) if (r.source, r.lineno) in fixed
            else r for r in records]


def _log_dir_files(records: Sequence[Record], texts: dict[str, str]) -> list[Record]:
    """The ``--log-dir`` files' lines: the file's local rank plus the attempt's offset."""
    offsets: dict[str, set[int]] = {}
    local: dict[str, tuple[str, int]] = {}
    for src, text in texts.items():
        m = LOG_DIR_FILE.search(src)
        if not m:
            continue
        attempt = _attempt_key(src[:m.start("local")])
        local[src] = (attempt, int(m["local"]))
        for line in text.splitlines():
            if g := OWN_RANK.match(line):
                offsets.setdefault(attempt, set()).add(int(g["rank"]) - int(m["local"]))
    if local and not offsets:  # torch 1.13/2.1 print no [rankN]: prefix; the summary
        for text in texts.values():  # beside the tree may say it
            for attempt, off in _summary_offsets(text):
                offsets.setdefault(attempt, set()).add(off)
    if not local:
        return list(records)
    alone = not offsets and _one_node(local, texts)  # one tree alone: its local ranks
    out = []
    for r in records:
        if r.rank is None and r.source in local:
            attempt, lr = local[r.source]
            if len(offsets.get(attempt, ())) == 1:
                r = replace(r, rank=lr + next(iter(offsets[attempt])))
            elif alone:
                r = replace(r, rank=lr)
        out.append(r)
    return out


def _one_node(local: dict[str, tuple[str, int]], texts: dict[str, str]) -> bool:
    """Every input is a file of one agent's --log-dir tree: one ``<run_id>_<random>``
    directory above ``attempt_N`` (api.py ``_make_log_dir``: ``tempfile.mkdtemp(prefix=
    f"{rdzv_run_id}_", dir=log_dir)``, one per agent, so two nodes writing into one shared
    log dir have two)."""
    return not set(texts) - set(local) and len(
        {src[:m.start()] for src in local if (m := LOG_DIR_FILE.search(src))}) == 1


def local_note(records: Sequence[Record], texts: dict[str, str]) -> str:
    """What explain says when the ranks it names are one tree's local ranks (``apply`` gave
    them where no line gives the node's offset), or ""."""
    local = {src for src in texts if LOG_DIR_FILE.search(src)}
    if not local or set(texts) - local or not _one_node(dict.fromkeys(local, ("", 0)), texts):
        return ""
    if any(OWN_RANK.match(line) or "local_rank:" in line
           for text in texts.values() for line in text.splitlines()):
        return ""  # a global rank was read (the files' own [rankN]:, a summary)
    return ("ranks: the --log-dir tree's local ranks (attempt_N/<local_rank>/); no line of "
            "it says this node's first global rank, so on node k of a multi-node job add k "
            "times the processes per node")


def _attempt_key(prefix: str) -> str:
    """``<run_id>/attempt_N/`` of a --log-dir path: the same attempt wherever the tree was
    copied (the summary names the path where torchrun wrote it)."""
    return "/".join(prefix.replace("\\", "/").rstrip("/").split("/")[-2:])


def _summary_offsets(text: str) -> list[tuple[str, int]]:
    """(attempt, global - local rank) from torchrun's failure summary: each entry's ``rank :
    R (local_rank: L)`` and ``error_file: .../<run_id>/attempt_N/L/error.json``
    (errors/__init__.py ``_format_failure``, the same in torch 1.13 to 2.13). Recorded with
    torch 1.13.1 (tests/data/explain/runs-torch1.13/user-exception), whose workers' files
    carry no ``[rankN]:`` prefix."""
    out: list[tuple[str, int]] = []
    pending: tuple[int, int] | None = None
    if "local_rank:" not in text:
        return out
    for line in text.splitlines():
        if m := SUMMARY_RANK.match(line):
            pending = (int(m["rank"]), int(m["local"]))
        elif pending and (f := SUMMARY_FILE.search(line)) and int(f["local"]) == pending[1]:
            out.append((_attempt_key(f["prefix"]), pending[0] - pending[1]))
            pending = None
    return out


def _tee_consoles(records: list[Record], texts: dict[str, str]) -> list[Record]:
    """A console's ``[defaultK]:`` lines: K plus the offset its ``[defaultK]:[rankN]:`` lines
    show (one per file; none or several: unchanged)."""
    local_lines: dict[str, set[int]] = {}  # source -> line numbers read with a local rank
    offset: dict[str, int] = {}
    agents: set[str] = set()  # consoles whose agent lines' local ranks can be made global
    for src, text in texts.items():
        seen: set[int] = set()
        lines: set[int] = set()
        for i, line in enumerate(text.splitlines(), 1):
            if not (m := TEE.match(line)):
                continue
            if m["rank"] is None:
                lines.add(i)
            else:
                seen.add(int(m["rank"]) - int(m["local"]))
        if len(seen) != 1:
            continue
        if "local_rank: " in text:  # the agent's lines name local ranks too
            agents.add(src)
        if (off := next(iter(seen))) != 0 and lines or src in agents:
            offset[src], local_lines[src] = off, lines
    if not offset:
        return records
    return [_agent_line(r, offset[r.source]) if r.rank is None and r.source in agents else
            replace(r, rank=r.rank + offset[r.source])
            if r.rank is not None and r.lineno in local_lines.get(r.source, ()) else r
            for r in records]


def _agent_line(r: Record, offset: int) -> Record:
    """The agent's "failed (exitcode: C) local_rank: L" line with its global rank."""
    m = AGENT_FAILED.search(r.text) if "local_rank: " in r.text else None
    return replace(r, rank=int(m["local"]) + offset) if m else r
