"""The report as machines read it: ``ddpcheck run --json`` and the baseline of ``--baseline``.

Runs in the launcher. Pure: the JSON mirrors the text report (the same verdict line, the
stages with every rank's status and figure, the problems with their role, the measurements).
"""

from __future__ import annotations

from typing import Any

from ddpcheck.report.build import Report
from ddpcheck.report.text import verdict


def to_json(report: Report, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "ready": report.ready,
        "exit_code": report.exit_code,
        "verdict": verdict(report),
        "world_size": report.world_size,
        "backend": report.backend,
        "elapsed_s": round(report.elapsed, 3),
        "hosts": {str(r): h for r, h in sorted(report.hosts_by_rank.items())},
        "stages": [{"name": s.name, "status": s.status, "blocked_by": s.blocked_by or None,
                    "ranks": {str(r): st for r, st in s.per_rank.items()},
                    "figures": {str(r): f for r, f in s.figures.items() if f},
                    "probes": s.probes} for s in report.stages],
        "problems": [p.to_dict() for p in report.problems],
        "measurements": report.measurements,
        "notes": list(report.notes),
        **(extra or {}),
    }
