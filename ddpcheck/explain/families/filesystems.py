"""A full filesystem or a used-up quota, in the words the C library and torch print.

Runs inside ``ddpcheck explain``. Python's OSError prints the C library's strerror:
``[Errno 28] No space left on device`` (ENOSPC) and ``[Errno 122] Disk quota exceeded``
(EDQUOT), often with the path after it. torch.save on a full disk fails in its zip writer
(caffe2/serialize/inline_container.cc): ``PytorchStreamWriter failed writing file ...: file
write failed`` or ``unexpected pos N vs M`` (a short write); other write errors print those
too, so they are a hint. A line about /dev/shm, NCCL's shared-memory segments or torch's
(``</torch_...>``) is dev-shm-too-small (the memory and nccl families), never disk-full, even
when those families' rules are left out.

A checkpoint written to a read-only filesystem or a directory the job may not write prints
the C library's EROFS / EACCES with the path: ``OSError: [Errno 30] Read-only file system:
'/ckpt/step-3.pt'`` (a container's or a bind mount's ``ro``; a real run:
tests/data/explain/runs/s32-checkpoint-dir-readonly), ``PermissionError: [Errno 13] Permission
denied: '/ckpt/step-3.pt'``. Only a path that is a checkpoint's (``.pt``, ``.pth``, ``.ckpt``,
``.safetensors``, ``.bin``, a ``checkpoint``/``ckpt`` directory) makes it checkpoint-failed:
the same errno on a device file (``/dev/nvidia0``) or a cache directory is another story.
"""

from __future__ import annotations

from collections.abc import Sequence

from ddpcheck.diagnoses import CHECKPOINT_FAILED, DEV_SHM_TOO_SMALL, Problem
from ddpcheck.explain.causality import HINT
from ddpcheck.explain.codes import DISK_FULL
from ddpcheck.explain.matching import Hit, default_combine, observed_lines, pattern, where
from ddpcheck.launcher.spawn.initfile import INIT_FILE_UNUSABLE

NEXT = "ddpcheck run --stages checkpoint --checkpoint-dir DIR --checkpoint-size SIZE"
# Who else prints a bare "OSError: [Errno 28] No space left on device": CPython's
# multiprocessing (Lib/multiprocessing/synchronize.py SemLock.__init__, "sl = self._semlock =
# _multiprocessing.SemLock(") creates each lock and queue semaphore with sem_open, which glibc
# writes as a file in /dev/shm: a full /dev/shm fails it with ENOSPC and no path. The frame's
# code line right above the error (then Python 3.11's caret line) tells it apart.
SEMLOCK = r"(?P<semlock>_multiprocessing\.SemLock\()"
MAX_GAP = 3
# A checkpoint's path: its file's suffix, or a directory named for checkpoints.
CHECKPOINT_PATH = (r"'(?P<path>[^']*(?:\.(?:pt|pth|ckpt|safetensors|bin|tar)|"
                   r"(?i:checkpoint|ckpt)[^'/]*/[^']*))'")
CHECKPOINT_FIX = ("save checkpoints to a directory every saving rank can write (mounted "
                  "read-write in the container, owned by or writable for the job's user); "
                  "check it from each node with touch DIR/probe, or ddpcheck run --stages "
                  "checkpoint --checkpoint-dir DIR")


def combine_disk(hits: Sequence[Hit]) -> Problem | None:
    """disk-full, except an ENOSPC raised right under multiprocessing's SemLock frame (a full
    /dev/shm); a SemLock frame above anything else is no failure of its own."""
    frames = {(h.record.source, h.record.lineno) for h in hits
              if h.match.groupdict().get("semlock")}
    errors = [h for h in hits if not h.match.groupdict().get("semlock")]
    # sem_open's error names no path: "OSError: [Errno 28] No space left on device"
    shm = [h for h in errors if h.record.text.rstrip().endswith("No space left on device")
           and any((h.record.source, h.record.lineno - gap) in frames
                   for gap in range(1, MAX_GAP + 1))]
    if shm:
        return DEV_SHM_TOO_SMALL.problem(
            f"multiprocessing could not create a semaphore: {observed_lines(shm)}",
            cause="multiprocessing's locks and queues are POSIX semaphores, files in /dev/shm "
                  "(sem_open): ENOSPC there is /dev/shm full or too small (containers default "
                  "to 64 MB), not the disk",
            **where(shm))
    rest = [h for h in errors if h not in shm]
    return default_combine(rest) if rest else None



