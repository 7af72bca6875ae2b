"""Which lines show a failure: each producer's wording, with a near miss that must not count,
and a log that ends at a 0% progress bar. NO FAILURE FOUND only when nothing fails."""

from __future__ import annotations

import pytest

from ddpcheck.explain import explain_texts
from ddpcheck.explain.engine import NOT_AN_ERROR
from ddpcheck.explain.failures import failure_records, is_failure, stalled_at_start
from ddpcheck.explain.reader import read_text

# (a producer's failure line, a line with the same words that reports no failure)
PAIRS = [
    # CUDA's string as a wrapper re-prints it (Ultralytics), and a CLI flag's help
    ("CUDA Invalid device ordinal in trainer.py:195", "--device  GPU ordinal to use, e.g. 0"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered",
     "memory access pattern: coalesced"),
    ("CUDA kernel errors might be asynchronously reported at some other API call",
     "kernel launch reported 12 blocks"),
    ("RuntimeError: CUBLAS_STATUS_NOT_INITIALIZED when calling cublasCreate(handle)",
     "cublas status: CUBLAS_STATUS_SUCCESS"),
    ("cuda: all CUDA-capable devices are busy or unavailable", "the CUDA device is ready"),
    # errno strings, as c10d / gloo / NCCL quote them
    ("connect [10.0.0.2]:29500: Connection refused", "connection established to 10.0.0.2"),
    ("OSError: No space left on device", "space left on device: 120 GB"),
    # c10d's capitalised "Socket Timeout" is a mark, prose about a timeout is not
    ("torch.distributed.DistStoreError: Socket Timeout", "raising the socket timeout to 300 s"),
    ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8, ...)",
     "[Rank 1] NCCL watchdog thread started!"),
    # exit codes and signals: only non-zero exits, only the signal names
    ("exitcode  : -9 (pid: 5343)", "exitcode  : 0 (pid: 5343)"),
    ("[launch.py:131] killing subprocess 1234; exits with return code = 1",
     "process exits with return code = 0"),
    ("Signal 9 (SIGKILL) received by PID 5343", "signal handlers installed"),
    # glog severity E/F, not a word that starts with E
    ("[E ProcessGroupNCCL.cpp:566] [Rank 0] Some NCCL operations have failed",
     "Epoch 3: loss 0.12"),
    ("E0325 20:57:27.620000 140 torch/distributed/elastic/agent.py:94] worker 3 lost",
     "E 3 20 57"),
    # Slurm, the kernel
    ("slurmstepd: *** JOB 42 ON n1 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***",
     "job 42 started on n1 with a 4 h time limit"),
    ("INFO: task python:1234 blocked for more than 120 seconds.", "blocked ranks: none"),
    # py-spy dump of a stuck process, a faulthandler dump
    ('Thread 4242 (active): "MainThread"', "Thread pool started with 8 workers"),
    ("Thread 0x00007f (most recent call first):", "most recent checkpoint: step 400"),
    # gloo, NCCL result strings without the word "error"
    ("[enforce fail at ../gloo/transport/tcp/pair.cc:446] op.preamble.length <= op.nbytes",
     "enforce the same seed on every rank"),
    ("ncclInvalidUsage: invalid usage (run with NCCL_DEBUG=WARN for details)",
     "usage: train.py [-h] [--epochs N]"),
    # messages that wrappers print without their exception's name
    ("Default process group has not been initialized, please make sure to call "
     "init_process_group.", "process group initialized with backend nccl"),
]


@pytest.mark.parametrize(("failure", "near_miss"), PAIRS)
def test_a_producers_failure_wording_counts_and_its_near_miss_does_not(failure, near_miss):
    assert is_failure(failure), failure
    assert not is_failure(near_miss), near_miss


