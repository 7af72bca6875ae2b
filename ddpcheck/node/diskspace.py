"""Free space of the checkpoint directory: measured, shown, and judged against a need.

Runs in the launcher's preflight (before anything is written, no torch) and inside the
checkpoint probe (on the rank that saves, after a save failed). A full filesystem is named
for what it is: ``torch.save`` raises a RuntimeError ("PytorchStreamWriter failed writing
file ...: file write failed"), not an OSError, so without this the failure reads like a
crash of rank 0.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ddpcheck.diagnoses import Problem, register

CHECKPOINT_DIR_FULL = register(
    "checkpoint-dir-full", "the checkpoint directory's filesystem has too little free space",
    "the filesystem holding --checkpoint-dir is full, or has less free space than one "
    "checkpoint needs (--checkpoint-size)",
    "free space on that filesystem (old checkpoints, core dumps), or pass a --checkpoint-dir "
    "on a filesystem with room")


@dataclass(frozen=True)
class DiskSpace:
    """The filesystem holding a path: where it was measured, free and total bytes."""

    measured_at: Path  # the path itself, or its nearest existing parent
    free: int
    total: int

    def text(self) -> str:
        return f"{size_text(self.free)} free of {size_text(self.total)}"


def disk_space(path: Path) -> DiskSpace | None:
    """Free space for an unprivileged writer (statvfs f_bavail), or None if unmeasurable."""
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:  # not made yet: its filesystem
        probe = probe.parent
    try:
        usage = shutil.disk_usage(probe)
    except OSError:
        return None
    return DiskSpace(probe, usage.free, usage.total)


def size_text(n: float) -> str:
    """Bytes in binary units, as the report writes sizes (1.5 GiB)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def space_problems(directory: Path, need: int | None, host: str) -> list[Problem]:
    """Less free space than ``need`` bytes in ``directory``'s filesystem, before any write."""
    space = disk_space(directory)
    if space is None or not need or space.free >= need:
        return []
    return [CHECKPOINT_DIR_FULL.problem(
        f"{directory} on {host} has {space.text()} (measured at {space.measured_at}); one "
        f"checkpoint needs {size_text(need)} (--checkpoint-size)", hosts=[host])]


def full_after_failed_save(directory: Path, error: str, written: int) -> DiskSpace | None:
    """The filesystem's space when a failed save looks like a full disk, else None.

    Full: ENOSPC's words in the error, or less free space left than the bytes being written
    (torch 2.13's writer on a full disk says only "[enforce fail at inline_container.cc:672]
    . unexpected pos 704 vs 598": a short write, recorded here on /dev/full).
    """
    space = disk_space(directory)
    words = ("No space left", "ENOSPC", "Disk quota exceeded")
    if space is None:
        return None
    if any(w in error for w in words) or space.free < max(written, 1 << 20):
        return space
    return None


def errno_text(exc: BaseException) -> str:
    """An OSError's strerror, else its first line (what a save failure said)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} ({os.strerror(exc.errno) if exc.errno else ''})".strip(" ()")
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
