"""Producers' wordings read at stop 31, from the stop-31 batch's dev part (read after the
whole batch was scored unread): the details of Ray's memory monitor kill quoted alone, and
NCCL's kernel lookup failing with 'named symbol not found' (no code for the GPU). Each with a
near miss."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause

# Ray's raylet (node_manager.cc), as a reporter quoted it (dev gh29-openrlhf-171; ids shortened)
RAY = ("Memory on the node (IP: 10.0.0.4, ID: 37f3bd9f) where the task (actor ID: 658f7608, "
       "name=RewardModelRayActor.__init__, pid=5315, memory used=1.67GB) was running was "
       "445.48GB / 468.75GB (0.950365), which exceeds the memory usage threshold of 0.95. Ray "
       "killed this worker (ID: 384252cd) because it was the most recently scheduled task")


def test_rays_memory_monitor_kill_details_are_host_oom():
    assert first_cause(RAY) == "host-out-of-memory"


def test_near_miss_rays_memory_report_without_a_kill_is_no_oom():
    # the memory monitor's usage line alone (printed while the node is still under threshold)
    assert first_cause("Memory on the node (IP: 10.0.0.4) was 300.00GB / 468.75GB (0.64), "
                       "which is below the memory usage threshold of 0.95.") != \
        "host-out-of-memory"


def test_nccls_named_symbol_not_found_is_a_build_without_code_for_the_gpu():
    # dev gh29-pytorch-152077: NCCL 2.14.3+cuda11.8 on an sm_120 GPU
    assert first_cause("4d1a:50555:50555 [0] NCCL WARN Cuda failure 'named symbol not found'",
                       "NCCL version 2.14.3+cuda11.8") == "cuda-unusable"
    assert first_cause("host:1:1 [0] NCCL WARN Cuda failure 500 'named symbol not found'") == \
        "cuda-unusable"


def test_near_miss_a_python_symbol_error_is_not_nccls():
    assert first_cause("AttributeError: module 'torch' has no attribute 'compile'",
                       "named symbol not found in the docs") != "cuda-unusable"


def test_init_process_group_twice_has_its_own_code():
    # dev gh30-megatron-lm-521 (torch 1.x RuntimeError) and the real run s30b-init-twice
    # (torch 2.x ValueError)
    for exc in ("RuntimeError", "ValueError"):
        assert first_cause(f"{exc}: trying to initialize the default process group twice!") \
            == "process-group-init-twice", exc


def test_near_miss_a_subgroup_created_twice_is_not_the_default_group_twice():
    assert first_cause("ValueError: trying to initialize the subgroup twice") != \
        "process-group-init-twice"


DIAL = "TCP client failed to connect/validate to host {host} - {why}"


def test_a_store_host_the_tcpstore_client_cannot_resolve_is_named_by_whose_store():
    # dev gh31-aionek-240: torchrun's c10d wrapper pasted above the store's own line
    assert first_cause("RendezvousConnectionError: The connection to the C10d store has failed.",
                       DIAL.format(host="slinky-0:29400", why="Name or service not known")) \
        == "endpoint-unresolvable"
    # the master's store (init_process_group's env://): the master address
    assert first_cause('  File "/x/torch/distributed/rendezvous.py", line 189, in '
                       "_create_c10d_store",
                       DIAL.format(host="node-a:29500", why="Name or service not known")) \
        == "master-addr-unresolvable"


def test_near_miss_a_store_host_that_timed_out_is_no_name_problem():
    assert first_cause(DIAL.format(host="node-a:29500", why="timed out (try=7)")) not in (
        "endpoint-unresolvable", "master-addr-unresolvable")
