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
