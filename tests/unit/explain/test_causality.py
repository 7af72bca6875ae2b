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


# Cause-grade lines as torch / NCCL print them (ProcessGroupNCCL init.cc, CUDACachingAllocator).
DUPLICATE = ("node1:81:81 [1] init.cc:497 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 "
             "both on CUDA device 1000")
CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
            "a total capacity of 79.15 GiB of which 1.2 GiB is free.")
PORT = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any "
        "local network address. port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, "
        "message: address already in use")
ORDINAL = "RuntimeError: CUDA error: invalid device ordinal"
# torchrun's agent (elastic/multiprocessing/api.py) on a worker ended by SIGKILL
SIGKILL = ("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
           "local_rank: 0 (pid: 5343) of binary: /usr/bin/python3")


def _first(e) -> str:
    causes = [p.code for p in e.problems if not p.consequence_of]
    return causes[0] if causes else "none"


def test_two_causes_the_log_does_not_order_are_an_abstention_that_names_both():
    e = explain_texts([("node0.err", ORDINAL + "\n"), ("node1.err", PORT + "\n")])
    assert _first(e) == "root-cause-ambiguous" and e.undetermined
    head = e.problems[0]
    assert "invalid-device-ordinal (node0.err:1)" in head.observed
    assert "master-port-in-use (node1.err:1)" in head.observed
    assert {p.code for p in e.problems[1:3]} == {"invalid-device-ordinal", "master-port-in-use"}
    assert e.verdict().startswith("ROOT CAUSE UNDETERMINED: candidates: invalid-device-ordinal")
    assert e.to_json()["root_cause_determined"] is False and e.exit_code == 1
    assert "candidate causes" in e.render_text()


def test_two_causes_in_one_stream_follow_its_line_order():
    e = explain_texts([("job.log", f"{PORT}\nstep 3\n{ORDINAL}\n")])
    assert _first(e) == "master-port-in-use" and not e.undetermined
    assert e.problems[1].consequence_of == "master-port-in-use"


def test_timestamps_order_causes_across_files():
    a = f"[2024-05-01 10:00:07,000] {ORDINAL}\n"
    b = f"[2024-05-01 10:00:02,000] {PORT}\n"
    assert _first(explain_texts([("node0.err", a), ("node1.err", b)])) == "master-port-in-use"
    # one second apart on two clocks is no order
    c = f"[2024-05-01 10:00:07,400] {PORT}\n"
    assert _first(explain_texts([("node0.err", a), ("node1.err", c)])) == "root-cause-ambiguous"


def test_the_rank_torchrun_saw_fail_first_orders_unordered_causes():
    summary = ("Root Cause (first observed failure):\n[0]:\n  time      : 2024-05-01_10:00:00\n"
               "  host      : node1\n  rank      : 3 (local_rank: 1)\n  exitcode  : 1 (pid: 9)\n")
    e = explain_texts([("node0.err", f"[rank0]: {ORDINAL}\n"),
                       ("node1.err", f"[rank3]: {PORT}\n{summary}")])
    assert _first(e) == "master-port-in-use"


def test_a_known_cause_of_the_other_comes_first_without_an_order():
    e = explain_texts([("node0.err", CUDA_OOM + "\n"), ("node1.err", DUPLICATE + "\n")])
    assert _first(e) == "duplicate-device"
    assert e.problems[1].consequence_of == "duplicate-device"


def test_a_hint_alone_answers_and_gives_way_to_a_cause():
    assert _first(explain_texts([("job.log", SIGKILL + "\n")])) == "host-out-of-memory"
    e = explain_texts([("node0.err", SIGKILL + "\n"), ("node1.err", CUDA_OOM + "\n")])
    assert _first(e) == "cuda-out-of-memory" and not e.undetermined


def test_a_warning_line_is_a_hint_that_gives_way_to_an_error_line():
    warn = ("[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 "
            "(errno: 98 - Address already in use).")
    assert _first(explain_texts([("job.log", warn + "\n")])) == "master-port-in-use"
    e = explain_texts([("node0.err", warn + "\n"), ("node1.err", ORDINAL + "\n")])
    assert _first(e) == "invalid-device-ordinal"


def test_an_exception_no_rule_explains_before_a_hint_leaves_the_cause_undetermined():
    crash = ('Traceback (most recent call last):\n  File "/home/me/train.py", line 9, in main\n'
             "ValueError: dataset path /data/x is empty\n")
    e = explain_texts([("job.log", crash + SIGKILL + "\n")])
    assert _first(e) == "root-cause-ambiguous" and e.undetermined
    assert "ValueError: dataset path" in e.problems[1].observed
    assert "train.py:9 in main" in e.problems[1].observed
    # after the hint (torchrun's own summary, a wrapper) it changes nothing
    after = SIGKILL + "\ntorch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
    assert _first(explain_texts([("job.log", after)])) == "host-out-of-memory"
    # before a cause-grade line it may be the first failure too; after it, it changes nothing
    assert _first(explain_texts([("job.log", crash + CUDA_OOM + "\n")])) == \
        "root-cause-ambiguous"
    assert _first(explain_texts([("job.log", CUDA_OOM + "\n" + crash)])) == "cuda-out-of-memory"


