"""nccl-socket-fallback: the job configured InfiniBand and NCCL found no IB device (NCCL's own
INFO lines, src/transport/net_ib.cc and src/misc/param.cc wordings)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

HCA = "node3:5:5 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0:1,mlx5_1:1"
DISABLE_0 = "node3:5:5 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0."
NO_DEVICE = "node3:5:5 [0] NCCL INFO NET/IB : No device found."
SOCKET = "node3:5:5 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>"


def test_infiniband_configured_and_no_device_found_is_a_socket_fallback_warning():
    for wanted in (HCA, DISABLE_0, "h:1:1 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0:1"):
        e = explain_texts([("node3.log", "\n".join((wanted, NO_DEVICE, SOCKET)) + "\n")])
        assert e.problems[0].code == "nccl-socket-fallback" and e.found[0].grade == "warning"
        assert "/dev/infiniband" in e.problems[0].fix and e.exit_code == 1


def test_no_device_found_alone_is_a_healthy_job_without_infiniband():
    assert first_cause(NO_DEVICE, SOCKET, "epoch 1 loss 0.3") == "none"
    # the two lines in different files are different jobs' or nodes' settings
    e = explain_texts([("a.log", HCA + "\n"), ("b.log", NO_DEVICE + "\n")])
    assert e.exit_code == 0


def test_one_node_connections_or_ib_in_use_name_no_fallback():
    inside = "node3:5:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"
    assert first_cause(HCA, NO_DEVICE, inside) == "none"
    ib = "node3:5:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA"
    assert first_cause(HCA, NO_DEVICE, ib) == "none"


def test_another_failure_comes_first():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert first_cause(HCA, NO_DEVICE, SOCKET, oom) == "cuda-out-of-memory"
