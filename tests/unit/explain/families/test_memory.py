"""Host OOM kills, DataLoader worker deaths and /dev/shm, as the kernel, Slurm and torch say."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause


def test_sigkill_of_a_worker_is_host_out_of_memory():
    # torch/distributed/elastic/multiprocessing/api.py
    assert first_cause("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: "
                       "-9) local_rank: 0 (pid: 5343) of binary: /usr/bin/python") == \
        "host-out-of-memory"


def test_the_root_cause_block_of_torchrun_gives_the_signal():
    assert first_cause("Root Cause (first observed failure):", "[0]:",
                       "  time      : 2024-05-01_10:00:00", "  host      : node7",
                       "  rank      : 3 (local_rank: 3)", "  exitcode  : -9 (pid: 123)",
                       "  error_file: <N/A>") == "host-out-of-memory"


def test_dataloader_worker_deaths():
    # torch/utils/data/_utils/signal_handling.py and dataloader.py
    assert first_cause("RuntimeError: DataLoader worker (pid 19597) is killed by signal: "
                       "Killed.") == "host-out-of-memory"
    # dataloader.py raises this for a worker that died of anything (segfault, OOM, bus error,
    # an exception): alone it cannot tell /dev/shm from the rest, so explain abstains.
    assert first_cause("RuntimeError: DataLoader worker (pid(s) 25) exited unexpectedly") == \
        "unexplained"
    assert first_cause("ERROR: Unexpected bus error encountered in worker. This might be "
                       "caused by insufficient shared memory (shm).",
                       "RuntimeError: DataLoader worker (pid(s) 25) exited unexpectedly") == \
        "dev-shm-too-small"
    assert first_cause("ERROR: Unexpected bus error encountered in worker. This might be "
                       "caused by insufficient shared memory (shm).") == "dev-shm-too-small"


def test_a_sigsegv_stays_a_rank_killed():
    assert first_cause("failed (exitcode: -11) local_rank: 0 (pid: 1) of binary: python") == \
        "rank-killed"


def test_cpu_allocator_and_container_oom_and_shared_memory_files():
    assert first_cause("RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. "
                       "DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                       "268435456 bytes. Error code 12 (Cannot allocate memory)") == \
        "host-out-of-memory"
    assert first_cause("/bin/bash: line 1:  4242 Killed                  python train.py") \
        == "host-out-of-memory"
    assert first_cause("RuntimeError: unable to write to file </torch_1234_567_0>: No space "
                       "left on device (28)") == "dev-shm-too-small"
    assert first_cause("RuntimeError: received 0 items of ancdata") == "open-file-limit"


def test_slurm_cgroup_oom_and_a_shells_killed_are_host_out_of_memory():
    assert first_cause("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=1.0. Some "
                       "of your processes may have been killed by the cgroup out-of-memory "
                       "handler.") == "host-out-of-memory"
    assert first_cause("Loading checkpoint shards:  38%|#####     | 3/8 [00:02<00:03]Killed") \
        == "host-out-of-memory"


def test_deepspeeds_launcher_reports_the_sigkill_like_torchrun():
    # deepspeed/launcher/launch.py sigkill_handler
    assert first_cause("[ERROR] [launch.py:320:sigkill_handler] ['/usr/bin/python', '-u', "
                       "'train.py', '--local_rank=1'] exits with return code = -9") == \
        "host-out-of-memory"


# --- Slurm and kernel wordings across versions (task/cgroup, jobacct_gather, mm/oom_kill.c)

def test_slurm_22_oom_kill_wording():
    assert first_cause("slurmstepd: error: Detected 1 oom_kill event in StepId=22035606.1. "
                       "Some of the step tasks have been OOM Killed.") == "host-out-of-memory"


def test_slurm_polling_memory_limit_kill():
    assert first_cause("slurmstepd: error: Job 41176 exceeded memory limit (3940736 > "
                       "2068480), being killed", "slurmstepd: error: Exceeded job memory limit"
                       ) == "host-out-of-memory"


def test_exceeded_at_some_point_is_not_a_kill():
    # older Slurm's note for a job that went on (page cache counted in the cgroup)
    assert first_cause("slurmstepd: error: Exceeded step memory limit at some point.") != \
        "host-out-of-memory"


def test_older_kernels_oom_killer_lines():
    assert first_cause("[12345.678] Out of memory: Kill process 1234 (python) score 912 or "
                       "sacrifice child") == "host-out-of-memory"
    assert first_cause("[12345.679] Killed process 1234 (python) total-vm:98765432kB, "
                       "anon-rss:8765432kB, file-rss:0kB") == "host-out-of-memory"


def test_dataloader_sigbus_hint_is_dev_shm():
    # torch/csrc/DataLoader.cpp, the SIGBUS branch's own hint
    assert first_cause("RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus "
                       "error. It is possible that dataloader's workers are out of shared "
                       "memory. Please try to raise your shared memory limit.") == \
        "dev-shm-too-small"


def test_dataloader_segfault_is_not_dev_shm():
    assert first_cause("ERROR: Unexpected segmentation fault encountered in worker.") != \
        "dev-shm-too-small"


def test_numpys_memory_error_is_host_memory():
    assert first_cause("numpy.core._exceptions._ArrayMemoryError: Unable to allocate 7.45 GiB "
                       "for an array with shape (1000000, 2000) and data type float32") == \
        "host-out-of-memory"


def test_exit_status_137_and_bad_alloc_are_host_memory():
    assert first_cause("subprocess.CalledProcessError: Command '['python', 'train.py']' "
                       "returned non-zero exit status 137.") == "host-out-of-memory"
    assert first_cause("terminate called after throwing an instance of 'std::bad_alloc'") == \
        "host-out-of-memory"
    assert first_cause("subprocess.CalledProcessError: Command '['python', 'train.py']' "
                       "returned non-zero exit status 1.") != "host-out-of-memory"


def test_pythons_enospc_on_a_dev_shm_path_is_dev_shm():
    # multiprocessing.shared_memory / semaphores: the path follows the message
    assert first_cause("OSError: [Errno 28] No space left on device: '/dev/shm/psm_8d1c2f'") == \
        "dev-shm-too-small"
    assert first_cause("OSError: [Errno 28] No space left on device: '/scratch/ckpt.pt'") != \
        "dev-shm-too-small"


def test_ucxs_report_of_a_bus_error_is_a_dev_shm_hint():
    # stop-32b dev gh38-nvidia-resiliency-ext-6 (a container's 64 MB /dev/shm)
    line = "[dgxa100:1034 :0:1034] Caught signal 7 (Bus error: nonexistent physical address)"
    assert first_cause(line) == "dev-shm-too-small"
    assert first_cause("[dgxa100:1034 :0:1034] Caught signal 11 (Segmentation fault: address "
                       "not mapped to object at address 0x8)") != "dev-shm-too-small"
