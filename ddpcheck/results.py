"""Result files: the only channel from the workers to the launcher, and their typed protocol.

Every worker appends one JSON line per event to ``rank-<N>.jsonl`` in the results directory
as it goes, so a rank that crashes still leaves what it did. The worker wrapper adds
``exit-<N>.json`` with the rank's exit status, and rank 0 writes ``world.json`` with every
rank's events gathered through the store (this is how results of other nodes reach the
rank-0 node). Runs on both sides: workers write (``RankLog``, ``write_exit``), the launcher
reads (``rank_events``, ``exit_statuses``); both see only the typed records below.

A line is ``{"event": KIND, "time": T, **fields}``. Reading is lenient: unknown kinds and
fields are ignored and missing fields take their defaults, so files of older or newer
versions (tests/data holds recorded ones) still read.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar, Union

from ddpcheck.diagnoses import Problem

RESULTS_DIR_ENV = "DDPCHECK_RESULTS_DIR"

class Status(str, Enum):
    """Status of a probe, a stage or a report cell; ``order`` says which is worse.

    A str so that it is its own JSON value and compares equal to the text a file holds.
    Over probes and ranks the worst wins: a stage is SKIP only when nothing in it ran."""

    SKIP = "SKIP"
    PASS = "PASS"
    BLOCKED = "BLOCKED"
    FAIL = "FAIL"
    NOT_RUN = "-"  # a stage no rank reported (before it is found blocked)
    NO_RESULT = "NO RESULT"  # a report cell: this rank reported nothing for the stage

    @property
    def order(self) -> int:
        return _STATUS_ORDER[self]

    @classmethod
    def worst(cls, statuses: Iterable[str]) -> Status:
        """The worst of the statuses (a text no Status spells counts as NO_RESULT)."""
        return max((cls.of(s) for s in statuses), key=lambda s: s.order)

    @classmethod
    def of(cls, text: str) -> Status:
        try:
            return cls(text)
        except ValueError:
            return cls.NO_RESULT

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __hash__(self) -> int:  # as its text hashes, so it finds and is found in str keys
        return hash(self.value)


_STATUS_ORDER = {Status.SKIP: 0, Status.PASS: 1, Status.BLOCKED: 2, Status.FAIL: 3,
                 Status.NOT_RUN: 4, Status.NO_RESULT: 4}
PASS, SKIP, FAIL, BLOCKED = Status.PASS, Status.SKIP, Status.FAIL, Status.BLOCKED


@dataclass(frozen=True)
class Start:
    """The rank is up: who it is and where it runs."""

    KIND: ClassVar[str] = "start"
    time: float = 0.0
    rank: int = 0
    world_size: int = 0
    backend: str = ""
    host: str = "?"
    local_rank: int = 0
    node_rank: int = 0
    pid: int | None = None


@dataclass(frozen=True)
class Hello:
    """The ranks this rank saw at the start ({rank: host, local_rank, node_rank, pid})."""

    KIND: ClassVar[str] = "hello"
    time: float = 0.0
    ranks: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    missing: tuple[int, ...] = ()
    coordinator: str | None = None  # rank 0's host


@dataclass(frozen=True)
class ProbeStart:
    """A probe begins; a ProbeStart without its Probe is where a rank stopped."""

    KIND: ClassVar[str] = "probe-start"
    time: float = 0.0
    nodeid: str = ""
    stage: str = ""
    deadline: float = 0.0


@dataclass(frozen=True)
class Probe:
    """A probe's outcome on this rank (status) and as all ranks agreed on it (agreed)."""

    KIND: ClassVar[str] = "probe"
    time: float = 0.0
    nodeid: str = ""
    name: str = ""
    stage: str = ""
    doc: tuple[str, ...] = ()
    status: str = ""
    agreed: str = ""
    duration: float | None = None
    message: str = ""
    figure: str = ""
    measurements: Mapping[str, Any] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    blocked_by: str = ""  # status BLOCKED: the stage whose failure blocked this probe


