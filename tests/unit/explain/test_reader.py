"""reader: launcher prefixes, NCCL hosts, timestamps and torchelastic error files."""

from __future__ import annotations

import json
import time

import pytest

from ddpcheck.explain.reader import RANK_PREFIXES, parse_time, read_text, record, split_prefix


@pytest.mark.parametrize("line,rank,text", [
    ("[rank3]:Traceback (most recent call last):", 3, "Traceback (most recent call last):"),
    ("[default1]:RuntimeError: x", 1, "RuntimeError: x"),
    ("[1,2]<stdout>:smc:1:2 [0] NCCL WARN y", 2, "smc:1:2 [0] NCCL WARN y"),
    ("trainer/0 [1]:[W socket.cpp:558] z", 1, "[W socket.cpp:558] z"),
    ("[rank: 5] Epoch 1", 5, "Epoch 1"),
    ("12: srun says", 12, "srun says"),
    ("[80746] [rank0]:[E321 02:07:08.4 ProcessGroupNCCL.cpp:607] w", 0,
     "[E321 02:07:08.4 ProcessGroupNCCL.cpp:607] w"),
    ("plain line", None, "plain line"),
])
def test_prefixes_give_the_rank_and_are_stripped(line, rank, text):
    r = record("log", 1, line)
    assert (r.rank, r.text) == (rank, text)


def test_rank_named_inside_a_watchdog_message():
    r = record("log", 1, "[E ProcessGroupNCCL.cpp:737] [Rank 6] Watchdog caught ...")
    assert r.rank == 6


def test_nccl_line_gives_the_host():
    r = record("log", 1, "gpu-bql-144-103:18553:18611 [0] include/socket.h:360 WARN Call")
    assert r.host == "gpu-bql-144-103"


def test_glog_and_logging_times_order_lines():
    a = parse_time("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607]")
    b = parse_time("E0321 02:07:09.000000 2606 api.py:869] failed")
    c = parse_time("[2023-10-13 17:40:02,544] torch.distributed")
    assert a is not None and b is not None and c is not None and a < b


def test_error_file_json_becomes_records_with_its_timestamp():
    data = {"message": {"message": "RuntimeError: CUDA error: invalid device ordinal",
                        "extraInfo": {"py_callstack": "Traceback\n  File x", "timestamp": "17"}}}
    recs = read_text("error.json", json.dumps(data))
    assert recs[0].text == "RuntimeError: CUDA error: invalid device ordinal"
    t = time.localtime(17)  # whole seconds: the end of that second
    assert {r.time for r in recs} == {parse_time(time.strftime("%Y-%m-%d %H:%M:%S,999", t))}


def test_an_error_files_moment_orders_among_the_consoles_lines():
    epoch = 1_732_430_304  # the job's own clock, as torchelastic writes it
    data = {"message": {"message": "ValueError: bad batch",
                        "extraInfo": {"py_callstack": "", "timestamp": str(epoch)}}}
    (err,) = read_text("error.json", json.dumps(data))
    before, after = (time.strftime("%Y-%m-%d %H:%M:%S,000", time.localtime(epoch + d))
                     for d in (-60, 60))
    assert parse_time(before) < err.time < parse_time(after)  # type: ignore[operator]


def test_the_root_cause_block_gives_its_exitcode_line_a_rank_and_a_host():
    from ddpcheck.explain.reader import read_text

    block = ("Root Cause (first observed failure):\n[0]:\n  time      : 2024-05-01_10:00:00\n"
             "  host      : gpu-node-07\n  rank      : 3 (local_rank: 3)\n"
             "  exitcode  : -9 (pid: 123)\n  error_file: <N/A>\n"
             "============================================================\nafter\n")
    recs = read_text("job.err", block)
    exitcode = next(r for r in recs if "exitcode" in r.text)
    assert (exitcode.rank, exitcode.host) == (3, "gpu-node-07")
    assert recs[-1].rank is None and recs[-1].host == ""


def test_the_root_cause_block_names_the_rank_that_failed_first():
    from ddpcheck.explain.reader import first_failed_rank

    summary = ("Failures:\n[1]:\n  rank      : 2 (local_rank: 0)\n"
               "------------------------------------------------------------\n"
               "Root Cause (first observed failure):\n[0]:\n  time      : 2024-05-01_10:00:00\n"
               "  host      : node1\n  rank      : 5 (local_rank: 1)\n  exitcode  : 1 (pid: 9)\n")
    assert first_failed_rank(read_text("job.log", summary)) == 5
    assert first_failed_rank(read_text("job.log", "rank : 3\n")) is None


