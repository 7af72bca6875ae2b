"""Tests for launcher.postmortem: turning torchrun's end into diagnoses that name the rank."""

from __future__ import annotations

from ddpcheck.diagnoses import ROOT_CAUSE
from ddpcheck.launcher.launch import LaunchOutcome
from ddpcheck.launcher.postmortem import diagnose_launch, diagnose_ranks, last_activity
from ddpcheck.results import End, Event, ExitStatus, Probe, ProbeStart, Start
from tests.helpers.paths import DATA

HOSTS = {0: "gpu-a", 1: "gpu-a", 2: "gpu-b", 3: "gpu-b"}
ALLREDUCE = "checks/test_collectives.py::test_all_reduce_sums_exactly"
BARRIER = "checks/test_collectives.py::test_barrier_is_reached_by_every_rank"


def start(rank: int) -> Start:
    return Start(rank=rank, host=HOSTS[rank], pid=1000 + rank)


def probe_start(nodeid: str, stage: str = "collectives") -> ProbeStart:
    return ProbeStart(nodeid=nodeid, stage=stage, deadline=40)


def probe_done(nodeid: str, stage: str = "collectives", status: str = "PASS") -> Probe:
    return Probe(nodeid=nodeid, name=nodeid.split("::")[-1], stage=stage, status=status,
                 agreed=status)


def in_allreduce(rank: int) -> list[Event]:
    """A rank that passed the barrier and was inside the all-reduce probe when it stopped."""
    return [start(rank), probe_start(BARRIER), probe_done(BARRIER), probe_start(ALLREDUCE)]


def finished(rank: int) -> list[Event]:
    return [start(rank), probe_start(BARRIER), probe_done(BARRIER), End()]


def exit_file(rank: int, returncode: int = 0, signal_name: str | None = None,
              done: bool = False) -> ExitStatus:
    return ExitStatus(rank=rank, pid=1000 + rank, returncode=returncode,
                      signal_name=signal_name, finished=done)


def outcome(**kw) -> LaunchOutcome:
    return LaunchOutcome(kw.pop("returncode", 1), kw.pop("elapsed", 5.0), **kw)


# --- last_activity ----------------------------------------------------------------------------
def test_last_activity_is_the_probe_started_without_a_result():
    assert last_activity(in_allreduce(0)) == ("collectives", "test_all_reduce_sums_exactly")


def test_last_activity_after_a_finished_probe_names_it():
    assert last_activity(finished(0)) == ("collectives",
                                          "after test_barrier_is_reached_by_every_rank")


def test_last_activity_before_any_probe_is_startup():
    assert last_activity([start(0)]) == ("startup", "")
    assert last_activity([]) == ("startup", "")


# --- killed ranks ------------------------------------------------------------------------------
def test_sigkilled_rank_is_named_with_signal_probe_stage_and_host():
    events = {r: in_allreduce(r) for r in range(4)}
    exits = {0: exit_file(0, -15, "SIGTERM"), 1: exit_file(1, -15, "SIGTERM"),
             2: exit_file(2, -9, "SIGKILL"), 3: exit_file(3, -15, "SIGTERM")}
    (problem,) = diagnose_ranks(events, exits, outcome(), HOSTS)
    assert problem.code == "rank-killed"
    assert problem.ranks == (2,) and problem.hosts == ("gpu-b",)
    assert problem.stage == "collectives"
    assert "SIGKILL" in problem.observed and "OOM killer" in problem.observed
    assert "pid 1002" in problem.observed
    assert "test_all_reduce_sums_exactly" in problem.observed
    assert "stage collectives" in problem.observed


def test_sigtermed_ranks_are_not_blamed_when_another_rank_was_killed_or_crashed():
    events = {r: in_allreduce(r) for r in range(3)}
    exits = {0: exit_file(0, -15, "SIGTERM"), 1: exit_file(1, 3), 2: exit_file(2, -15, "SIGTERM")}
    problems = diagnose_ranks(events, exits, outcome(), HOSTS)
    assert [(p.code, p.ranks) for p in problems] == [("rank-exited", (1,))]
    assert "exited with code 3" in problems[0].observed


def test_sigtermed_ranks_are_blamed_when_nothing_else_explains_the_failure():
    events = {0: in_allreduce(0), 1: finished(1)}
    exits = {0: exit_file(0, -15, "SIGTERM"), 1: exit_file(1, 0, done=True)}
    (problem,) = diagnose_ranks(events, exits, outcome(), HOSTS)
    assert problem.code == "rank-killed" and problem.ranks == (0,)
    assert "SIGTERM" in problem.observed and "OOM" not in problem.observed


def test_finished_ranks_are_never_blamed():
    events = {r: finished(r) for r in range(2)}
    exits = {r: exit_file(r, 0, done=True) for r in range(2)}
    assert diagnose_ranks(events, exits, outcome(returncode=0), HOSTS) == []


def test_rank_exiting_1_inside_a_probe_is_a_probe_timeout():
    events = {0: in_allreduce(0)}
    (problem,) = diagnose_ranks(events, {0: exit_file(0, 1)}, outcome(), HOSTS)
    assert problem.code == "probe-timeout" and problem.ranks == (0,)
    assert "test_all_reduce_sums_exactly" in problem.observed


