"""Works out the job's shape from the scheduler's environment; runs in the launcher, pure
functions of an env mapping (and a file reader seam for PBS_NODEFILE).

`detect` reads Slurm, else PBS, else torchrun's variables (PET_* flag fallbacks, worker
variables), else hand-set MASTER_*/NODE_RANK into a `JobEnv`; each value notes where it came
from ("nodes from SLURM_STEP_NODELIST=gpu-[07-08]").
ddpcheck.scheduler.contradictions judges that shape against ddpcheck's flags.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

from ddpcheck.diagnoses import Problem, register
from ddpcheck.parsing import join_host_port, port_number, positive_count, whole_number
from ddpcheck.scheduler.hostlist import (
    compress_hostlist,
    count_devices,
    expand_slurm_nodelist,
    parse_gpus_per_node,
    parse_nnodes,
    parse_nproc_per_node,
    parse_slurm_tasks_per_node,
    same_host,
)

__all__ = ["JobEnv", "detect", "expand_slurm_nodelist", "parse_slurm_tasks_per_node"]

T = TypeVar("T")
Parse = Callable[[str], Optional[T]]

# Ids of Slurm's pseudo-steps (salloc's interactive step, the batch script, extern): not srun.
_PSEUDO_STEPS = {"4294967290", "4294967291", "4294967292"}
_TORCHRUN_VARS = ("PET_NNODES", "PET_NODE_RANK", "PET_RDZV_ENDPOINT", "PET_NPROC_PER_NODE",
                  "PET_RDZV_ID", "PET_MASTER_ADDR", "TORCHELASTIC_RUN_ID", "GROUP_RANK")
_ENV_VARS = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "WORLD_SIZE", "RANK", "LOCAL_RANK",
             "LOCAL_WORLD_SIZE")


ENV_INVALID = register(
    "scheduler-env-invalid", "a scheduler variable could not be read",
    "the variable is malformed or stale (exported by hand, or copied from another job)",
    "unset the variable, or start ddpcheck from a fresh job step")
@dataclass(frozen=True)
class JobEnv:
    """The job's shape as the environment describes it; None where it does not say.

    endpoint is "host:port", or just "host" when no port is known (valid for torchrun's
    --rdzv-endpoint, which then uses its default port). hostname is this node's name in the
    scheduler's terms (SLURMD_NODENAME under Slurm); step_id is set only inside an srun step.
    Under Slurm and PBS tasks_per_node counts the tasks (ddpcheck copies) the scheduler starts
    per node; under torchrun/env it is the ranks per node (PET_NPROC_PER_NODE).
    """

    source: str  # "slurm" | "pbs" | "torchrun" | "env" | "none"
    nodes: tuple[str, ...] = ()
    nnodes: int | None = None
    node_rank: int | None = None
    endpoint: str | None = None
    job_id: str | None = None
    tasks_per_node: int | None = None
    gpus_per_node: int | None = None
    hostname: str | None = None
    step_id: str | None = None
    problems: tuple[Problem, ...] = ()
    notes: tuple[str, ...] = ()
    invalid: tuple[str, ...] = ()  # malformed variables ("NAME='value': why"): bad input

    def origin(self, field: str) -> str:
        """Where a field came from, e.g. "SLURM_STEP_NODELIST=gpu-[07-08]" ("" if unknown)."""
        prefix = f"{field} from "
        return next((n[len(prefix):] for n in self.notes if n.startswith(prefix)), "")


class _Reader:
    """Reads variables in precedence order, noting where each value came from."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.notes: list[str] = []
        self.problems: list[Problem] = []
        self.invalid: list[str] = []

    def value(self, name: str) -> str:
        return self.env.get(name, "").strip()

    def has(self, *names: str) -> bool:
        return any(self.value(n) for n in names)

    def first(self, field: str, sources: Mapping[str, Parse[T]]) -> T | None:
        """The first variable that is set and parses; a malformed one is a problem."""
        for name, parse in sources.items():
            raw = self.value(name)
            if not raw:
                continue
            try:
                result = parse(raw)
            except ValueError as exc:
                self.problems.append(ENV_INVALID.problem(f"{name}={raw!r}: {exc}"))
                self.invalid.append(f"{name}={_clip(raw)!r}: {exc}")
                continue
            if result is None:
                self.notes.append(f"{name}={_clip(raw)} gives no {field}; looking further")
                continue
            self.notes.append(f"{field} from {name}={_clip(raw)}")
            return result
        return None

    def job(self, source: str, **fields: object) -> JobEnv:
        return JobEnv(source, problems=tuple(self.problems), notes=tuple(self.notes),
                      invalid=tuple(self.invalid), **fields)  # type: ignore[arg-type]


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def detect(env: Mapping[str, str], read_file: Callable[[str], str] = _read_text,
           hostname: str | None = None) -> JobEnv:
    """Read the job's shape: Slurm, else PBS, else torchrun's variables, else MASTER_* by hand.

    hostname (default socket.gethostname()) finds this node in a PBS node file, and in a
    Slurm node list when SLURMD_NODENAME is unset (e.g. an salloc shell on a login node).
    """
    host = hostname or socket.gethostname()
    r = _Reader(env)
    if r.has("SLURM_JOB_ID", "SLURM_JOBID"):
        return _slurm(r, host)
    if r.has("PBS_JOBID", "PBS_NODEFILE"):
        return _pbs(r, read_file, host)
    if r.has(*_TORCHRUN_VARS) or r.has(*_ENV_VARS):
        return _torch(r, "torchrun" if r.has(*_TORCHRUN_VARS) else "env", host)
    r.notes.append("no Slurm, PBS, torchrun or MASTER_* variables: a single by-hand launch")
    return r.job("none", hostname=host)