def test_with_every_nodes_console_the_earliest_root_cause_block_names_the_first_rank():
    """Each node's torchrun prints its own block (runs/netns-hostname-loopback: node1's
    console sorts first, but node0's rank 0 failed 25 s earlier); a tie names no rank."""
    from ddpcheck.explain.reader import first_failed_rank

    def block(when: str, host: str, rank: int) -> str:
        return ("Root Cause (first observed failure):\n[0]:\n"
                f"  time      : 2026-11-24_{when}\n  host      : {host}\n"
                f"  rank      : {rank} (local_rank: 0)\n  exitcode  : 1 (pid: 1430)\n")

    recs = [*read_text("console-node1.log", block("13:58:32", "node1", 1)),
            *read_text("console.log", block("13:58:07", "node0", 0))]
    assert first_failed_rank(recs) == 0
    tie = [*read_text("a.log", block("13:58:07", "node1", 1)),
           *read_text("b.log", block("13:58:07", "node0", 0))]
    assert first_failed_rank(tie) is None
    same = [*read_text("a.log", block("13:58:07", "node1", 1)),
            *read_text("a.log", block("13:58:09", "node1", 1))]
    assert first_failed_rank(same) == 1


def _one_by_one(line: str) -> tuple[int | None, str]:
    """split_prefix as it was: each prefix regex in the list's order, up to three times."""
    rank = None
    for _ in range(3):
        m = next((m for rx in RANK_PREFIXES if (m := rx.match(line))), None)
        if m is None:
            break
        rank, line = int(m.group("rank")), line[m.end():]
    return rank, line


@pytest.mark.parametrize("line", [
    "[rank3]: x", "[default12]:y", "[1,3]<stdout>:z", "trainer/0 [5]: w", "[rank: 2] v",
    "7: u", "[4] t", "  [80746] [rank0]: s", "3: [rank1]: [2] r", "[rank3]:[default2]:q",
    "12345: p", "123456: o", "[1,2]<stdin>: n", "no prefix [rank3]:", "", "   ",
])
def test_the_one_prefix_regex_strips_as_the_list_tried_in_order_did(line):
    assert split_prefix(line) == _one_by_one(line)


def test_rays_worker_prefix_and_colour_codes_are_stripped_and_the_node_kept():
    """Ray's driver prints a worker's lines as "(Actor pid=N, ip=A) line" (ip only for another
    node's workers), often coloured: the line itself is what the rules read, the ip the host."""
    recs = read_text("driver.log", "\x1b[36m(RayTrainWorker pid=552, ip=10.130.6.168)\x1b[0m "
                     '  File "/opt/torch/distributed/run.py", line 9, in main\n'
                     "(pid=45601) [rank1]: RuntimeError: boom\n"
                     "(raylet, ip=10.0.0.7) [2023-05-19 12:35:18,347 I 4259 68] x.cc:35: ok\n"
                     "(a note in parentheses, pid=3) stays as it is\n")
    assert recs[0].text == '  File "/opt/torch/distributed/run.py", line 9, in main'
    assert recs[0].host == "10.130.6.168"
    assert (recs[1].text, recs[1].rank, recs[1].host) == ("RuntimeError: boom", 1, "")
    assert recs[2].host == "10.0.0.7" and recs[2].text.startswith("[2023-05-19")
    assert recs[3].text.startswith("(a note in parentheses")


def test_a_ray_workers_trimmed_traceback_is_a_failure_not_a_healthy_log():
    from ddpcheck.explain import explain_texts

    log = ("(CommandActor pid=552, ip=10.130.6.168)   File \"/x/site-packages/torch/distributed/"
           "elastic/rendezvous/c10d_rendezvous_backend.py\", line 115, in _call_store\n")
    assert explain_texts([("driver.log", log)]).exit_code == 1


def test_last_lines_are_each_files_last_output_blank_and_skipped_lines_aside():
    import re

    from ddpcheck.explain.reader import last_lines

    recs = [*read_text("a.log", "one\nretry 1\n\n"), *read_text("b.log", "two\n  \n")]
    assert {s: r.text for s, r in last_lines(recs).items()} == {"a.log": "retry 1",
                                                                "b.log": "two"}
    assert last_lines(recs, skip=re.compile(r"^retry"))["a.log"].text == "one"