def test_rank_exiting_between_probes_is_rank_exited():
    events = {0: finished(0)[:-1]}
    (problem,) = diagnose_ranks(events, {0: exit_file(0, 1)}, outcome(), HOSTS)
    assert problem.code == "rank-exited"
    assert "after test_barrier_is_reached_by_every_rank" in problem.observed


def test_rank_dying_at_startup_is_reported_in_the_startup_stage():
    (problem,) = diagnose_ranks({0: [start(0)]}, {0: exit_file(0, -11, "SIGSEGV")}, outcome(),
                                HOSTS)
    assert problem.code == "rank-killed" and problem.stage == "startup"
    assert "in stage startup" in problem.observed


def test_rank_without_events_gets_an_unknown_host():
    (problem,) = diagnose_ranks({}, {5: exit_file(5, -9, "SIGKILL")}, outcome(), {})
    assert problem.ranks == (5,) and problem.hosts == ("?",)


# --- stopped ranks -----------------------------------------------------------------------------
def test_stopped_pid_is_rank_unresponsive_naming_the_pid_rank_and_host():
    events = {r: in_allreduce(r) for r in range(3)}
    exits = {0: exit_file(0, 0, done=True), 1: exit_file(1, -15, "SIGTERM"),
             2: exit_file(2, -15, "SIGTERM")}
    (problem,) = diagnose_ranks(events, exits, outcome(stopped_pids=[1001]), HOSTS)
    assert problem.code == "rank-unresponsive"
    assert problem.ranks == (1,) and problem.hosts == ("gpu-a",)
    assert problem.stage == "collectives"
    assert "pid 1001" in problem.observed and "stopped" in problem.observed
    assert "kill -CONT 1001" in problem.fix and "gpu-a" in problem.fix
    assert problem.role == ROOT_CAUSE  # what its peers saw of it are consequences


def test_stopped_pid_that_is_no_rank_is_ignored():
    events = {0: finished(0)}
    exits = {0: exit_file(0, 0, done=True)}
    assert diagnose_ranks(events, exits, outcome(stopped_pids=[4242]), HOSTS) == []


def test_a_stopped_rank_and_a_killed_rank_are_both_reported():
    events = {r: in_allreduce(r) for r in range(3)}
    exits = {1: exit_file(1, -15, "SIGTERM"), 2: exit_file(2, -9, "SIGKILL")}
    problems = diagnose_ranks(events, exits, outcome(stopped_pids=[1000]), HOSTS)
    assert [(p.code, p.ranks) for p in problems] == [("rank-unresponsive", (0,)),
                                                     ("rank-killed", (2,))]


# --- the run as a whole ------------------------------------------------------------------------
def test_run_deadline_names_the_timeout_and_the_ranks_still_running():
    events = {0: finished(0), 1: in_allreduce(1), 2: in_allreduce(2)}
    (problem,) = diagnose_launch(events, outcome(deadline_hit=True), 300.0, "")
    assert problem.code == "run-deadline-exceeded"
    assert "deadline of 300 s (--timeout)" in problem.observed
    assert "ranks still running: 1, 2" in problem.observed


def test_run_deadline_with_no_events_is_only_a_deadline():
    problems = diagnose_launch({}, outcome(deadline_hit=True), 12.5, "some log")
    assert [p.code for p in problems] == ["run-deadline-exceeded"]
    assert "deadline of 12.5 s (--timeout)" in problems[0].observed


def test_launch_failure_with_no_events_quotes_the_log_tail():
    log = ("\n".join(f"noise {i}" for i in range(10)) + "\n\ntorch.distributed.elastic: "
           "RendezvousTimeoutError\n  ValueError: bad rdzv conf  \n")
    (problem,) = diagnose_launch({}, outcome(returncode=1), 300, log)
    assert problem.code == "launch-failed"
    assert "torchrun exited with code 1 before any rank started" in problem.observed
    assert problem.observed.endswith(
        "noise 9 | torch.distributed.elastic: RendezvousTimeoutError | ValueError: bad rdzv conf")
    assert "noise 8" not in problem.observed


def test_launch_failure_with_an_empty_log_still_names_the_exit_code():
    (problem,) = diagnose_launch({}, outcome(returncode=2), 300, "  \n")
    assert problem.observed == "torchrun exited with code 2 before any rank started"


def test_launch_failure_clips_very_long_log_lines():
    (problem,) = diagnose_launch({}, outcome(returncode=1), 300, "x" * 1000)
    assert len(problem.observed) < 300


def test_a_run_with_events_and_no_deadline_has_no_launch_problems():
    assert diagnose_launch({0: finished(0)}, outcome(returncode=0), 300, "ok") == []


def test_ranks_the_launcher_ended_at_the_deadline_are_not_reported_as_killed():
    events = {r: in_allreduce(r) for r in range(2)}
    exits = {r: exit_file(r, -15, "SIGTERM") for r in range(2)}
    assert diagnose_ranks(events, exits, outcome(deadline_hit=True), HOSTS) == []