def test_lines_a_healthy_job_prints_are_no_failure():
    for line in ["TIMEOUT(ms): 5000", "NCCL_ASYNC_ERROR_HANDLING: 1",  # PG NCCL's options
                 "# Errors with asterisks indicate errors that have exceeded the maximum",
                 "# Out of bounds values : 0 OK",  # nccl-tests' table footer
                 # ibvwrap.cc's fallback warning: NCCL goes on over sockets
                 "node:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]"]:
        assert not is_failure(line), line
    # NCCL's return-code trace at a comm abort of a job that finished: an INFO line
    recs = read_text("ok.log", "h:1:2 [0] NCCL INFO misc/socket.cc:47 -> 3\n")
    assert failure_records(recs, NOT_AN_ERROR) == []


def test_traceback_frames_whose_header_was_trimmed_are_a_failure():
    frames = ('  File "main.py", line 830, in <module>\n    trainer.fit(model, data)\n'
              '  File "/site-packages/pytorch_lightning/trainer.py", line 740, in fit\n'
              "    self._call_and_handle_interrupt(\n")
    recs = read_text("job.log", frames)
    assert [r.lineno for r in failure_records(recs, NOT_AN_ERROR)] == [1]  # quoted once
    e = explain_texts([("job.log", frames)])
    assert e.exit_code == 1 and e.verdict().startswith("UNEXPLAINED")


def test_frames_under_their_header_are_the_headers_and_a_saved_file_is_no_frame():
    text = ('Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n'
            "    main()\nValueError: bad\n")
    got = [r.text for r in failure_records(read_text("job.log", text), NOT_AN_ERROR)]
    assert got == ["Traceback (most recent call last):", "ValueError: bad"]
    assert failure_records(read_text("j.log", 'File "ckpt.pt", saved at step 400\n'),
                           NOT_AN_ERROR) == []


def test_a_wrappers_capitalisation_of_a_cuda_string_is_no_healthy_log():
    e = explain_texts([("job.log", "CUDA Invalid device ordinal in trainer.py:195\n")])
    assert e.exit_code == 1
    assert [p.code for p in e.problems][0] == "invalid-device-ordinal"


BAR = "Processed prompts:   0%|          | 0/16 [00:00<?, ?it/s, est. speed input: 0.00 toks/s]"


def test_a_log_that_ends_at_a_zero_progress_bar_stopped_at_step_zero():
    text = "INFO 11-01 23:16:33 executor.py:56] # GPU blocks: 185231\n" + BAR + "\n"
    assert stalled_at_start(read_text("job.log", text)) is not None
    e = explain_texts([("job.log", text)])
    assert e.exit_code == 1 and e.undetermined
    assert "progress bar still at 0" in e.problems[0].observed
    assert "TORCH_FR_BUFFER_SIZE" in e.problems[0].fix


@pytest.mark.parametrize("text", [
    BAR + "\nProcessed prompts: 100%|##########| 16/16 [00:03<00:00]\n",  # it went on
    "Epoch 1:  10%|#         | 1/10 [00:01<00:09]\n",  # past the first step
    BAR + "\r" + "Processed prompts:  50%|#####     | 8/16 [00:01<00:01]\n",  # \r-updated bar
])
def test_a_bar_past_zero_or_followed_by_more_output_is_no_stop(text):
    assert stalled_at_start(read_text("job.log", text)) is None
    assert explain_texts([("job.log", text)]).exit_code == 0


def test_no_failure_found_says_how_to_catch_a_hang():
    e = explain_texts([("ok.log", "epoch 3 loss 0.12\n")])
    verdict = e.verdict()
    assert e.exit_code == 0 and verdict.startswith("NO FAILURE FOUND")
    for hint in ("NCCL_DEBUG=INFO", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE",
                 "TORCH_NCCL_DUMP_ON_TIMEOUT=1", "py-spy dump"):
        assert hint in verdict, hint


def test_a_hint_gives_way_to_an_earlier_failure_line_no_rule_reads():
    e = explain_texts([("job.log", "[E custom_op.cpp:12] kernel launch returned 7\nKilled\n")])
    assert e.problems[0].code == "root-cause-ambiguous" and e.undetermined
    assert "no rule reads" in e.problems[0].cause
    # near miss: the launcher's teardown lines say a worker ended, not why
    e = explain_texts([("job.log", "WARNING:torch.distributed.elastic.multiprocessing.api:"
                        "Sending process 9 closing signal SIGTERM\nERROR:torch.distributed."
                        "elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 "
                        "(pid: 5) of binary: python\n")])
    assert e.problems[0].code == "host-out-of-memory"


