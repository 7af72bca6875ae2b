"""The open-file limit the user's job will have, against what its backend and store need.

Runs in every node's launcher, before torchrun. The user's job inherits the soft
RLIMIT_NOFILE of the shell (or of slurmd, unless Slurm propagates the submitting shell's:
PropagateResourceLimits), so that soft limit is the one judged; ddpcheck never raises it
silently. What one process of the job holds:

- gloo: ``Context::connectFullMesh`` opens one pair, one TCP socket, per other rank of each
  process group (gloo/rendezvous/context.cc in pytorch/pytorch's gloo submodule): a world
  of R ranks needs R-1 sockets per worker, past the usual soft limit of 1,024 at ~1,000
  ranks (EMFILE, "Too many open files", mid-connect).
- NCCL: a bounded number per rank, whatever R: its bootstrap ring (a listening socket and
  one to each ring neighbour, src/bootstrap.cc), proxy and network connections per channel
  to ring/tree neighbours, and the cuMem/IPC handles of the peers on its node; NCCL_BUFFSIZE
  aside, ~NCCL_FILES covers it.
- The store's host: the process hosting the job's c10d TCPStore (the torchrun agent on the
  rendezvous endpoint; rank 0 with env://) holds one connection per client, every worker of
  every node and every agent: R + N.

ddpcheck's own run adds subgroups the user's job does not have (its scaling worlds, one
leader per node, the ranks of a node): only when those alone pass the soft limit does the
launcher raise it for its own torchrun, and says so in the report.
"""

from __future__ import annotations

import resource
from collections.abc import Callable
from dataclasses import dataclass, field

from ddpcheck.diagnoses import Problem, register
from ddpcheck.stages import PREFLIGHT

BASE_FILES = 256  # a torch worker's own files: libraries, pipes, the store, rank files
NCCL_FILES = 256  # NCCL's bootstrap, proxy, network and IPC descriptors per rank (bounded)

OPEN_FILE_LIMIT = register(
    "open-file-limit", "the open-file limit is below what the job's connections need",
    "gloo opens one socket per other rank in every process group (a full mesh) and the "
    "process hosting the c10d store one per worker and agent, so a large world needs more "
    "descriptors than the default soft limit of 1,024 allows; the job inherits the soft "
    "limit of the shell or of slurmd",
    "raise the soft limit before the job starts (ulimit -n N in the job script, within the "
    "hard limit; /etc/security/limits.conf nofile; LimitNOFILE= in slurmd's unit; Slurm: "
    "PropagateResourceLimits=NOFILE or srun --propagate=NOFILE)")


@dataclass(frozen=True)
class FileLimits:
    """The soft/hard limits, what the user's job and ddpcheck's run need, and the verdict."""

    soft: int
    hard: int
    job_need: int  # one worker of the user's job with this backend
    store_need: int  # the process hosting the store (0 on other nodes)
    own_need: int  # one worker of ddpcheck's run (its subgroups included)
    raised_to: int | None = None  # ddpcheck raised its own soft limit to this
    problems: list[Problem] = field(default_factory=list)

    def note(self) -> str:
        soft = "unlimited" if self.soft == resource.RLIM_INFINITY else str(self.soft)
        text = (f"open files: the job's soft limit is {soft}; a worker needs ~{self.job_need}"
                + (f", the store's host ~{self.store_need}" if self.store_need else ""))
        if self.raised_to:
            text += (f"; ddpcheck raised its own soft limit to {self.raised_to} for its extra "
                     "subgroups (your job does not need it)")
        return text


def files_needed(world: int, nodes: int, nproc: int) -> int:
    """Descriptors one ddpcheck worker may hold on gloo: its meshes (world, scaling
    subgroups, leaders, node)."""
    scaling = 2 * world  # subgroups of 1, 2, 4 ... world ranks: under 2 x world in all
    return BASE_FILES + (world - 1) + scaling + (nodes - 1) + (nproc - 1)


