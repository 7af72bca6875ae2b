"""Which GPUs this node's ranks get: CUDA_VISIBLE_DEVICES as CUDA reads it, the device plan
(local rank r drives cuda:r*K..r*K+K-1) and nvidia-smi's count against torch's and the job's.

Pure logic, used by the launcher's node preflight and the worker's node/placement probes;
never imports torch. Callers pass what they observed (the GPU inventory from
``ddpcheck.node.gpu``, torch.cuda.device_count(), the environment) and get back parsed data
or a list of Problems.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ddpcheck.diagnoses import (
    CPU_ONLY_TORCH,
    CUDA_VISIBLE_DEVICES_INVALID,
    DEVICE_PLAN_INVALID,
    GPU_COUNT_MISMATCH,
    TOO_FEW_GPUS,
    Problem,
    ProblemFound,
)
from ddpcheck.node.gpu import GpuInfo

# --- CUDA_VISIBLE_DEVICES -----------------------------------------------------------------

@dataclass(frozen=True)
class VisibleDevices:
    """CUDA_VISIBLE_DEVICES as CUDA reads it (modelled on torch.cuda._parse_visible_devices).

    CUDA reads the comma list left to right and stops at the first entry it cannot use: a
    negative number (`-1` is the idiom for "no GPUs"), a word, an empty item, or a UUID in an
    index list (the first entry decides: indices, `GPU-` UUIDs or `MIG-` UUIDs). That entry and
    every later one are dropped. Indices are read like strtoul (`1gpu` is 1). A repeated
    entry makes CUDA expose no device at all. Unset means every GPU; empty means none.
    """

    raw: str | None
    entries: tuple[str, ...] = ()  # usable entries before the first invalid one, normalised
    invalid: str | None = None  # the first entry CUDA rejects
    ignored: tuple[str, ...] = ()  # entries after `invalid`, dropped with it
    duplicates: tuple[str, ...] = ()
    lenient: tuple[str, ...] = ()  # entries CUDA reads differently than written ('1gpu', ' 2')

    @property
    def is_set(self) -> bool:
        return self.raw is not None

    @property
    def uses_uuids(self) -> bool:
        return bool(self.entries) and not self.entries[0].isdigit()

    @property
    def effective(self) -> tuple[str, ...]:
        """The entries CUDA actually exposes, in order (empty when any entry repeats)."""
        return () if self.duplicates else self.entries

    @property
    def indices(self) -> tuple[int, ...]:
        return () if self.uses_uuids else tuple(int(e) for e in self.effective)


_ORDINAL = re.compile(r"\s*([+-]?\d+)")


def parse_cuda_visible_devices(value: str | None) -> VisibleDevices:
    """Parse CUDA_VISIBLE_DEVICES (None = unset); see VisibleDevices for CUDA's rules."""
    if value is None or not value.strip():
        return VisibleDevices(value)
    parts = value.split(",")
    kind = parts[0].strip()[:4] if parts[0].strip()[:4] in ("GPU-", "MIG-") else ""
    entries: list[str] = []
    dups: list[str] = []
    lenient: list[str] = []
    for pos, part in enumerate(parts):
        entry = part.strip()
        if kind:
            key = entry if entry.startswith(kind) else None
        else:
            m = _ORDINAL.match(part)
            key = str(int(m.group(1))) if m and int(m.group(1)) >= 0 else None
        if key is None:
            return VisibleDevices(value, tuple(entries), entry,
                                  tuple(p.strip() for p in parts[pos + 1:]), tuple(dups),
                                  tuple(lenient))
        if key != part and not (key == entry and not kind):
            lenient.append(part)
        (dups if key in entries else entries).append(key)
    return VisibleDevices(value, tuple(entries), None, (), tuple(dups), tuple(lenient))


def _exposed(entries: Sequence[str]) -> str:
    return "only " + ",".join(entries) if entries else "no GPUs"


def _resolve(entry: str, gpus: Sequence[GpuInfo]) -> int:
    """How many of this node's GPUs/MIG devices a UUID (or unique prefix) matches."""
    uuids = [g.uuid for g in gpus] + [m.uuid for g in gpus for m in g.mig]
    return sum(u.startswith(entry) for u in uuids)


