"""Stop 29: what older torch releases print for the same failures (recorded with torch 1.13.1
and 2.1.2 by ``bench/explain_real_runs.py``, tests/data/explain/runs-torch*/), each line as
that release prints it (its site-packages source or the strings of its libtorch_cpu.so
cited), and a near miss that must not match.
"""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.engine import explain_inputs
from ddpcheck.explain.globalranks import apply
from ddpcheck.explain.inputs import read_inputs
from ddpcheck.explain.reader import first_failed_rank, read_text
from tests.helpers.paths import DATA

RUNS_113 = DATA / "explain" / "runs-torch1.13"
LOST = ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed "
        "by peer [127.0.0.1]:60310")


def _verdict(*files: tuple[str, str]) -> tuple[str, bool, str]:
    e = explain_texts(list(files))
    causes = [p for p in e.problems if not p.consequence_of]
    first = causes[0] if causes else None
    return (first.code if first else "none"), e.undetermined, first.observed if first else ""


def _summary(*entries: tuple[str, int, str, str], root: tuple[str, int, str, str]) -> str:
    """torchrun's ChildFailedError summary (errors/__init__.py _MSG_FORMAT_TEMPLATE,
    _format_failure: the same fields in torch 1.13.1 and 2.13)."""
    def entry(i: int, e: tuple[str, int, str, str]) -> str:
        when, rank, code, efile = e
        return (f"[{i}]:\n  time      : 2026-11-24_{when}\n  host      : localhost\n"
                f"  rank      : {rank} (local_rank: {rank})\n  exitcode  : {code} (pid: 1)\n"
                f"  error_file: {efile}\n  traceback : To enable traceback see: "
                "https://pytorch.org/docs/stable/elastic/errors.html\n")
    others = "".join(entry(i, e) for i, e in enumerate(entries, 1)) or "  <NO_OTHER_FAILURES>\n"
    return ("=" * 60 + "\nbench/real_runs_train.py FAILED\n" + "-" * 60 + "\nFailures:\n"
            + others + "-" * 60 + "\nRoot Cause (first observed failure):\n" + entry(0, root)
            + "=" * 60 + "\n")


def test_a_root_cause_block_tied_on_its_second_with_another_failure_names_no_rank():
    # 1.13.1 runs-torch1.13/user-exception: rank 1's KeyError and rank 0's lost peer in one
    # second; get_first_failure's min() keeps rank 0 (error_handler.py int(time.time()))
    ef = "/tmp/r/logs/none_x/attempt_0/{}/error.json"
    tied = _summary(("16:03:54", 1, "1", ef.format(1)), root=("16:03:54", 0, "1", ef.format(0)))
    assert first_failed_rank(read_text("c.log", tied)) is None
    # near misses: the other failure a second later, or torchrun's own SIGTERM in that second
    later = _summary(("16:03:55", 1, "1", ef.format(1)), root=("16:03:54", 0, "1", ef.format(0)))
    assert first_failed_rank(read_text("c.log", later)) == 0
    torn = _summary(("16:03:54", 1, "-15", "<N/A>"), root=("16:03:54", 0, "1", ef.format(0)))
    assert first_failed_rank(read_text("c.log", torn)) == 0


def test_a_failure_with_no_error_file_is_dated_when_the_agent_looked():
    # 1.13.1 runs-torch1.13/sigkill: "exitcode : -9 (pid: 17205) error_file: <N/A>" at :25,
    # the Root Cause block's rank 0 (its lost peer) at :23; the default --monitor_interval
    # is 5 s in torch 1.13 and 2.1 (run.py), so :25 is only when the agent polled
    ef = "/tmp/r/logs/none_x/attempt_0/0/error.json"
    killed = _summary(("16:04:25", 1, "-9", "<N/A>"), root=("16:04:23", 0, "1", ef))
    assert first_failed_rank(read_text("c.log", killed)) is None
    # near miss: every other failure wrote its error file and came later
    other = _summary(("16:04:25", 1, "1", ef.replace("/0/", "/1/")), root=("16:04:23", 0, "1",
                                                                          ef))
    assert first_failed_rank(read_text("c.log", other)) == 0


