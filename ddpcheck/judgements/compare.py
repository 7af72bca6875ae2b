"""Compare two ddpcheck reports (``--json`` files): is today's cluster worse than the baseline?

Runs in the launcher: ``ddpcheck compare BASE.json NEW.json`` and ``ddpcheck run --baseline
BASE.json``. Pure over the two JSON documents. Figures compared: versions (torch, CUDA,
NCCL, driver, Python, arch) and GPU counts per node, stage statuses, peak and per-size
all-reduce busbw, every link of the link matrix, intra-node and cross-node busbw, DDP step
time. A figure is a ``regression`` when it is worse than the baseline by more than the
threshold (``--regression-ratio``, default 0.8) *and*, where the report keeps the trials'
min-max (the all-reduce sweep), when even the new run's best trial is below the threshold
times the baseline's worst: noise the trials themselves show is never called a regression.
Sweep sizes whose baseline busbw is under 0.8x its peak are not bandwidth-bound (latency,
scheduling) and are shown, not judged. Nodes that differ by name are matched by position
(the link matrix's host order) and the result says so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from ddpcheck.diagnoses import Problem, register
from ddpcheck.judgements.bandwidth import human_size
from ddpcheck.parsing import UsageError

REGRESSION = register(
    "regression", "a figure is worse than the baseline report's",
    "something changed since the baseline: a degraded link or port, a slower or missing GPU, "
    "a software update, or another job sharing the nodes",
    "check what changed on the named link or node since the baseline (ethtool/ibstat counters, "
    "nvidia-smi, package versions); if the change is intended, take a new baseline: "
    "ddpcheck run --json BASE.json")
DEFAULT_RATIO = 0.8
LATENCY_BOUND = 0.8  # per-size busbw below 0.8x the baseline's peak is not bandwidth-bound
GOOD_STATUSES = ("PASS", "SKIP")
GPUS_RE = re.compile(r"(\d+) GPU\(s\)")


class Change(str, Enum):
    """How a figure compares with the baseline's; a str, so tables and JSON show its text."""

    SAME = "same"
    CHANGED = "changed"  # a fact (a version, a stage's status) that differs, not judged
    BETTER = "better"
    NOISE = "worse (noise)"  # worse, but within the threshold or the trials' own spread
    LATENCY_BOUND = "worse (latency-bound, not judged)"
    REGRESSION = "REGRESSION"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True)
class Row:
    """One compared figure."""

    what: str
    base: str
    now: str
    verdict: Change
    stage: str = ""
    hosts: tuple[str, ...] = ()
    measured: bool = True  # a measured figure (a threshold applies), not a fact or a status


@dataclass
class Comparison:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.verdict is Change.REGRESSION]

    def problems(self, ratio: float, statuses: bool = True) -> list[Problem]:
        """Regression problems, one per place (the same link or node, or the same stage).

        statuses=False leaves out stage statuses (for ``run --baseline``, where a failed
        stage is already a problem of its own). Those naming a link or node come first.
        """
        groups: dict[tuple[str, tuple[str, ...]], list[Row]] = {}
        for r in sorted(self.regressions, key=lambda r: not r.hosts):
            if statuses or not r.what.startswith("stage "):
                groups.setdefault((r.stage, tuple(sorted(set(r.hosts)))), []).append(r)
        out = []
        for (stage, hosts), rows in groups.items():
            why = (f" (below {ratio:g}x the baseline, beyond the trials' min-max)"
                   if any(r.measured for r in rows) else "")
            observed = "; ".join(f"{r.what}: {r.now}, baseline {r.base}" for r in rows)
            out.append(REGRESSION.problem(observed + why, stage=stage, hosts=hosts))
        return out


def load_report(path: Path, source: str = "compare") -> dict[str, Any]:
    """Read a ddpcheck JSON report; a bad file is a one-line UsageError naming it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{source} {path}: cannot read it ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{source} {path}: not JSON ({exc})") from None
    if not isinstance(data, dict) or not {"stages", "measurements"} <= data.keys():
        raise UsageError(f"{source} {path}: not a ddpcheck report (write one with "
                         "ddpcheck run --json PATH)")
    return data


def node_order(report: Mapping[str, Any]) -> list[str]:
    """The report's nodes in order: the link matrix's order, else by lowest rank."""
    hosts = report.get("measurements", {}).get("link_hosts")
    if hosts:
        return list(hosts)
    by_rank = sorted((int(r), h) for r, h in (report.get("hosts") or {}).items())
    return list(dict.fromkeys(h for _, h in by_rank))


def match_nodes(base: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[dict[str, str], str]:
    """Map each baseline node to the new report's node; say how when not by name."""
    a, b = node_order(base), node_order(new)
    if set(a) == set(b) or not a or not b:
        return {h: h for h in a if h in b}, ""
    if len(a) == len(b):
        pairs = ", ".join(f"{x} -> {y}" for x, y in zip(a, b) if x != y)
        return dict(zip(a, b)), f"nodes differ by name: matched by position ({pairs})"
    common = [h for h in a if h in b]
    return {h: h for h in common}, (f"node counts differ ({len(a)} in the baseline, {len(b)} "
                                    f"now): only nodes with the same name are compared")