def check_cuda_visible_devices(value: str | None, gpus: Sequence[GpuInfo]) -> list[Problem]:
    """Problems with CUDA_VISIBLE_DEVICES given the GPUs nvidia-smi lists (may be empty)."""
    if value is None:
        return []
    vd = parse_cuda_visible_devices(value)
    shown = f"CUDA_VISIBLE_DEVICES={value}"
    problems: list[Problem] = []
    if vd.duplicates:
        problems.append(CUDA_VISIBLE_DEVICES_INVALID.problem(
            f"{shown} repeats {','.join(vd.duplicates)}; CUDA then exposes no GPUs at all",
            fix=f"list each GPU once: CUDA_VISIBLE_DEVICES={','.join(vd.entries)}"))
    if vd.lenient:
        problems.append(CUDA_VISIBLE_DEVICES_INVALID.problem(
            f"{shown}: CUDA reads {', '.join(repr(e) for e in vd.lenient)} loosely "
            f"(as {','.join(vd.entries)})",
            fix=f"write it plainly: CUDA_VISIBLE_DEVICES={','.join(vd.entries)}"))
    harmless = vd.invalid in ("", "-1") and not vd.ignored and vd.entries
    if vd.invalid is not None and not harmless and (vd.ignored or vd.entries or gpus):
        problems.append(CUDA_VISIBLE_DEVICES_INVALID.problem(
            f"{shown}: entry {vd.invalid!r} is not a GPU index or UUID; CUDA stops at the "
            f"first invalid entry, so it exposes {_exposed(vd.effective)}"
            + (f" and ignores {','.join(vd.ignored)}" if vd.ignored else ""),
            cause="CUDA stops at a negative number, a word, an empty item, or a UUID mixed "
                  "into a list of indices (or an index into a list of UUIDs)",
            fix=f"remove {vd.invalid!r} from CUDA_VISIBLE_DEVICES, or unset it"))
    elif not value.strip() and gpus:
        problems.append(CUDA_VISIBLE_DEVICES_INVALID.problem(
            f"CUDA_VISIBLE_DEVICES is set but empty, which hides all {len(gpus)} GPUs "
            "nvidia-smi lists",
            cause="an empty value means no GPUs (often a job script exporting an unset variable)",
            fix="unset CUDA_VISIBLE_DEVICES, or list the GPUs to use"))
    if gpus:
        problems.extend(_check_entries_exist(vd, gpus, shown))
    return problems


def _first_missing(vd: VisibleDevices, gpus: Sequence[GpuInfo]) -> int | None:
    """Position of the first entry naming no GPU of this node (CUDA stops there), or None."""
    for pos, entry in enumerate(vd.entries):
        if (_resolve(entry, gpus) != 1) if vd.uses_uuids else int(entry) >= len(gpus):
            return pos
    return None


def visible_count(value: str | None, gpus: Sequence[GpuInfo]) -> int:
    """How many devices CUDA exposes given CUDA_VISIBLE_DEVICES and nvidia-smi's GPUs."""
    vd = parse_cuda_visible_devices(value)
    if not vd.is_set:
        return len(gpus)
    stop = _first_missing(vd, gpus)
    return len(vd.effective if stop is None else vd.effective[:stop])


def _check_entries_exist(vd: VisibleDevices, gpus: Sequence[GpuInfo], shown: str
                         ) -> list[Problem]:
    pos = _first_missing(vd, gpus)
    if pos is None:
        return []
    n, entry, exposed = len(gpus), vd.entries[pos], _exposed(vd.effective[:pos])
    if not vd.uses_uuids:
        return [CUDA_VISIBLE_DEVICES_INVALID.problem(
            f"{shown} names GPU {entry} but nvidia-smi lists {n} GPUs (0-{n - 1}); CUDA "
            f"stops there, so it exposes {exposed}",
            cause="the list was written for a bigger node, or a GPU has fallen off the bus",
            fix=f"use indices 0-{n - 1} (see nvidia-smi -L), or unset CUDA_VISIBLE_DEVICES")]
    matches = _resolve(entry, gpus)
    what = f"which matches {matches} devices" if matches else "which nvidia-smi -L does not list"
    return [CUDA_VISIBLE_DEVICES_INVALID.problem(
        f"{shown} names {entry}, {what}; CUDA stops there, so it exposes {exposed}",
        cause="GPU UUIDs belong to one board: a list copied from another node never matches, "
              "and a shortened UUID must match exactly one device",
        fix="use UUIDs from this node's nvidia-smi -L, or indices")]


# --- device plan and counts ----------------------------------------------------------------

def expected_gpus(nproc_per_node: int, gpus_per_replica: int) -> int:
    """GPUs one node must expose: every local rank drives gpus_per_replica devices."""
    return max(nproc_per_node, 0) * max(gpus_per_replica, 0)


def _cvd_text(value: str | None) -> str:
    return "CUDA_VISIBLE_DEVICES unset" if value is None else f"CUDA_VISIBLE_DEVICES={value}"


def _fit_fix(nproc: int, k: int, visible: int) -> str:
    """A fix naming the flag value(s) that fit `visible` devices."""
    more = f"expose {nproc * k} GPUs to the node (e.g. Slurm --gres=gpu:{nproc * k})"
    if visible <= 0:
        return f"this node exposes no GPUs: check CUDA_VISIBLE_DEVICES and {more}"
    options = []
    if visible >= k:
        options.append(f"--nproc-per-node {visible // k}")
    if k > 1 and visible >= nproc:
        options.append(f"--gpus-per-replica {visible // nproc}")
    if visible < k:
        options.append(f"--nproc-per-node 1 --gpus-per-replica {visible}")
    fit = "the 1 visible device" if visible == 1 else f"the {visible} visible devices"
    return f"pass {' or '.join(options)} to fit {fit}, or {more}"


