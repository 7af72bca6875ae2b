"""mp.spawn's fn(i, *args) that does not fit fn, and workers killed by SIGBUS."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

SPAWN_TRACE = [
    "-- Process 1 terminated with the following error:",
    "Traceback (most recent call last):",
    '  File "/opt/conda/lib/python3.7/site-packages/torch/multiprocessing/spawn.py", line 59, '
    "in _wrap",
    "    fn(i, *args)",
]


def test_a_typeerror_right_under_spawns_call_is_spawn_args_mismatch():
    assert first_cause(*SPAWN_TRACE,
                       "TypeError: main() takes 2 positional arguments but 63 were given") == \
        "spawn-args-mismatch"
    assert first_cause(*SPAWN_TRACE, "    ^^^^^^^^^^^^^^",
                       "TypeError: run() missing 1 required positional argument: 'cfg'") == \
        "spawn-args-mismatch"


def test_args_that_are_not_a_tuple_are_spawn_args_mismatch_in_both_pythons_words():
    # Python 3.11+ names no function; older Pythons name it (runs/s32-spawn-args-not-tuple)
    for line in ("TypeError: Value after * must be an iterable, not int",
                 "TypeError: main() argument after * must be an iterable, not Namespace"):
        e = explain_texts([("job.log", "\n".join([*SPAWN_TRACE, line]) + "\n")])
        assert e.problems[0].code == "spawn-args-mismatch", line
        assert "not a tuple" in e.problems[0].cause and line.rsplit(" ", 1)[1] in \
            e.problems[0].cause


def test_the_same_unpacking_error_in_the_users_code_is_not_spawns():
    assert first_cause('  File "train.py", line 3, in main', "    f(*cfg)",
                       "TypeError: Value after * must be an iterable, not int") != \
        "spawn-args-mismatch"


def test_a_typeerror_deeper_in_the_users_code_is_not_spawns():
    got = first_cause(*SPAWN_TRACE,
                      '  File "train.py", line 12, in main',
                      "    model(x, y)",
                      "TypeError: forward() takes 2 positional arguments but 3 were given")
    assert got != "spawn-args-mismatch"
    assert first_cause("TypeError: forward() takes 2 positional arguments but 3 were given") \
        != "spawn-args-mismatch"


def test_spawns_frame_above_another_error_leaves_that_error_the_cause():
    assert first_cause(*SPAWN_TRACE, "RuntimeError: CUDA error: invalid device ordinal") == \
        "invalid-device-ordinal"


def test_sigbus_is_dev_shm_too_small():
    assert first_cause("The worker fails with {0: ProcessFailure(local_rank=0, pid=54, "
                       "exitcode=-7, error_file='<N/A>', error_file_data={'message': "
                       "'<NONE>'}, message='Signal 7 (SIGBUS) received by PID 54', "
                       "timestamp=1711419181)}") == "dev-shm-too-small"
    assert first_cause("  exitcode  : -7 (pid: 1016)") == "dev-shm-too-small"


def test_other_signals_are_not_sigbus():
    assert first_cause("Signal 6 (SIGABRT) received by PID 54") != "dev-shm-too-small"
    assert first_cause("  exitcode  : -70 (pid: 1016)") != "dev-shm-too-small"


def test_sighup_to_the_launcher_is_a_hangup():
    # torch/distributed/elastic: agent/server/api.py and multiprocessing/api.py, old and new
    for line in ("WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, "
                 "shutting down workers",
                 "W0101 12:00:00.000 api.py:704] Received Signals.SIGHUP death signal, "
                 "shutting down workers",
                 "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 1234 "
                 "closing signal SIGHUP",
                 "torch.distributed.elastic.multiprocessing.api.SignalException: Process 1200 "
                 "got signal: 1",
                 "Signal 1 (SIGHUP) received by PID 1234"):
        assert first_cause(line) == "launcher-hangup", line


def test_sigterm_and_signal_numbers_starting_with_1_are_not_a_hangup():
    assert first_cause("Received 15 death signal, shutting down workers") != "launcher-hangup"
    assert first_cause("Sending process 1234 closing signal SIGTERM") != "launcher-hangup"
    assert first_cause("SignalException: Process 1200 got signal: 15") != "launcher-hangup"
    assert first_cause("Signal 15 (SIGTERM) received by PID 1234") != "launcher-hangup"


AGENT_SIGTERM = ("W1124 18:47:33.701000 26816 torch/distributed/elastic/agent/server/api.py:753] "
                 "Received 15 death signal, shutting down workers")


def test_the_agent_receiving_sigterm_or_sigint_is_run_interrupted():
    assert first_cause(AGENT_SIGTERM) == "run-interrupted"
    assert first_cause(AGENT_SIGTERM.replace("15", "Signals.SIGTERM")) == "run-interrupted"
    assert first_cause(AGENT_SIGTERM.replace("15", "2")) == "run-interrupted"
    assert first_cause("torch.distributed.elastic.multiprocessing.api.SignalException: "
                       "Process 26816 got signal: 15") == "run-interrupted"


def test_sighup_stays_the_hangup_and_a_worker_getting_sigterm_is_not_the_agent():
    assert first_cause(AGENT_SIGTERM.replace("15", "1")) == "launcher-hangup"
    # torchrun's own teardown sends SIGTERM to its workers: no interruption of the job
    assert first_cause("W1124 18:47:33.702000 26816 torch/distributed/elastic/"
                       "multiprocessing/api.py:1028] Sending process 26926 closing signal "
                       "SIGTERM") != "run-interrupted"


def test_a_cause_on_another_node_comes_before_the_sigterm_srun_sent_after_it():
    assert first_cause("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
                       AGENT_SIGTERM) == "cuda-out-of-memory"
