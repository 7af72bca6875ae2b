"""Patterns appended (``# stop24 dev:``) to the nccl, watchdog and launcher families."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause

NVLS = ("Failed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error 401 "
        "'the operation cannot be performed in the present state'.")
NVLS_HINT = ("This is usually caused by a system or configuration error in the Fabric Manager "
             "or NVSwitches.")


def test_nvls_bind_failure_is_the_fabric():
    assert first_cause("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.cpp:93, "
                       "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL "
                       "version 2.29.3", "ncclUnhandledCudaError: Call to CUDA function failed.",
                       "Last error:", NVLS, NVLS_HINT) == "fabric-manager-not-ready"
    # NCCL's own WARN form: the first line is a WARN, the second line is NCCL's hint
    assert first_cause("h:1:2 [0] transport/nvls.cc:160 NCCL WARN " + NVLS, NVLS_HINT) == \
        "fabric-manager-not-ready"


def test_nvls_info_lines_are_not_a_failure():
    assert first_cause("h:1:2 [0] NCCL INFO NVLS multicast support is available on dev 0") == \
        "none"


def test_a_bootstrap_back_trace_is_an_nccl_failure():
    assert first_cause("h:1:2 [2] NCCL INFO misc/socket.cc:567 -> 2",
                       "h:1:2 [2] NCCL INFO bootstrap.cc:270 -> 2") == "nccl-error"


def test_teardown_socket_traces_and_channel_lines_are_not():
    assert first_cause("h:1:2 [0] NCCL INFO misc/socket.cc:47 -> 3",
                       "h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/"
                       "Socket/0", "h:1:2 [0] NCCL INFO bootstrap.cc:270 -> 7") == "none"


STORE = ("RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] "
         "via c10d key-value store by key '0', but store->get('0') got error")


def test_a_failed_store_get_of_rank_zeros_id_is_a_symptom():
    assert first_cause(STORE) == "collective-timeout"
    assert first_cause("Running tokenizer on dataset: 47%| 3169000/6811963 [30:11<38:27]",
                       STORE) == "rank-zero-only-step-timeout"


def test_a_store_error_with_its_reason_is_left_to_the_other_rules():
    assert first_cause(STORE + ": Connection reset by peer") != "collective-timeout"


def test_a_cut_agent_line_still_names_the_signal():
    assert first_cause("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: "
                       "-9) local_rankroot/anaconda3/envs/x/bin/python") == "host-out-of-memory"
    assert first_cause("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: "
                       "1) local_rankroot/anaconda3/envs/x/bin/python") != "host-out-of-memory"
