"""The worker's settings, read from the DDPCHECK_* variables the launcher exports.

Runs inside every worker. A plain ``torchrun ... -m pytest -p ddpcheck.plugin`` run uses the
defaults; ``ddpcheck run`` sets these from its validated flags.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ddpcheck.parsing import convert, positive_float, positive_int, positive_number, ratio
from ddpcheck.stages import parse_stages

DEFAULT_PROBE_TIMEOUT = 20.0


@dataclass(frozen=True)
class WorkerSettings:
    stages: tuple[str, ...]
    probe_timeout: float
    gpus_per_replica: int
    checkpoint_dir: Path | None
    results_dir: Path | None
    expected_world_size: int | None
    expected_nproc_per_node: int | None
    expected_busbw: float | None = None  # GB/s, --expect-busbw
    slow_link_ratio: float = 0.5  # a link below ratio x median link is slow

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        def get(name: str, parse, default):  # type: ignore[no-untyped-def]
            raw = env.get(name, "").strip()
            return convert(name, raw, parse) if raw else default

        ckpt = env.get("DDPCHECK_CHECKPOINT_DIR", "").strip()
        results = env.get("DDPCHECK_RESULTS_DIR", "").strip()
        return cls(
            stages=get("DDPCHECK_STAGES", parse_stages, parse_stages("all")),
            probe_timeout=get("DDPCHECK_PROBE_TIMEOUT", positive_float, DEFAULT_PROBE_TIMEOUT),
            gpus_per_replica=get("DDPCHECK_GPUS_PER_REPLICA", positive_int, 1),
            checkpoint_dir=Path(ckpt) if ckpt else None,
            results_dir=Path(results) if results else None,
            expected_world_size=get("DDPCHECK_EXPECT_WORLD_SIZE", positive_int, None),
            expected_nproc_per_node=get("DDPCHECK_EXPECT_NPROC_PER_NODE", positive_int, None),
            expected_busbw=get("DDPCHECK_EXPECT_BUSBW", positive_number, None),
            slow_link_ratio=get("DDPCHECK_SLOW_LINK_RATIO", ratio, 0.5),
        )
