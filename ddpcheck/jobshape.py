"""Settings worked out from the job's environment (Slurm, PBS, torchrun) for the config.

Runs in the launcher. Maps the scheduler's view of the job onto config settings, each
with the variable it came from, so flags and DDPCHECK_* variables can override it.
"""

from __future__ import annotations

from typing import Any, Mapping


def scheduler_settings(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """{setting: (value, source)} from the scheduler's environment."""
    return {}
