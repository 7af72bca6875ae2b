"""Works out the job's shape from the scheduler's environment; runs in the launcher, pure
functions of an env mapping (and a file reader seam for PBS_NODEFILE).

`detect` reads Slurm, PBS, torchrun (PET_* flag fallbacks, worker variables) or hand-set
MASTER_* variables, in that order of preference, into a `JobEnv`; `shape_problems` turns
contradictions between that shape and ddpcheck's flags into Problems. Every value records
where it came from in `JobEnv.notes` ("nodes from SLURM_STEP_NODELIST=gpu-[07-08]").
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

from ddpcheck import diagnoses
from ddpcheck.diagnoses import Diagnosis, Problem
from ddpcheck.hostlist import compress_hostlist, expand_slurm_nodelist, parse_slurm_tasks_per_node

__all__ = ["JobEnv", "compress_hostlist", "detect", "expand_slurm_nodelist",
           "parse_slurm_tasks_per_node", "shape_problems"]

T = TypeVar("T")
Parse = Callable[[str], Optional[T]]

# Step ids of Slurm's pseudo-steps (interactive salloc shell, batch script, extern): not srun.
_PSEUDO_STEPS = {"4294967290", "4294967291", "4294967292"}
_TORCHRUN_VARS = ("PET_NNODES", "PET_NODE_RANK", "PET_RDZV_ENDPOINT", "PET_NPROC_PER_NODE",
                  "PET_RDZV_ID", "PET_MASTER_ADDR", "PET_MASTER_PORT", "TORCHELASTIC_RUN_ID",
                  "GROUP_RANK")
_ENV_VARS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK",
             "LOCAL_WORLD_SIZE", "NODE_RANK")


def _register(code: str, summary: str, cause: str, fix: str) -> Diagnosis:
    return diagnoses.CATALOGUE.setdefault(code, Diagnosis(code, summary, cause, fix))


ENV_INVALID = _register(
    "scheduler-env-invalid", "a scheduler variable could not be read",
    "the variable is malformed or stale (exported by hand, or copied from another job)",
    "unset the variable, or start ddpcheck from a fresh job step")
SHAPE_MISMATCH = _register(
    "job-shape-mismatch", "ddpcheck's flags disagree with the job's allocation",
    "--nodes (or --nproc-per-node) was written for a different allocation",
    "pass the allocation's values, or change the allocation to match the flags")
TOO_MANY_TASKS = _register(
    "too-many-tasks-per-node", "the scheduler starts more than one ddpcheck per node",
    "srun inherited --ntasks-per-node (or -n) from the job; every task would start torchrun",
    "start one ddpcheck per node: srun --ntasks-per-node=1 ddpcheck run ...")
TASKS_GPUS_MISMATCH = _register(
    "tasks-gpus-mismatch", "Slurm tasks per node differ from GPUs per node",
    "--ntasks-per-node and --gres=gpu:N (or --gpus-per-node) were set to different numbers, "
    "so ranks launched by srun directly would share GPUs or leave some idle",
    "make --ntasks-per-node equal the GPUs per node, or use --ntasks-per-node=1 with torchrun")
NOT_PER_NODE = _register(
    "not-launched-per-node", "ddpcheck runs on only one node of a multi-node allocation",
    "it was started in the batch script (or salloc shell) itself, not once per node by srun",
    "start it on every node: srun --ntasks-per-node=1 ddpcheck run ...")
NODE_RANK_INVALID = _register(
    "node-rank-invalid", "this node's rank is outside 0..nodes-1",
    "NODE_RANK / PET_NODE_RANK / SLURM_NODEID was set for a larger job or by hand",
    "give every node a distinct rank below --nodes, or unset the variable")
NOT_IN_ALLOCATION = _register(
    "node-not-in-allocation", "this host is not in the job's node list",
    "ddpcheck runs on a login node or another machine (e.g. an salloc shell without srun), "
    "or the scheduler's node names differ from the hostname",
    "start it on the job's nodes (srun --ntasks-per-node=1 ..., or pbsdsh -u / mpiexec --ppn 1)")


@dataclass(frozen=True)
class JobEnv:
    """The job's shape as the scheduler describes it; None where the environment does not say.

    endpoint is "host:port", or just "host" when no port is known (a valid torchrun
    --rdzv-endpoint: torchrun adds its default port). hostname is this node's name in the
    scheduler's terms (SLURMD_NODENAME under Slurm); step_id is set only inside an srun step.
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

    def origin(self, field: str) -> str:
        """Where a field came from, e.g. "SLURM_STEP_NODELIST=gpu-[07-08]" ("" if unknown)."""
        prefix = f"{field} from "
        return next((n[len(prefix):] for n in self.notes if n.startswith(prefix)), "")

    def summary(self) -> str:
        nodes = compress_hostlist(self.nodes) if self.nodes else "nodes unknown"
        return (f"{self.source} job {self.job_id or '-'}: {self.nnodes or '?'} node(s) ({nodes}), "
                f"this is node {self.node_rank if self.node_rank is not None else '?'} "
                f"({self.hostname or '?'}), GPUs per node {self.gpus_per_node or '?'}")


