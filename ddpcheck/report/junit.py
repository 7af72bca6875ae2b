"""The report as JUnit XML (``--junitxml PATH``), the format GitLab, Jenkins and GitHub read.

Runs in the launcher, after the report is built. One ``testsuite`` per stage (preflight
first), one ``testcase`` per probe and rank (per host above 8 ranks, as the table does):
a failure carries the problem blocks, a skip its reason, a blocked stage names its blocker.
A last ``verdict`` suite holds one ``readiness`` testcase that fails whenever the verdict
is NOT READY, so a CI job can never go green on a run that was not READY, even when the
cause (a regression, a launcher problem) belongs to no probe. Built with xml.etree.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ddpcheck import results
from ddpcheck.diagnoses import OWN_FAILURE, Problem
from ddpcheck.ranges import format_ranks
from ddpcheck.report.build import Report
from ddpcheck.report.text import MAX_RANK_COLUMNS, MISSING, render_problem, verdict

FAILING = (results.FAIL, MISSING)


def _units(report: Report) -> list[tuple[str, list[int]]]:
    """(label, ranks) per column of the table: each rank, or each host above 8 ranks."""
    hosts = report.hosts_by_rank
    if not hosts:
        return [(f"node {h}", []) for h in (report.nodes or ["this node"])]
    if len(hosts) <= MAX_RANK_COLUMNS:
        return [(f"rank {r} ({h})", [r]) for r, h in sorted(hosts.items())]
    by_host: dict[str, list[int]] = {}
    for r, h in sorted(hosts.items()):
        by_host.setdefault(h, []).append(r)
    return [(f"{h} (ranks {format_ranks(rs)})", rs) for h, rs in by_host.items()]


def _worst(statuses: Sequence[str]) -> str:
    return results.Status.worst(statuses)


def build(report: Report, events: dict[int, list[results.Event]]) -> ET.Element:
    """The whole document: <testsuites> with one <testsuite> per stage, then the verdict."""
    root = ET.Element("testsuites", name="ddpcheck")
    units = _units(report)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    for stage in report.stages:
        suite = ET.SubElement(root, "testsuite", name=stage.name, timestamp=stamp)
        for label, ranks in units:
            _unit_cases(suite, report, stage, label, ranks, events)
        _count(suite)
    suite = ET.SubElement(root, "testsuite", name="verdict", timestamp=stamp)
    case = ET.SubElement(suite, "testcase", classname="ddpcheck.verdict", name="readiness",
                         time=f"{report.elapsed:.3f}")
    if not report.ready:
        causes = [p for p in report.problems if not p.consequence_of]
        _failure(case, verdict(report), causes, report)
    _count(suite)
    _count(root, suites=True)
    return root


def _unit_cases(suite: ET.Element, report: Report, stage: Any, label: str, ranks: list[int],
                events: dict[int, list[results.Event]]) -> None:
    classname = f"ddpcheck.{stage.name}"
    probes: dict[str, list[results.Probe]] = {}
    for r in ranks:
        for e in events.get(r, []):
            if isinstance(e, results.Probe) and e.stage == stage.name:
                probes.setdefault(e.name, []).append(e)
    covered = False
    for name, evs in probes.items():
        case = ET.SubElement(suite, "testcase", classname=classname, name=f"{name} [{label}]",
                             time=f"{max(float(e.duration or 0) for e in evs):.3f}")
        status = _worst([e.status for e in evs])
        if status == results.FAIL:
            covered = True
            found = [p for e in evs for p in e.problems]
            _failure(case, evs[0].message or "failed", found, report)
        elif status in (results.SKIP, results.BLOCKED):
            ET.SubElement(case, "skipped", message=_skip_message(evs, status))
    unit_status = _worst([stage.per_rank.get(r, stage.status) for r in ranks] or [stage.status])
    if unit_status in FAILING and not covered:  # died, hung or failed outside any probe
        found = [p for p in report.problems if p.stage in (stage.name, "")
                 and (not ranks or not p.ranks or set(p.ranks) & set(ranks))]
        case = ET.SubElement(suite, "testcase", classname=classname, name=f"outcome [{label}]")
        _failure(case, f"{stage.name}: {unit_status} on {label}", found, report)
    elif not probes:
        case = ET.SubElement(suite, "testcase", classname=classname, name=f"outcome [{label}]")
        if unit_status == results.BLOCKED or stage.status == results.BLOCKED:
            ET.SubElement(case, "skipped", message=f"blocked by stage {stage.blocked_by}")
        elif unit_status == results.SKIP:
            ET.SubElement(case, "skipped", message=stage.figures.get(ranks[0], "skipped")
                          if ranks else "skipped")


def _skip_message(evs: list[results.Probe], status: str) -> str:
    msg = evs[0].message
    if status == results.BLOCKED and not msg.startswith("blocked"):
        return f"blocked by stage {msg}"
    return msg or status.lower()


def _failure(case: ET.Element, message: str, problems: Sequence[Problem],
             report: Report) -> None:
    first = problems[0].code if problems else "failed"
    # JUnit's <error> is the test itself breaking: ddpcheck's own failure, not the cluster's
    own = bool(problems) and all(p.role == OWN_FAILURE for p in problems)
    el = ET.SubElement(case, "error" if own else "failure", message=message[:500], type=first)
    el.text = "\n\n".join(render_problem(p, report.hosts_by_rank) for p in problems) or message


def _count(el: ET.Element, suites: bool = False) -> None:
    cases = list(el.iter("testcase"))
    el.set("tests", str(len(cases)))
    el.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    el.set("errors", "0")
    if not suites:
        el.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    el.set("time", f"{sum(float(c.get('time') or 0) for c in cases):.3f}")


def write(path: Path, report: Report, events: dict[int, list[results.Event]]) -> None:
    """Write the JUnit file atomically (a CI reader never sees half a file)."""
    tree = ET.ElementTree(build(report, events))
    ET.indent(tree)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)


def write_if_whole(path: Path, report: Report, results_dir: Path, nodes: int) -> None:
    """Write PATH on the node that has the whole report (a shared PATH is never clobbered).

    In a multi-node run only the node hosting rank 0 has the world's results; the others'
    parts would overwrite it on shared storage, so they leave a note instead. When no rank
    ever started (the cluster did not form), each node writes its own diagnosis.
    """
    events = results.rank_events(results_dir)
    if nodes == 1 or not events or results.rank_file(results_dir, 0).exists():
        write(path, report, events)
    else:
        report.notes.append(f"--junitxml {path}: written by the node hosting rank 0")
