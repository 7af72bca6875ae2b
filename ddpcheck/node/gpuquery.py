"""nvidia-smi's documented query interface, read for node health: typed records per GPU.

Runs in the launcher's preflight (``ddpcheck.launcher.nodehealth``); no torch. Three
queries, all ``--format=csv`` with the header, so each column is read by its name whatever
the driver prints or leaves out (``nvidia-smi --help-query-gpu``, ``--help-query-remapped-rows``,
``--help-query-compute-apps``): ``--query-gpu`` (ECC, retired pages, throttle reasons, PCIe
link, memory), ``--query-remapped-rows`` (A100 and newer) and ``--query-compute-apps``. A
field an older driver does not know ("Field "x" is not a valid field to query.") is dropped
and the query retried; R535 renamed ``clocks_throttle_reasons`` to ``clocks_event_reasons``
and both spellings are read. Every call goes through ``gpu.run_nvidia_smi`` (a deadline,
and the runner seam that feeds tests recorded outputs: tests/data/gpu/SOURCES.md).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ddpcheck.node import gpu

THROTTLE = "clocks_throttle_reasons."
EVENT = "clocks_event_reasons."  # the R535+ name of the same fields
SLOWDOWNS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
             "sw_thermal_slowdown")
HEALTH_FIELDS = ("index", "pci.bus_id", "uuid", "name", "memory.used", "memory.total",
                 "ecc.errors.uncorrected.volatile.total", "retired_pages.pending",
                 THROTTLE + "gpu_idle", *(THROTTLE + s for s in SLOWDOWNS),
                 "pcie.link.gen.current", "pcie.link.gen.max",
                 "pcie.link.width.current", "pcie.link.width.max",
                 "fabric.state", "fabric.status", "gpu_recovery_action")
REMAP_FIELDS = ("gpu_bus_id", "gpu_uuid", "remapped_rows.pending", "remapped_rows.failure")
APP_FIELDS = ("gpu_uuid", "gpu_bus_id", "pid", "used_memory")  # never the process name
MAX_RETRIES = 8  # an old driver rejects up to 8 of HEALTH_FIELDS
_INVALID = re.compile(r'Field "([^"]+)" is not a valid field to query')
_UNIT = re.compile(r"\s*\[[^\]]*\]$")
_FIELD = re.compile(r"^[a-z][a-z0-9_.]*$")


@dataclass(frozen=True)
class GpuHealth:
    """One GPU's health facts; None where the driver or the board does not say."""

    index: int
    bus_id: str = ""
    uuid: str = ""
    name: str = ""
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    ecc_uncorrected: int | None = None
    retired_pending: bool | None = None
    idle: bool | None = None
    slowdowns: tuple[str, ...] = ()  # active ones among SLOWDOWNS
    pcie_gen: tuple[int, int] | None = None  # (current, max)
    pcie_width: tuple[int, int] | None = None
    remap_pending: bool | None = None
    remap_failed: bool | None = None
    fabric_state: str | None = None  # "Completed", "In Progress", "Not Started" (NVSwitch)
    fabric_status: str | None = None  # "Success", or the error
    recovery_action: str | None = None  # "None", "GPU Reset", "Node Reboot", "Drain P2P", ...

    def named(self) -> str:
        """How a problem names this GPU: index, PCI bus id and UUID."""
        ids = ", ".join(x for x in (self.bus_id, self.uuid) if x)
        return f"GPU {self.index}" + (f" ({ids})" if ids else "")


@dataclass(frozen=True)
class ComputeApp:
    """A process holding memory on a GPU: its pid and memory only (never its command)."""

    gpu_uuid: str
    bus_id: str
    pid: int
    used_mib: int | None


@dataclass(frozen=True)
class QueryResult:
    """Rows read by column name, or why there are none."""

    rows: tuple[Mapping[str, str], ...] = ()
    error: str = ""


def column(name: str) -> str:
    """A header cell as a field name: no unit, the pre-R535 throttle spelling."""
    name = _UNIT.sub("", name.strip())
    return THROTTLE + name[len(EVENT):] if name.startswith(EVENT) else name