def test_of_tracebacks_without_ranks_the_one_that_is_no_lost_peer_is_the_first_failure():
    # 1.13.1 runs-torch1.13/user-exception-console: torchrun without --tee; torch 1.13
    # and 2.1 print no "[rankN]:" prefix on a worker's traceback (2.5 does)
    frame = '  File "/work/bench/real_runs_train.py", line {}, in {}\n    x\n'
    log = ("Traceback (most recent call last):\n" + frame.format(81, "train") + LOST + "\n"
           "Traceback (most recent call last):\n" + frame.format(92, "inject")
           + "KeyError: 'labels'\n")
    code, undetermined, observed = _verdict(("console.log", log))
    assert code == "unexplained" and "KeyError: 'labels'" in observed
    assert "failed first" in observed
    # near miss: two exceptions of their own, nothing says which came first
    two = log.replace(LOST, "ValueError: could not parse record 1204")
    code, undetermined, observed = _verdict(("console.log", two))
    assert "failed first" not in observed


def test_the_summary_gives_log_dir_files_their_global_rank_without_a_rank_prefix():
    # errors/__init__.py _format_failure: "rank : 9 (local_rank: 1)" and "error_file: .../
    # <run_id>/attempt_0/1/error.json" name the node's offset (8) for that attempt's files
    tree = "job/logs/none_ab/attempt_0/1/stderr.log"
    summary = ("  rank      : 9 (local_rank: 1)\n  exitcode  : 1 (pid: 5)\n"
               "  error_file: /tmp/run/logs/none_ab/attempt_0/1/error.json\n")
    texts = {tree: "KeyError: 'labels'\n", "console.log": summary}
    recs = [*read_text(tree, texts[tree]), *read_text("console.log", summary)]
    assert apply(recs, texts)[0].rank == 9
    # near miss: the summary of another run (its run_id) says nothing of this tree
    other = {tree: texts[tree], "console.log": summary.replace("none_ab", "none_cd")}
    recs = [*read_text(tree, other[tree]), *read_text("console.log", other["console.log"])]
    assert apply(recs, other)[0].rank is None


def test_a_store_connect_timeout_in_whole_seconds_follows_the_unresolved_name():
    # 1.13.1/2.1.2 libtorch_cpu.so: "The client socket has timed out after {} while trying
    # to connect to ({}, {})." with a std::chrono duration: "8s" (2.13: "8000ms")
    lines = ("[W socket.cpp:601] [c10d] The IPv6 network addresses of (no-such-host.invalid, "
             "39891) cannot be retrieved (gai error: -2 - Name or service not known).",
             "[E socket.cpp:860] [c10d] The client socket has timed out after 8s while trying "
             "to connect to (no-such-host.invalid, 39891).",
             "Traceback (most recent call last):",
             '  File "/v/torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", line '
             "55, in next_rendezvous",
             "TimeoutError: The client socket has timed out after 8s while trying to connect "
             "to (no-such-host.invalid, 39891).")
    assert _verdict(("c.log", "\n".join(lines)))[0] == "master-addr-unresolvable"
    # near miss: the timeout is to another host than the name that did not resolve
    miss = [x.replace("(no-such-host.invalid, 39891).", "(node0, 39891).") if "timed out" in x
            else x for x in lines]
    assert _verdict(("c.log", "\n".join(miss)))[0] != "master-addr-unresolvable"


def test_a_lost_peer_printed_before_the_other_ranks_own_cause_does_not_hide_it():
    # 1.13.1 runs-torch1.13/fresh-disk-full-console: the peer's lost connection six lines
    # before the traceback of the rank whose finally: destroy_process_group() closed it
    log = ("Traceback (most recent call last):\n" + LOST + "\nTraceback (most recent call "
           "last):\n  File \"/w/train.py\", line 36, in save_checkpoint\n"
           "OSError: [Errno 28] No space left on device\n")
    assert _verdict(("console.log", log))[:2] == ("disk-full", False)
    # near miss: the lost peer and the cause on the same rank (its own line order holds)
    same = "".join(f"[default1]:{x}\n" for x in log.splitlines())
    assert _verdict(("console.log", same))[1]