def compare_reports(base: Mapping[str, Any], new: Mapping[str, Any],
                    ratio: float = DEFAULT_RATIO) -> Comparison:
    out = Comparison()
    nodes, how = match_nodes(base, new)
    if how:
        out.notes.append(how)
    _versions(out, base, new)
    _gpus(out, base, new, nodes)
    _statuses(out, base, new)
    bm, nm = base.get("measurements", {}), new.get("measurements", {})
    _sweep(out, bm, nm, ratio)
    _links(out, bm, nm, nodes, ratio)
    _ddp(out, bm, nm, ratio)
    return out


def _versions(out: Comparison, base: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    def values(report: Mapping[str, Any], key: str) -> str:
        facts = report.get("measurements", {}).get("ranks") or {}
        got = sorted({str(f.get(key)) for f in facts.values() if key in f})
        return ", ".join(got) if got else "not recorded"

    for key in ("torch", "cuda", "nccl", "driver", "python", "arch"):
        a, b = values(base, key), values(new, key)
        if a == b == "not recorded":
            continue
        change = Change.SAME if a == b else Change.CHANGED
        out.rows.append(Row(f"{key} version" if key != "arch" else "CPU architecture", a, b,
                            change, "rendezvous", measured=False))


def _gpus_by_host(report: Mapping[str, Any]) -> dict[str, int]:
    node = next((s for s in report.get("stages", []) if s.get("name") == "node"), None)
    hosts = report.get("hosts") or {}
    out: dict[str, int] = {}
    for rank, fig in ((node or {}).get("figures") or {}).items():
        m = GPUS_RE.search(fig or "")
        if m:
            host = hosts.get(rank, f"rank {rank}")
            out[host] = max(out.get(host, 0), int(m.group(1)))
    return out


def _gpus(out: Comparison, base: Mapping[str, Any], new: Mapping[str, Any],
          nodes: dict[str, str]) -> None:
    a, b = _gpus_by_host(base), _gpus_by_host(new)
    for host, count in a.items():
        now_host = nodes.get(host)
        if now_host is None or now_host not in b:
            continue
        got = b[now_host]
        verdict = (Change.SAME if got == count else Change.REGRESSION if got < count
                   else Change.BETTER)
        out.rows.append(Row(f"GPUs on {_pair(host, now_host)}", str(count), str(got), verdict,
                            "node", (now_host,), measured=False))


def _statuses(out: Comparison, base: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    now = {s["name"]: s for s in new.get("stages", [])}
    for s in base.get("stages", []):
        n = now.get(s["name"])
        if n is None:
            continue
        a, b = _status(s), _status(n)
        # A stage blocked by an earlier failure is that failure's consequence, not its own.
        worse = s["status"] in GOOD_STATUSES and n["status"] == "FAIL"
        change = Change.REGRESSION if worse else Change.SAME if a == b else Change.CHANGED
        out.rows.append(Row(f"stage {s['name']}", a, b, change, s["name"], measured=False))


def _status(stage: Mapping[str, Any]) -> str:
    by = stage.get("blocked_by")
    return f"{stage['status']} ({by})" if stage["status"] == "BLOCKED" and by else stage["status"]


def _range(row: Mapping[str, Any]) -> tuple[float, float]:
    """busbw at the slowest and the fastest trial (busbw scales as 1/time)."""
    bw, t = float(row["busbw"]), float(row.get("time_us") or 0)
    slow, fast = float(row.get("time_max_us") or t), float(row.get("time_min_us") or t)
    if not t or not slow or not fast:
        return bw, bw
    return bw * t / slow, bw * t / fast


def _judge(base: float, now: float, ratio: float, base_rng: tuple[float, float] | None = None,
           now_rng: tuple[float, float] | None = None) -> Change:
    """Higher is better. REGRESSION only when worse by the threshold *beyond* the trials' spread.

    With min-max known, even the new run's fastest trial must be below ``ratio`` x the
    baseline's slowest trial: noise the trials themselves show never counts.
    """
    if now >= base:
        return Change.SAME if now == base else Change.BETTER
    beyond_noise = base_rng is None or now_rng is None or now_rng[1] < ratio * base_rng[0]
    if now < ratio * base and beyond_noise:
        return Change.REGRESSION
    return Change.NOISE if now < base * 0.95 else Change.SAME


def _sweep(out: Comparison, bm: Mapping[str, Any], nm: Mapping[str, Any], ratio: float) -> None:
    a = {int(r["size"]): r for r in bm.get("allreduce_sweep") or []}
    b = {int(r["size"]): r for r in nm.get("allreduce_sweep") or []}
    if a and b:
        pa, pb = max(a.values(), key=lambda r: r["busbw"]), max(b.values(),
                                                               key=lambda r: r["busbw"])
        out.rows.append(Row("peak all-reduce busbw", _gbps(pa["busbw"]), _gbps(pb["busbw"]),
                            _judge(pa["busbw"], pb["busbw"], ratio, _range(pa), _range(pb)),
                            "bandwidth"))
    peak = max((float(r["busbw"]) for r in a.values()), default=0.0)
    for size in sorted(a.keys() & b.keys()):
        ra, rb = a[size], b[size]
        verdict = _judge(ra["busbw"], rb["busbw"], ratio, _range(ra), _range(rb))
        if verdict is Change.REGRESSION and float(ra["busbw"]) < LATENCY_BOUND * peak:
            # Sizes short of the peak measure latency (scheduling, launch), not the fabric:
            # shown, never judged (healthy pairs flipped at 4-256 KiB on these hosts).
            verdict = Change.LATENCY_BOUND
        out.rows.append(Row(f"all-reduce busbw at {human_size(size)}", _gbps(ra["busbw"]),
                            _gbps(rb["busbw"]), verdict, "bandwidth"))


def _links(out: Comparison, bm: Mapping[str, Any], nm: Mapping[str, Any],
           nodes: dict[str, str], ratio: float) -> None:
    b = nm.get("link_matrix") or {}
    for key, base_v in sorted((bm.get("link_matrix") or {}).items()):
        src, dst = key.split("->")
        now_key = f"{nodes.get(src)}->{nodes.get(dst)}"
        if now_key not in b:
            continue
        out.rows.append(Row(f"link {_pair(src, nodes[src])} -> {_pair(dst, nodes[dst])}",
                            _gbps(base_v), _gbps(b[now_key]), _judge(base_v, b[now_key], ratio),
                            "bandwidth", (nodes[src], nodes[dst])))
    intra = nm.get("intra_node_busbw") or {}
    for host, base_v in sorted((bm.get("intra_node_busbw") or {}).items()):
        now_host = nodes.get(host)
        if now_host in intra and base_v is not None and intra[now_host] is not None:
            out.rows.append(Row(f"intra-node busbw on {_pair(host, now_host)}", _gbps(base_v),
                                _gbps(intra[now_host]), _judge(base_v, intra[now_host], ratio),
                                "bandwidth", (now_host,)))
    a_x, b_x = bm.get("cross_node_busbw"), nm.get("cross_node_busbw")
    if a_x is not None and b_x is not None:
        out.rows.append(Row("cross-node busbw", _gbps(a_x), _gbps(b_x), _judge(a_x, b_x, ratio),
                            "bandwidth"))


def _ddp(out: Comparison, bm: Mapping[str, Any], nm: Mapping[str, Any], ratio: float) -> None:
    a = {r["world_size"]: r for r in bm.get("ddp_scaling") or []}
    b = {r["world_size"]: r for r in nm.get("ddp_scaling") or []}
    common = sorted(a.keys() & b.keys())
    if not common:
        return
    k = common[-1]
    ta, tb = float(a[k]["step_time_s"]), float(b[k]["step_time_s"])
    # Lower is better: judge the rates (1/time) so one rule serves both.
    out.rows.append(Row(f"DDP step time at world size {k}", f"{ta * 1e3:.1f} ms",
                        f"{tb * 1e3:.1f} ms", _judge(1 / ta, 1 / tb, ratio), "ddp"))


def _gbps(v: float) -> str:
    return f"{float(v):.3f} GB/s"


def _pair(base_host: str, now_host: str | None) -> str:
    return base_host if now_host in (None, base_host) else f"{now_host} (baseline {base_host})"
