"""Stop-27 audit of the launcher, memory, filesystem, wrapper and traceback rules: each line
as its producer prints it (source cited), with the other causes that print it and a near miss.
"""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause


def _undetermined(*lines: str) -> bool:
    return explain_texts([("job.log", "\n".join(lines) + "\n")]).undetermined


# aten/src/ATen/MapAllocator.cpp (torch 2.13 libtorch_cpu: the errno after the name; older
# releases print the name alone): shm_open, write and posix_fallocate of torch's segments.
SHM_OPEN = ("RuntimeError: unable to open shared memory object </torch_18741_1594148461> in "
            "read-write mode")


def test_torch_shm_open_is_decided_by_its_errno():
    # EMFILE: the open-file limit (DataLoader's file_descriptor sharing), not /dev/shm, and
    # not NCCL's segment line either
    assert first_cause(SHM_OPEN + ": Too many open files (24)") == "open-file-limit"
    assert first_cause(SHM_OPEN + ": Permission denied (13)") == "dev-shm-unwritable"
    assert first_cause(SHM_OPEN + ": No space left on device (28)") == "dev-shm-too-small"
    # ENOENT, or no errno (older torch, where EMFILE is the usual reason): no cause named
    assert first_cause(SHM_OPEN + ": No such file or directory (2)") == "unexplained"
    assert first_cause(SHM_OPEN) == "unexplained"


def test_torch_shm_write_and_fallocate_on_a_full_dev_shm():
    assert first_cause("RuntimeError: unable to write to file </torch_1394_2747491098>") == \
        "dev-shm-too-small"
    assert first_cause("RuntimeError: unable to write to file </torch_1394_2747491098>: No "
                       "space left on device (28)") == "dev-shm-too-small"
    # torch 2.x posix_fallocate (no space after the colon, as MapAllocator.cpp formats it)
    assert first_cause("RuntimeError: unable to allocate shared memory(shm) for file "
                       "</torch_2234_3422_0>:No space left on device (28)") == \
        "dev-shm-too-small"
    # near miss: another errno after the name is another cause
    assert first_cause("RuntimeError: unable to write to file </torch_1394_2747491098>: Bad "
                       "address (14)") == "unexplained"


def test_nccl_segment_out_of_fds_stays_nccls():
    # NCCL >= 2.23 misc/shmutils.cc, quoted by torch after "Last error:"
    assert first_cause("Last error:", "Error while creating shared memory segment "
                       "/dev/shm/nccl-ab (size 9637888), error: Too many open files (24)") == \
        "nccl-error"


def test_bad_alloc_is_a_symptom_not_the_oom_killer():
    # libstdc++'s terminate handler; pybind11's "MemoryError: std::bad_alloc" (torch elastic
    # c10d, pytorch/pytorch#64990): a garbage size from a peer prints it with RAM to spare
    bad = ("terminate called after throwing an instance of 'std::bad_alloc'",
           "  what():  std::bad_alloc")
    assert first_cause(*bad) == "host-out-of-memory"
    assert _undetermined(*bad)
    assert _undetermined("MemoryError: std::bad_alloc")
    # Python's own MemoryError stays cause-grade, and a kernel OOM line beside bad_alloc wins
    assert first_cause("MemoryError") == "host-out-of-memory"
    assert not _undetermined("MemoryError")
    assert not _undetermined(*bad, "Out of memory: Killed process 1234 (python) "
                             "total-vm:1kB, anon-rss:1kB")


def test_inotify_watch_limit_is_no_full_disk():
    # inotify_add_watch(2) returns ENOSPC for fs.inotify.max_user_watches; watchdog says so
    assert first_cause("OSError: [Errno 28] inotify watch limit reached") != "disk-full"
    assert first_cause("OSError: [Errno 28] No space left on device: '/ckpt/step_100.pt'") == \
        "disk-full"