class _Reader:
    """Reads variables in precedence order, noting where each value came from."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env
        self.notes: list[str] = []
        self.problems: list[Problem] = []

    def has(self, *names: str) -> bool:
        return any(self.env.get(n, "").strip() for n in names)

    def value(self, name: str) -> str:
        return self.env.get(name, "").strip()

    def first(self, field: str, sources: Sequence[tuple[str, Parse[T]]]) -> T | None:
        """The first variable that is set and parses; a bad one is a problem, then the next."""
        for name, parse in sources:
            raw = self.value(name)
            if not raw:
                continue
            try:
                result = parse(raw)
            except ValueError as exc:
                self.problems.append(ENV_INVALID.problem(f"{name}={raw!r}: {exc}"))
                continue
            if result is None:
                self.notes.append(f"{name}={_clip(raw)} gives no {field}; looking further")
                continue
            self.notes.append(f"{field} from {name}={_clip(raw)}")
            return result
        return None

    def get(self, field: str, names: Sequence[str], parse: Parse[T]) -> T | None:
        return self.first(field, [(n, parse) for n in names])

    def job(self, source: str, **fields: object) -> JobEnv:
        return JobEnv(source, problems=tuple(self.problems), notes=tuple(self.notes),
                      **fields)  # type: ignore[arg-type]


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def detect(env: Mapping[str, str], read_file: Callable[[str], str] = _read_text,
           hostname: str | None = None) -> JobEnv:
    """Read the job's shape: Slurm, then PBS, then torchrun's variables, then MASTER_* by hand.

    hostname (default: socket.gethostname()) locates this node in a PBS node file and in a
    Slurm node list when SLURMD_NODENAME is unset.
    """
    host = hostname or socket.gethostname()
    r = _Reader(env)
    if r.has("SLURM_JOB_ID", "SLURM_JOBID"):
        return _slurm(r, host)
    if r.has("PBS_JOBID", "PBS_NODEFILE"):
        return _pbs(r, read_file, host)
    if r.has(*_TORCHRUN_VARS):
        return _torch(r, "torchrun", host)
    if r.has(*_ENV_VARS):
        return _torch(r, "env", host)
    r.notes.append("no Slurm, PBS, torchrun or MASTER_* variables: a by-hand single launch")
    return r.job("none", hostname=host)


def _slurm(r: _Reader, host: str) -> JobEnv:
    step = r.value("SLURM_STEP_ID") or r.value("SLURM_STEPID") or None
    if step in _PSEUDO_STEPS:
        step = None
    scope = ("SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST") if step else (
        "SLURM_JOB_NODELIST", "SLURM_NODELIST")
    counts = ("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES") if step else (
        "SLURM_JOB_NUM_NODES", "SLURM_NNODES")
    job_id = r.get("job_id", ("SLURM_JOB_ID", "SLURM_JOBID"), str)
    nodes = r.get("nodes", scope, _hostlist) or ()
    nnodes = _checked_count(r, nodes, r.get("nnodes", counts, _count))
    this = r.value("SLURMD_NODENAME") or host
    r.notes.append(f"hostname from {'SLURMD_NODENAME' if r.has('SLURMD_NODENAME') else 'host'}"
                   f"={this}")
    rank = r.get("node_rank", ("SLURM_NODEID",), _whole)
    if rank is None:
        rank = _position(r, this, nodes)
    tasks = _slurm_tasks(r, step, rank)
    gpu_sources: list[tuple[str, Parse[int]]] = [
        ("SLURM_GPUS_ON_NODE", _whole), ("SLURM_GPUS_PER_NODE", _gpu_spec)]
    if step:
        gpu_sources.append(("SLURM_STEP_GPUS", _id_count))
    gpu_sources += [("SLURM_JOB_GPUS", _id_count), ("CUDA_VISIBLE_DEVICES", _id_count)]
    gpus = r.first("gpus_per_node", gpu_sources)
    return r.job("slurm", nodes=nodes, nnodes=nnodes, node_rank=rank, job_id=job_id,
                 endpoint=_first_node_endpoint(r, nodes), tasks_per_node=tasks,
                 gpus_per_node=gpus, hostname=this, step_id=step)


def _slurm_tasks(r: _Reader, step: str | None, rank: int | None) -> int | None:
    def per_node(raw: str) -> int:
        counts = parse_slurm_tasks_per_node(raw)
        if len(set(counts)) == 1:
            return counts[0]
        r.notes.append(f"tasks per node vary ({raw}); taking node {rank}'s")
        return counts[rank] if rank is not None and rank < len(counts) else max(counts)

    if step:
        names = ("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE")
    elif r.has("SLURM_NTASKS"):
        names = ("SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
    else:
        names = ("SLURM_NTASKS_PER_NODE",)
        if r.has("SLURM_TASKS_PER_NODE") and not r.has("SLURM_NTASKS_PER_NODE"):
            r.notes.append(f"SLURM_TASKS_PER_NODE={r.value('SLURM_TASKS_PER_NODE')} ignored: "
                           "no task count was requested, so it only counts CPUs")
    return r.get("tasks_per_node", names, per_node)


def _pbs(r: _Reader, read_file: Callable[[str], str], host: str) -> JobEnv:
    job_id = r.get("job_id", ("PBS_JOBID",), str)
    if r.has("PBS_O_WORKDIR"):
        r.notes.append(f"submitted from PBS_O_WORKDIR={r.value('PBS_O_WORKDIR')}")
    slots: list[str] = []
    path = r.value("PBS_NODEFILE")
    if path:
        try:
            slots = [ln.strip() for ln in read_file(path).splitlines() if ln.strip()]
        except OSError as exc:
            r.problems.append(ENV_INVALID.problem(
                f"cannot read PBS_NODEFILE={path}: {exc.strerror or exc}",
                cause="PBS Pro writes the node file on the job's first node only",
                fix="start ddpcheck on the first node, or copy the file to shared storage and "
                    "export PBS_NODEFILE=<copy> on every node"))
    nodes = tuple(dict.fromkeys(slots))
    if nodes:
        r.notes.append(f"nodes from PBS_NODEFILE={path} ({len(slots)} slots)")
        r.notes.append(f"nnodes from PBS_NODEFILE={path} ({len(nodes)} unique hosts)")
    rank = _position(r, host, nodes)
    if rank is None:
        rank = r.get("node_rank", ("PBS_NODENUM",), _whole)
    tasks = None
    if nodes:
        per_host = [slots.count(n) for n in nodes]
        tasks = per_host[rank] if rank is not None and rank < len(nodes) else max(per_host)
        r.notes.append(f"tasks_per_node from PBS_NODEFILE={path} (slots of this node)")
    return r.job("pbs", nodes=nodes, nnodes=len(nodes) or None, node_rank=rank, job_id=job_id,
                 endpoint=_first_node_endpoint(r, nodes), tasks_per_node=tasks, hostname=host)


def _torch(r: _Reader, source: str, host: str) -> JobEnv:
    nnodes = r.first("nnodes", [("PET_NNODES", _nnodes_spec), ("GROUP_WORLD_SIZE", _count)])
    if nnodes is None and r.has("WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        nnodes = r.get("nnodes", ("WORLD_SIZE",), lambda v: _per_node(r, v))
    rank = r.get("node_rank", ("PET_NODE_RANK", "GROUP_RANK", "NODE_RANK"), _whole)
    endpoint = r.get("endpoint", ("PET_RDZV_ENDPOINT",), str)
    for addr, port in (("PET_MASTER_ADDR", "PET_MASTER_PORT"), ("MASTER_ADDR", "MASTER_PORT")):
        if endpoint is None and r.has(addr):
            endpoint = _join(r.value(addr), r.get("port", (port,), _port))
            r.notes.append(f"endpoint from {addr}={r.value(addr)}")
    tasks = r.first("tasks_per_node", [("PET_NPROC_PER_NODE", _nproc_spec),
                                       ("LOCAL_WORLD_SIZE", _count)])
    job_id = r.get("job_id", ("PET_RDZV_ID", "TORCHELASTIC_RUN_ID"),
                   lambda v: None if v == "none" else v)
    return r.job(source, nnodes=nnodes, node_rank=rank, endpoint=endpoint, job_id=job_id,
                 tasks_per_node=tasks, hostname=host)


def _first_node_endpoint(r: _Reader, nodes: Sequence[str]) -> str | None:
    if not nodes:
        return None
    port = r.get("port", ("MASTER_PORT",), _port)
    addr = r.value("MASTER_ADDR")
    if addr and addr != nodes[0]:
        r.notes.append(f"MASTER_ADDR={addr} not used: the endpoint is the first node, {nodes[0]}")
    r.notes.append(f"endpoint from the first node, {nodes[0]}")
    return _join(nodes[0], port)


def _checked_count(r: _Reader, nodes: Sequence[str], count: int | None) -> int | None:
    if nodes and count is not None and count != len(nodes):
        r.problems.append(ENV_INVALID.problem(
            f"the node count says {count} but the node list {compress_hostlist(nodes)} "
            f"names {len(nodes)}; using the list"))
    return len(nodes) if nodes else count


def _position(r: _Reader, host: str, nodes: Sequence[str]) -> int | None:
    for i, node in enumerate(nodes):
        if _same_host(host, node):
            r.notes.append(f"node_rank from the position of {host} in the node list")
            return i
    return None


def _same_host(a: str, b: str) -> bool:
    a, b = a.lower(), b.lower()
    if a == b:
        return True
    if a.replace(".", "").isdigit() or b.replace(".", "").isdigit():
        return False  # IPv4 addresses: no short-name matching
    return a.split(".")[0] == b.split(".")[0]


def _join(host: str, port: int | None) -> str:
    if port is None:
        return host
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def _hostlist(raw: str) -> tuple[str, ...] | None:
    return tuple(expand_slurm_nodelist(raw)) or None


def _whole(raw: str) -> int:
    if not raw.isdigit():
        raise ValueError("expected a whole number")
    return int(raw)


def _count(raw: str) -> int:
    value = _whole(raw)
    if value < 1:
        raise ValueError("expected a positive count")
    return value


def _port(raw: str) -> int:
    value = _whole(raw)
    if not 0 < value < 65536:
        raise ValueError("expected a port number 1-65535")
    return value


def _id_count(raw: str) -> int | None:
    """Count GPU ids in "0,1,2,3" (or UUIDs); Slurm's old "NoDevFiles" means no information."""
    return None if raw == "NoDevFiles" else len([x for x in raw.split(",") if x.strip()])


def _gpu_spec(raw: str) -> int:
    """SLURM_GPUS_PER_NODE: "4", "a100:4" or "a100:2,v100:2" (summed)."""
    return sum(_whole(item.rsplit(":", 1)[-1].strip()) for item in raw.split(","))


def _nnodes_spec(raw: str) -> int | None:
    """torchrun's --nnodes: "2", or "MIN:MAX" (one value only if MIN == MAX)."""
    low, _, high = raw.partition(":")
    low_n, high_n = _count(low), _count(high or low)
    return low_n if low_n == high_n else None


def _nproc_spec(raw: str) -> int | None:
    """torchrun's --nproc-per-node: a count, or gpu/cpu/auto (decided when torchrun starts)."""
    return None if raw in ("gpu", "cpu", "auto", "xpu") else _count(raw)


def _per_node(r: _Reader, world: str) -> int | None:
    local = r.value("LOCAL_WORLD_SIZE")
    if not local:
        return None
    size, per = _count(world), _count(local)
    return size // per if size % per == 0 else None


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
