"""Before a file:// launch: the init file's directory is shared, lockable, and the file is new.

Runs in the launcher of every node with ``--init-method file:///PATH``, before any rank
starts; problems go on the node's check-in card, so every node names them. torch's FileStore
(torch/csrc/distributed/c10d/FileStore.cpp) keeps every key in that one file, takes flock(2)
locks on it for each operation (LOCK_SH to read, LOCK_EX to write), and removes it when the
last of the world_size stores is destroyed; a killed rank leaves it behind, and the next run
reads the old run's keys (a stale barrier count, dead peers' addresses) and hangs or joins
the wrong world. So: the directory exists and is writable here, flock works there, the file
does not exist yet, and (several nodes) every node sees a token the endpoint node wrote.

ddpcheck's own ranks form their world through a fresh file next to the user's
(``.ddpcheck-init-<nonce>``), so a check never leaves a stale file in the user's path.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddpcheck import storekeys
from ddpcheck.diagnoses import Problem, register

INIT_FILE_STALE = register(
    "init-file-stale", "the file:// init file already exists before the run",
    "an earlier run left it (a rank was killed, so FileStore never removed it); the new run "
    "reads its keys and hangs or joins the wrong world",
    "remove the file before every run, or give every run a fresh path (e.g. "
    "file:///shared/init-$SLURM_JOB_ID)")
INIT_FILE_NOT_SHARED = register(
    "init-file-not-shared", "the file:// init file is not on storage every node sees",
    "the path is on node-local storage (/tmp, a local scratch disk), or a different "
    "filesystem is mounted there on some nodes: each node would write its own file and "
    "wait for ranks that never appear",
    "put the init file on a filesystem mounted on every node (NFS, Lustre, GPFS), or use "
    "env:// / tcp://")
INIT_FILE_NO_LOCKS = register(
    "init-file-no-locks", "the file:// init file's filesystem does not support flock",
    "FileStore takes flock(2) locks on every operation; this filesystem (some NFS mounts "
    "with nolock, FUSE or object-store mounts) refuses them",
    "use a filesystem with working locks (mount NFS without nolock), or use env:// / tcp://")
INIT_FILE_UNUSABLE = register(
    "init-file-unusable", "the file:// init file's directory is missing or not writable",
    "the directory does not exist on this node (storage not mounted, or a typo), or this "
    "user cannot create files there",
    "create the directory on shared storage with write access for the job's user, or fix "
    "the path in --init-method")

TOKEN_KEY = storekeys.INITFILE_TOKEN
Locker = Callable[[int, int], Any]


def init_file_problems(path: str, node: str, locker: Locker = fcntl.flock,
                       now: Callable[[], float] = time.time) -> list[Problem]:
    """This node's problems with the init file: directory, locks, stale file."""
    directory = Path(path).parent
    if not directory.is_dir():
        return [INIT_FILE_UNUSABLE.problem(
            f"directory {directory} of --init-method file://{path} does not exist on {node}",
            hosts=[node])]
    problem = lock_problem(directory, node, locker)
    if problem:
        return [problem]
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [INIT_FILE_UNUSABLE.problem(f"cannot stat {path} on {node}: {exc.strerror}",
                                           hosts=[node])]
    return [judge_stale(path, found.st_size, now() - found.st_mtime, node)]


def judge_stale(path: str, size: int, age_s: float, node: str) -> Problem:
    """The problem of an init file that exists before any rank of this run started."""
    directory = os.path.dirname(path) or "/"
    return INIT_FILE_STALE.problem(
        f"{path} already exists on {node} before any rank started ({size} bytes, last "
        f"written {_age(age_s)} ago): an earlier run left it", hosts=[node],
        fix=f"remove it (rm {path}) before every run, or give every run a fresh path, e.g. "
            f"file://{directory.rstrip('/')}/init-$SLURM_JOB_ID")


def lock_problem(directory: Path, node: str, locker: Locker = fcntl.flock) -> Problem | None:
    """Create a probe file in directory and take an exclusive flock on it, as FileStore does."""
    probe = directory / f".ddpcheck-lock-{node}-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        return INIT_FILE_UNUSABLE.problem(
            f"cannot create a file in {directory} on {node}: {exc.strerror}", hosts=[node])
    try:
        locker(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        locker(fd, fcntl.LOCK_UN)
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "error")
        return INIT_FILE_NO_LOCKS.problem(
            f"flock(LOCK_EX) on a file in {directory} failed on {node}: {name} "
            f"({exc.strerror})", hosts=[node])
    finally:
        os.close(fd)
        probe.unlink(missing_ok=True)
    return None


def new_nonce() -> str:
    return uuid.uuid4().hex[:16]


def ranks_file(path: str, nonce: str) -> str:
    """The fresh file ddpcheck's ranks use, next to the user's (same directory, same FS)."""
    return str(Path(path).parent / f".ddpcheck-init-{nonce}")


def token_path(path: str, nonce: str) -> Path:
    return Path(path).parent / f".ddpcheck-share-{nonce}"


def post_token(store: Any, path: str, nonce: str, node: str) -> list[Problem]:
    """On the endpoint node: write the token file, then tell the others its nonce."""
    token = token_path(path, nonce)
    try:
        token.write_text(nonce)
    except OSError as exc:
        return [INIT_FILE_UNUSABLE.problem(f"cannot write {token} on {node}: {exc.strerror}",
                                           hosts=[node])]
    store.set(TOKEN_KEY, json.dumps({"nonce": nonce, "host": node}))
    return []


def check_token(raw: bytes | None, path: str, node: str) -> tuple[str, list[Problem]]:
    """On the other nodes: (nonce, problems) once the endpoint node's token key arrived."""
    if raw is None:  # the endpoint node stopped before posting: its own report says why
        return "", []
    data = json.loads(raw)
    nonce, writer = str(data["nonce"]), str(data["host"])
    token = token_path(path, nonce)
    try:
        seen = token.read_text()
    except OSError as exc:
        seen = f"<{exc.strerror}>"
    if seen == nonce:
        return nonce, []
    return nonce, [INIT_FILE_NOT_SHARED.problem(
        f"{node} does not see {token}, which {writer} wrote in {token.parent} "
        f"({'no such file' if seen.startswith('<') else 'different content'}): "
        f"{token.parent} on {node} is not the same storage as on {writer}",
        hosts=[node])]


def remove_quietly(*paths: str | Path) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass


def _age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s} s"
    return f"{s // 60} min" if s < 7200 else f"{s // 3600} h"