# Lightning's device parser and accelerator connector (lightning_fabric/utilities/
# device_parser.py _sanitize_gpu_ids; accelerator_connector.py)
def test_lightning_asking_for_more_gpus_than_the_node_shows():
    assert first_cause("lightning_fabric.utilities.exceptions.MisconfigurationException: You "
                       "requested gpu: [0, 1, 2, 3]",
                       " But your machine only has: [0, 1]") == "invalid-device-ordinal"
    assert first_cause("pytorch_lightning.utilities.exceptions.MisconfigurationException: You "
                       "requested GPUs: [0, 1] But your machine only has: [0]") == \
        "invalid-device-ordinal"
    # near miss: the first line alone does not say what the node has
    assert first_cause("pytorch_lightning.utilities.exceptions.MisconfigurationException: You "
                       "requested GPUs: [0]") == "unexplained"


def test_lightning_seeing_no_gpu_is_a_hint_of_cuda_unusable():
    assert first_cause("MisconfigurationException: You requested GPUs: [0]",
                       " But your machine only has: []") == "cuda-unusable"
    assert first_cause("lightning_fabric.utilities.exceptions.MisconfigurationException: "
                       "`CUDAAccelerator` can not run on your system since the accelerator is "
                       "not available. The following accelerator(s) is available and can be "
                       "passed into `accelerator` argument of `Trainer`: ['cpu'].") == \
        "cuda-unusable"
    # near miss: Apple's MPS is not CUDA
    assert first_cause("MisconfigurationException: `MPSAccelerator` can not run on your "
                       "system since the accelerator is not available.") != "cuda-unusable"


def test_the_local_rank_argument_names_both_launchers_that_pass_it():
    # argparse; torch.distributed.launch and deepspeed/launcher/launch.py both append it
    e = explain_texts([("job.log", "train.py: error: unrecognized arguments: --local_rank=0\n"
                        "[2023-05-15 13:14:32,960] [ERROR] [launch.py:434:sigkill_handler] "
                        "['/usr/bin/python', '-u', 'train.py', '--local_rank=0'] exits with "
                        "return code = 2\n")])
    first, echo = e.problems
    assert first.code == "local-rank-arg-unread" and "--no_local_rank" in first.fix
    # DeepSpeed's positive return code is the worker's own exit: a consequence
    assert echo.code == "rank-exited" and echo.consequence_of == "local-rank-arg-unread"
    # near miss: an unrecognised argument of another name is not the launcher's
    assert first_cause("train.py: error: unrecognized arguments: --lr=0.1") != \
        "local-rank-arg-unread"


def test_rays_memory_monitor_is_host_memory_not_cuda():
    # python/ray/exceptions.py OutOfMemoryError: Ray 2.2-2.54, and 2.55+ wording
    assert first_cause("ray.exceptions.OutOfMemoryError: Task was killed due to the node "
                       "running low on memory.") == "host-out-of-memory"
    assert first_cause("ray.exceptions.OutOfMemoryError: 2 worker(s) were killed due to the "
                       "node running low on memory.") == "host-out-of-memory"
    # near miss: torch's own OutOfMemoryError is the GPU's
    assert first_cause("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 "
                       "MiB") == "cuda-out-of-memory"
    assert first_cause("torch.cuda.OutOfMemoryError: Tried to allocate 2 GiB") == \
        "cuda-out-of-memory"


def test_slurms_out_of_memory_state():
    # src/common/slurm_protocol_defs.c job_state_string(JOB_OOM), as seff and sacct print it
    assert first_cause("State: OUT_OF_MEMORY (exit code 0)") == "host-out-of-memory"
    assert first_cause("12345.0          python  OUT_OF_ME+      0:125") == "host-out-of-memory"
    # near miss: another state
    assert first_cause("State: TIMEOUT (exit code 0)") != "host-out-of-memory"