# torch/csrc/distributed/c10d/FileStore.cpp (init_method file://, 2.x): opening or locking the
# file throws c10d's DistStoreError with the C library's strerror alone, no path:
# "torch.distributed.DistStoreError: Read-only file system" (a real run:
# runs/s32e-file-init-readonly, the init file's directory on a read-only mount), "...:
# Permission denied", "...: No such file or directory" (a directory missing on this node).
# TCPStore's DistStoreErrors always say more ("wait timeout after", "Socket Timeout").
FILESTORE_ERRNO = (r"DistStoreError: (?P<err>Read-only file system|Permission denied|No such "
                   r"file or directory)\s*$")


PATTERNS = [
    # never a shared-memory line, whichever family reads it first: /dev/shm, NCCL's segments
    # (/dev/shm/nccl-*), torch's (</torch_...>) are dev-shm-too-small.
    # Who else prints ENOSPC (Linux inotify(7), inotify_add_watch(2)): the per-user inotify
    # watch limit (fs.inotify.max_user_watches) is reported as ENOSPC too; file watchers in
    # the job (watchdog, used by wandb, and others) name it: "OSError: [Errno 28] inotify
    # watch limit reached", "inotify_add_watch(...) failed: No space left on device".
    # Those lines are no full disk.
    pattern(DISK_FULL, r"^(?!.*(?:/dev/shm|shared memory|\bshm|torch_\d|inotify|"
            r"watch limit|file watchers))(?:.*?)"
            r"(?:No space left on device|\[Errno 28\]|\bENOSPC\b|"
            r"Disk quota exceeded|\[Errno 122\]|\bEDQUOT\b)|" + SEMLOCK, NEXT,
            combine=combine_disk),
    pattern(DISK_FULL, r"PytorchStreamWriter failed writing file .*file write failed|"
            r"inline_container\.cc:\d+\] \. unexpected pos \d+ vs \d+", NEXT, grade=HINT,
            cause="torch.save could not finish writing (a short write): most often the "
                  "checkpoint's filesystem is full or over quota; a network filesystem that "
                  "dropped the write prints the same"),
    pattern(INIT_FILE_UNUSABLE, FILESTORE_ERRNO,
            "ls -ld DIR and touch DIR/probe on every node (DIR: the --init-method file's "
            "directory)",
            cause="the file:// init file could not be opened ({err}): its directory is "
                  "missing on this node (storage not mounted, a typo), mounted read-only, or "
                  "not writable for the job's user",
            fix="point init_method=file://PATH at a directory on shared storage that every "
                "node mounts read-write and the job's user can write (or use env:// with "
                "MASTER_ADDR and MASTER_PORT)"),
    pattern(CHECKPOINT_FAILED, r"\[Errno 30\] Read-only file system: " + CHECKPOINT_PATH,
            NEXT, fix=CHECKPOINT_FIX,
            cause="a rank could not write its checkpoint ({path}): the directory is on a "
                  "read-only filesystem (a container's or a bind mount's read-only volume, a "
                  "filesystem remounted read-only after errors)"),
    pattern(CHECKPOINT_FAILED, r"\[Errno 13\] Permission denied: " + CHECKPOINT_PATH,
            NEXT, fix=CHECKPOINT_FIX,
            cause="a rank could not write or read its checkpoint ({path}): the job's user may "
                  "not (the directory belongs to another user, or a container runs as another "
                  "uid)"),
    # torch.save's own check (serialization.py _open_zipfile_writer_file ->
    # PyTorchFileWriter, caffe2/serialize/inline_container.cc, torch 1.13-2.13: "RuntimeError:
    # Parent directory /scratch/run-42/checkpoints does not exist."): only torch.save says it,
    # so it is a checkpoint (or another tensor file) written where this node has no such
    # directory (real run s33-save-missing-dir). A rank-dependent path, storage mounted on
    # some nodes only, or a directory only rank 0 created.
    pattern(CHECKPOINT_FAILED, r"RuntimeError: Parent directory (?P<path>.+?) does not exist",
            NEXT,
            cause="torch.save could not write into {path}: that directory does not exist on "
                  "this node (created by another rank or node only, storage not mounted here, "
                  "or a path of another machine)",
            fix="create the directory before saving on every node that saves (os.makedirs("
                "path, exist_ok=True) on each rank, after a barrier if rank 0 makes it), on "
                "storage every saving node mounts; check with ddpcheck run --stages "
                "checkpoint --checkpoint-dir DIR"),
]