@dataclass(frozen=True)
class Problems:
    """Problems found outside a probe (rendezvous, collection) that block a stage."""

    KIND: ClassVar[str] = "problems"
    time: float = 0.0
    stage: str = ""
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class End:
    """The session ended; blocked_by is the stage whose failure blocked the rest."""

    KIND: ClassVar[str] = "end"
    time: float = 0.0
    blocked_by: str | None = None


Event = Union[Start, Hello, ProbeStart, Probe, Problems, End]
KINDS: dict[str, type[Event]] = {c.KIND: c for c in  # type: ignore[misc]
                                 (Start, Hello, ProbeStart, Probe, Problems, End)}


def record_fields(record: Any) -> dict[str, Any]:
    """The fields of a typed record (a rank event, a launcher message) as JSON values:
    problems as Problem dicts, tuples as lists, mappings as dicts. The one encoder of both
    channels (``to_record`` here, ``ddpcheck.cluster.messages.encode``)."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if f.name == "problems":
            value = [p.to_dict() for p in value]
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = dict(value)
        out[f.name] = value
    return out


def to_record(event: Event) -> dict[str, Any]:
    """The event as its JSON line holds it."""
    return {"event": event.KIND, **record_fields(event)}


def read_fields(cls: type, data: Mapping[str, Any],
                convert: Mapping[str, Callable[[Any], Any]] | None = None) -> dict[str, Any]:
    """The constructor arguments of the typed record ``cls`` from its JSON fields, the inverse
    of :func:`record_fields` (both channels read with it: :func:`parse_event` and
    ``ddpcheck.cluster.messages.decode``). Unknown fields are ignored and missing or null ones
    take their defaults, so a record of an older or newer ddpcheck still reads; problems
    become Problems, and ``convert`` maps another field's JSON value to its type."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        value = data.get(f.name)
        if value is None:
            continue
        if f.name == "problems":
            value = tuple(Problem.from_dict(p) for p in value if isinstance(p, dict))
        elif convert and f.name in convert:
            value = convert[f.name](value)
        values[f.name] = value
    return values


def _status(value: Any) -> Any:
    return Status.of(str(value)) if value else value


# How an event's fields leave JSON: rank keys are ints again, lists tuples, statuses Statuses.
_EVENT_FIELDS: dict[str, Callable[[Any], Any]] = {
    "ranks": lambda v: {int(r): x for r, x in v.items()},
    "missing": lambda v: tuple(int(r) for r in v),
    "doc": tuple,
    "status": _status,
    "agreed": _status,
}


def parse_event(record: Mapping[str, Any]) -> Event | None:
    """The typed event of one JSON line; None for a kind this version does not know."""
    kind = KINDS.get(str(record.get("event")))
    if kind is None:
        return None
    return kind(**read_fields(kind, record, _EVENT_FIELDS))


def parse_events(records: Iterable[Mapping[str, Any]]) -> list[Event]:
    return [e for e in (parse_event(r) for r in records if isinstance(r, Mapping)) if e]


@dataclass(frozen=True)
class ExitStatus:
    """How a rank's probe session ended, as its wrapper saw it (``exit-<N>.json``)."""

    rank: int = 0
    pid: int | None = None
    returncode: int | None = None
    signal: int | None = None
    signal_name: str | None = None  # SIGKILL, SIGTERM...: the session was killed
    finished: bool = False  # the session logged its end: failed probes are results
    session_error: str = ""  # pytest's own failure (collection, usage...), if any
    tail: tuple[str, ...] = ()  # the last lines it printed, as evidence
    time: float = 0.0
    # The session's own word on why it stopped (its SessionFailure file), typed:
    world_connect: str = ""  # the init method it could not reach the store through, and why
    probes_missing: str = ""  # why the rank's python cannot import ddpcheck's probes, if so

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExitStatus:
        known = {f.name: data[f.name] for f in fields(cls) if data.get(f.name) is not None}
        known["tail"] = tuple(known.get("tail", ()))
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self)}