def test_device_query_and_init_prose_are_no_failure():
    for line in ["Detected 2 CUDA Capable device(s)", "Found 8 CUDA-capable devices",
                 "wandb: run not yet initialized, starting"]:
        assert not is_failure(line), line
    assert is_failure("RuntimeError: CUDA error: no CUDA-capable device is detected")
    assert is_failure("cudaErrorSystemNotReady: system not yet initialized")


# torchrun's agent on a node that did not host the store, at the end of a healthy two-node
# run (dynamic_rendezvous.py _close's logger.warning), in the formats torch's loggers have:
# torch >= 2.3's glog-style one (torch/_logging/_internal.py) and 1.9-2.2's "[WARNING]".
SHUTDOWN = ("The node 'n2_4711_0' has failed to shutdown the rendezvous 'job7' due to an "
            "error of type RendezvousConnectionError.")
WARNED = [
    "W1124 13:05:09.112000 4711 site-packages/torch/distributed/elastic/rendezvous/"
    "dynamic_rendezvous.py:1321] " + SHUTDOWN,
    "[2023-09-12 08:31:09,112] torch.distributed.elastic.rendezvous.dynamic_rendezvous: "
    "[WARNING] " + SHUTDOWN,
    "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:" + SHUTDOWN,
    "[WARNING|trainer.py:123] 2024-05-01 10:00:00 >> RuntimeError in a metric, skipped",
    "05/01/2024 10:00:00 - WARNING - __main__ - CUDA error on a retry, retrying",
]


@pytest.mark.parametrize("line", WARNED)
def test_a_line_its_producer_logged_as_a_warning_is_no_failure(line):
    healthy = "step 100 loss 0.5\n" + line + "\ntraining done\n"
    explanation = explain_texts([("node2.log", healthy)])
    assert explanation.exit_code == 0, explanation.verdict()


@pytest.mark.parametrize("line", [w.replace("W1124", "E1124").replace("WARNING", "ERROR")
                                  for w in WARNED])
def test_the_same_line_logged_as_an_error_is_a_failure(line):
    recs = read_text("node2.log", line + "\n")
    assert failure_records(recs, NOT_AN_ERROR) == recs


@pytest.mark.parametrize("line", [
    # torch 2.13 elastic multiprocessing/api.py and agent/server/api.py log these at WARNING
    "W1124 13:05:09.112000 4711 torch/distributed/elastic/multiprocessing/api.py:897] "
    "Sending process 4712 closing signal SIGTERM",
    "W1124 13:05:09.112000 4711 torch/distributed/elastic/agent/server/api.py:704] "
    "Received Signals.SIGTERM death signal, shutting down workers",
    "[2023-09-12 08:31:09,112] torch.distributed.elastic.multiprocessing.api: [WARNING] "
    "Sending process 4712 closing signal SIGTERM",
])
def test_a_launchers_warning_that_a_worker_ended_keeps_the_job_from_being_healthy(line):
    assert explain_texts([("node2.log", "step 1 loss 0.5\n" + line + "\n")]).exit_code == 1


# A training loop's error metrics and zero counts (the figures torchmetrics, timm's
# "top1_err", HF's "eval_*" dicts and pytest's summary print) beside the failures that carry
# the same words with an integer (make's "Error 137", NCCL's result number) or an
# exception's name glued to a capital.
@pytest.mark.parametrize("metric", [
    "epoch 3 | train_loss 0.21 | val_error 0.05",
    "Epoch 3: top1_error=12.3 top5_error=2.1",
    "{'eval_loss': 0.5, 'eval_error': 0.1}",
    "Validation Error: 0.034",
    "step 100 rel_error 1e-3 max_abs_error 2e-05",
    "eval: word error rate (WER) 4.5%",
    "Test: top1_err 23.51%",
    "0 failed, 12 passed",
    "errors: 0",
])
def test_an_error_metric_or_a_zero_count_is_no_failure(metric):
    assert not is_failure(metric)
    assert explain_texts([("train.log", metric + "\n")]).exit_code == 0


