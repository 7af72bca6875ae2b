"""NCCL's /dev/shm lines read together: SYSCHECK's EACCES line is the create path only when the
same thread's next segment line says "creating" (include/shm.h <= 2.11, shmutils.cc 2.12+)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts


def _graded(*lines: str) -> list[tuple[str, str]]:
    e = explain_texts([("r.log", "\n".join(lines) + "\n")])
    return [(x.problem.code, x.grade) for x in e.found if not x.problem.consequence_of]


EACCES = "node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open failed : " \
         "Permission denied"


def test_eacces_then_creating_is_an_unwritable_dev_shm():
    assert _graded(EACCES, "", "node08:27106:27302 [0] include/shm.h:48 NCCL WARN Error while "
                   "creating shared memory segment nccl-shm-recv-b79-0-3-0 (size 4460544)"
                   )[0] == ("dev-shm-unwritable", "cause")


def test_eacces_alone_or_attaching_stays_a_hint():
    # shm_open(O_CREAT|O_RDWR) also opens a peer's segment: another user's file is EACCES too
    assert _graded(EACCES)[0] == ("dev-shm-unwritable", "hint")
    assert ("dev-shm-unwritable", "hint") in _graded(
        "n:1:2 [0] misc/shmutils.cc:77 NCCL WARN Call to open failed : Permission denied",
        "n:1:2 [0] misc/shmutils.cc:112 NCCL WARN Error while attaching to shared memory "
        "segment /dev/shm/nccl-ab12cd (size 9637888)")
    # near miss: another thread's "creating" line is not this call's
    assert _graded(EACCES, "node08:27106:27399 [1] include/shm.h:48 NCCL WARN Error while "
                   "creating shared memory segment nccl-shm-recv-b79-0-2-1 (size 4460544)"
                   )[0] == ("dev-shm-unwritable", "hint")
