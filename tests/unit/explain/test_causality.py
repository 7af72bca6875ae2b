"""Root cause before consequences, on real logs joined as one job's output."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.helpers.paths import DATA

LOGS = DATA / "logs"


def _read(*names: str) -> list[tuple[str, str]]:
    return [(n, (LOGS / n).read_text()) for n in names]


def test_a_crash_comes_before_the_watchdog_timeouts_of_the_others():
    e = explain_texts(_read("watchdog/allreduce-basicsr-737.log", "device/oom-ddp-18853.log"))
    assert [p.code for p in e.problems] == ["cuda-out-of-memory", "collective-timeout"]
    assert e.problems[1].consequence_of == "cuda-out-of-memory"
    assert "consequences" in e.render_text()


def test_torchrun_teardown_signals_follow_the_worker_error():
    e = explain_texts(_read("ddpcheck-run/torchrun-gloo-ifname-eth9.log"))
    assert e.problems[0].code == "socket-ifname-invalid"
    assert e.problems[0].ranks == (0, 1)
    assert {p.code for p in e.problems[1:]} == {"rank-exited", "rank-killed"}
    assert all(p.consequence_of == "socket-ifname-invalid" for p in e.problems[1:])


def test_watchdog_compares_sequence_numbers_across_ranks():
    e = explain_texts(_read("watchdog/allreduce-llamafactory-7396.log"))
    (p,) = e.problems
    assert p.code == "collective-timeout" and p.ranks == (0, 4)
    assert "ALLREDUCE #1580" in p.cause
    d = explain_texts(_read("watchdog/desync-seq-lightning-118369.log")).problems[0]
    assert d.code == "collective-desync" and d.ranks == (0, 7)


def test_a_log_without_a_known_pattern_is_unexplained_with_its_error_lines():
    (p,) = explain_texts(_read("other/unrelated-debugger-5040.log")).problems
    assert p.code == "unexplained" and "Exception escaped from start_client" in p.observed


def test_ambiguous_evidence_names_the_candidates():
    (p,) = explain_texts(_read("rendezvous/c10d-connect-timeout-107021.log")).problems
    assert "firewall" in p.cause and "had not started" in p.cause
    (t,) = explain_texts(_read("rendezvous/errorfile-timeout-avhubert.log")).problems
    assert "does not decide" in t.cause


# ProcessGroupNCCL.cpp WorkNCCL::checkTimeout, as torch 2.x prints it.
WATCHDOG = ("[rank1]:[E ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=412, OpType=ALLREDUCE, NumelIn=2048, NumelOut=2048, "
            "Timeout(ms)=600000) ran for 600039 milliseconds before timing out.")
# torch/csrc/distributed/c10d/socket.cpp, a client that never reached the store.
CONNECT = ("torch.distributed.DistNetworkError: The client socket has timed out after 900s "
           "while trying to connect to (10.0.0.1, 29500).")


def test_a_symptom_alone_leaves_the_root_cause_undetermined_and_quotes_the_first_errors():
    e = explain_texts([("rank1.log", f"step 411\n{WATCHDOG}\n")])
    assert e.problems[0].code == "collective-timeout" and e.undetermined
    verdict = e.verdict()
    assert verdict.startswith("ROOT CAUSE UNDETERMINED: the log shows collective-timeout")
    assert "rank1.log:2: " in verdict
    assert e.to_json()["root_cause_determined"] is False and e.exit_code == 1


def test_an_unreachable_endpoint_alone_is_a_symptom_not_a_cause():
    e = explain_texts([("node1.err", CONNECT + "\n")])
    assert e.problems[0].code == "endpoint-unreachable" and e.undetermined
    assert "node1.err:1" in e.verdict()


def test_a_specific_cause_comes_before_a_symptom_printed_earlier():
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
           "a total capacity of 79.15 GiB of which 1.2 GiB is free.")
    e = explain_texts([("node1.err", CONNECT + "\n"), ("node0.err", oom + "\n")])
    assert e.problems[0].code == "cuda-out-of-memory" and not e.undetermined
    assert e.verdict().startswith("EXPLAINED: 1 cause")