def parse_table(text: str) -> QueryResult:
    """Parse ``--format=csv`` output (header first) into rows keyed by field name."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    bad = _INVALID.search(text)
    if bad:
        return QueryResult(error=bad.group(0))
    reader = csv.reader(lines, skipinitialspace=True)
    header = [column(h) for h in next(reader, [])]
    if not header or not all(_FIELD.match(h) for h in header):
        return QueryResult(error=(lines[0].strip()[:200] if lines else "no output"))
    rows = tuple({h: v.strip() for h, v in zip(header, row)} for row in reader
                 if len(row) == len(header))
    return QueryResult(rows)


def value(raw: str | None) -> str | None:
    """The cell without its unit; None for "[N/A]", "[Not Supported]" and the like."""
    if raw is None:
        return None
    text = raw.strip()
    if not text or text.startswith("[") or text in ("N/A", "Not Supported"):
        return None
    return text.split()[0] if re.match(r"^-?\d+(\.\d+)?\s+\S+$", text) else text


def as_int(raw: str | None) -> int | None:
    text = value(raw)
    try:
        return int(float(text)) if text is not None else None
    except ValueError:
        return None


def as_flag(raw: str | None) -> bool | None:
    """Yes/No, Active/Not Active, 1/0 as nvidia-smi prints them."""
    text = (value(raw) or "").lower()
    if text in ("yes", "active", "1", "true"):
        return True
    if text in ("no", "not active", "0", "false"):
        return False
    return None


def _pair(row: Mapping[str, str], what: str) -> tuple[int, int] | None:
    cur, top = as_int(row.get(f"{what}.current")), as_int(row.get(f"{what}.max"))
    return (cur, top) if cur is not None and top is not None else None


def gpu_from_row(row: Mapping[str, str]) -> GpuHealth | None:
    index = as_int(row.get("index"))
    if index is None:
        return None
    return GpuHealth(
        index, value(row.get("pci.bus_id")) or "", value(row.get("uuid")) or "",
        row.get("name", ""), as_int(row.get("memory.used")), as_int(row.get("memory.total")),
        as_int(row.get("ecc.errors.uncorrected.volatile.total")),
        as_flag(row.get("retired_pages.pending")), as_flag(row.get(THROTTLE + "gpu_idle")),
        tuple(s for s in SLOWDOWNS if as_flag(row.get(THROTTLE + s))),
        _pair(row, "pcie.link.gen"), _pair(row, "pcie.link.width"),
        fabric_state=value(row.get("fabric.state")),
        fabric_status=value(row.get("fabric.status")),
        recovery_action=value(row.get("gpu_recovery_action")))


def with_remaps(gpus: Sequence[GpuHealth], rows: Sequence[Mapping[str, str]]
                ) -> list[GpuHealth]:
    """Attach --query-remapped-rows facts to their GPU (by UUID, else by bus id)."""
    out = []
    for g in gpus:
        row = next((r for r in rows if (g.uuid and r.get("gpu_uuid") == g.uuid)
                    or (g.bus_id and _bus(r.get("gpu_bus_id", "")) == _bus(g.bus_id))), None)
        out.append(replace(g, remap_pending=as_flag(row.get("remapped_rows.pending")),
                           remap_failed=as_flag(row.get("remapped_rows.failure")))
                   if row else g)
    return out


def apps_from_rows(rows: Sequence[Mapping[str, str]]) -> list[ComputeApp]:
    apps = []
    for r in rows:
        pid = as_int(r.get("pid"))
        if pid is not None:
            used = r.get("used_gpu_memory", r.get("used_memory"))
            apps.append(ComputeApp(r.get("gpu_uuid", ""), r.get("gpu_bus_id", ""), pid,
                                   as_int(used)))
    return apps


def _bus(bus_id: str) -> str:
    """00000000:4E:00.0 and 0000:4e:00.0 name the same device."""
    return bus_id.lower()[-12:]


def query(kind: str, fields: Sequence[str], runner: gpu.Runner, timeout: float) -> QueryResult:
    """Run ``nvidia-smi --KIND=FIELDS --format=csv``, dropping fields the driver rejects."""
    wanted = list(fields)
    for _ in range(MAX_RETRIES + 1):
        text = gpu.run_nvidia_smi((f"--{kind}={','.join(wanted)}", "--format=csv"), runner,
                                  timeout)
        if text is None:
            return QueryResult(error=f"nvidia-smi --{kind} did not answer within {timeout:g} s")
        result = parse_table(text)
        bad = _INVALID.search(result.error)
        if not bad or bad.group(1) not in wanted:
            return result
        field = bad.group(1)
        renamed = EVENT + field[len(THROTTLE):] if field.startswith(THROTTLE) else ""
        wanted = [renamed if f == field and renamed else f for f in wanted if
                  f != field or renamed]
    return QueryResult(error=f"nvidia-smi --{kind}: too many unknown fields")


def read_gpus(runner: gpu.Runner = gpu.subprocess_runner, timeout: float = 5.0
              ) -> tuple[list[GpuHealth], str]:
    """Every GPU's health facts, and the reason when they could not be read ("" if read)."""
    main = query("query-gpu", HEALTH_FIELDS, runner, timeout)
    gpus = [g for g in (gpu_from_row(r) for r in main.rows) if g]
    if not gpus:
        return [], main.error or "nvidia-smi --query-gpu listed no GPU"
    remaps = query("query-remapped-rows", REMAP_FIELDS, runner, timeout)
    return with_remaps(gpus, remaps.rows), ""


def read_apps(runner: gpu.Runner = gpu.subprocess_runner, timeout: float = 5.0
              ) -> tuple[list[ComputeApp], str]:
    """Processes holding GPU memory (pid and memory), and why not, if they could not be read."""
    result = query("query-compute-apps", APP_FIELDS, runner, timeout)
    if result.error and "No running" not in result.error:
        return [], result.error
    return apps_from_rows(result.rows), ""