def test_a_healthy_log_still_exits_0_and_says_so():
    ok = explain_texts([("job.log", "NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                                    "epoch 1 loss 0.3\ntraining finished\n")])
    assert ok.exit_code == 0 and ok.verdict().startswith("NO FAILURE FOUND")


def test_a_sigkill_after_a_hang_is_the_teardown_not_the_oom_killer():
    # torchrun's agent SIGTERMs the workers, then SIGKILLs them after 30 s (elastic api.py)
    e = explain_texts([("job.log", f"{WATCHDOG}\n{SIGKILL}\n")])
    assert _first(e) == "root-cause-ambiguous" and e.undetermined
    assert "teardown" in e.problems[0].cause
    # a kill first, the peers' timeouts after it: the kill is the first failure
    e = explain_texts([("job.log", f"{SIGKILL}\n{WATCHDOG}\n")])
    assert _first(e) == "host-out-of-memory"
    assert e.problems[1].consequence_of == "host-out-of-memory"
    # the kernel's own word is cause-grade, whatever the order
    oom = "Out of memory: Killed process 5343 (python3) total-vm:90123456kB"
    assert _first(explain_texts([("job.log", f"{WATCHDOG}\n{oom}\n")])) == "host-out-of-memory"


def test_a_warning_beside_another_failure_is_no_root_cause():
    warn = ("[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 "
            "(errno: 98 - Address already in use).")
    e = explain_texts([("job.log", f"{warn}\nepoch 1\n{WATCHDOG}\n")])
    assert _first(e) == "root-cause-ambiguous" and e.undetermined
    assert "warning or INFO line" in e.problems[0].cause and "SIGKILL" not in e.problems[0].cause


def test_a_line_that_does_not_say_whose_name_failed_is_a_symptom():
    gai = "socket.gaierror: [Errno -2] Name or service not known"
    e = explain_texts([("job.log", gai + "\n")])
    assert _first(e) == "endpoint-unresolvable" and e.undetermined
    assert e.verdict().startswith("ROOT CAUSE UNDETERMINED")
    # c10d's reverse lookup warning, printed by healthy jobs too: as printed (C10D_WARNING)
    # no failure; pasted without its [W prefix, a symptom
    noise = ("[W socket.cpp:663] [c10d] The hostname of the client socket cannot be "
             "retrieved. err=-3")
    assert explain_texts([("job.log", noise + "\n")]).exit_code == 0
    bare = noise.split("] ", 1)[1]
    assert explain_texts([("job.log", bare + "\n")]).undetermined


def test_zero_parameters_on_one_rank_is_a_symptom_of_two_causes():
    line = ("RuntimeError: DDP expects same model across all ranks, but Rank 0 has 382 params, "
            "while rank 1 has inconsistent 0 params.")
    e = explain_texts([("job.log", line + "\n")])
    assert e.undetermined and "NCCL transport" in e.problems[0].cause
    other = line.replace("inconsistent 0", "inconsistent 380")
    e = explain_texts([("job.log", other + "\n")])
    assert _first(e) == "ddp-model-mismatch" and not e.undetermined


def test_a_hint_on_ranks_torchrun_did_not_see_fail_first_is_no_root_cause():
    summary = ("Failures:\n[1]:\n  host      : node1\n  rank      : 1 (local_rank: 1)\n"
               "  exitcode  : -9 (pid: 10)\n"
               "Root Cause (first observed failure):\n[0]:\n  host      : node1\n"
               "  rank      : 0 (local_rank: 0)\n  exitcode  : 1 (pid: 9)\n")
    e = explain_texts([("job.log", summary)])
    assert _first(e) == "root-cause-ambiguous" and "rank 0" in e.problems[0].cause
    alone = summary.replace("rank      : 0 (local_rank: 0)\n  exitcode  : 1",
                            "rank      : 1 (local_rank: 1)\n  exitcode  : -9")
    assert _first(explain_texts([("job.log", alone)])) == "host-out-of-memory"


def test_a_cause_printed_after_a_symptom_is_not_the_first_failure():
    ib = ("node2:81:90 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
          "10.0.0.3<53450> with error 12, opcode 0, len 0, vendor err 129")
    e = explain_texts([("job.log", f"{WATCHDOG}\n{ib}\n")])
    assert _first(e) == "root-cause-ambiguous" and "collective-timeout" in e.problems[0].cause
    assert _first(explain_texts([("job.log", f"{ib}\n{WATCHDOG}\n")])) == "nccl-net-error"
    # a connect retry warning before it is not a failure of its own
    retry = ("[W socket.cpp:464] [c10d] The client socket has failed to connect to "
             "[node0]:29500 (errno: 111 - Connection refused).")
    assert _first(explain_texts([("job.log", f"{retry}\n{ORDINAL}\n")])) == \
        "invalid-device-ordinal"


def test_an_ib_completion_error_is_a_hint_that_a_peers_own_cause_outranks():
    ib = ("node2:81:90 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer "
          "10.0.0.3<53450> with error 12, opcode 0, len 0, vendor err 129")
    assert _first(explain_texts([("node2.err", ib + "\n")])) == "nccl-net-error"
    e = explain_texts([("node2.err", ib + "\n"), ("node3.err", CUDA_OOM + "\n")])
    assert _first(e) == "cuda-out-of-memory" and not e.undetermined


def test_before_uses_timestamps_then_one_streams_line_order_and_otherwise_says_it_cannot():
    from ddpcheck.explain.causality import before
    from ddpcheck.explain.reader import Record

    a, b = Record("n0.log", 9, "x", time=100.0), Record("n1.log", 1, "y", time=105.0)
    assert before(a, b) is True and before(b, a) is False
    assert before(Record("n0.log", 9, "x", time=100.0), Record("n1.log", 1, "y", time=100.5)) \
        is None
    assert before(Record("n0.log", 3, "x"), Record("n0.log", 7, "y")) is True
    assert before(Record("n0.log", 3, "x"), Record("n1.log", 7, "y")) is None


def test_tiers_rank_cause_hint_peers_symptom_generic_and_named_consequences():
    from ddpcheck.diagnoses import RANK_EXITED
    from ddpcheck.explain.causality import HINT, SYMPTOM, WARNING, Explained, tier
    from ddpcheck.explain.codes import COLLECTIVE_TIMEOUT, CUDA_OOM
    from ddpcheck.explain.reader import Record

    rec = Record("job.log", 1, "x")

    def ex(diag, root=True, grade="cause", echo=""):
        problem = diag.problem("seen").where(consequence_of=echo or None)
        return Explained(problem, rec, root, "next", (), grade)

    assert tier(ex(CUDA_OOM)) == 0
    assert tier(ex(CUDA_OOM, grade=HINT)) == tier(ex(CUDA_OOM, grade=WARNING)) == 1
    assert tier(ex(CUDA_OOM, root=False)) == 2
    assert tier(ex(CUDA_OOM, grade=SYMPTOM)) == tier(ex(COLLECTIVE_TIMEOUT)) == 3
    assert tier(ex(RANK_EXITED)) == 4
    assert tier(ex(CUDA_OOM, echo="duplicate-device")) == 5


# gh-fairseq-2329 (dev, a healthy two-node run): NCCL 2.4.8 lists a docker bridge beside eth0.
FAIRSEQ_LISTING = ("<2nd node server>:5359:5359 [0] NCCL INFO NET/Socket : Using "
                   "[0]eth0:node2_ip<0> [1]docker0:172.17.0.1<0>")


def test_a_network_condition_warned_alone_is_shown_but_decides_nothing():
    # no refused or timed-out connection follows: the job may have run, or hung silently
    for lines in ([FAIRSEQ_LISTING, "NCCL version 2.4.8+cuda10.1"],
                  # variant: another host, bridge and NCCL version's wording
                  ["gpu-17:88:88 [3] NCCL INFO NET/Socket : Using [0]bond0:10.2.0.17<0> "
                   "[1]br-5f0c2a1b9e7d:172.19.0.1<0>", "NCCL version 2.18.5+cuda12.2"],
                  # gloo's loopback fallback, the other warned condition
                  ["[W ProcessGroupGloo.cpp:715] Warning: Unable to resolve hostname to a "
                   "(local) address. Using the loopback address as fallback. Manually set the "
                   "network interface to bind to with GLOO_SOCKET_IFNAME."]):
        e = explain_texts([("job.log", "\n".join(lines) + "\n")])
        assert e.undetermined and e.verdict().startswith("ROOT CAUSE UNDETERMINED")
        assert _first(e) in ("nccl-wrong-interface", "hostname-loopback")
        assert "may have run" in e.problems[0].cause
        assert not any(p.consequence_of for p in e.problems)


def test_a_network_condition_still_explains_the_connection_failures_after_it():
    refused = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:575] Connection "
               "closed by peer [10.0.3.17]:57365")
    loopback = ("[W ProcessGroupGloo.cpp:694] Warning: Unable to resolve hostname to a (local) "
                "address. Using the loopback address as fallback. Manually set the network "
                "interface to bind to with GLOO_SOCKET_IFNAME.")
    e = explain_texts([("job.log", f"{loopback}\n{refused}\n")])
    assert _first(e) == "hostname-loopback" and not e.undetermined
    # a warning that is no network condition keeps answering alone (torch retries the bind)
    warn = ("[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 "
            "(errno: 98 - Address already in use).")
    e = explain_texts([("job.log", warn + "\n")])
    assert _first(e).endswith("port-in-use") and not e.undetermined  # endpoint- or master-