def _slurm(r: _Reader, host: str) -> JobEnv:
    step = r.value("SLURM_STEP_ID") or r.value("SLURM_STEPID") or None
    step = None if step in _PSEUDO_STEPS else step
    if step:  # inside srun, SLURM_NODELIST / SLURM_NNODES describe the step, SLURM_JOB_* the job
        lists = ("SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST")
        counts = ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES")
    else:
        lists, counts = ("SLURM_JOB_NODELIST", "SLURM_NODELIST"), ("SLURM_JOB_NUM_NODES",
                                                                   "SLURM_NNODES")
    job_id = r.first("job_id", dict.fromkeys(("SLURM_JOB_ID", "SLURM_JOBID"), str))
    nodes = r.first("nodes", dict.fromkeys(lists, _hostlist)) or ()
    nnodes = _checked_count(r, nodes, r.first("nnodes", dict.fromkeys(counts, positive_count)))
    this = r.value("SLURMD_NODENAME") or host
    r.notes.append(f"hostname from SLURMD_NODENAME={this}" if r.has("SLURMD_NODENAME")
                   else f"hostname from this machine: {this}")
    rank = r.first("node_rank", {"SLURM_NODEID": whole_number})
    if rank is None:
        rank = _position(r, this, nodes)
    gpu_vars: dict[str, Parse[int]] = {"SLURM_GPUS_ON_NODE": whole_number,
                                       "SLURM_GPUS_PER_NODE": parse_gpus_per_node}
    if step:
        gpu_vars["SLURM_STEP_GPUS"] = count_devices
    gpu_vars.update(dict.fromkeys(("SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"), count_devices))
    return r.job("slurm", nodes=nodes, nnodes=nnodes, node_rank=rank, job_id=job_id,
                 endpoint=_first_node_endpoint(r, nodes, lists[0]), step_id=step,
                 tasks_per_node=_slurm_tasks(r, step, rank), hostname=this,
                 gpus_per_node=r.first("gpus_per_node", gpu_vars))


