"""Read torch Flight Recorder dumps: each rank's last collectives, as typed records.

Runs wherever ``ddpcheck explain`` runs, without torch. A dump is what
``torch._C._distributed_c10d._dump_fr_trace()`` returns (a pickle of plain dicts, lists,
strings and numbers; ProcessGroupNCCL's watchdog writes the same bytes to
``$TORCH_NCCL_DEBUG_INFO_TEMP_FILE<rank>`` / ``$TORCH_FR_DUMP_TEMP_FILE<rank>``), or the JSON
of ``_dump_fr_trace_json()``. Layout as torch 2.13 writes it (dump version "2.10"):
``{"version", "pg_config": {pg: {"name", "desc", "ranks": "[0, 1]"}}, "pg_status",
"entries": [{"collective_seq_id", "p2p_seq_id", "is_p2p", "profiling_name": "gloo:all_reduce",
"process_group": (name, desc), "input_sizes", "output_sizes", "input_dtypes", "output_dtypes",
"state", "retired", "frames", ...}]}``. The rank is the file name's trailing number, as
torch's own analyser (torch/distributed/flight_recorder/components/loader.py) reads it.

The unpickler refuses every class: a dump holds builtin containers only, and a file from
elsewhere must not run code.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from dataclasses import dataclass
from typing import Any

TRAILING_RANK = re.compile(r"(\d+)(?:\.json)?$")
PICKLE_PROTOCOL_2_PLUS = b"\x80"


@dataclass(frozen=True)
class Entry:
    """One recorded collective (or p2p op) of one rank."""

    pg: str
    seq: int  # collective_seq_id (p2p_seq_id for a p2p op)
    op: str  # "all_reduce", "broadcast", ... (the backend prefix dropped)
    input_sizes: str
    output_sizes: str
    dtypes: str
    state: str
    retired: bool
    is_p2p: bool
    user_frame: str  # the first frame outside torch, "file:line in func"


@dataclass(frozen=True)
class RankTrace:
    """One rank's dump: where it came from, the group members it names, its entries."""

    source: str
    rank: int
    version: str
    pg_ranks: tuple[tuple[str, tuple[int, ...]], ...]  # (pg name, its global ranks)
    entries: tuple[Entry, ...]


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"a Flight Recorder dump holds no {module}.{name}")


def looks_like_dump(data: bytes) -> bool:
    """A pickle, or a JSON object with the dump's keys."""
    if data.startswith(PICKLE_PROTOCOL_2_PLUS):
        return True
    head = data[:4096].lstrip()
    return head.startswith(b"{") and b'"entries"' in data[:1 << 20] and b'"pg_' in data


def read_dump(source: str, data: bytes) -> RankTrace | None:
    """The rank's trace, or None when ``data`` is not a Flight Recorder dump."""
    m = TRAILING_RANK.search(source)
    if m is None:
        return None
    try:
        raw = (_NoClasses(io.BytesIO(data)).load() if data.startswith(PICKLE_PROTOCOL_2_PLUS)
               else json.loads(data))
    except Exception:  # noqa: BLE001 - any unreadable dump is "not a dump", never a crash
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        return None
    return RankTrace(source, int(m.group(1)), str(raw.get("version", "")),
                     _pg_ranks(raw.get("pg_config")),
                     tuple(_entry(e) for e in raw["entries"] if isinstance(e, dict)))


def _pg_ranks(config: object) -> tuple[tuple[str, tuple[int, ...]], ...]:
    out = []
    if isinstance(config, dict):
        for name, pg in config.items():
            ranks = pg.get("ranks", "[]") if isinstance(pg, dict) else "[]"
            try:
                members = tuple(int(r) for r in (json.loads(ranks) if isinstance(ranks, str)
                                                  else ranks))
            except (ValueError, TypeError):
                members = ()
            out.append((str(name), members))
    return tuple(out)


def _entry(e: dict[str, Any]) -> Entry:
    name = str(e.get("profiling_name", "?"))
    pg = e.get("process_group") or ("?", "")
    is_p2p = bool(e.get("is_p2p"))
    seq = e.get("p2p_seq_id" if is_p2p else "collective_seq_id") or 0
    dtypes = f"{e.get('input_dtypes', [])}->{e.get('output_dtypes', [])}"
    return Entry(str(pg[0]), int(seq), name.split(":", 1)[-1], str(e.get("input_sizes")),
                 str(e.get("output_sizes")), dtypes, str(e.get("state", "")),
                 bool(e.get("retired")), is_p2p, _user_frame(e.get("frames")))


def _user_frame(frames: object) -> str:
    """The innermost frame outside torch: where the user's code called the collective."""
    if not isinstance(frames, list):
        return ""
    for f in frames:
        if isinstance(f, dict) and "/torch/" not in str(f.get("filename", "")):
            return f"{f.get('filename')}:{f.get('line')} in {f.get('name')}"
    return ""
