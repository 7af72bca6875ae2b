"""The open-file limit against what gloo's full mesh will open; runs in every node's launcher.

gloo connects every rank of a process group to every other: ``Context::connectFullMesh``
creates one pair, one TCP socket, per other rank (gloo/rendezvous/context.cc in
pytorch/pytorch's gloo submodule), and each ``new_group`` a rank belongs to is another
mesh. So a rank holds about as many sockets as the ranks of every group it is in: the
world, plus ddpcheck's subgroups (scaling worlds 1, 2, 4 ... R; one leader per node; the
ranks of a node). Past the soft RLIMIT_NOFILE (often 1,024) gloo fails mid-connect with
EMFILE ("Too many open files"). Before torchrun starts, the launcher raises its soft limit
up to the hard limit (torchrun and the workers inherit it); a need above the hard limit is
a problem that says which limit to raise, before anything fails.
"""

from __future__ import annotations

import resource

from ddpcheck.diagnoses import Problem, register
from ddpcheck.stages import PREFLIGHT

BASE_FILES = 256  # a torch worker's own files: libraries, pipes, the store, rank files

OPEN_FILE_LIMIT = register(
    "open-file-limit", "the open-file limit is below what gloo's connections need",
    "gloo opens one socket per other rank in every process group (a full mesh), so a large "
    "world needs more descriptors than the default soft limit of 1,024 allows",
    "raise the hard limit of open files (ulimit -Hn; /etc/security/limits.conf nofile, "
    "LimitNOFILE= in slurmd's systemd unit, Slurm: srun --propagate=NOFILE)")


def files_needed(world: int, nodes: int, nproc: int) -> int:
    """Descriptors one worker may hold: its meshes (world, scaling subgroups, leaders, node)."""
    scaling = 2 * world  # subgroups of 1, 2, 4 ... world ranks: under 2 x world in all
    return BASE_FILES + (world - 1) + scaling + (nodes - 1) + (nproc - 1)


def open_files_problems(world: int, nproc: int, node: str,
                        limits: tuple[int, int] | None = None) -> list[Problem]:
    """Raise the soft limit as far as needed (within the hard limit), or say what to raise.

    ``limits`` (soft, hard) is for tests; without it the process's own limits are read and
    the soft limit is raised for real (inherited by torchrun and its workers).
    """
    nodes = max(1, world // max(nproc, 1))
    need = files_needed(world, nodes, nproc)
    soft, hard = limits or resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = hard == resource.RLIM_INFINITY
    if soft != resource.RLIM_INFINITY and soft < need and (unlimited or hard >= need):
        if limits is None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
        return []
    if unlimited or hard >= need or soft == resource.RLIM_INFINITY:
        return []
    return [OPEN_FILE_LIMIT.problem(
        f"a world of {world} ranks ({nproc} per node) needs about {need} open files per "
        f"worker on {node} (gloo: one socket per peer in each process group), but the hard "
        f"limit is {hard} (soft {soft})",
        fix=f"raise the hard limit of open files to at least {need} on {node} (ulimit -Hn "
        f"{need} as root; /etc/security/limits.conf: * hard nofile {need}; LimitNOFILE={need} "
        "in slurmd's unit; Slurm: srun --propagate=NOFILE)",
        hosts=[node], stage=PREFLIGHT)]
