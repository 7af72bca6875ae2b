"""The catalogue of diagnoses: every problem ddpcheck can report, with a stable code.

Used on both sides: probes inside torchrun workers raise them, the launcher raises them
from preflight and from what it observes of torchrun, and the report renders them.
A Problem is plain data (JSON round-trip) so it can cross from worker to launcher in files.
It carries its role, set where it is made: a root cause (a rank killed, exited, timed out or
stopped), what peers see of one (a consequence when a root cause shares its stage), ddpcheck's
own failure (its code raised, so a check could not be completed: never the cluster's fault),
or neither (the default: a problem of its own).
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field, replace

# Problem.role: what the report does with it (report.build.mark_consequences).
ROOT_CAUSE = "root-cause"  # peers' echoes in its stage follow from it
CONSEQUENCE = "consequence"  # what a peer saw; a consequence when a root cause shares its stage
OWN_FAILURE = "own-failure"  # ddpcheck's own code failed: says nothing about the cluster
ROLES = ("", ROOT_CAUSE, CONSEQUENCE, OWN_FAILURE)


@dataclass(frozen=True)
class Problem:
    """One diagnosed problem: where, what was observed, why, and what to change."""

    code: str
    summary: str
    observed: str
    cause: str
    fix: str
    stage: str = ""
    hosts: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()
    consequence_of: str = ""  # code of the root cause this follows from, if any
    role: str = ""  # ROOT_CAUSE, CONSEQUENCE or "" (neither), see ROLES

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Problem:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        known["hosts"] = tuple(known.get("hosts", ()))
        known["ranks"] = tuple(int(r) for r in known.get("ranks", ()))
        if "role" not in known:  # written before problems carried their role
            entry = CATALOGUE.get(str(known.get("code", "")))
            known["role"] = entry.role if entry else ""
        return cls(**known)

    def where(self, **changes: object) -> Problem:
        """Return a copy with location fields (stage, hosts, ranks) filled in."""
        return replace(self, **changes)  # type: ignore[arg-type]


class ProblemFound(Exception):
    """Raised by a probe (or the launcher) to report one or more diagnosed problems."""

    def __init__(self, *problems: Problem) -> None:
        super().__init__("; ".join(f"{p.code}: {p.observed}" for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class Diagnosis:
    """A catalogue entry: stable code, one-line summary, default cause and fix."""

    code: str
    summary: str
    cause: str
    fix: str
    docs: str = field(default="", compare=False)
    role: str = field(default="", compare=False)  # the role of its problems, unless told

    def problem(self, observed: str, *, cause: str = "", fix: str = "", role: str | None = None,
                **where: object) -> Problem:
        """Build a Problem for this diagnosis; cause/fix/role override the catalogue defaults."""
        hosts = tuple(str(h) for h in where.pop("hosts", ()))  # type: ignore[union-attr]
        ranks = tuple(int(r) for r in where.pop("ranks", ()))  # type: ignore[union-attr]
        stage = str(where.pop("stage", ""))
        if where:
            raise TypeError(f"unknown location fields: {sorted(where)}")
        return Problem(self.code, self.summary, observed, cause or self.cause, fix or self.fix,
                       stage, hosts, ranks, role=self.role if role is None else role)

    def fail(self, observed: str, **kwargs: object) -> ProblemFound:
        """Return the exception a probe raises: ``raise WRONG_RESULT.fail("got 3, expected 4")``."""
        return ProblemFound(self.problem(observed, **kwargs))  # type: ignore[arg-type]


CATALOGUE: dict[str, Diagnosis] = {}


def _d(code: str, summary: str, cause: str, fix: str, role: str = "") -> Diagnosis:
    if code in CATALOGUE:
        raise ValueError(f"duplicate diagnosis code {code}")
    CATALOGUE[code] = Diagnosis(code, summary, cause, fix, role=role)
    return CATALOGUE[code]


def register(code: str, summary: str, cause: str, fix: str, role: str = "") -> Diagnosis:
    """Add a diagnosis to the catalogue next to the code that raises it.

    Registering the same code with the same text again returns the first entry (a module
    imported twice); the same code with other text is a conflict and raises ValueError, so
    two modules can never silently share a code. A module that calls this is named in
    CATALOGUE_MODULES (tests/unit/test_problem_docs.py checks the list is complete)."""
    entry = Diagnosis(code, summary, cause, fix, role=role)
    known = CATALOGUE.get(code)
    if known is None:
        CATALOGUE[code] = entry
        return entry
    if (known.summary, known.cause, known.fix, known.role) != (summary, cause, fix, role):
        raise ValueError(f"diagnosis code {code!r} is already registered with other text "
                         f"({known.summary!r}); pick another code or reuse the constant")
    return known


# Every module that registers diagnoses next to the code that raises them, besides this one:
# the catalogue is this module plus these. A new module calling ``register`` adds its name
# here; tests/unit/test_problem_docs.py fails when one is missing or one registers nothing.
CATALOGUE_MODULES: tuple[str, ...] = (
    "ddpcheck.cluster.board",
    "ddpcheck.cluster.checkin",
    "ddpcheck.cluster.ending",
    "ddpcheck.cluster.lifecycle",
    "ddpcheck.cluster.namecheck",
    "ddpcheck.cluster.nodeflow",
    "ddpcheck.cluster.pathjudge",
    "ddpcheck.cluster.peerprobe",
    "ddpcheck.cluster.userjob",
    "ddpcheck.explain.codes",
    "ddpcheck.explain.families.addresses",
    "ddpcheck.explain.families.workers",
    "ddpcheck.judgements.compare",
    "ddpcheck.judgements.expectations",
    "ddpcheck.judgements.links",
    "ddpcheck.judgements.ranklayout",
    "ddpcheck.judgements.readiness",
    "ddpcheck.judgements.straggler",
    "ddpcheck.launcher.fdlimit",
    "ddpcheck.launcher.postmortem",
    "ddpcheck.launcher.spawn.formation",
    "ddpcheck.launcher.spawn.initfile",
    "ddpcheck.launcher.spawn.mastercheck",
    "ddpcheck.node.diskspace",
    "ddpcheck.node.gpuhealth",
    "ddpcheck.node.gpustate",
    "ddpcheck.node.infiniband",
    "ddpcheck.node.nccl",
    "ddpcheck.node.ncclinfo",
    "ddpcheck.node.ncclstack",
    "ddpcheck.node.netprobe",
    "ddpcheck.node.nvlinkfabric",
    "ddpcheck.node.socketifname",
    "ddpcheck.node.xid",
    "ddpcheck.scheduler.contradictions",
    "ddpcheck.scheduler.detect",
    "ddpcheck.scheduler.gpubinding",
)


def load_catalogue() -> dict[str, Diagnosis]:
    """The whole catalogue: import every module of CATALOGUE_MODULES (none imports torch)."""
    for name in CATALOGUE_MODULES:
        importlib.import_module(name)
    return CATALOGUE


# --- node stage -------------------------------------------------------------------------
CPU_ONLY_TORCH = _d(
    "cpu-only-torch-on-gpu-node", "torch is a CPU-only build but this node has NVIDIA GPUs",
    "pip installed the CPU wheel of torch (e.g. from the default index on a machine without CUDA)",
    "install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu124")
GPU_COUNT_MISMATCH = _d(
    "gpu-count-mismatch", "torch sees a different number of GPUs than nvidia-smi",
    "CUDA_VISIBLE_DEVICES hides GPUs, or a GPU has fallen off the bus / failed (check dmesg, Xid)",
    "unset or correct CUDA_VISIBLE_DEVICES; if nvidia-smi lists fewer GPUs than installed, "
    "drain the node and reset the GPU")
TOO_FEW_GPUS = _d(
    "too-few-gpus", "the job needs more GPUs per node than are visible",
    "--nproc-per-node x --gpus-per-replica exceeds the GPUs this node exposes",
    "lower --nproc-per-node (or --gpus-per-replica), or request more GPUs (e.g. --gres=gpu:N)")
CUDA_VISIBLE_DEVICES_INVALID = _d(
    "cuda-visible-devices-invalid", "CUDA_VISIBLE_DEVICES is malformed or names missing GPUs",
    "the variable lists an index or UUID that does not exist, or repeats one",
    "set CUDA_VISIBLE_DEVICES to distinct indices that nvidia-smi -L lists, or unset it")
NCCL_LIBRARY_MISMATCH = _d(
    "nccl-library-mismatch",
    "the libnccl loaded is older than the one torch was built with, or two are loaded",
    "LD_LIBRARY_PATH or a system libnccl shadows the NCCL bundled with torch",
    "remove the other libnccl from LD_LIBRARY_PATH, or match its version to torch's")
BACKEND_UNAVAILABLE = _d(
    "backend-unavailable", "the requested torch.distributed backend is not available",
    "this torch build was compiled without it (NCCL needs a CUDA build on Linux)",
    "pass --backend gloo, or install a torch build with the backend")
DEV_SHM_TOO_SMALL = _d(
    "dev-shm-too-small", "/dev/shm is too small for NCCL and DataLoader workers",
    "containers default to a 64 MB /dev/shm",
    "run the container with --shm-size=8g (docker) or mount a larger tmpfs on /dev/shm")
BAD_SOCKET_IFNAME = _d(
    "socket-ifname-invalid", "a *_SOCKET_IFNAME variable names an unusable interface",
    "the interface does not exist on this node, is down, or has no IPv4 address",
    "set the variable to an interface that exists and is up on every node, or unset it")

# --- rendezvous / world -----------------------------------------------------------------
WORLD_SIZE_MISMATCH = _d(
    "world-size-mismatch", "the world that formed is not the size the job expects",
    "nodes were started with different --nodes/--nproc-per-node, or WORLD_SIZE is set by hand",
    "start every node with the same --nodes and --nproc-per-node")
VERSION_MISMATCH = _d(
    "version-mismatch", "ranks run different versions of the software stack",
    "nodes have different environments (module loads, containers, virtualenvs)",
    "use one environment on every node (same container image or venv on shared storage)")
ARCH_MISMATCH = _d(
    "arch-mismatch", "ranks run on different CPU architectures",
    "the allocation mixes node types (e.g. aarch64 next to x86_64)",
    "constrain the job to one node type (Slurm: --constraint / partition)")
ENV_MISMATCH = _d(
    "env-mismatch", "a distributed setting differs across ranks",
    "the variable is set in one node's shell profile or job step but not the others",
    "export the same value on every node (or unset it everywhere)")
COLLECTION_MISMATCH = _d(
    "collection-mismatch", "ranks collected different probes",
    "ddpcheck versions or --stages differ across nodes",
    "install the same ddpcheck everywhere and pass the same --stages")
DUPLICATE_DEVICE = _d(
    "duplicate-device", "two local ranks drive the same GPU",
    "device chosen from the global rank, or CUDA_VISIBLE_DEVICES differs per rank",
    "pick the device from LOCAL_RANK (torch.cuda.set_device(local_rank * K))")

# --- collectives / ddp / placement / checkpoint -------------------------------------------
WRONG_COLLECTIVE_RESULT = _d(
    "wrong-collective-result", "a collective returned a wrong value",
    "a faulty transport, GPU memory error or mismatched backend build",
    "rerun with NCCL_DEBUG=INFO (or GLOO debug) and exclude the named host")
COLLECTIVE_FAILED = _d(
    "collective-failed", "a collective raised an error",
    "a peer crashed or stalled, or the transport between ranks broke",
    "see the other problems for the rank that failed first; check the named hosts' network",
    CONSEQUENCE)
DDP_DIVERGED = _d(
    "ddp-diverged", "DDP parameters differ across ranks or from the single-process reference",
    "gradients were not averaged correctly (broken all-reduce, mixed precision settings)",
    "check the collectives stage; make sure every rank builds the same model")
SAMPLER_SHARDS_WRONG = _d(
    "sampler-shards-wrong", "DistributedSampler shards overlap or miss samples",
    "the rank, world size or local rank a job reads from its launcher's variables disagree "
    "with the process group, or the same seed shuffles differently on some ranks",
    "build the sampler from the launcher's variables of this launch (torchrun: RANK, "
    "WORLD_SIZE, LOCAL_RANK; srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and one torch "
    "version everywhere")
DEVICE_PLAN_INVALID = _d(
    "device-plan-invalid", "the rank-to-device plan for model parallelism is invalid",
    "local_rank x gpus-per-replica goes past the visible devices, or devices repeat",
    "make nproc-per-node x gpus-per-replica <= GPUs per node")
PLACEMENT_FAILED = _d(
    "placement-failed", "a model split across a replica's devices failed to run",
    "a device in the plan is unusable or peer access between them fails",
    "check the devices named; run nvidia-smi topo -m on the host")
CHECKPOINT_NOT_SHARED = _d(
    "checkpoint-dir-not-shared", "the checkpoint directory is not shared between nodes",
    "the path is node-local storage (e.g. /tmp or a local disk) on some nodes",
    "pass --checkpoint-dir on a filesystem every node mounts (NFS, Lustre, GPFS)")
CHECKPOINT_FAILED = _d(
    "checkpoint-failed", "saving or loading a checkpoint failed",
    "the directory is not writable or the filesystem is full",
    "pass a writable --checkpoint-dir with free space")

# --- runtime, seen by the worker agreement or by the launcher ---------------------------------
RANK_UNRESPONSIVE = _d(
    "rank-unresponsive", "ranks did not arrive before the stage deadline",
    "the process is stopped, hung in a collective, or starved (swap, CPU throttling)",
    "inspect the named host (py-spy dump --pid PID); raise --probe-timeout if the node is "
    "just slow", CONSEQUENCE)
RANK_KILLED = _d(
    "rank-killed", "a rank was killed by a signal",
    "the OOM killer, a scheduler limit, or someone killed the process",
    "check dmesg / the job's memory limit on the named host", ROOT_CAUSE)
RANK_EXITED = _d(
    "rank-exited", "a rank exited before its work (the probes, or your job's steps) was done",
    "a crash or error in the worker process",
    "rerun with -v to see the worker's output", ROOT_CAUSE)
DDPCHECK_ERROR = _d(
    "ddpcheck-error", "ddpcheck's own code failed, so this check could not be completed",
    "a bug in ddpcheck or in a package it uses, not a fault of the cluster: no peer crashed "
    "and no transport broke because of it",
    "report it to ddpcheck's maintainers with these lines; meanwhile run the other stages "
    "(--stages without this one)", OWN_FAILURE)
PROBE_TIMEOUT = _d(
    "probe-timeout", "a probe ran past its deadline",
    "a collective or device call hung",
    "inspect the named host; raise --probe-timeout if the node is just slow", ROOT_CAUSE)
RUN_DEADLINE = _d(
    "run-deadline-exceeded", "the whole run passed its --timeout",
    "a stage or the rendezvous hung",
    "see the other problems; raise --timeout if the cluster is just slow")
RUN_INTERRUPTED = _d(
    "run-interrupted", "the run was interrupted before it finished",
    "Ctrl-C, or the scheduler ended the job (time limit, scancel) with SIGTERM",
    "rerun; under Slurm give the job more time (--time) than ddpcheck's --timeout")
LAUNCH_FAILED = _d(
    "launch-failed", "the launcher failed before its workers ran",
    "torchrun could not start the workers",
    "rerun with -v to see torchrun's output")
DUPLICATE_LOCAL_RANK = _d(
    "duplicate-local-rank", "two ranks on one host have the same local rank",
    "two launchers run on the same host (e.g. srun started more than one ddpcheck per node)",
    "start exactly one ddpcheck (or torchrun) per node: srun --ntasks-per-node=1")
