"""Rank events for the report tests: the typed records ddpcheck.plugin writes.

Events are ddpcheck.results records: Start, Hello, ProbeStart, Probe (status/agreed/figure/
measurements/problems), Problems and End; ``failing_report`` is a report with a failed
stage, a killed rank and a rank that never reported.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddpcheck import diagnoses, results
from ddpcheck.diagnoses import Problem
from ddpcheck.report.build import build_report

STAGES = ("node", "rendezvous", "collectives", "bandwidth")


def start(rank: int, host: str = "", backend: str = "gloo") -> results.Start:
    return results.Start(rank=rank, world_size=2, backend=backend,
                         host=host or f"host{rank // 2}", local_rank=rank % 2,
                         node_rank=rank // 2, pid=1000 + rank)


def probe(stage: str, name: str, status: str = "PASS", *, agreed: str = "", figure: str = "",
          measurements: dict | None = None, problems: Sequence[Problem] = (),
          message: str = "", blocked_by: str = "") -> results.Probe:
    return results.Probe(nodeid=f"checks/test_{stage}.py::{name}", name=name, stage=stage,
                         doc=(f"{name} works",), status=status, agreed=agreed or status,
                         duration=0.01, message=message, figure=figure,
                         measurements=measurements or {}, problems=tuple(problems),
                         blocked_by=blocked_by)


def blocked(stage: str, name: str, by: str) -> results.Probe:
    return probe(stage, name, "BLOCKED", message=f"blocked by stage {by}", blocked_by=by)


def rank_events(rank: int, *probes: results.Probe, end: bool = True) -> list[results.Event]:
    return [start(rank), results.Hello(), *probes, *([results.End()] if end else [])]


def all_pass(rank: int) -> list[results.Event]:
    return rank_events(rank, probe("node", "test_a"), probe("rendezvous", "test_b"),
                       probe("collectives", "test_c"), probe("bandwidth", "test_d"))


def status_of(report, name: str) -> str:
    return next(s for s in report.stages if s.name == name).status


def stage_of(report, name: str):
    return next(s for s in report.stages if s.name == name)


WRONG = diagnoses.WRONG_COLLECTIVE_RESULT


def failing_report():
    shm = diagnoses.DEV_SHM_TOO_SMALL.problem("/dev/shm has 64 MiB free", ranks=[0, 1],
                                              hosts=["host0"], stage="node")
    killed = diagnoses.RANK_KILLED.problem("rank 3 was killed by SIGKILL", ranks=[3],
                                           hosts=["host1"], stage="rendezvous")
    events = {r: rank_events(r, probe("node", "test_a", "FAIL" if r < 2 else "PASS",
                                      problems=[shm] if r < 2 else []),
                             probe("rendezvous", "test_b")) for r in range(3)}
    events[3] = [start(3)]
    return build_report(events, STAGES, [killed], 2.5)
