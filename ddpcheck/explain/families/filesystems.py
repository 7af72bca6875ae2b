"""A full filesystem or a used-up quota, in the words the C library and torch print.

Runs inside ``ddpcheck explain``. Python's OSError prints the C library's strerror:
``[Errno 28] No space left on device`` (ENOSPC) and ``[Errno 122] Disk quota exceeded``
(EDQUOT), often with the path after it. torch.save on a full disk fails in its zip writer
(caffe2/serialize/inline_container.cc): ``PytorchStreamWriter failed writing file ...: file
write failed`` or ``unexpected pos N vs M`` (a short write); other write errors print those
too, so they are a hint. A line about /dev/shm, NCCL's shared-memory segments or torch's
(``</torch_...>``) is dev-shm-too-small (the memory and nccl families), never disk-full, even
when those families' rules are left out.
"""

from __future__ import annotations

from ddpcheck.explain.causality import HINT
from ddpcheck.explain.codes import DISK_FULL
from ddpcheck.explain.matching import pattern

NEXT = "ddpcheck run --stages checkpoint --checkpoint-dir DIR --checkpoint-size SIZE"

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
            r"Disk quota exceeded|\[Errno 122\]|\bEDQUOT\b)", NEXT),
    pattern(DISK_FULL, r"PytorchStreamWriter failed writing file .*file write failed|"
            r"inline_container\.cc:\d+\] \. unexpected pos \d+ vs \d+", NEXT, grade=HINT,
            cause="torch.save could not finish writing (a short write): most often the "
                  "checkpoint's filesystem is full or over quota; a network filesystem that "
                  "dropped the write prints the same"),
]