def test_gloo_connects_refused_at_loopback_follow_the_loopback_fallback_warning():
    # 1.13.1 runs-torch1.13/netns-own-hostname-not-in-hosts: node1's untimed warning
    # (ProcessGroupGloo.cpp:694) and node0's refused connect to 127.0.0.1 (pair.cc:799)
    warn = ("[default0]:[W ProcessGroupGloo.cpp:694] Warning: Unable to resolve hostname to a "
            "(local) address. Using the loopback address as fallback (function operator())\n")
    refused = ("[default0]:Traceback (most recent call last):\n[default0]:RuntimeError: "
               "[../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [127.0.0.1]:16798:"
               " Connection refused\n")
    assert _verdict(("node1.log", warn), ("node0.log", refused))[0] == "hostname-loopback"
    # near miss: refused at a routable address: the warning does not explain it
    other = refused.replace("127.0.0.1", "10.1.2.3")
    assert _verdict(("node1.log", warn), ("node0.log", other))[0] != "hostname-loopback"


def test_dataloaders_exited_unexpectedly_wraps_the_workers_bus_error():
    # utils/data/dataloader.py _try_get_data (1.13.1-2.13): raise RuntimeError('DataLoader
    # worker (pid(s) {}) exited unexpectedly') from e (runs-torch1.13/shm-too-small)
    log = ("Traceback (most recent call last):\n  File \"/v/torch/utils/data/_utils/"
           "signal_handling.py\", line 66, in handler\nRuntimeError: DataLoader worker (pid "
           "31931) is killed by signal: Bus error. It is possible that dataloader's workers "
           "are out of shared memory. Please try to raise your shared memory limit.\n\n"
           "The above exception was the direct cause of the following exception:\n\n"
           "Traceback (most recent call last):\n  File \"/w/train.py\", line 66, in train\n"
           "RuntimeError: DataLoader worker (pid(s) 31931) exited unexpectedly\n")
    assert _verdict(("error.log", log))[:2] == ("dev-shm-too-small", False)
    # near miss: the wrapper alone names no cause
    alone = "RuntimeError: DataLoader worker (pid(s) 31931) exited unexpectedly\n"
    assert _verdict(("error.log", alone))[0] != "dev-shm-too-small"


def test_gloo_socket_ifname_lo_with_torch_113s_refused_connect_at_127_0_0_1():
    # 1.13.1 has no gloo debug_logger ("remote=[127.0.0.1]" in 2.x): pair.cc:799 only
    # (runs-torch1.13/netns-socket-ifname-lo)
    script = "+ export GLOO_SOCKET_IFNAME=lo\n"
    refused = ("[default0]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] "
               "connect [127.0.0.1]:33175: Connection refused\n")
    assert _verdict(("node0.log", script + refused))[0] == "socket-ifname-unreachable"
    # near miss: the job sets no such variable
    assert _verdict(("node0.log", refused))[0] != "socket-ifname-unreachable"


def test_recorded_113_runs_the_structure_decides():
    """Whole recordings: the Root Cause blocks of two nodes order a hint (node0 failed
    first) over node1's untimed "failed (exitcode: 1)"; a SIGKILL dated by the agent's poll
    is the first failure by causality."""
    ex = explain_inputs(read_inputs([str(RUNS_113 / "netns-hostname-loopback")], None))
    assert ex.problems[0].code == "hostname-loopback" and not ex.undetermined
    ex = explain_inputs(read_inputs([str(RUNS_113 / "sigkill")], None))
    assert ex.problems[0].code == "host-out-of-memory" and ex.problems[0].ranks == (1,)


MESH = ("RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/"
        "tcp/pair.h:301] Connect timeout [none]")