def test_ranks_ended_after_the_user_interrupted_are_not_blamed():
    from ddpcheck.launcher.launch import LaunchOutcome
    from ddpcheck.launcher.postmortem import diagnose_launch, diagnose_ranks

    outcome = LaunchOutcome(returncode=-15, elapsed=9.4, interrupted="SIGTERM")
    exits = {0: ExitStatus(pid=5, returncode=-15, signal_name="SIGTERM", finished=False)}
    assert diagnose_ranks({}, exits, outcome, {0: "vm"}) == []
    (problem,) = diagnose_launch({}, outcome, 300, "")
    assert problem.code == "run-interrupted" and "SIGTERM after 9.4 s" in problem.observed


def test_a_local_rank_whose_wrapper_left_no_exit_file_was_killed() -> None:
    from ddpcheck.launcher.launch import LaunchOutcome
    from ddpcheck.launcher.postmortem import diagnose_ranks

    events: dict[int, list[Event]] = {3: [Start(pid=77, host="node1"), End()],
                                      0: [Start(pid=12, host="node0"), End()]}
    exits = {2: ExitStatus(rank=2, pid=70, returncode=0, finished=True)}
    outcome = LaunchOutcome(returncode=1, elapsed=3.0)
    got = diagnose_ranks(events, exits, outcome, {0: "node0", 3: "node1"}, local={2, 3})
    assert [(p.code, p.ranks, p.hosts) for p in got] == [("rank-killed", (3,), ("node1",))]
    assert "ended without recording the rank's exit" in got[0].observed
    # rank 0 lives on another node: no exit file here is expected, not a problem
    assert diagnose_ranks(events, exits, outcome, {}, local={2}) == []


def test_torchrun_failing_after_the_start_is_the_last_word_with_its_log() -> None:
    from ddpcheck.launcher.launch import LaunchOutcome
    from ddpcheck.launcher.postmortem import torchrun_failed

    events: dict[int, list[Event]] = {0: [Start()]}
    log = "ok\n  exitcode  : -9 (pid: 4242)\nbye\n"
    (p,) = torchrun_failed(events, LaunchOutcome(returncode=1, elapsed=1.0), log)
    assert p.code == "launch-failed" and "exitcode  : -9" in p.observed
    assert torchrun_failed(events, LaunchOutcome(returncode=0, elapsed=1.0), log) == []
    ended = LaunchOutcome(returncode=-15, elapsed=1.0, killed_after_end=True)
    assert torchrun_failed(events, ended, log) == []


# --- NCCL's watchdog abort ---------------------------------------------------------------------
WATCHDOG_TAIL = tuple(  # the last lines an aborted rank printed: sgl-project/sglang#1693
    (DATA / "logs" / "watchdog" / "allgather-sglang-1693.log").read_text().splitlines()[1:6])


def nccl_in_allreduce(rank: int) -> list[Event]:
    return [Start(rank=rank, host=HOSTS[rank], pid=1000 + rank, backend="nccl"),
            probe_start(BARRIER), probe_done(BARRIER), probe_start(ALLREDUCE)]


def aborted(rank: int, tail: tuple[str, ...] = WATCHDOG_TAIL) -> ExitStatus:
    return ExitStatus(rank=rank, pid=1000 + rank, returncode=-6, signal_name="SIGABRT",
                      tail=tail)


def test_ranks_the_watchdog_aborted_are_consequences_of_the_rank_that_was_killed():
    events = {r: nccl_in_allreduce(r) for r in range(4)}
    exits = {0: aborted(0), 1: aborted(1), 2: exit_file(2, -9, "SIGKILL"), 3: aborted(3)}
    problems = diagnose_ranks(events, exits, outcome(), HOSTS)
    assert [(p.code, p.ranks) for p in problems] == [("rank-killed", (2,)),
                                                     ("watchdog-abort", (0, 1, 3))]
    assert problems[1].role == "consequence" and problems[0].role == "root-cause"
    assert not any(p.code == "rank-killed" and 0 in p.ranks for p in problems)


def test_a_watchdog_abort_alone_names_the_hung_collective_not_a_kill():
    events = {r: nccl_in_allreduce(r) for r in range(2)}
    problems = diagnose_ranks(events, {0: aborted(0), 1: aborted(1)}, outcome(), HOSTS)
    assert [(p.code, p.ranks) for p in problems] == [("watchdog-abort", (0, 1))]
    p = problems[0]
    assert "SIGABRT from NCCL's watchdog during probe test_all_reduce_sums_exactly" in p.observed
    assert "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141" in p.observed
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" in p.cause and "TORCH_NCCL_DUMP_ON_TIMEOUT" in p.fix


def test_a_sigabrt_on_gloo_without_the_watchdogs_words_is_still_a_kill():
    events = {0: in_allreduce(0), 1: finished(1)}
    exits = {0: aborted(0, tail=("Fatal Python error: Aborted",)), 1: exit_file(1, 0, done=True)}
    (problem,) = diagnose_ranks(events, exits, outcome(), HOSTS)
    assert problem.code == "rank-killed" and "SIGABRT" in problem.observed
