"""Result files: the only channel from the workers to the launcher.

Every worker appends JSON lines to ``rank-<N>.jsonl`` in the results directory as it goes,
so a rank that crashes still leaves what it did. The worker wrapper adds ``exit-<N>.json``
with the rank's exit status, and rank 0 writes ``world.json`` with every rank's events
gathered through the store (this is how results of other nodes reach the rank-0 node).
Runs on both sides: workers write, the launcher reads.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULTS_DIR_ENV = "DDPCHECK_RESULTS_DIR"

# Status of a probe or a stage, worst last.
PASS, SKIP, FAIL, BLOCKED = "PASS", "SKIP", "FAIL", "BLOCKED"


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
        self.events: list[dict[str, Any]] = []
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"event": event, "time": time.time(), **fields}
        self.events.append(record)
        if self.path:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record, default=str) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        return record


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a rank file, ignoring a torn last line left by a crash."""
    events = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


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


def rank_events(results_dir: Path) -> dict[int, list[dict[str, Any]]]:
    """Every rank's events: world.json (all nodes) overlaid with local rank files."""
    merged: dict[int, list[dict[str, Any]]] = {}
    world = read_json(world_file(results_dir)) or {}
    for rank, events in world.get("ranks", {}).items():
        merged[int(rank)] = events
    for path in _rank_paths(results_dir):
        rank = int(path.stem.split("-")[1])
        local = read_jsonl(path)
        if len(local) >= len(merged.get(rank, [])):
            merged[rank] = local
    return dict(sorted(merged.items()))


def exit_statuses(results_dir: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for path in sorted(results_dir.glob("exit-*.json")):
        data = read_json(path)
        if data is not None:
            out[int(path.stem.split("-")[1])] = data
    return out


def _rank_paths(results_dir: Path) -> Iterator[Path]:
    return iter(sorted(results_dir.glob("rank-*.jsonl")))
