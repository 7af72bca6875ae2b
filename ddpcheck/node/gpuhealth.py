"""Is each GPU healthy? Memory errors, throttling, the PCIe link, memory other processes hold.

Pure checks over ``gpuquery``'s records, run by the launcher's preflight (``nodehealth``); no
torch, no I/O. Meanings follow NVIDIA's documentation: the field descriptions of
``nvidia-smi --help-query-gpu`` (throttle reasons: nvml.h ``nvmlClocksEventReasons``) and
"NVIDIA GPU Memory Error Management" (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/:
row remapping, pending remaps applied at GPU reset, a remap failure means RMA) and "Dynamic
Page Retirement" (https://docs.nvidia.com/deploy/dynamic-page-retirement/: pending pages
retire at the next reboot or driver reload). Memory errors are problems (the job would crash
or compute on bad memory); throttling and a slow PCIe link only cost speed, so they are
performance-only findings.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddpcheck.diagnoses import register
from ddpcheck.node.findings import Finding, drain_line
from ddpcheck.node.gpuquery import ComputeApp, GpuHealth
from ddpcheck.node.nvlinkfabric import FABRIC_MANAGER_DOWN

# Memory another process holds with no process visible (another container, a process that
# died with its memory): more than this is not the driver's own idle use (a few MiB).
UNSEEN_HOLDER_MIB = 1024
MEM_DOCS = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/"

ECC_UNCORRECTABLE = register(
    "gpu-ecc-uncorrectable", "a GPU reports uncorrectable ECC memory errors",
    "the GPU's memory returned data that ECC could not correct since the driver loaded; the "
    "program that touched it was stopped, and the GPU cannot be trusted until it is reset",
    "drain the node, reset the GPU (nvidia-smi -r -i BUS_ID) or reboot; if errors return, "
    f"RMA the GPU ({MEM_DOCS})")
RETIRED_PAGES_PENDING = register(
    "gpu-retired-pages-pending", "a GPU has memory pages waiting to be retired",
    "ECC errors marked memory pages for retirement; they are retired only at the next reboot "
    "or driver reload, until then the bad pages can still be handed out",
    "drain the node and reboot it (or reload the driver) to retire the pages")
ROW_REMAP_PENDING = register(
    "gpu-row-remap-pending", "a GPU has a memory row remap waiting for a GPU reset",
    "an uncorrectable error was found in a memory row; the spare row is put in place only at "
    "the next GPU reset, until then the GPU keeps failing on that row",
    "drain the node and reset the GPU (nvidia-smi -r -i BUS_ID) or reboot")
ROW_REMAP_FAILED = register(
    "gpu-row-remap-failed", "a GPU could not remap a bad memory row (no spare rows left)",
    "the GPU ran out of spare memory rows for a bank; NVIDIA's memory error management says "
    "such a GPU needs to be replaced",
    f"drain the node and RMA the GPU ({MEM_DOCS})")
GPU_THROTTLED = register(
    "gpu-throttled", "a GPU is slowed down by hardware or thermal protection",
    "the GPU lowers its clocks: HW slowdown (power or heat, clocks halved or lower), HW "
    "thermal slowdown (too hot), HW power brake (the board's external power brake signal), "
    "SW thermal slowdown (the driver holds it below its temperature limit)",
    "check the node's cooling and power supplies (nvidia-smi -q -d PERFORMANCE,TEMPERATURE,"
    "POWER); ask the admins to inspect fans, airflow and PSUs")
PCIE_DEGRADED = register(
    "gpu-pcie-degraded", "a GPU's PCIe link trained below its width or generation",
    "the link to the GPU came up with fewer lanes or a lower generation than the GPU and "
    "slot support (a badly seated card or riser, a damaged cable, a BIOS setting): host "
    "transfers and GPUDirect traffic through it are slower",
    "reseat the GPU or riser, check the slot's BIOS settings; lspci -vv -s BUS_ID shows "
    "LnkSta '(downgraded)'")
MEMORY_IN_USE = register(
    "gpu-memory-in-use", "another process holds memory on a GPU the job will use",
    "a process that is not part of this job (often a previous job's leftover) holds GPU "
    "memory, so the job can run out of memory or share the GPU",
    "end that process (or wait for the job it belongs to); if no process holds the memory, "
    "reset the GPU (nvidia-smi -r -i BUS_ID) or reboot")

RECOVERY_ACTION = register(
    "gpu-recovery-action", "the driver says a GPU needs a reset, a reboot or a drain",
    "nvidia-smi's gpu_recovery_action is set after an error the driver could not recover "
    "from in place (NVIDIA Xid catalogue: GPU Reset, Node Reboot, Drain P2P, Drain and Reset)",
    "drain the node and do what the action says (nvidia-smi -r -i BUS_ID for GPU Reset)")
FABRIC_READY = ("completed", "not supported")

THROTTLE_TEXT = {"hw_slowdown": "HW slowdown", "hw_thermal_slowdown": "HW thermal slowdown",
                 "hw_power_brake_slowdown": "HW power brake slowdown",
                 "sw_thermal_slowdown": "SW thermal slowdown"}


def check_memory_errors(g: GpuHealth) -> list[Finding]:
    """Uncorrectable ECC errors, pages pending retirement, pending or failed row remaps."""
    out = []
    reset = f"nvidia-smi -r -i {g.bus_id or g.index}"
    if g.remap_failed:
        out.append(Finding(ROW_REMAP_FAILED.problem(
            f"{g.named()}: remapped_rows.failure is Yes",
            fix=f"{drain_line(f'GPU {g.index} row remap failure, RMA')}; then RMA the GPU "
                f"{g.uuid or g.bus_id} ({MEM_DOCS})")))
    if g.remap_pending:
        out.append(Finding(ROW_REMAP_PENDING.problem(
            f"{g.named()}: remapped_rows.pending is Yes",
            fix=f"{drain_line(f'GPU {g.index} row remap pending, reset')}; then {reset} "
                "(or reboot) and undrain it")))
    if g.retired_pending:
        out.append(Finding(RETIRED_PAGES_PENDING.problem(
            f"{g.named()}: retired_pages.pending is Yes",
            fix=f"{drain_line(f'GPU {g.index} retired pages pending, reboot')}; then reboot "
                "the node (or reload the nvidia driver) and undrain it")))
    if g.ecc_uncorrected:
        out.append(Finding(ECC_UNCORRECTABLE.problem(
            f"{g.named()}: {g.ecc_uncorrected} uncorrectable ECC error(s) since the driver "
            "loaded (ecc.errors.uncorrected.volatile.total)",
            fix=f"{drain_line(f'GPU {g.index} uncorrectable ECC')}; then {reset} or reboot; "
                f"if errors return, RMA the GPU ({MEM_DOCS})")))
    return out


def check_recovery_and_fabric(g: GpuHealth) -> list[Finding]:
    """The driver's own verdict (gpu_recovery_action) and the NVLink fabric registration.

    On NVSwitch systems a GPU whose fabric.state is not Completed (or whose fabric.status
    is not Success) cannot run CUDA: Fabric Manager has not registered it.
    """
    out = []
    action = g.recovery_action
    if action and action.lower() != "none":
        reset = f"nvidia-smi -r -i {g.bus_id or g.index}"
        step = {"gpu reset": reset, "node reboot": "reboot the node"}.get(
            action.lower(), f"{reset} after draining its work ({action})")
        out.append(Finding(RECOVERY_ACTION.problem(
            f"{g.named()}: gpu_recovery_action is {action}",
            fix=f"{drain_line(f'GPU {g.index} recovery action {action}')}; then {step}")))
    state, status = (g.fabric_state or "").lower(), (g.fabric_status or "").lower()
    if (state and state not in FABRIC_READY) or (state == "completed" and status and
                                                 status != "success"):
        out.append(Finding(FABRIC_MANAGER_DOWN.problem(
            f"{g.named()}: fabric.state is {g.fabric_state}, fabric.status "
            f"{g.fabric_status or 'unknown'} (the GPU is not registered with the NVLink "
            "fabric)")))
    return out


def check_speed(g: GpuHealth) -> list[Finding]:
    """Throttling and a PCIe link below its maximum: performance-only findings.

    A lower link generation on an idle GPU is power saving, not a fault ("These may be
    reduced when the GPU is not in use", --help-query-gpu), so the generation is judged
    only on a GPU that is not idle; the width is judged always (a card that lost lanes).
    """
    out = []
    if g.slowdowns:
        out.append(Finding(GPU_THROTTLED.problem(
            f"{g.named()}: {', '.join(THROTTLE_TEXT[s] for s in g.slowdowns)} active "
            "(clocks_throttle_reasons)"), performance_only=True))
    lanes = g.pcie_width and g.pcie_width[0] < g.pcie_width[1]
    gen = g.pcie_gen and g.pcie_gen[0] < g.pcie_gen[1] and g.idle is False
    if lanes or gen:
        w, v = g.pcie_width or (0, 0), g.pcie_gen or (0, 0)
        out.append(Finding(PCIE_DEGRADED.problem(
            f"{g.named()}: PCIe link x{w[0]} of x{w[1]}, gen {v[0]} of {v[1]} "
            "(pcie.link.width/gen current of max)",
            fix=f"reseat the GPU or its riser, check the slot in the BIOS; lspci -vv -s "
                f"{g.bus_id or 'BUS_ID'} | grep LnkSta shows the trained link"),
            performance_only=True))
    return out


def check_leftovers(gpus: Sequence[GpuHealth], apps: Sequence[ComputeApp],
                    apps_read: bool = True) -> list[Finding]:
    """GPU memory held by other processes: named by pid and memory, never by command line.

    Runs before any rank starts, so every compute process is someone else's. With no
    visible process (another container's, or one that died holding its memory), memory.used
    above UNSEEN_HOLDER_MIB is reported the same way.
    """
    out = []
    for g in gpus:
        mine = [a for a in apps if (g.uuid and a.gpu_uuid == g.uuid)
                or (g.bus_id and a.bus_id.lower()[-12:] == g.bus_id.lower()[-12:])]
        if mine:
            held = ", ".join(f"pid {a.pid} ({_mib(a.used_mib)})" for a in mine)
            pids = " ".join(str(a.pid) for a in mine)
            out.append(Finding(MEMORY_IN_USE.problem(
                f"{g.named()}: held by {held} before the job started",
                fix=f"end the process(es) (kill {pids}, as their owner or root) or wait for "
                    "the job they belong to; if memory stays held, nvidia-smi -r -i "
                    f"{g.bus_id or g.index} or reboot")))
        elif apps_read and (g.memory_used_mib or 0) > UNSEEN_HOLDER_MIB:
            out.append(Finding(MEMORY_IN_USE.problem(
                f"{g.named()}: {g.memory_used_mib} MiB of {_mib(g.memory_total_mib)} in use "
                "and no process this node's nvidia-smi can see holds it",
                fix="find the holder outside this container (fuser -v /dev/nvidia* on the "
                    f"host) and end it; else {drain_line(f'GPU {g.index} memory held')} and "
                    f"reset the GPU (nvidia-smi -r -i {g.bus_id or g.index}) or reboot")))
    return out


def _mib(value: int | None) -> str:
    return f"{value} MiB" if value is not None else "memory unknown"


def check_gpus(gpus: Sequence[GpuHealth], apps: Sequence[ComputeApp],
               apps_read: bool = True) -> list[Finding]:
    """Every GPU finding: memory errors, speed, leftovers."""
    found: list[Finding] = []
    for g in gpus:
        found += check_memory_errors(g) + check_recovery_and_fabric(g) + check_speed(g)
    return found + check_leftovers(gpus, apps, apps_read)
