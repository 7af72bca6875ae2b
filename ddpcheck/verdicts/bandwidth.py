"""Bandwidth arithmetic of the all-reduce sweep.

Pure; the bandwidth probe (worker) measures times and calls these; the launcher's report
prints the rows as nccl-tests does (:func:`ddpcheck.report.tables.format_sweep`).
Definitions follow nccl-tests' PERFORMANCE.md: algbw = bytes / time; all-reduce busbw =
algbw * 2(n-1)/n, so it is comparable to the link's peak whatever n is. Rates are derived
from the median time, never averaged per trial.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass

GB = 1e9


def algbw(nbytes: int, seconds: float) -> float:
    """Algorithm bandwidth in GB/s (10^9 bytes per second)."""
    return nbytes / seconds / GB if seconds > 0 else 0.0


def allreduce_busbw(nbytes: int, seconds: float, world_size: int) -> float:
    """Bus bandwidth of an all-reduce in GB/s: algbw * 2(n-1)/n."""
    if world_size < 2:
        return 0.0
    return algbw(nbytes, seconds) * 2 * (world_size - 1) / world_size


@dataclass(frozen=True)
class SweepRow:
    """One message size of an all-reduce sweep: median time over trials, min and max."""

    size: int
    count: int
    dtype: str
    time_us: float
    time_min_us: float
    time_max_us: float
    algbw: float
    busbw: float

    def to_dict(self) -> dict:
        return asdict(self)


def sweep_row(size: int, elem_size: int, dtype: str, trial_seconds: Sequence[float],
              world_size: int) -> SweepRow:
    """Summarise the per-iteration times of several trials for one message size."""
    med = statistics.median(trial_seconds)
    return SweepRow(size, size // elem_size, dtype, med * 1e6, min(trial_seconds) * 1e6,
                    max(trial_seconds) * 1e6, algbw(size, med),
                    allreduce_busbw(size, med, world_size))


def sizes(min_bytes: int, max_bytes: int, factor: int = 4) -> list[int]:
    """Message sizes from min to max, multiplying by factor (nccl-tests' -b -e -f)."""
    if min_bytes < 1 or factor < 2:
        raise ValueError("sizes need min_bytes >= 1 and factor >= 2")
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= factor
    return out


def human_size(nbytes: int) -> str:
    """Binary units: 1024 -> "1 KiB", 4194304 -> "4 MiB"."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:g} {unit}" if unit == "B" else f"{nbytes:.0f} {unit}"
        nbytes /= 1024  # type: ignore[assignment]
    return str(nbytes)