def _slurm_tasks(r: _Reader, step: str | None, rank: int | None) -> int | None:
    def this_node(raw: str) -> int:
        counts = parse_slurm_tasks_per_node(raw)
        known = rank is not None and rank < len(counts)
        if len(set(counts)) > 1:
            r.notes.append(f"tasks per node vary ({raw}); taking "
                           + (f"node {rank}'s" if known else "the largest"))
        return counts[rank] if known and rank is not None else max(counts)

    if step:
        names: tuple[str, ...] = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                                  "SLURM_NTASKS_PER_NODE")
    elif r.has("SLURM_NTASKS"):
        names = ("SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
    else:  # without -n/--ntasks-per-node, SLURM_TASKS_PER_NODE counts CPUs, not tasks
        names = ("SLURM_NTASKS_PER_NODE",)
        if r.has("SLURM_TASKS_PER_NODE") and not r.has(*names):
            r.notes.append(f"SLURM_TASKS_PER_NODE={r.value('SLURM_TASKS_PER_NODE')} ignored: "
                           "no task count was requested, so it only counts CPUs")
    return r.first("tasks_per_node", dict.fromkeys(names, this_node))


def _pbs(r: _Reader, read_file: Callable[[str], str], host: str) -> JobEnv:
    job_id = r.first("job_id", {"PBS_JOBID": str})
    if r.has("PBS_O_WORKDIR"):
        r.notes.append(f"submitted from PBS_O_WORKDIR={r.value('PBS_O_WORKDIR')}")
    path = r.value("PBS_NODEFILE")
    slots: list[str] = []
    try:
        slots = [ln.strip() for ln in read_file(path).splitlines() if ln.strip()] if path else []
    except OSError as exc:
        r.problems.append(ENV_INVALID.problem(
            f"cannot read PBS_NODEFILE={path}: {exc.strerror or exc}",
            cause="PBS writes the node file on the job's first node only",
            fix="start ddpcheck on the first node, or copy the file to shared storage and "
                "export PBS_NODEFILE=<copy> on every node"))
    nodes = tuple(dict.fromkeys(slots))  # one line per slot: unique, in order
    if nodes:
        r.notes.append(f"nodes from PBS_NODEFILE={path} ({len(slots)} slot lines)")
        r.notes.append(f"nnodes from PBS_NODEFILE={path} ({len(nodes)} unique hosts)")
    rank = _position(r, host, nodes)
    if rank is None:
        rank = r.first("node_rank", {"PBS_NODENUM": whole_number})
    tasks = None
    if nodes:
        per_host = [slots.count(n) for n in nodes]
        tasks = per_host[rank] if rank is not None and rank < len(nodes) else max(per_host)
        r.notes.append(f"tasks_per_node from PBS_NODEFILE={path} (this node's slot lines)")
    return r.job("pbs", nodes=nodes, nnodes=len(nodes) or None, node_rank=rank, job_id=job_id,
                 endpoint=_first_node_endpoint(r, nodes, "PBS_NODEFILE"),
                 tasks_per_node=tasks, hostname=host)


def _torch(r: _Reader, source: str, host: str) -> JobEnv:
    nnodes = r.first("nnodes", {"PET_NNODES": parse_nnodes, "GROUP_WORLD_SIZE": positive_count})
    rank = r.first("node_rank", dict.fromkeys(("PET_NODE_RANK", "GROUP_RANK", "NODE_RANK"),
                                              whole_number))
    endpoint = r.first("endpoint", {"PET_RDZV_ENDPOINT": str})
    for addr, port in (("PET_MASTER_ADDR", "PET_MASTER_PORT"), ("MASTER_ADDR", "MASTER_PORT")):
        if endpoint is None and r.has(addr):
            r.notes.append(f"endpoint from {addr}={r.value(addr)}")
            endpoint = join_host_port(r.value(addr), r.first("port", {port: port_number}))
    tasks = r.first("tasks_per_node", {"PET_NPROC_PER_NODE": parse_nproc_per_node,
                                       "LOCAL_WORLD_SIZE": positive_count})
    job_id = r.first("job_id", dict.fromkeys(("PET_RDZV_ID", "TORCHELASTIC_RUN_ID"),
                                             lambda v: None if v == "none" else v))
    return r.job(source, nnodes=nnodes, node_rank=rank, endpoint=endpoint, job_id=job_id,
                 tasks_per_node=tasks, hostname=host)


def _first_node_endpoint(r: _Reader, nodes: Sequence[str], where: str) -> str | None:
    if not nodes:
        return None
    addr = r.value("MASTER_ADDR")
    if addr and not same_host(addr, nodes[0]):
        r.notes.append(f"MASTER_ADDR={addr} not used: the endpoint is the first node, {nodes[0]}")
    r.notes.append(f"endpoint from {where} (first node, {nodes[0]})")
    return join_host_port(nodes[0], r.first("port", {"MASTER_PORT": port_number}))


def _checked_count(r: _Reader, nodes: Sequence[str], count: int | None) -> int | None:
    if nodes and count is not None and count != len(nodes):
        r.problems.append(ENV_INVALID.problem(
            f"the node count says {count} but the node list {compress_hostlist(nodes)} "
            f"names {len(nodes)}; using the list"))
    return len(nodes) if nodes else count


def _position(r: _Reader, host: str, nodes: Sequence[str]) -> int | None:
    for i, node in enumerate(nodes):
        if same_host(host, node):
            r.notes.append(f"node_rank from the position of {host} in the node list: {i}")
            return i
    return None


def _hostlist(raw: str) -> tuple[str, ...] | None:
    return tuple(expand_slurm_nodelist(raw)) or None


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
