"""NCCL's shared-memory lines (and torch's for the DataLoader's): /dev/shm too small or not
writable, graded by the errno the line carries in each version.

Runs inside ``ddpcheck explain`` (a pure reader of log lines). NCCL creates one file in
/dev/shm per peer pair of a node (include/shm.h 2.4-2.11, misc/shmutils.cc 2.12-2.26,
os/linux.cc 2.27+); the errno it prints (or not) decides the reading: ``No space left on
device`` is a full /dev/shm (the NCCL user guide, Troubleshooting, "Shared memory"),
``Permission denied`` / ``Read-only file system`` one it cannot write, and a line without an
errno is a hint. ``created`` reads two lines together: SYSCHECK's EACCES line followed by the
segment line that says "creating" (not "attaching to") is the create path.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ddpcheck.diagnoses import DEV_SHM_TOO_SMALL
from ddpcheck.explain.causality import CAUSE, HINT, Explained
from ddpcheck.explain.codes import DEV_SHM_UNWRITABLE
from ddpcheck.explain.families.ncclresult import WARN_START
from ddpcheck.explain.matching import pattern
from ddpcheck.explain.reader import Record

NODE = "ddpcheck run --stages node,collectives (the node stage measures /dev/shm)"

PATTERNS = [
    # The errno NCCL's SYSCHECK prints before "Error while creating shared memory segment"
    # (include/checks.h "Call to %s failed : %s"; misc/shmutils.cc "failed to create shared
    # memory file ... error Permission denied"): /dev/shm is there but not writable.
    # NCCL >= 2.23 appends the errno to the segment line itself.
    pattern(DEV_SHM_UNWRITABLE,
            WARN_START + r"(?:Error: failed to create shared memory file .*|Error while creating "
            r"shared memory segment .*error: )(?:Permission denied|Read-only file system)|"
            + WARN_START + r"Call to (?:shm_open|open|mkstemp) failed ?: ?Read-only file system",
            NODE),
    # SYSCHECK's "Call to shm_open failed : Permission denied" (include/shm.h <= 2.11, which
    # opens with O_CREAT|O_RDWR to create *and* to attach) and "Call to open failed : ..."
    # (shmutils.cc 2.12+, also on the attach path, O_RDWR) follow EACCES on a peer's segment
    # too: ranks of one node under different users (containers sharing the host's IPC), or a
    # segment another user's job left with the same name: a hint.
    pattern(DEV_SHM_UNWRITABLE,
            WARN_START + r"Call to (?:shm_open|open) failed ?: ?Permission denied", NODE,
            grade="hint",
            cause="NCCL could not open a shared-memory file in /dev/shm (EACCES): most often "
                  "/dev/shm not writable by the job's user; a peer's segment owned by another "
                  "user (ranks of one node under different users) prints the same line"),
    # misc/shmutils.cc 2.12-2.21 call mkstemp without checking it and, when it fails, extend
    # fd -1 under the untouched template: "failed to extend /dev/shm/nccl-XXXXXX to N bytes".
    # mkstemp's errno is not printed: EACCES/EROFS (not writable), ENOENT (no /dev/shm), but
    # also EMFILE (the open-files limit) print the same line: a hint.
    pattern(DEV_SHM_UNWRITABLE, r"failed to extend \S*nccl-XXXXXX to \d+ bytes", NODE,
            grade="hint",
            cause="NCCL could not create its shared-memory file in /dev/shm (mkstemp failed, "
                  "its errno unprinted): most often /dev/shm missing or not writable by the "
                  "job's user; the open-files limit (ulimit -n) prints the same line"),
    # NCCL 2.7-2.11 include/shm.h, 2.12-2.2x misc/shmutils.cc, >= 2.27 os/linux.cc:
    # "Error while creating shared memory segment /dev/shm/nccl-X (size N)[, error: ...]",
    # "Error: failed to extend /dev/shm/nccl-X to N bytes[, error: No space left on device
    # (28)]" (2.22 on: the errno decides), SYSCHECK's "Call to posix_fallocate failed : No
    # space left on device" (2.4-2.11), NCCL <= 2.3 include/shm.h "Unable to allocate shared
    # memory (N bytes) : No space left on device" and torch's MapAllocator.cpp "unable to
    # allocate shared memory(shm) for file </torch_...>: No space left on device (28)".
    # Another errno on the line is another cause: "Interrupted system call" (a signal during
    # posix_fallocate, NVIDIA/nccl#137), >= 2.23 "Too many open files", "Cannot allocate
    # memory".
    pattern(DEV_SHM_TOO_SMALL,
            r"Error while creating shared memory segment .*error: No space left on device|"
            r"failed to extend \S+ to \d+ bytes, error: No space left on device|"
            r"Call to (?:posix_)?fallocate failed ?: ?No space left on device|"
            r"failed to create shared memory file .*No space left on device|"
            r"[Uu]nable to allocate shared memory.*No space left on device", NODE,
            cause="/dev/shm is too small for NCCL's shared-memory transport or the "
                  "DataLoader workers (containers default to 64 MB)"),
    # "failed to extend" without an errno (NCCL 2.12-2.21; the NCCL user guide's
    # Troubleshooting gives it as its example of too little shared memory) is not always
    # that: 2.12-2.18 extend with ftruncate, which never fails for lack of space on tmpfs (a
    # full /dev/shm there ends in SIGBUS when the page is touched, see the Bus error hints),
    # and 2.19-2.21's fallocate also fails with EINTR under a signal (2.22 retries it). The
    # same for the allocation lines cut before their errno: a hint.
    pattern(DEV_SHM_TOO_SMALL,
            r"failed to extend (?!\S*nccl-XXXXXX)\S+ to \d+ bytes\s*$|"
            r"[Uu]nable to allocate shared memory(?!.*:\s*\S)", NODE, grade="hint",
            cause="NCCL could not extend its shared-memory file in /dev/shm (the errno is not "
                  "printed by this NCCL version): most often /dev/shm too small (containers "
                  "default to 64 MB); a signal interrupting the call prints the same line"),
    # The segment line without its errno (NCCL 2.7-2.22) follows a full /dev/shm ("failed to
    # extend", "posix_fallocate ... No space left") or one that is not writable ("Call to
    # shm_open/open failed : Permission denied"): alone it is a hint.
    pattern(DEV_SHM_TOO_SMALL, r"Error while creating shared memory segment(?!.*error:)", NODE,
            grade="hint", cause="NCCL could not create its shared-memory segment, most often "
            "because /dev/shm is too small (containers default to 64 MB); a /dev/shm that is "
            "not writable prints the same line (the WARN before it says which)"),
    # SIGBUS in a DataLoader worker: most often /dev/shm, but a memory-mapped file truncated
    # under it does it too, and torch says so only as "It is possible that ... out of shared
    # memory" (_utils/signal_handling.py) / "This might be caused by insufficient shared
    # memory" (csrc/DataLoader.cpp): a hint
    pattern(DEV_SHM_TOO_SMALL, r"killed by signal: Bus error|Unexpected bus error encountered "
            r"in worker", NODE, grade="hint",
            cause="a DataLoader worker died of SIGBUS, most often a /dev/shm too small for its "
                  "shared tensors (containers default to 64 MB)"),
]

# SYSCHECK's EACCES line (the hint above) and, from the same thread a few lines on, the line
# ncclShmOpen/shmOpen prints when it gives up: "Error while creating shared memory segment"
# (the create path: /dev/shm not writable) or "... attaching to ..." (a peer's segment).
EACCES_LINE = re.compile(r"Call to (?:shm_open|open) failed ?: ?Permission denied")
CREATING = re.compile(r"Error while creating shared memory segment")
THREAD = re.compile(r"(?P<who>[\w.-]+:\d+:\d+) \[\d+\]")
NEAR = 4  # lines between the two (a blank line, another thread's line)


def created(found: Sequence[Explained], records: Sequence[Record]) -> list[Explained]:
    """The EACCES hint becomes cause-grade when its own thread's next shared-memory line says
    it was creating the segment (include/shm.h <= 2.11 and shmutils.cc 2.12-2.22 print it
    right after SYSCHECK's line)."""
    out = []
    for e in found:
        if (e.problem.code == DEV_SHM_UNWRITABLE.code and e.grade == HINT
                and EACCES_LINE.search(e.first.text) and _creating_after(e.first, records)):
            e = replace(e, grade=CAUSE)
        out.append(e)
    return out


def _creating_after(first: Record, records: Sequence[Record]) -> bool:
    who = m["who"] if (m := THREAD.search(first.text)) else None
    for r in records:
        if (r.source == first.source and 0 < r.lineno - first.lineno <= NEAR
                and CREATING.search(r.text)
                and (who is None or (m := THREAD.search(r.text)) is None or m["who"] == who)):
            return True
    return False