@pytest.mark.parametrize("failure", [
    "RuntimeError: 0.5 is not a valid value",
    "make: *** [all] Error 137",
    "NCCL error 2: unhandled system error",
    "1 failed, 12 passed",
    "Error: 0.5s timed out",
])
def test_the_same_words_with_an_integer_or_an_exception_name_are_a_failure(failure):
    assert is_failure(failure)


# glog's INFO severity, as c10 (TORCH_CPP_LOG_LEVEL=INFO) and torch >= 2.3's Python loggers
# print it: the libuv store's shutdown line of a real healthy run (torch 2.13) is no failure;
# the agent's worker-group end state and a worker's end, logged at INFO too, still are.
@pytest.mark.parametrize("line", [
    "[I1124 16:31:39.317481630 TCPStoreLibUvBackend.cpp:1354] [c10d] uv_loop_close failed "
    "with:-16 errn:EBUSY desc:resource busy or locked",
    "I1124 16:31:39.317000 4711 torch/distributed/elastic/agent/server/api.py:900] "
    "[default] retrying a failed rendezvous read",
])
def test_a_line_logged_at_info_is_no_failure(line):
    assert not failure_records(read_text("run.log", line + "\n"), NOT_AN_ERROR)


@pytest.mark.parametrize("line", [
    "I1124 16:32:28.317000 4711 torch/distributed/elastic/agent/server/api.py:719] "
    "[default] Worker group FAILED. 3/3 attempts left; will restart worker group",
    "I1124 16:32:28.317000 4711 torch/distributed/elastic/multiprocessing/api.py:900] "
    "Sending process 4712 closing signal SIGTERM",
    "[E1124 16:31:39.317481630 TCPStoreLibUvBackend.cpp:1354] [c10d] uv_loop_close failed",
])
def test_an_agents_end_state_or_a_workers_end_logged_at_info_stays_a_failure(line):
    assert failure_records(read_text("run.log", line + "\n"), NOT_AN_ERROR)


# gdb attached to a hung rank (gdb/stack.c print_frame), as users paste it: a stack, like
# py-spy's, of a process stopped to see where it waits; a markdown list or comment is none.
@pytest.mark.parametrize(("line", "fails"), [
    ("(gdb) bt", True),
    ("(gdb) thread apply all bt", True),
    ("#2  0x00007f778b8ae63f in void c10d::tcputil::recvBytes<unsigned char>(int, unsigned "
     "char*, unsigned long) () from /env/lib/python3.8/site-packages/torch/lib/libtorch_cpu.so",
     True),
    ("#2 in the list of steps", False),
    ("# 0x1f in hex is 31", False),
    ("(gdb) run", False),
])
def test_a_gdb_backtrace_is_a_stuck_process(line, fails):
    assert is_failure(line) is fails


def test_a_c10d_warnings_own_cpp_stack_is_no_failure_line():
    # stop-32b dev gh37-torchcomms-2358: the store client's retry warning with the caught
    # c10::Error's stack, on a run that went on
    warned = ["[W506 00:43:56.240378877 TCPStore.cpp:125] [c10d] recvValue failed on "
              "SocketImpl(fd=3, addr=[n0]:47466, remote=[n0]:29500): Connection reset by peer",
              "Exception raised from recvBytes at /pt/torch/csrc/distributed/c10d/Utils.hpp:679 "
              "(most recent call first):",
              "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x80 (0x1 in "
              "/pt/torch/lib/libc10.so)"]
    assert explain_texts([("a.log", "\n".join(warned) + "\n")]).exit_code == 0
    # the same stack under an error line is that error's
    errored = [warned[0].replace("[W506", "[E506"), *warned[1:]]
    assert explain_texts([("a.log", "\n".join(errored) + "\n")]).exit_code != 0
