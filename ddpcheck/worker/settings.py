"""The worker's settings: the one contract between the launcher and every worker.

Defined once here, used on both sides: the launcher builds a ``WorkerSettings`` from its
validated RunConfig and exports ``to_env()`` (the ``DDPCHECK_*`` variables) to torchrun's
workers; every worker reads them back with ``from_env()``. A plain ``torchrun ... -m pytest
-p ddpcheck.plugin`` run, with no variable set, gets the defaults. Imports no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable

from ddpcheck.parsing import (
    byte_size,
    choice,
    convert,
    positive_float,
    positive_int,
    positive_number,
    ratio,
)
from ddpcheck.results import RESULTS_DIR_ENV
from ddpcheck.stages import STAGES, parse_stages

DEFAULT_PROBE_TIMEOUT = 20.0
DEFAULT_SLOW_LINK_RATIO = 0.5  # a link below ratio x median link is slow
BACKENDS = ("auto", "nccl", "gloo")


def _path(raw: str) -> Path:
    return Path(raw.strip())


@dataclass(frozen=True)
class WorkerSettings:
    """What a worker needs from the launcher; every field has its variable in VARIABLES."""

    stages: tuple[str, ...] = tuple(STAGES)
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    gpus_per_replica: int = 1
    checkpoint_dir: Path | None = None
    checkpoint_size: int | None = None  # bytes, --checkpoint-size
    results_dir: Path | None = None
    expected_world_size: int | None = None
    expected_nproc_per_node: int | None = None
    expected_busbw: float | None = None  # GB/s, --expect-busbw
    slow_link_ratio: float = DEFAULT_SLOW_LINK_RATIO
    backend: str = "auto"  # auto, nccl or gloo, as --backend
    init_method: str | None = None  # --launch spawn/srun: the URL the ranks form the world by

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        """Read the DDPCHECK_* variables; blank or unset means the default.

        A bad value raises a UsageError whose one line names the variable.
        """
        values: dict[str, Any] = {}
        for name, (var, parse, _) in VARIABLES.items():
            raw = env.get(var, "").strip()
            if raw:
                values[name] = convert(var, raw, parse)
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """The DDPCHECK_* variables that give a worker these settings (unset fields: none)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                var, _, write = VARIABLES[f.name]
                out[var] = write(value)
        return out


def _number(value: float) -> str:
    """20.0 as "20" (as users write it), any other value exactly."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


# field: (variable, parser, writer); the parsers are the ones the launcher's flags use.
VARIABLES: dict[str, tuple[str, Callable[[str], Any], Callable[[Any], str]]] = {
    "stages": ("DDPCHECK_STAGES", parse_stages, ",".join),
    "probe_timeout": ("DDPCHECK_PROBE_TIMEOUT", positive_float, _number),
    "gpus_per_replica": ("DDPCHECK_GPUS_PER_REPLICA", positive_int, str),
    "checkpoint_dir": ("DDPCHECK_CHECKPOINT_DIR", _path, str),
    "checkpoint_size": ("DDPCHECK_CHECKPOINT_SIZE", byte_size, str),
    "results_dir": (RESULTS_DIR_ENV, _path, str),
    "expected_world_size": ("DDPCHECK_EXPECT_WORLD_SIZE", positive_int, str),
    "expected_nproc_per_node": ("DDPCHECK_EXPECT_NPROC_PER_NODE", positive_int, str),
    "expected_busbw": ("DDPCHECK_EXPECT_BUSBW", positive_number, _number),
    "slow_link_ratio": ("DDPCHECK_SLOW_LINK_RATIO", ratio, _number),
    "backend": ("DDPCHECK_BACKEND", choice(*BACKENDS), str),
    "init_method": ("DDPCHECK_INIT_METHOD", str.strip, str),
}
ENV_NAMES = tuple(var for var, _, _ in VARIABLES.values())