def _span(first: int, last: int) -> str:
    return f"cuda:{first}" if first == last else f"cuda:{first}-{last}"


def check_device_plan(local_world_size: int, gpus_per_replica: int, visible_count: int, *,
                      cuda_visible_devices: str | None = None) -> list[Problem]:
    """Problems with the plan "local rank r drives cuda:r*K..r*K+K-1" on this node."""
    nproc, k = local_world_size, gpus_per_replica
    if nproc < 1 or k < 1:
        return [DEVICE_PLAN_INVALID.problem(
            f"--nproc-per-node {nproc} x --gpus-per-replica {k}: both must be at least 1",
            fix="pass --nproc-per-node and --gpus-per-replica of 1 or more")]
    if nproc * k <= visible_count:
        return []
    first = max(visible_count, 0) // k  # first local rank whose devices do not all exist
    who = f"local rank {first} needs" if first == nproc - 1 else \
        f"local ranks {first}-{nproc - 1} need"
    are = "device is" if visible_count == 1 else "devices are"
    observed = (f"{who} {_span(first * k, nproc * k - 1)} but only {visible_count} {are} "
                f"visible ({_cvd_text(cuda_visible_devices)})")
    plan = "cuda:r" if k == 1 else f"cuda:r*{k}..r*{k}+{k - 1}"
    need = (f"--nproc-per-node {nproc}" if k == 1 else
            f"--nproc-per-node {nproc} x --gpus-per-replica {k}")
    cause = (f"each node numbers devices from LOCAL_RANK (not the global RANK): local rank r "
             f"drives {plan}, so {need} needs {nproc * k} devices per node")
    diag = TOO_FEW_GPUS if k == 1 else DEVICE_PLAN_INVALID
    return [diag.problem(observed, cause=cause, fix=_fit_fix(nproc, k, visible_count))]


def device_plan(local_world_size: int, gpus_per_replica: int, visible_count: int, *,
                cuda_visible_devices: str | None = None) -> list[tuple[int, ...]]:
    """Devices per local rank: rank r drives r*K..r*K+K-1. Raises ProblemFound if unfit."""
    problems = check_device_plan(local_world_size, gpus_per_replica, visible_count,
                                 cuda_visible_devices=cuda_visible_devices)
    if problems:
        raise ProblemFound(*problems)
    k = gpus_per_replica
    return [tuple(range(r * k, r * k + k)) for r in range(local_world_size)]


def check_gpu_counts(nvidia_smi_gpus: Sequence[GpuInfo] | None, torch_count: int,
                     expected: int, cuda_build: bool, *,
                     cuda_visible_devices: str | None = None, gpus_per_replica: int = 1,
                     lost_bus_ids: Sequence[str] = ()) -> list[Problem]:
    """Compare nvidia-smi's GPUs (None = no nvidia-smi), torch's count and the job's need.

    `expected` is expected_gpus(...); 0 means the job does not use GPUs.
    """
    smi = None if nvidia_smi_gpus is None else len(nvidia_smi_gpus)
    if not cuda_build:
        if smi and expected > 0:
            names = sorted({g.name for g in nvidia_smi_gpus or ()})
            return [CPU_ONLY_TORCH.problem(
                f"nvidia-smi lists {smi} GPUs ({', '.join(names)}) but torch is a CPU-only "
                "build (torch.version.cuda is None)")]
        torch_count = 0
    problems: list[Problem] = []
    lost = f"; nvidia-smi cannot reach GPU {', '.join(lost_bus_ids)}" if lost_bus_ids else ""
    if cuda_build and smi is not None and cuda_visible_devices is None and smi != torch_count:
        mig = any(g.mig for g in nvidia_smi_gpus or ())
        cause = ("MIG is enabled: CUDA counts MIG instances (and may expose only one), not "
                 "boards; pick instances with CUDA_VISIBLE_DEVICES=MIG-<uuid>" if mig else
                 "torch cannot initialise CUDA (driver older than torch's CUDA, GPUs in "
                 "exclusive-process mode)" if torch_count == 0 else "")
        problems.append(GPU_COUNT_MISMATCH.problem(
            f"nvidia-smi lists {smi} GPUs but torch.cuda.device_count() is {torch_count} "
            f"(CUDA_VISIBLE_DEVICES unset){lost}", cause=cause))
    if torch_count < expected:
        k = max(gpus_per_replica, 1)
        sees = f"torch sees {torch_count}" if cuda_build else "torch is a CPU-only build"
        if smi is None:
            lost += "; nvidia-smi is not installed"
        problems.append(TOO_FEW_GPUS.problem(
            f"the job needs {expected} GPUs per node (--nproc-per-node {expected // k} x "
            f"--gpus-per-replica {k}) but {sees} ({_cvd_text(cuda_visible_devices)}){lost}",
            fix=_fit_fix(expected // k, k, torch_count)))
    return problems
