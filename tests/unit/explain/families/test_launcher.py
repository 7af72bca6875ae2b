"""How launchers report a worker's end: torchrun, mp.spawn, torch.distributed.launch, srun."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause


def test_mp_spawn_sigkill_is_the_oom_killer():
    # torch/multiprocessing/spawn.py ProcessExitedException
    assert first_cause("torch.multiprocessing.spawn.ProcessExitedException: process 1 "
                       "terminated with signal SIGKILL") == "host-out-of-memory"


def test_old_launch_subprocess_sigkill_is_the_oom_killer():
    # torch.distributed.launch <= 1.9 re-raises subprocess.CalledProcessError
    assert first_cause("subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', "
                       "'train.py', '--local_rank=1']' died with <Signals.SIGKILL: 9>.") == \
        "host-out-of-memory"


def test_mp_spawn_sigsegv_is_a_kill_not_an_oom():
    assert first_cause("torch.multiprocessing.spawn.ProcessExitedException: process 0 "
                       "terminated with signal SIGSEGV") == "rank-killed"


def test_srun_terminated_tasks_and_exit_codes_are_echoes():
    # src/srun: SIGTERM in words, and a task's exit code
    for line in ("srun: error: node3: tasks 0-3: Terminated",
                 "srun: error: node3: task 2: Exited with exit code 1",
                 "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated "
                 "with exit code 1"):
        e = explain_texts([("job.err", line + "\n")])
        assert e.undetermined, line


def test_a_crash_before_srun_reports_the_exit_stays_the_cause():
    assert first_cause("RuntimeError: CUDA error: invalid device ordinal",
                       "srun: error: node3: task 2: Exited with exit code 1") == \
        "invalid-device-ordinal"


def test_sigbus_from_torchrun_is_dev_shm():
    # torch/distributed/elastic/multiprocessing/errors: "Signal 7 (SIGBUS) received by PID";
    # torch's own SIGBUS handler (torch/csrc/DataLoader.cpp) blames shared memory
    assert first_cause("torch.distributed.elastic.multiprocessing.api:failed (exitcode: -7) "
                       "local_rank: 0 (pid: 4242) of binary: /usr/bin/python3") == \
        "dev-shm-too-small"


def test_shell_bus_error_is_dev_shm_and_a_segfault_is_not():
    assert first_cause("/var/spool/slurmd/job123/slurm_script: line 12: 4242 Bus error "
                       "(core dumped) python train.py") == "dev-shm-too-small"
    assert first_cause("Segmentation fault (core dumped)") != "dev-shm-too-small"


def test_a_bare_kill_after_a_slurm_cancellation_is_the_schedulers():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("slurm.out", "slurmstepd: error: *** JOB 99 ON n1 CANCELLED AT "
                        "2024-05-01T10:00:00 DUE TO TIME LIMIT ***\n"
                        "srun: error: n1: task 0: Killed\n")])
    assert e.undetermined


def test_an_oom_kill_under_a_cancellation_stays_the_cause():
    assert first_cause("slurmstepd: error: Detected 1 oom_kill event in StepId=99.0. Some of "
                       "the step tasks have been OOM Killed.",
                       "slurmstepd: error: *** STEP 99.0 ON n1 CANCELLED AT "
                       "2024-05-01T10:00:00 ***") == "host-out-of-memory"


def test_a_torch_build_without_libuv_is_named_with_use_libuv_0_in_both_spellings():
    for built in ("built", "build"):  # torch 2.13 / torch 2.4 to 2.6
        line = (f"RuntimeError: use_libuv was requested but PyTorch was {built} without libuv "
                "support, run with USE_LIBUV=0 to disable it.")
        e = explain_texts([("job.log", line + "\n")])
        assert e.problems[0].code == "tcpstore-libuv-unavailable" and not e.undetermined
        assert "USE_LIBUV=0" in e.problems[0].fix
    assert first_cause("[I socket.cpp:1] using libuv backend for TCPStore") == "none"


def test_torchrun_refusing_its_nproc_per_node_value_is_a_launch_failure():
    assert first_cause("ValueError: Unsupported nproc_per_node value: "
                       "./ckpts/vad_b2d_base.pth") == "launch-failed"  # dev bench2drivezoo-32
    assert first_cause("  raise ValueError(f\"Unsupported nproc_per_node value: {x}\")",
                       "ValueError: Unsupported nproc_per_node value: configs/train.yaml") == \
        "launch-failed"


def test_the_interpreter_that_cannot_open_the_script_is_a_launch_failure():
    # CPython Modules/main.c pymain_run_file_obj: "%ls: can't open file %R: [Errno %d] %s"
    line = ("/usr/bin/python3: can't open file '/home/u/train.py': "
            "[Errno 2] No such file or directory")
    assert first_cause(line, "failed (exitcode: 2) local_rank: 0 (pid: 141) of binary: "
                       "/usr/bin/python3") == "launch-failed"
    assert first_cause("C:\\Python311\\python.exe: can't open file 'C:\\\\x\\\\t.py': "
                       "[Errno 13] Permission denied") == "launch-failed"
    # near miss: a script's own message about another file is not the interpreter's
    assert first_cause("warning: can't open file 'cache.bin', rebuilding it") != "launch-failed"


def test_python_dash_m_that_cannot_find_its_module_is_a_launch_failure():
    # CPython Lib/runpy.py _run_module_as_main: sys.exit("%s: %s" % (sys.executable, exc))
    assert first_cause("/usr/bin/python3: No module named trainer") == "launch-failed"
    assert first_cause("/opt/py/bin/python3.11: Error while finding module specification for "
                       "'pkg.train' (ModuleNotFoundError: No module named 'pkg')") == \
        "launch-failed"
    # near miss: an import inside the user's code is the user's exception, not the launch
    assert first_cause("ModuleNotFoundError: No module named 'flash_attn'") != "launch-failed"


def test_nproc_per_node_gpu_without_a_gpu_is_too_few_gpus_and_its_chained_int_error_is_not():
    # runs/s32c-nproc-gpu-on-cpu-host: run.py's int('gpu') ValueError raised into its own
    chained = "\n".join([
        "Traceback (most recent call last):",
        '  File "/x/torch/distributed/run.py", line 748, in determine_local_world_size',
        "    return int(nproc_per_node)",
        "ValueError: invalid literal for int() with base 10: 'gpu'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/x/torch/distributed/run.py", line 755, in determine_local_world_size',
        '    raise ValueError("Cuda is not available.") from e',
        "ValueError: Cuda is not available."])
    e = explain_texts([("console.log", chained + "\n")])
    assert [p.code for p in e.problems if not p.consequence_of][0] == "too-few-gpus"
    assert not e.undetermined
    # an unexplained exception raised into another unexplained one stays a candidate
    other = chained.replace("ValueError: Cuda is not available.", "KeyError: 'gpu'")
    assert explain_texts([("console.log", other + "\n")]).undetermined