def job_files_needed(world: int, backend: str) -> int:
    """Descriptors one worker of the user's job needs: gloo's world mesh, or NCCL's bound."""
    if backend == "nccl":
        return BASE_FILES + NCCL_FILES
    return BASE_FILES + (world - 1)


def store_files_needed(world: int, nodes: int) -> int:
    """Descriptors of the process hosting the c10d store: one per worker and per agent."""
    return BASE_FILES + world + nodes


def _resolve(backend: str) -> str:
    if backend != "auto":
        return backend
    from ddpcheck.node import gpu  # only when it matters: nvidia-smi is not free

    return "nccl" if gpu.list_gpus() else "gloo"


def _fix(need: int, node: str, hard: int) -> str:
    within = hard == resource.RLIM_INFINITY or hard >= need
    first = (f"ulimit -n {need} in the job script before torchrun (the hard limit {hard} "
             "allows it)" if within else
             f"raise the hard limit to at least {need} on {node} (/etc/security/limits.conf: "
             f"* hard nofile {need}; LimitNOFILE={need} in slurmd's unit), then ulimit -n "
             f"{need} in the job script")
    return (f"{first}; Slurm: PropagateResourceLimits=NOFILE (slurm.conf) or srun "
            "--propagate=NOFILE")


def open_file_limits(world: int, nproc: int, node: str, *, backend: str = "gloo",
                     hosts_store: bool | Callable[[], bool] = False,
                     limits: tuple[int, int] | None = None) -> FileLimits:
    """Judge the soft limit against the user's job's need; raise it only for ddpcheck's own
    extra subgroups (never to pass a job that would fail).

    ``hosts_store``: whether this node hosts the job's store, or a callable that finds out
    (asked only when the soft limit is below the store's need).

    ``limits`` (soft, hard) is for tests; without it the process's own limits are read and,
    where ddpcheck alone needs more, its soft limit is raised for its torchrun.
    """
    nodes = max(1, world // max(nproc, 1))
    soft, hard = limits or resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited_soft = soft == resource.RLIM_INFINITY
    gloo_own = files_needed(world, nodes, nproc)
    if unlimited_soft or soft >= max(gloo_own, store_files_needed(world, nodes)):
        return FileLimits(soft, hard, job_files_needed(world, "gloo"), 0, gloo_own)
    kind = _resolve(backend)
    job = job_files_needed(world, kind)
    here = hosts_store() if callable(hosts_store) else hosts_store
    store = store_files_needed(world, nodes) if here else 0
    own = gloo_own if kind == "gloo" else job
    problems = []
    # one problem per node, for the larger need: fixing it fixes the other
    for need, who in sorted(((job, f"each {kind} worker"),
                             (store, "the process hosting the store")), reverse=True):
        if need and soft < need:
            why = ("gloo: one socket per other rank" if kind == "gloo" and need == job
                   else "one connection per worker and agent" if need == store
                   else "NCCL's sockets and IPC handles")
            problems.append(OPEN_FILE_LIMIT.problem(
                f"a world of {world} ranks ({nproc} per node, {kind}) needs about {need} open "
                f"files for {who} on {node} ({why}), but the job's soft limit is {soft} "
                f"(hard {'unlimited' if hard == resource.RLIM_INFINITY else hard})",
                fix=_fix(need, node, hard), hosts=[node], stage=PREFLIGHT))
            break
    raised = None
    if not problems and soft < max(own, store) and (hard == resource.RLIM_INFINITY
                                                    or hard >= max(own, store)):
        raised = max(own, store)
        if limits is None:  # ddpcheck's own subgroups only: the job's need already fits
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    return FileLimits(soft, hard, job, store, own, raised, problems)


def open_files_problems(world: int, nproc: int, node: str,
                        limits: tuple[int, int] | None = None, *, backend: str = "gloo",
                        hosts_store: bool | Callable[[], bool] = False) -> list[Problem]:
    """The problems of :func:`open_file_limits` (the launcher's preflight)."""
    return open_file_limits(world, nproc, node, backend=backend, hosts_store=hosts_store,
                            limits=limits).problems