def test_the_port_in_use_on_macos_and_windows():
    # c10d socket.cpp prints the OS's errno and text: EADDRINUSE is 48 on macOS, Windows'
    # WSAEADDRINUSE is 10048 (its FormatMessage text); Python's OSError alike
    for line in ("[W socket.cpp:426] [c10d] The server socket has failed to bind to "
                 "[::]:29500 (errno: 48 - Address already in use).",
                 "RuntimeError: The server socket has failed to listen on any local network "
                 "address. The server socket has failed to bind to 0.0.0.0:29500 (errno: 10048 "
                 "- Only one usage of each socket address (protocol/network address/port) is "
                 "normally permitted.).",
                 "OSError: [WinError 10048] Only one usage of each socket address "
                 "(protocol/network address/port) is normally permitted",
                 "OSError: [Errno 48] Address already in use"):
        assert first_cause(line) == "master-port-in-use", line
    e = explain_texts([("job.log", "[W socket.cpp:426] [c10d] The server socket has failed to "
                        "bind to [::]:29511 (errno: 48 - Address already in use).\n")])
    assert "grep 29511" in e.problems[0].fix
    # near miss: macOS's EADDRNOTAVAIL (49) is not a port in use
    assert first_cause("OSError: [Errno 49] Can't assign requested address") != \
        "master-port-in-use"


def test_own_name_lookups_on_macos_and_windows():
    # socket.cpp's listen path with macOS's EAI_NONAME (8) and Windows' WSAHOST_NOT_FOUND
    assert first_cause("The local network addresses cannot be retrieved (gai error: 8 - "
                       "nodename nor servname provided, or not known)") == \
        "hostname-unresolvable"
    assert first_cause("RuntimeError: The local IPv4 network addresses cannot be retrieved "
                       "(gai error: 11001 - No such host is known. )") == "hostname-unresolvable"
    # the connect path (whose name: the master's, another node's) stays a symptom
    assert _undetermined("[W socket.cpp:764] [c10d] The IPv6 network addresses of "
                         "(my-mac.local, 54517) cannot be retrieved (gai error: 8 - nodename "
                         "nor servname provided, or not known).")
    # near miss: another gai code is not "no such name"
    assert first_cause("The local network addresses cannot be retrieved (gai error: -25 - "
                       "x)") != "hostname-unresolvable"


def test_lightning_on_a_torch_without_distributed():
    # lightning_fabric/utilities/distributed.py _init_dist_connection
    assert first_cause("RuntimeError: torch.distributed is not available. Cannot initialize "
                       "distributed process group") == "backend-unavailable"
    # near miss: a line saying it is already initialised is no failure
    assert first_cause("torch.distributed is already initialized. Exiting early") == "none"


def test_the_kernels_and_systemd_oomd_kill_summaries():
    # mm/oom_kill.c dump_oom_summary (>= 4.19)
    assert first_cause("[ 812.3] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
                       "mems_allowed=0-1,oom_memcg=/slurm/uid_1/job_2,task_memcg=/slurm/uid_1/"
                       "job_2/step_0,task=python,pid=4242,uid=1000") == "host-out-of-memory"
    # systemd src/oom/oomd.c log_notice
    assert first_cause("Sep 21 09:15:58 node1 systemd-oomd[581]: Killed /user.slice/"
                       "user-1000.slice/user@1000.service/app.slice/run-r25.scope due to memory "
                       "pressure for /user.slice/user-1000.slice/user@1000.service being "
                       "86.80% > 50.00% for > 20s with reclaim activity") == "host-out-of-memory"
    # near miss: a process killed for another reason
    assert first_cause("Killed /user.slice/run-r25.scope due to user request") != \
        "host-out-of-memory"


SEMLOCK_TB = ("Traceback (most recent call last):",
              '  File "train.py", line 10, in <module>',
              "    q = mp.Queue()",
              '  File "/usr/lib/python3.10/multiprocessing/synchronize.py", line 57, in __init__',
              "    sl = self._semlock = _multiprocessing.SemLock(")


