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
