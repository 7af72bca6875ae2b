"""Bandwidth arithmetic of the all-reduce sweep.

Pure; the bandwidth probe (worker) measures times and calls these; the launcher's report
prints the rows as nccl-tests does (:func:`ddpcheck.report.tables.format_sweep`).
Definitions follow nccl-tests' PERFORMANCE.md: algbw = bytes / time; all-reduce busbw =
algbw * 2(n-1)/n, so it is comparable to the link's peak whatever n is. Rates are derived
from the median time, never averaged per trial.

:class:`JudgeRule` says at which message sizes and iteration counts a busbw reference
applies: "on large sizes ... it makes more sense to look at the bandwidth", while time at
small sizes measures "the constant overhead (or latency)" (nccl-tests doc/PERFORMANCE.md).
Smaller rows are shown, never judged. See docs/bandwidth.md.
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
    iters: int = 0
    judged: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def sweep_row(size: int, elem_size: int, dtype: str, trial_seconds: Sequence[float],
              world_size: int, iters: int = 0, judged: bool = False) -> SweepRow:
    """Summarise the per-iteration times of several trials for one message size."""
    med = statistics.median(trial_seconds)
    return SweepRow(size, size // elem_size, dtype, med * 1e6, min(trial_seconds) * 1e6,
                    max(trial_seconds) * 1e6, algbw(size, med),
                    allreduce_busbw(size, med, world_size), iters, judged)


@dataclass(frozen=True)
class JudgeRule:
    """The smallest message and iteration count at which a busbw reference applies."""

    backend: str
    min_bytes: int
    min_iters: int
    why: str

    def applies(self, nbytes: int, iters: int) -> bool:
        return nbytes >= self.min_bytes and iters >= self.min_iters

    def describe(self) -> str:
        return (f"judged at messages of at least {human_size(self.min_bytes)} timed over at "
                f"least {self.min_iters} iterations ({self.why})")


# NCCL: nccl-tests' own figures (and ddpcheck's GPU references, judgements.expectations) are
# large-message plateaus. NVLink/NVSwitch all-reduce on 8 H100/A100 reaches its plateau only
# from ~256 MiB (NVLS peaks above 256 MiB: NVIDIA/nccl-tests#212), and nccl-tests times 20
# iterations after 5 warm-ups by default (its "warmup iters: 5 iters: 20" header). ddpcheck
# runs 20 iterations unless one takes so long that fewer already make a long trial; never
# fewer than MIN_TIMED_ITERS (worker.timing).
NCCL_JUDGE_RULE = JudgeRule(
    "nccl", 256 << 20, 5,
    "nccl-tests doc/PERFORMANCE.md: bandwidth is read at large sizes, time at small ones "
    "measures latency; NVLink/NVSwitch and NIC figures are plateaus reached from ~256 MiB")
# gloo on CPU: TCP over one connection per peer saturates from a few MiB; the sweep stops at
# 16 MiB to keep CPU runs fast, so --expect-busbw is judged from 4 MiB (2+ iterations).
GLOO_JUDGE_RULE = JudgeRule(
    "gloo", 4 << 20, 2,
    "gloo's TCP transfers are latency-bound below a few MiB; ddpcheck's CPU sweep stops at "
    "16 MiB to stay fast")


def judge_rule(backend: str) -> JudgeRule:
    """The rule for a backend: NCCL's for nccl, gloo's for anything else (CPU)."""
    return NCCL_JUDGE_RULE if backend.lower() == "nccl" else GLOO_JUDGE_RULE


def judged_peak(rows: Sequence[SweepRow]) -> SweepRow | None:
    """The judged row with the highest busbw, None when no row may be judged."""
    judged = [r for r in rows if r.judged]
    return max(judged, key=lambda r: r.busbw) if judged else None


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
