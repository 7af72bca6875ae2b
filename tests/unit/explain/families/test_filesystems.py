"""A full filesystem or quota (disk-full), as the C library and torch.save print it."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

# Python's OSError: the C library's strerror for ENOSPC (28) and EDQUOT (122), path after it
ENOSPC = "OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/datasets/tmp'"
EDQUOT = "OSError: [Errno 122] Disk quota exceeded: '/home/u/ckpt/epoch_3.pt'"
# caffe2/serialize/inline_container.cc, torch.save's zip writer on a short write
SHORT_WRITE = "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"


def test_enospc_and_edquot_name_a_full_filesystem_with_its_path():
    for line in (ENOSPC, EDQUOT):
        e = explain_texts([("rank1.log", "Traceback (most recent call last):\n" + line + "\n")])
        p = e.problems[0]
        assert p.code == "disk-full" and not e.undetermined
        assert line.split(": ", 1)[1] in p.observed and "df -h" in p.fix


def test_dev_shm_and_torch_shared_memory_stay_dev_shm_too_small():
    assert first_cause("OSError: [Errno 28] No space left on device: '/dev/shm/abc'") == \
        "dev-shm-too-small"
    assert first_cause("RuntimeError: unable to write to file </torch_123_456>: No space left "
                       "on device (28)") == "dev-shm-too-small"


def test_a_short_torch_save_is_a_hint_that_a_cause_grade_line_outranks():
    e = explain_texts([("r.log", SHORT_WRITE + "\n")])
    assert e.problems[0].code == "disk-full" and e.found[0].grade == "hint"
    both = explain_texts([("r.log", SHORT_WRITE + "\nRuntimeError: CUDA error: invalid device "
                           "ordinal\n")])
    assert both.problems[0].code != "disk-full"


def test_space_words_that_report_no_failure_are_not_a_full_disk():
    assert first_cause("Disk usage: 40% of 2 TB, 1.2 TB free", "epoch 1 loss 0.3") == "none"
    assert first_cause("[Errno 2] No such file or directory: 'ckpt.pt'") != "disk-full"


def test_a_shared_memory_line_is_never_a_full_disk_even_without_the_shm_rules():
    from ddpcheck.explain.families import PATTERNS
    no_shm = [p for p in PATTERNS if p.code != "dev-shm-too-small"]
    for line in ("NCCL WARN Error: failed to extend /dev/shm/nccl-ZH5sT1 to 9637892 bytes, "
                 "error: No space left on device (28)",
                 "RuntimeError: unable to write to file </torch_9_1>: No space left on device "
                 "(28)"):
        e = explain_texts([("r.log", line + "\n")], patterns=no_shm)
        assert all(p.code != "disk-full" for p in e.problems), line


def test_a_checkpoint_on_a_read_only_or_forbidden_path_is_checkpoint_failed():
    # runs/s32-checkpoint-dir-readonly: torch.save into a read-only bind mount
    assert first_cause("OSError: [Errno 30] Read-only file system: "
                       "'/mnt/ckpt/run1/step-3.pt'") == "checkpoint-failed"
    assert first_cause("PermissionError: [Errno 13] Permission denied: "
                       "'/shared/checkpoints/epoch_2/model.safetensors'") == "checkpoint-failed"


def test_the_same_errno_on_a_path_that_is_no_checkpoint_is_not_checkpoint_failed():
    assert first_cause("PermissionError: [Errno 13] Permission denied: '/dev/nvidia0'") != \
        "checkpoint-failed"
    assert first_cause("OSError: [Errno 30] Read-only file system: "
                       "'/root/.cache/huggingface/hub/tmpx'") != "checkpoint-failed"


def test_filestores_bare_errno_is_an_unusable_init_file():
    # runs/s32e-file-init-readonly: FileStore.cpp throws the strerror alone
    assert first_cause("torch.distributed.DistStoreError: Read-only file system") == \
        "init-file-unusable"
    assert first_cause("torch.distributed.DistStoreError: No such file or directory") == \
        "init-file-unusable"
    # TCPStore's own DistStoreErrors say more
    assert first_cause("torch.distributed.DistStoreError: wait timeout after 5000ms, keys: "
                       "/default_pg/0//cpu//0/0") != "init-file-unusable"
