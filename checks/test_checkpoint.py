"""Stage *checkpoint*: a snapshot saved by rank 0 loads on every rank (``--checkpoint-dir``).

Runs inside every worker. Rank 0 writes a small state dict with a fresh nonce; after all
ranks agree it was written, each loads it. A rank on another host that cannot see the file
means the directory is not shared between nodes. Rank 0 measures the directory's free space
and shows it; a save that fails on a full filesystem (torch.save raises RuntimeError there,
not OSError) is named checkpoint-dir-full with that space, never a crash of rank 0.
Cost: two agreements (O(1) store operations per rank; rank 0 reads O(R) small values).
"""

from __future__ import annotations

import os
import secrets

import pytest
import torch

from ddpcheck.diagnoses import CHECKPOINT_FAILED, CHECKPOINT_NOT_SHARED, ProblemFound
from ddpcheck.node.diskspace import (
    CHECKPOINT_DIR_FULL,
    disk_space,
    errno_text,
    full_after_failed_save,
    size_text,
)
from ddpcheck.ranges import ranks_with_hosts
from ddpcheck.stages import stage
from ddpcheck.worker.world import first_line


@stage("checkpoint")
def test_checkpoint_saved_by_rank_0_loads_on_every_rank(world, settings, record):
    """A checkpoint rank 0 saves in --checkpoint-dir is readable, intact, on every rank."""
    if settings.checkpoint_dir is None:
        pytest.skip("no --checkpoint-dir given (pass one on shared storage to probe it)")
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "local")
    path = settings.checkpoint_dir / f"ddpcheck-probe-{run_id}.pt"
    saved = {"nonce": None, "error": None, "full": None, "space": None}
    if world.rank == 0:
        saved.update(_save(path, settings.checkpoint_dir))
    # Cost: one decide (rank 0's nonce back to all, O(1) bytes) and one gather (judged on
    # rank 0): 6 store operations per non-zero rank, O(R) bytes read by rank 0 only.
    root, _ = world.decide("ckpt-saved", saved, lambda ex: ex.values.get(0))
    root = root or {"error": "rank 0 did not report"}
    if root.get("space"):
        record.measure("checkpoint_dir_free_bytes", root["space"]["free"])
    if root.get("full"):
        raise CHECKPOINT_DIR_FULL.fail(
            f"rank 0 could not save {path}: {root['error']}; the filesystem has "
            f"{root['full']}", ranks=[0])
    if root.get("error"):
        raise CHECKPOINT_FAILED.fail(f"rank 0 could not save {path}: {root['error']}", ranks=[0])
    need = settings.checkpoint_size
    if need and root.get("space") and root["space"]["free"] < need:
        raise CHECKPOINT_DIR_FULL.fail(
            f"{settings.checkpoint_dir} has {size_text(root['space']['free'])} free; one "
            f"checkpoint needs {size_text(need)} (--checkpoint-size)", ranks=[0])
    try:
        loaded = torch.load(path, weights_only=True)
        ok = loaded["nonce"] == root["nonce"] and torch.equal(loaded["weights"],
                                                              torch.arange(1000.0))
        mine = "ok" if ok else "stale or corrupt"
    except FileNotFoundError:
        mine = "missing"
    except Exception as exc:  # unreadable file: report what the loader said
        mine = f"error: {first_line(exc)}"
    seen = world.gather("ckpt-loaded", mine).values
    if world.rank != 0:
        record.key_figure(f"loaded here: {mine}")  # rank 0's verdict names every failure
        return
    _cleanup(path)
    bad = {r: v for r, v in seen.items() if v != "ok"}
    free = f", {size_text(root['space']['free'])} free" if root.get("space") else ""
    record.key_figure(f"{len(seen) - len(bad)}/{len(seen)} ranks loaded{free}")
    if bad:
        raise ProblemFound(*_problems(bad, world, path))


def _save(path, directory):
    """Rank 0's save: the nonce, or the error and, when the disk is full, its free space.

    Any exception of the save is the filesystem's story here: torch.save raises RuntimeError
    on a full disk ("PytorchStreamWriter failed writing file ...")."""
    weights = torch.arange(1000.0)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        nonce = secrets.token_hex(8)
        torch.save({"nonce": nonce, "weights": weights}, path)
        out = {"nonce": nonce}
    except Exception as exc:  # noqa: BLE001 - OSError or torch's RuntimeError, both reported
        error = errno_text(exc)
        full = full_after_failed_save(directory, error, weights.numel() * 4)
        out = {"error": error, "full": full.text() if full else None}
        _cleanup(path)  # a partial file must not be loaded by the others
    space = disk_space(directory)
    if space is not None:
        out["space"] = {"free": space.free, "total": space.total}
    return out


def _problems(bad, world, path):
    hosts = world.hosts_by_rank
    missing = sorted(r for r, v in bad.items() if v == "missing")
    other = sorted(r for r, v in bad.items() if v != "missing")
    out = []
    if missing:
        out.append(CHECKPOINT_NOT_SHARED.problem(
            f"{path} written by rank 0 ({hosts.get(0, '?')}) does not exist on rank "
            f"{ranks_with_hosts(missing, hosts)}", ranks=missing))
    if other:
        out.append(CHECKPOINT_FAILED.problem(
            f"loading {path} failed on rank {ranks_with_hosts(other, hosts)}: "
            f"{bad[other[0]]}", ranks=other))
    return out


def _cleanup(path):
    try:
        path.unlink()
    except OSError:
        pass
