"""Tests for worker.blame: whose failure a probe's exception is, on real raised exceptions."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist

from ddpcheck import diagnoses
from ddpcheck.worker.blame import is_communication_error, own_failure, raised_at

# Real messages of torch 2.13's gloo (a peer killed mid all_reduce; a peer that never sent),
# recorded from 2-rank worlds on this machine.
GLOO_RESET = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read "
              "error [127.0.0.1]:17570: Connection reset by peer. This is typically caused by a "
              "remote worker hanging or bugs in the application")
GLOO_TIMEOUT = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:"
                "78] Timed out waiting 3000ms for recv operation to complete")
NCCL_WATCHDOG = ("[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
                 "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600049 "
                 "milliseconds before timing out.")


def raised(fn) -> BaseException:  # noqa: ANN001
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - the test wants whatever it raised
        return exc
    raise AssertionError("did not raise")


def _no_numpy() -> None:
    raise RuntimeError("Numpy is not available")  # what torch raises when numpy is missing


@pytest.mark.parametrize("exc", [
    RuntimeError(GLOO_RESET),
    RuntimeError(GLOO_TIMEOUT),
    RuntimeError(NCCL_WATCHDOG),
    TimeoutError("timed out"),
    ConnectionResetError("reset"),
    dist.DistError("store gone"),
    dist.DistNetworkError("connect() timed out"),
    diagnoses.COLLECTIVE_FAILED.fail("all_reduce timed out"),
])
def test_errors_of_torch_distributed_and_its_transport_are_communication_errors(
        exc: BaseException) -> None:
    assert is_communication_error(exc)


def test_a_runtime_error_raised_inside_torch_distributed_counts_whatever_its_words() -> None:
    # all_reduce without a process group: raised by distributed_c10d.py itself
    exc = raised(lambda: dist.all_reduce(torch.ones(1)))
    assert isinstance(exc, (RuntimeError, ValueError))
    assert is_communication_error(exc) == isinstance(exc, RuntimeError)


def test_a_full_disk_under_torch_save_is_not_a_communication_error(tmp_path) -> None:
    # torch.save into /dev/full: the RuntimeError a full filesystem gives (not an OSError)
    exc = raised(lambda: torch.save(torch.ones(1 << 16), "/dev/full"))
    assert isinstance(exc, RuntimeError), type(exc)
    assert not is_communication_error(exc)


@pytest.mark.parametrize("exc", [
    raised(_no_numpy),
    raised(lambda: None + 1),  # TypeError
    raised(lambda: os.nonexistent),  # AttributeError
    raised(lambda: __import__("numpy_is_not_a_dependency")),  # ImportError
    AssertionError("wrong"),
    ValueError("bad"),
    NotImplementedError("not on this backend"),
    diagnoses.WRONG_COLLECTIVE_RESULT.fail("got 3, expected 4"),
])
def test_ddpchecks_own_errors_are_not_communication_errors(exc: BaseException) -> None:
    assert not is_communication_error(exc)


def test_own_failure_names_the_probe_the_exception_and_the_place() -> None:
    exc = raised(_no_numpy)
    p = own_failure("test_sampler_shards", exc, "ddp", ["node", "collectives", "ddp", "checkpoint"])
    assert p.code == "ddpcheck-error" and p.role == diagnoses.OWN_FAILURE and p.stage == "ddp"
    assert "test_sampler_shards raised RuntimeError: Numpy is not available" in p.observed
    # raised from this test file, not ddpcheck's code: the innermost frame is named
    assert f"test_blame.py:{_no_numpy.__code__.co_firstlineno + 1}" in p.observed
    assert "not the cluster's" in p.observed
    assert "--stages node,collectives,checkpoint" in p.fix
    assert "peer" not in p.cause.split("no peer")[0]


def test_raised_at_prefers_ddpchecks_own_frame() -> None:
    from ddpcheck.parsing import endpoint  # any function of ddpcheck that raises

    exc = raised(lambda: endpoint("host:port:extra"))
    assert raised_at(exc).startswith("ddpcheck/parsing.py:")
