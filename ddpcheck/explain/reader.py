"""Split any mix of training-job output into records: one line with its rank, host and time.

Runs wherever ``ddpcheck explain`` runs. Knows the prefixes launchers put on each line
(torchrun ``--tee``/``--log-dir`` ``[rank3]:`` / ``[default3]:``, ``srun -l`` ``3:``, mpirun
``[1,3]<stdout>:``, torchx ``trainer/0 [3]:``, Lightning ``[rank: 3]``, a bare ``[3]``), Ray's
``(RayTrainWorker pid=N, ip=A)`` (the node, no rank), colour codes, the
NCCL ``host:pid:tid [dev]`` form, glog/logging timestamps, and torchelastic's JSON
``error_file``, whose message and Python call stack become records too.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ddpcheck.explain import prefilter

# Prefixes that carry a global rank; each pattern's group "rank" is the rank.
RANK_PREFIXES = [
    re.compile(r"^\s*\[(?:rank|default)(?P<rank>\d+)\]:\s?"),       # torchrun --tee / log-dir
    re.compile(r"^\s*\[\d+,(?P<rank>\d+)\]<std(?:out|err)>:"),       # mpirun --tag-output
    re.compile(r"^\s*\w+/\d+ \[(?P<rank>\d+)\]:"),                  # torchx role/replica [rank]
    re.compile(r"^\s*\[rank: (?P<rank>\d+)\]\s?"),                  # Lightning rank_zero/log
    re.compile(r"^\s*(?P<rank>\d{1,5}): "),                         # srun -l / --label
    re.compile(r"^\s*\[(?P<rank>\d{1,5})\] "),                      # bare [N] (horovod, pdsh)
]
# All of them as one regex, one match a line instead of up to six: its branches are tried in
# the list's order, as the list was; pattern i's rank is its group "rank<i>" (its only group).
ANY_PREFIX = re.compile("|".join(f"(?:{rx.pattern.replace('(?P<rank>', f'(?P<rank{i}>')})"
                                 for i, rx in enumerate(RANK_PREFIXES)))
# Ray's driver prints each worker's output under the worker process and, for another node's
# workers, that node's address (ray/_private/worker.py print_worker_logs: "(pid=45601) task",
# "(RayTrainWorker pid=1234, ip=10.0.0.5) ...", "(raylet, ip=10.0.0.5) ..."; Ray docs,
# "Configuring Logging"): no rank, but the node.
RAY_PREFIX = re.compile(r"^\s*\((?:(?:[\w.<>:-]+ )?pid=\d+|raylet)"
                        r"(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?\) ?")
# Colour codes (ECMA-48 SGR, "\x1b[36m" ... "\x1b[0m") that Ray, Lightning's rich console,
# loguru and colorlog put around a line or its prefix: kept, they would hide the prefix and the
# line's start from every anchored pattern.
ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")
# Ranks named inside the message itself (ProcessGroupNCCL, DDP).
INNER_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (?P<rank>\d+)\]")
# NCCL_DEBUG lines: "host:pid:tid [cudaDev] NCCL INFO|WARN ..." (NCCL src/debug.cc format).
NCCL_HOST = re.compile(r"(?:^|\s|\])(?P<host>[A-Za-z0-9][\w.-]*):\d+:\d+ \[\d+\] ")
MAY_NAME_HOST = prefilter.may_match(NCCL_HOST)  # most lines lack its " [": skip the regex
# glog "[E321 02:07:08.408" / "E0325 20:57:27.620000"; logging "2023-10-13 17:40:02,544".
GLOG_TIME = re.compile(r"\[?[IWEF](?P<mon>\d{1,2})(?P<day>\d\d) (?P<h>\d\d):(?P<m>\d\d):"
                       r"(?P<s>\d\d(?:\.\d+)?)")
ISO_TIME = re.compile(r"(?P<y>\d{4})-(?P<mon>\d\d)-(?P<day>\d\d)[ T](?P<h>\d\d):(?P<m>\d\d):"
                      r"(?P<s>\d\d(?:[.,]\d+)?)")


@dataclass(frozen=True)
class Record:
    """One line of one source, with what its prefix and content say about where and when."""

    source: str
    lineno: int
    text: str  # the line without the launcher's prefix
    rank: int | None = None
    host: str = ""
    time: float | None = None  # seconds, comparable within one log (glog has no year)

    @property
    def order(self) -> tuple[float, int]:
        return (self.time if self.time is not None else float("inf"), self.lineno)


def split_prefix(line: str) -> tuple[int | None, str]:
    """Strip launcher prefixes; the innermost wins (a copied "[80746] [rank0]:" is rank 0)."""
    rank: int | None = None
    for _ in range(3):
        m = ANY_PREFIX.match(line)
        if m is None:
            break
        rank, line = int(m[m.lastgroup]), line[m.end():]  # type: ignore[index]
    return rank, line


def parse_time(text: str) -> float | None:
    m = ISO_TIME.search(text) or GLOG_TIME.search(text)
    if not m:
        return None
    mon, day, h, mi, s = m.group("mon", "day", "h", "m", "s")
    secs = int(h) * 3600 + int(mi) * 60 + float(s.replace(",", "."))
    return ((int(mon) * 31 + int(day)) * 86400) + secs


def record(source: str, lineno: int, line: str) -> Record:
    line = line.rstrip("\n")
    if "\x1b" in line:
        line = ANSI_SGR.sub("", line)
    ray = RAY_PREFIX.match(line) if line.lstrip().startswith("(") else None
    if ray is not None:
        line = line[ray.end():]
    rank, text = split_prefix(line)
    if rank is None:
        inner = INNER_RANK.search(text)
        rank = int(inner.group("rank")) if inner else None
    nccl = NCCL_HOST.search(text) if MAY_NAME_HOST(text) else None
    host = nccl.group("host") if nccl else (ray["ip"] or "") if ray else ""
    return Record(source, lineno, text, rank, host, parse_time(text))


def last_lines(records: Sequence[Record],
               skip: re.Pattern[str] | None = None) -> dict[str, Record]:
    """Each source's last line that is not blank (nor matches ``skip``): where its output
    ended."""
    last: dict[str, Record] = {}
    for r in records:
        if r.text.strip() and not (skip is not None and skip.search(r.text)):
            last[r.source] = r
    return last


def read_text(source: str, text: str) -> list[Record]:
    """Records of one input: an error_file / ddpcheck JSON, or plain log lines."""
    data = _json(text)
    if isinstance(data, dict) and "message" in data:
        return list(_error_file_records(source, data))
    return _failure_blocks([record(source, i, line)
                            for i, line in enumerate(text.splitlines(), 1)])


# torchrun's ChildFailedError summary (torch/distributed/elastic/multiprocessing/errors/
# __init__.py): per failure "[N]:" then "time : ...", "host : H", "rank : R (local_rank: L)",
# "exitcode : C (pid: P)", "error_file", "traceback". The block's fields name the rank and host
# of its exitcode and traceback lines, which carry neither themselves.
BLOCK_START = re.compile(r"^\s*(?:\[\d+\]:|Root Cause \(first observed failure\):|"
                         r"Failures:)\s*$")
BLOCK_FIELD = re.compile(r"^\s*(?P<key>host|rank)\s*:\s*(?P<value>\S+)")
BLOCK_FIRST = "[RFhr"  # the first characters of BLOCK_START's and BLOCK_FIELD's matches


def _failure_blocks(records: list[Record]) -> list[Record]:
    rank: int | None = None
    host = ""
    out = []
    gate = prefilter.GATES
    for r in records:
        # a field or block start begins (after blanks) with one of BLOCK_FIRST: others move
        # nothing (exact: str.lstrip and re's \s strip the same characters)
        if gate and r.text.lstrip()[:1] not in BLOCK_FIRST and r.text[:1] != "=":
            pass
        elif BLOCK_START.match(r.text):
            rank, host = None, ""
        elif m := BLOCK_FIELD.match(r.text):
            if m["key"] == "host":
                host = m["value"]
            elif m["value"].isdigit():
                rank = int(m["value"])
        elif r.text.startswith("===="):
            rank, host = None, ""
        if (rank is not None or host) and r.rank is None and not r.host:
            r = Record(r.source, r.lineno, r.text, rank, host, r.time)
        out.append(r)
    return out


def _json(text: str) -> Any:
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return None
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        return None


def _error_file_records(source: str, data: dict[str, Any]) -> Iterator[Record]:
    """torchelastic's error_file: {"message": {"message": ..., "extraInfo": {...}}}.

    Format written by torch/distributed/elastic/multiprocessing/errors/error_handler.py
    (``record_exception``): the message, the formatted traceback, a Unix timestamp.
    """
    msg = data.get("message")
    info: dict[str, Any] = {}
    if isinstance(msg, dict):
        info = msg.get("extraInfo") or {}
        msg = msg.get("message", "")
    when = _log_scale(_float(info.get("timestamp")))
    lines = [*str(msg or "").splitlines(), *str(info.get("py_callstack", "")).splitlines()]
    for i, line in enumerate(lines, 1):
        r = record(source, i, line)
        yield Record(r.source, r.lineno, r.text, r.rank, r.host, when)


def _log_scale(epoch: float | None) -> float | None:
    """A Unix timestamp on the scale ``parse_time`` gives log lines (month, day, time of
    day), so an error_file's moment orders among the console's lines. Logs print the job
    machine's local time; the conversion uses this machine's time zone (the same where
    explain runs on the cluster that ran the job). torchelastic writes whole seconds
    (``int(time.time())``): the moment is taken at the end of its second, so it never comes
    before a line stamped within that second (the agent's "failed (exitcode: -11)" at
    .305 was printed after the rank's crash, which its error_file dates .000)."""
    if epoch is None:
        return None
    t = time.localtime(epoch)
    return ((t.tm_mon * 31 + t.tm_mday) * 86400 + t.tm_hour * 3600 + t.tm_min * 60 + t.tm_sec
            + (epoch % 1 or 0.999))


def _float(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


# The summary's "Failures:" section (errors/__init__.py ``_MSG_FORMAT_TEMPLATE``: "Failures:",
# the other failures or "<NO_OTHER_FAILURES>", a rule, then the Root Cause block).
FAILURES_TITLE = re.compile(r"^\s*Failures:\s*$")
# "exitcode  : -15 (pid: 9804)": torchrun's own teardown (api.py ``_close`` SIGTERMs every
# worker still running once one failed), never a failure of its own.
TORN_DOWN = re.compile(r"^-15\b")
ENTRY_FIELD = re.compile(r"^\s*(?P<key>time|exitcode|error_file)\s*:\s*(?P<value>.*)$")
SUMMARY_SPAN = 400  # lines between "Failures:" and the Root Cause line (tracebacks included)


def _unordered(records: list[Record], root: int, when: str) -> bool:
    """Whether the summary ending at the Root Cause line ``root`` (block time ``when``) lists
    another failure that may have come first: torch's pick is then no order.

    ``get_first_failure`` is ``min(failures, key=timestamp)`` over whole seconds (torch/
    distributed/elastic/multiprocessing/errors/__init__.py, 1.13 to 2.13):
    - error.json's ``"timestamp": str(int(time.time()))`` (error_handler.py): failures in one
      second tie, and ``min`` keeps the lowest rank. Recorded with torch 1.13.1 (tests/data/
      explain/runs-torch1.13/user-exception): "[1]: time : 2026-11-24_16:03:54 ... rank : 1
      ... exitcode : 1" (the KeyError) above "Root Cause (first observed failure): [0]: time :
      2026-11-24_16:03:54 ... rank : 0" (its peer's "Connection closed by peer").
    - a failure with no error file (``error_file: <N/A>``, a signal) is dated when the agent
      looked (``_set_no_reply_file``: ``self.timestamp = int(time.time())``), up to
      ``--monitor-interval`` late: 5 s by default in torch 1.13 to 2.1 (run.py), 0.1 s in
      2.13. Recorded with 1.13.1 (runs-torch1.13/sigkill): rank 1's "exitcode : -9 ...
      error_file: <N/A>" at 16:04:25, after the Root Cause block's rank 0 (16:04:23), whose
      "Connection closed by peer" it caused.
    A failure torchrun's own teardown made (exitcode -15: api.py ``_close`` SIGTERMs the
    workers still running) came after the first one by construction and never counts."""
    entry: dict[str, str] = {}
    for r in reversed(records[max(0, root - SUMMARY_SPAN):root]):
        if FAILURES_TITLE.match(r.text):
            break
        if m := ENTRY_FIELD.match(r.text):
            entry.setdefault(m["key"], m["value"].strip())
        if m and m["key"] == "time":  # an entry's first field (read backwards: its last)
            torn = TORN_DOWN.match(entry.get("exitcode", ""))
            if not torn and (entry["time"] == when or entry.get("error_file") == "<N/A>"):
                return True
            entry = {}
    return False


# torchrun's ChildFailedError summary names the failure it observed first (torch/distributed/
# elastic/multiprocessing/errors/__init__.py): "Root Cause (first observed failure):" then
# "[0]:", "time", "host", "rank : R (local_rank: L)".
ROOT_CAUSE_BLOCK = re.compile(r"^\s*Root Cause \(first observed failure\):")
BLOCK_RANK = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d+)")
# "time : 2026-11-24_13:58:07" (errors/__init__.py ``_format_failure``: the failure's
# timestamp, strftime "%Y-%m-%d_%H:%M:%S", whole seconds)
BLOCK_TIME = re.compile(r"^\s*time\s*:\s*(?P<time>\d{4}-\d\d-\d\d_\d\d:\d\d:\d\d)\s*$")
BLOCK_LINES = 8  # the fields of one failure: "[0]:", time, host, rank, exitcode, ...


def first_failed_rank(records: list[Record]) -> int | None:
    """The rank torchrun's "Root Cause (first observed failure)" block names, if any.

    Each node's torchrun prints its own block, naming its own first failure: with the
    consoles of several nodes, the block with the strictly earliest time is the job's first
    failure (torchrun's own rule, ``get_first_failure``, across the nodes); blocks that tie
    on their whole second name no rank. Recorded: tests/data/explain/runs/
    netns-hostname-loopback, where node1's block ("time : ..._13:58:32", rank 1) sorts
    before node0's ("time : ..._13:58:07", rank 0), which failed first."""
    blocks: list[tuple[str, int]] = []  # (time or "", rank), in the records' order
    for i in prefilter.lines_for([r.text for r in records], ROOT_CAUSE_BLOCK):
        if not ROOT_CAUSE_BLOCK.match(records[i].text):
            continue
        when = ""
        for nxt in records[i + 1:i + 1 + BLOCK_LINES]:
            if t := BLOCK_TIME.match(nxt.text):
                when = t["time"]
            if m := BLOCK_RANK.match(nxt.text):
                if when and _unordered(records, i, when):
                    return None  # torch's pick among failures it could not order
                blocks.append((when, int(m["rank"])))
                break
    ranks = {rank for _, rank in blocks}
    if len(ranks) <= 1 or not all(when for when, _ in blocks):
        return blocks[0][1] if blocks else None  # one rank, or no times to compare
    (t0, r0), (t1, _) = sorted(set(blocks))[:2]
    return r0 if t0 < t1 else None
