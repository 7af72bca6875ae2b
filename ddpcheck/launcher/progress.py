"""Progress lines while ``ddpcheck run`` runs, read from the rank files as ranks write them.

Runs in the launcher, called from the torchrun poll loop (``on_tick``, every 0.2 s). It tails
this node's ``rank-N.jsonl`` files (only the bytes added since the last tick: O(new events))
and prints to stderr, so stdout keeps only the report:

- on a terminal, one live line for the running stage (stage, ranks done/total, elapsed),
  rewritten in place and replaced by the stage's outcome line;
- elsewhere (a Slurm ``.out`` file, a CI log), one timestamped line per node joining and per
  stage outcome, flushed at once, never a carriage return.

Scope: on the node that hosts rank 0 the lines are the whole world's. Rank 0 records, for
every probe, the outcome all ranks agreed on (``agreed`` in its ``probe`` events, see
plugin.RankSession._agree), and its ``hello`` event lists every rank with its host: a stage
is done for the world when rank 0 has agreed on its last probe. On the other nodes the
lines are this node's own ranks.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from ddpcheck import results
from ddpcheck.ranges import format_ranks

CLEAR = "\r\x1b[K"  # carriage return, erase to the end of the line (ECMA-48 EL)


@dataclass
class _Stage:
    name: str
    start: float  # wall time of the first probe-start seen
    end: float = 0.0
    statuses: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    done: set[int] = field(default_factory=set)  # ranks known to have finished it
    reported: bool = False


def read_appended(path: Path, offset: int) -> tuple[str, int]:
    """The text appended to ``path`` since ``offset``, and the offset to read from next."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        fh.seek(offset)
        return fh.read(), fh.tell()


class Tail:
    """The complete JSON lines appended to one file since the last read."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, ""

    def read(self) -> list[results.Event]:
        try:
            chunk, self.offset = read_appended(self.path, self.offset)
        except OSError:
            return []
        lines = (self.partial + chunk).split("\n")
        self.partial = lines.pop()  # a line still being written waits for the next tick
        return results.parse_events(results.json_lines(lines))


class Progress:
    """Turns rank events into progress lines (see the module docstring)."""

    def __init__(self, results_dir: Path, out: TextIO | None = None, live: bool | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.results_dir = results_dir
        self.out = out or sys.stderr
        self.live = self.out.isatty() if live is None else live
        self.clock = clock
        self.tails: dict[int, Tail] = {}
        self.stages: dict[str, _Stage] = {}
        self.order: list[str] = []
        self.hosts: dict[int, str] = {}  # rank -> host, of the ranks in scope
        self.world_size = 0
        self.joined: set[str] = set()
        self.live_text = ""

    @property
    def world_scope(self) -> bool:
        return 0 in self.tails

    def tick(self) -> None:
        for path in self.results_dir.glob("rank-*.jsonl"):
            self.tails.setdefault(results.rank_of(path), Tail(path))
        for rank, tail in sorted(self.tails.items()):
            for event in tail.read():
                self._event(rank, event)
        self._report_finished()
        if self.live:
            self._draw_live()

    def close(self) -> None:
        """Last read after torchrun ended; erase the live line before the report."""
        self.tick()
        if self.live and self.live_text:
            self.out.write(CLEAR)
            self.out.flush()

    # --- events ----------------------------------------------------------------------------
    def _event(self, rank: int, e: results.Event) -> None:
        if isinstance(e, results.Start):
            self.world_size = max(self.world_size, e.world_size)
        elif isinstance(e, results.Hello) and (rank == 0 or not self.world_scope):
            ranks = {r: v.get("host", "?") for r, v in e.ranks.items()}
            self._joined(ranks if rank == 0 else {r: h for r, h in ranks.items()
                                                  if r in self.tails})
        elif isinstance(e, results.ProbeStart):
            st = self._stage(e.stage or "?", e.time or self.clock())
            self._finish_earlier(rank, st.name)
        elif isinstance(e, results.Probe):
            st = self._stage(e.stage or "?", e.time or self.clock())
            if self._counts(rank):
                st.statuses.append(e.agreed or e.status)
                st.codes += [p.code for p in e.problems]
                st.end = e.time or self.clock()
        elif isinstance(e, results.End):
            self._finish_earlier(rank, "")

    def _counts(self, rank: int) -> bool:
        """Whose outcomes make the line: rank 0's agreement, or every local rank's."""
        return rank == 0 if self.world_scope else True

    def _joined(self, ranks: dict[int, str]) -> None:
        self.hosts.update(ranks)
        by_host: dict[str, list[int]] = {}
        for r, h in sorted(ranks.items()):
            by_host.setdefault(h, []).append(r)
        for host, rs in by_host.items():
            if host not in self.joined:
                self.joined.add(host)
                self._line(f"node {host} joined: ranks {format_ranks(rs)} "
                           f"({len(self.hosts)} of {self.world_size or '?'} ranks in)")

    def _stage(self, name: str, when: float) -> _Stage:
        if name not in self.stages:
            self.stages[name] = _Stage(name, when)
            self.order.append(name)
        return self.stages[name]

    def _finish_earlier(self, rank: int, current: str) -> None:
        """A rank that starts a later stage (or ends) has finished every earlier one."""
        for name in self.order:
            if name == current:
                break
            self.stages[name].done.add(rank)

    # --- output ----------------------------------------------------------------------------
    def _total(self) -> int:
        return self.world_size if self.world_scope else len(self.tails)

    def _finished(self, st: _Stage) -> bool:
        if self.world_scope:  # rank 0 agreed on every probe of the stage with all ranks
            return 0 in st.done
        return len(st.done) >= len(self.tails) > 0

    def _report_finished(self) -> None:
        for name in self.order:
            st = self.stages[name]
            if st.reported or not self._finished(st):
                continue
            st.reported = True
            status = results.Status.worst(st.statuses) if st.statuses else "?"
            codes = sorted({c for c in st.codes if c})
            why = f"  ({', '.join(codes)})" if codes else ""
            done = self._total() if self.world_scope else len(st.done)
            self._line(f"{name:<12} {status:<8} {done}/{self._total()} ranks  "
                       f"{max(st.end - st.start, 0.0):6.1f} s{why}")

    def _draw_live(self) -> None:
        running = next((self.stages[n] for n in self.order if not self.stages[n].reported),
                       None)
        text = ""
        if running:
            done = len(running.done)
            text = (f"{running.name:<12} running  {done}/{self._total()} ranks  "
                    f"{self.clock() - running.start:6.1f} s")
        if text != self.live_text:
            self.out.write(CLEAR + text)
            self.out.flush()
            self.live_text = text

    def _line(self, text: str) -> None:
        if self.live:
            self.out.write(CLEAR + text + "\n")
            self.live_text = ""
        else:
            stamp = time.strftime("%H:%M:%S", time.localtime(self.clock()))
            self.out.write(f"[{stamp}] ddpcheck: {text}\n")
        self.out.flush()
