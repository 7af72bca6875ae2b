"""What a training job computes as its rank, world size and local rank, and whether it fits.

Pure; used by the ddp stage's sampler probe inside every worker, judged on rank 0. A job
does not ask the process group who it is: it reads the launcher's variables (torchrun:
RANK, WORLD_SIZE, LOCAL_RANK; ranks started by srun: SLURM_PROCID, SLURM_NTASKS,
SLURM_LOCALID). The DistributedSampler it builds from those numbers is only disjoint and
complete when they match the process group, and its device only distinct when the local
ranks of a host are 0..k-1.
"""

from __future__ import annotations

from collections.abc import Mapping

# (rank, world size, local rank) variables per launch.
TORCHRUN = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
SRUN = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID")


def job_identity(env: Mapping[str, str]) -> dict:
    """The numbers a job launched like this one reads, with the variables they come from."""
    names = TORCHRUN if env.get("TORCHELASTIC_RUN_ID") or "RANK" in env else SRUN
    rank, world, local = (_int(env.get(n)) for n in names)
    return {"vars": list(names), "rank": rank, "world": world, "local": local}


def _int(raw: str | None) -> int | None:
    try:
        return int(str(raw).strip())
    except (TypeError, ValueError):
        return None


def judge(ids: Mapping[int, dict], hosts: Mapping[int, str], world_size: int) -> list[str]:
    """Lines naming where the job's numbers disagree with the process group (rank: index)."""
    out = []
    first = next(iter(ids.values()), None)
    if first is None:
        return out
    rank_var, world_var, local_var = first["vars"][:3]
    wrong = {r: v["rank"] for r, v in ids.items() if v["rank"] != r}
    if wrong:
        out.append(f"{rank_var} differs from the process-group rank on ranks "
                   + ", ".join(f"{r} ({rank_var}={v})" for r, v in sorted(wrong.items())[:8]))
    worlds = {v["world"] for v in ids.values()}
    if worlds != {world_size}:
        out.append(f"{world_var} is {sorted(worlds, key=str)} but the world has {world_size} ranks")
    by_host: dict[str, list[int | None]] = {}
    for r, v in ids.items():
        by_host.setdefault(hosts.get(r, "?"), []).append(v["local"])
    for host, locals_ in sorted(by_host.items()):
        if sorted(locals_, key=lambda x: -1 if x is None else x) != list(range(len(locals_))):
            out.append(f"{local_var} on {host} is {sorted(locals_, key=str)}, expected "
                       f"0..{len(locals_) - 1}")
    return out