def test_a_semaphore_that_dev_shm_cannot_hold_is_no_full_disk():
    # CPython Lib/multiprocessing/synchronize.py: sem_open writes its file in /dev/shm
    assert first_cause(*SEMLOCK_TB, "OSError: [Errno 28] No space left on device") == \
        "dev-shm-too-small"
    # Python 3.11 prints a caret line between
    assert first_cause(*SEMLOCK_TB, "                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
                       "OSError: [Errno 28] No space left on device") == "dev-shm-too-small"
    # near misses: ENOSPC without the SemLock frame, or a path's ENOSPC after another error
    assert first_cause("OSError: [Errno 28] No space left on device") == "disk-full"
    assert first_cause(*SEMLOCK_TB, "OSError: [Errno 38] Function not implemented") == \
        "unexplained"


def test_deepspeeds_launcher_before_any_worker():
    # deepspeed/launcher/runner.py main
    e = explain_texts([("job.log", "RuntimeError: Using hostfile at /job/hostfile but "
                        "host=worker-1 was not reachable via ssh. If you are running with a "
                        "single node please remove /job/hostfile or setup passwordless ssh.\n")])
    assert e.problems[0].code == "launch-failed" and "worker-1" in e.problems[0].fix
    assert first_cause("RuntimeError: Unable to proceed, no GPU resources available") == \
        "cuda-unusable"
    # near miss: a host named in the hostfile that answers is no failure
    assert first_cause("[INFO] [runner.py:555:main] Using IP address of 10.0.0.2 for node "
                       "worker-1") == "none"


def test_torchs_invalid_device_id_is_a_hint():
    # torch/cuda/__init__.py get_device_properties: index >= device_count() or negative
    assert first_cause("AssertionError: Invalid device id") == "invalid-device-ordinal"
    assert not _undetermined("AssertionError: Invalid device id")  # a hint answers alone
    # a cause-grade line beside it wins (the local rank never set)
    assert first_cause("AssertionError: Invalid device id", "ValueError: environment "
                       "variable RANK expected, but not set") == "launcher-env-missing"
    # near miss: another assertion
    assert first_cause("AssertionError: Invalid device type") != "invalid-device-ordinal"


def test_the_system_wide_file_table_is_not_ulimit():
    # strerror(ENFILE) "Too many open files in system" vs strerror(EMFILE)
    e = explain_texts([("job.log", "OSError: [Errno 23] Too many open files in system\n")])
    assert e.problems[0].code == "open-file-limit" and "file-max" in e.problems[0].fix
    e = explain_texts([("job.log", "OSError: [Errno 24] Too many open files\n")])
    assert e.problems[0].code == "open-file-limit" and "file-max" not in e.problems[0].fix


def test_only_ddpchecks_own_codes_are_its_report_blocks():
    # ddpcheck's report (report/text.py render_problem): "FAIL  <code>  ..."
    assert first_cause("FAIL  master-port-in-use   rank 0; node n1") == "master-port-in-use"
    # near miss: a test runner's summary with the same prefix (Jest prints "FAIL  <file>")
    # (was read as a problem coded "unit": a confident answer; now the failure words alone)
    assert first_cause("FAIL  unit   3 tests failed") == "unexplained"


def test_enomem_is_a_hint_of_host_memory():
    # Python OSError(ENOMEM): fork under the commit limit, and mmap past vm.max_map_count
    e = explain_texts([("job.log", "OSError: [Errno 12] Cannot allocate memory\n")])
    assert e.problems[0].code == "host-out-of-memory" and "max_map_count" in e.problems[0].fix
    # a cause-grade line of another kind beside it wins
    assert first_cause("OSError: [Errno 12] Cannot allocate memory",
                       "OSError: [Errno 28] No space left on device: '/ckpt/a.pt'") == \
        "disk-full"
    # aten MapAllocator.cpp's mmap of a shared tensor, same errno
    assert first_cause("RuntimeError: unable to mmap 4096 bytes from file </torch_12_345_6>: "
                       "Cannot allocate memory (12)") == "host-out-of-memory"
    # near miss: another errno of the same mmap
    assert first_cause("RuntimeError: unable to mmap 4096 bytes from file </torch_12_345_6>: "
                       "Bad file descriptor (9)") != "host-out-of-memory"