def test_torch_21s_connect_full_mesh_timeout_names_no_address_but_follows_the_warning():
    # 2.1.2 runs-torch2.1/netns-own-hostname-not-in-hosts: ProcessGroupGloo.cpp:138 prints
    # no address; gloo dials only addresses published after each peer made its device
    warn = ("[default0]:[W ProcessGroupGloo.cpp:695] Warning: Unable to resolve hostname to a "
            "(local) address. Using the loopback address as fallback. Manually set the network "
            "interface to bind to with GLOO_SOCKET_IFNAME. (function operator())\n")
    timeout = f"[default0]:Traceback (most recent call last):\n[default0]:{MESH}\n"
    assert _verdict(("node1.log", warn), ("node0.log", timeout))[0] == "hostname-loopback"
    # near miss: a store wait that timed out is no pair connect
    store = timeout.replace(MESH, "RuntimeError: Wait timeout after 30000ms, keys: /rank_1")
    assert _verdict(("node1.log", warn), ("node0.log", store))[0] != "hostname-loopback"


def test_gloo_socket_ifname_lo_on_two_hosts_whose_mesh_connect_timed_out():
    # 2.1.2 runs-torch2.1/netns-socket-ifname-lo: no address in the line, two hosts failing
    def node(host: str) -> str:
        return (f"+ export GLOO_SOCKET_IFNAME=lo\n[default0]:{MESH}\n"
                f"Root Cause (first observed failure):\n[0]:\n  time      : 2026-11-24_16:22:14\n"
                f"  host      : {host}\n  rank      : 0 (local_rank: 0)\n"
                "  exitcode  : 1 (pid: 5)\n  traceback : Traceback (most recent call last):\n"
                f"  {MESH}\n")
    assert _verdict(("n0.log", node("node0")), ("n1.log", node("node1")))[0] == \
        "socket-ifname-unreachable"
    # near miss: one host (lo reaches its own ranks: the variable is no cause there)
    assert _verdict(("n0.log", node("node0")))[0] != "socket-ifname-unreachable"


def test_a_log_dir_tree_without_rank_prefixes_the_exception_of_its_own_is_the_root():
    # 1.13.1 runs-torch1.13/user-exception/logs alone: each worker's stderr.log and
    # error.json hold the same traceback, and no line names a global rank
    tb = "Traceback (most recent call last):\n  File \"/w/real_runs_train.py\", line 92, " \
         "in inject\n    x\n{}\n"
    files = [("logs/none_a/attempt_0/0/stderr.log", tb.format(LOST)),
             ("logs/none_a/attempt_0/1/stderr.log", tb.format("KeyError: 'labels'")),
             ("logs/none_a/attempt_0/1/error.log", tb.format("KeyError: 'labels'"))]
    code, _, observed = _verdict(*files)
    assert code == "unexplained" and "KeyError: 'labels'" in observed
    assert "failed first" in observed
    # near miss: two different exceptions of their own: nothing says which came first
    other = [*files, ("logs/none_a/attempt_0/2/stderr.log", tb.format("ValueError: bad row"))]
    assert "failed first" not in _verdict(*other)[2]


def test_a_signal_death_dated_by_the_agents_poll_leads_the_peers_lost_connection():
    # 2.1.2 runs-torch2.1/fresh-sigsegv: rank 1's "exitcode : -11 ... error_file: <N/A>
    # traceback : Signal 11 (SIGSEGV) received by PID 13318" 3 s after the Root Cause block's
    # rank 0 ("Connection closed by peer"): a symptom still, but the first one
    ef = "/tmp/r/logs/none_x/attempt_0/0/error.json"
    def log(code: str, sig: str) -> str:
        summary = _summary(("16:19:31", 1, code, "<N/A>"), root=("16:19:28", 0, "1", ef))
        summary = summary.replace("  traceback : To enable traceback see: https://pytorch.org/"
                                  "docs/stable/elastic/errors.html\n[0]:",
                                  f"  traceback : Signal {sig} received by PID 13318\n[0]:", 1)
        return (f"[default0]:Traceback (most recent call last):\n[default0]:{LOST}\n"
                + summary)
    code, undetermined, observed = _verdict(("c.log", log("-11", "11 (SIGSEGV)")))
    assert code == "rank-killed" and "SIGSEGV" in observed and undetermined
    # near miss: torchrun's own SIGTERM of rank 1 is no first failure
    assert _verdict(("c.log", log("-15", "15 (SIGTERM)")))[0] != "rank-killed"
