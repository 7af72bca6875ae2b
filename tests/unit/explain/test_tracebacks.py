"""The last exception of a rank's traceback and the user's frame, ranks interleaved."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from ddpcheck.explain.reader import read_text
from ddpcheck.explain.tracebacks import crashes, summary

LOG = """\
[rank1]: Traceback (most recent call last):
[rank0]: Traceback (most recent call last):
[rank1]:   File "/home/me/train.py", line 42, in <module>
[rank1]:     main()
[rank0]:   File "/home/me/train.py", line 40, in <module>
[rank1]:   File "/home/me/model.py", line 7, in forward
[rank1]:   File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1, in _call
[rank1]: ValueError: shapes (3,) and (4,) differ
[rank0]: KeyError: 'labels'
"""


def test_each_rank_gets_its_own_exception_and_user_frame():
    found = crashes(read_text("job.log", LOG))
    assert [(c.rank, c.exception, c.user_frame) for c in found] == [
        (1, "ValueError: shapes (3,) and (4,) differ", "/home/me/model.py:7 in forward"),
        (0, "KeyError: 'labels'", "/home/me/train.py:40 in <module>")]
    assert summary(read_text("job.log", LOG)).endswith("[job.log:8]")


def test_an_unexplained_log_quotes_the_first_exception_and_its_frame():
    (p,) = explain_texts([("job.log", LOG)]).problems
    assert p.code == "unexplained"
    assert "first exception: rank 1: ValueError: shapes" in p.observed
    assert "user code: /home/me/model.py:7 in forward" in p.observed


def test_unclaimed_keeps_each_ranks_first_exception_that_nothing_wraps_or_explains():
    from ddpcheck.explain.families import PATTERNS
    from ddpcheck.explain.tracebacks import unclaimed

    log = ("[rank0]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, "
           "unhandled system error\n"
           "[rank1]: RuntimeError: CUDA error: invalid device ordinal\n"
           "[rank2]: FileNotFoundError: [Errno 2] No such file or directory: '/ckpt/last.pt'\n"
           "[rank2]: ValueError: later, same rank\n"
           "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n")
    found = unclaimed(read_text("job.log", LOG + log), PATTERNS)
    assert [(c.rank, c.exception.split(":")[0]) for c in found] == [
        (1, "ValueError"), (0, "KeyError"), (2, "FileNotFoundError")]


# gh9-colossalai-2439 (dev): the paste stops at the frame's code, before the error line.
COLOSSALAI = """\
Traceback (most recent call last):
  File "/home/alpha/tempclone/ColossalAI/examples/images/dreambooth/train_dreambooth_colossalai.py", line 358, in main
    colossalai.launch_from_torch(config={})
  File "/home/alpha/.local/lib/python3.10/site-packages/colossalai-0.2.0-py3.10.egg/colossalai/context/parallel_context.py", line 519, in set_device
    torch.cuda.set_device(device_ordinal)
"""  # noqa: E501


def test_a_traceback_cut_before_its_error_line_says_where_it_stopped():
    from ddpcheck.explain.tracebacks import cut_short

    where = cut_short(list(read_text("c.log", COLOSSALAI)))
    assert "parallel_context.py:519 in set_device: torch.cuda.set_device(device_ordinal)" in where
    assert where.endswith("[c.log:4]")
    # variant: Python 3.11's caret lines, torch's own frame, a rank prefix
    ignite = ("[rank2]:   File \".../site-packages/torch/cuda/__init__.py\", line 399, in "
              "set_device\n[rank2]:     torch._C._cuda_setDevice(device)\n"
              "[rank2]:     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n")
    assert "__init__.py:399 in set_device: torch._C._cuda_setDevice(device)" in \
        cut_short(list(read_text("r.log", ignite)))
    # near misses: the error line is there, or the log went on after the traceback
    whole = COLOSSALAI + "RuntimeError: CUDA error: invalid device ordinal\n"
    assert cut_short(list(read_text("c.log", whole))) == ""
    assert cut_short(list(read_text("c.log", COLOSSALAI + "epoch 1 loss 0.3\n"))) == ""


def test_an_unexplained_cut_traceback_in_set_device_lists_what_it_raises():
    (p,) = explain_texts([("c.log", COLOSSALAI)]).problems
    assert p.code == "unexplained"  # the log does not say which error: it abstains
    assert "ends without its error line" in p.observed and "invalid device ordinal" in p.observed
    (q,) = explain_texts([("d.log", COLOSSALAI.replace(
        "torch.cuda.set_device(device_ordinal)", "model.cuda()"))]).problems
    assert "ends without its error line" in q.observed and "device ordinal" not in q.observed


# runs/shm-too-small (torch 2.13, DataLoader workers over a 1 MiB /dev/shm): torch/_utils.py
# ExceptionWrapper.reraise prints "Caught <type> in DataLoader worker process N." then the
# worker's own traceback under "Original Traceback".
SHM_WORKER = """\
[default0]:[rank0]: Traceback (most recent call last):
[default0]:[rank0]:   File "/work/bench/real_runs_train.py", line 69, in train
[default0]:[rank0]:     x = next(data)
[default0]:[rank0]: RuntimeError: Caught RuntimeError in DataLoader worker process 0.
[default0]:[rank0]: Original Traceback (most recent call last):
[default0]:[rank0]:   File "/v/lib/python3.11/site-packages/torch/multiprocessing/reductions.py", line 642, in reduce_storage
[default0]:[rank0]:     fd, size = storage._share_fd_cpu_()
[default0]:[rank0]: RuntimeError: unable to allocate shared memory(shm) for file </torch_9939_526318745_0>: No space left on device (28)
"""  # noqa: E501


def test_a_dataloader_workers_wrapper_yields_to_the_workers_own_exception():
    from ddpcheck.explain.families import PATTERNS
    from ddpcheck.explain.tracebacks import unclaimed

    assert unclaimed(read_text("console.log", SHM_WORKER), PATTERNS) == []
    e = explain_texts([("console.log", SHM_WORKER)])
    assert e.problems[0].code == "dev-shm-too-small" and not e.undetermined