@dataclass(frozen=True)
class SessionFailure:
    """Why a rank's probe session stopped before its probes, in its own words (written by
    the plugin the way torchrun's ``@record`` writes an error file; the wrapper copies it
    into the rank's ExitStatus, so the launcher never reads it back out of printed text)."""

    world_connect: str = ""  # "env:// (node0:29790) within 8 s: Timed out ..."

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionFailure:
        return cls(**{f.name: str(data[f.name]) for f in fields(cls) if data.get(f.name)})


def rank_from_env(environ: Mapping[str, str]) -> int:
    """This process's global rank before any world exists (srun sets no RANK)."""
    return int(environ.get("RANK") or environ.get("SLURM_PROCID") or "0")


def failure_file(results_dir: Path, rank: int) -> Path:
    return results_dir / f"failure-{rank}.json"


def write_failure(results_dir: Path, rank: int, failure: SessionFailure) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    write_json(failure_file(results_dir, rank), failure.to_dict())


def read_failure(results_dir: Path, rank: int) -> SessionFailure:
    data = read_json(failure_file(results_dir, rank))
    return SessionFailure.from_dict(data) if isinstance(data, dict) else SessionFailure()


def rank_file(results_dir: Path, rank: int) -> Path:
    return results_dir / f"rank-{rank}.jsonl"


def exit_file(results_dir: Path, rank: int) -> Path:
    return results_dir / f"exit-{rank}.json"


def world_file(results_dir: Path) -> Path:
    return results_dir / "world.json"


class RankLog:
    """Append-only event log of one rank; each line is flushed before returning."""

    def __init__(self, results_dir: Path | None, rank: int) -> None:
        self.path = rank_file(results_dir, rank) if results_dir else None
        self.events: list[Event] = []
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: Event) -> Event:
        """Stamp the event with the time (unless it has one) and append it."""
        event = event if event.time else replace(event, time=time.time())
        self.events.append(event)
        if self.path:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(to_record(event), default=str) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        return event

    def records(self) -> list[dict[str, Any]]:
        """The events as their lines hold them (what rank 0 gathers into world.json)."""
        return [to_record(e) for e in self.events]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a rank file's raw lines, ignoring a torn last line left by a crash."""
    try:
        return json_lines(path.read_text(encoding="utf-8").splitlines())
    except OSError:
        return []


def json_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The JSON objects of a rank file's lines; a torn or partial line is skipped."""
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def read_events(path: Path) -> list[Event]:
    """A rank file's typed events (a torn last line and unknown kinds are skipped)."""
    return parse_events(read_jsonl(path))


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def write_json(path: Path, data: Any) -> None:
    """Write atomically (rename), so a reader never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, path)


def rank_events(results_dir: Path) -> dict[int, list[Event]]:
    """Every rank's events: world.json (all nodes) overlaid with local rank files."""
    merged: dict[int, list[dict[str, Any]]] = {}
    world = read_json(world_file(results_dir)) or {}
    for rank, records in world.get("ranks", {}).items():
        merged[int(rank)] = records
    for path in sorted(results_dir.glob("rank-*.jsonl")):
        local = read_jsonl(path)
        if len(local) >= len(merged.get(rank_of(path), [])):
            merged[rank_of(path)] = local
    return {rank: parse_events(records) for rank, records in sorted(merged.items())}


def write_exit(results_dir: Path, status: ExitStatus) -> None:
    write_json(exit_file(results_dir, status.rank), status.to_dict())


def exit_statuses(results_dir: Path) -> dict[int, ExitStatus]:
    out = {}
    for path in sorted(results_dir.glob("exit-*.json")):
        data = read_json(path)
        if isinstance(data, dict):
            out[rank_of(path)] = ExitStatus.from_dict(data)
    return out


def rank_of(path: Path) -> int:
    """The rank of a ``rank-N.jsonl`` or ``exit-N.json`` file."""
    return int(path.stem.split("-")[1])
