"""Producers' wordings read at stop 30, from the stop-30 batch's dev part (read after the
whole batch was scored unread): a redacted pid in torchrun's summary, the launcher's own
argparse refusal, python-fire's refusal of --local_rank, Llama's model-parallel assertion,
NCCL's duplicate-GPU words behind another header, and c10's warning mark behind a runner's
prefix. Each with a near miss."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

# torchrun's failure summary (errors/__init__.py _format_failure) as users post it, the pid
# redacted (dev gh21-cosmos-predict2.5-72)
SUMMARY = ("Root Cause (first observed failure):", "[0]:", "  exitcode  : -9 (pid: {pid})",
           "  error_file: <N/A>", "  traceback : Signal 9 (SIGKILL) received by PID {pid}")


def _summary(pid: str) -> list[str]:
    return [line.format(pid=pid) for line in SUMMARY]


def test_a_sigkill_with_its_pid_redacted_reads_as_one_with_its_pid():
    assert first_cause(*_summary("4242")) == "host-out-of-memory"
    for pid in ("xxx", "XXXX", "<pid>", "***"):
        assert first_cause(*_summary(pid)) == "host-out-of-memory", pid


def test_near_miss_words_after_pid_that_are_no_redaction_are_not_read_as_one():
    assert first_cause("traceback : Signal 9 (SIGKILL) received by PID unknown") != \
        "host-out-of-memory"


# Lib/argparse.py ArgumentParser.error on torch/distributed/run.py's parser (dev
# gh20-earthvqa-15: "--master_port $RANDOM" under sh, the variable empty)
USAGE = "usage: launch.py [-h] [--nnodes NNODES] [--nproc_per_node NPROC_PER_NODE] ..."


def test_the_launchers_own_argparse_refusal_is_a_launch_failure():
    e = explain_texts([("job.log", "\n".join([
        USAGE, "launch.py: error: argument --master_port: invalid int value: 'train.py'"])
        + "\n")])
    root = next(p for p in e.problems if not p.consequence_of)
    assert root.code == "launch-failed"
    assert "--master_port" in root.observed and "empty" in root.cause
    assert first_cause("torchrun: error: the following arguments are required: "
                       "training_script") == "launch-failed"


def test_near_miss_a_scripts_refusal_of_the_launchers_local_rank_is_not_the_launchers():
    for prog in ("train.py", "run.py", "launch.py"):
        assert first_cause(f"{prog}: error: unrecognized arguments: --local_rank=1") == \
            "local-rank-arg-unread", prog
    assert first_cause("train.py: error: argument --lr: invalid float value: 'x'") != \
        "launch-failed"


def test_an_empty_nproc_per_node_stops_torchrun():
    # torch/distributed/run.py determine_local_world_size (dev gh21-lsknet-112)
    assert first_cause('    raise ValueError(f"Unsupported nproc_per_node value: '
                       '{nproc_per_node}")',
                       "ValueError: Unsupported nproc_per_node value: ") == "launch-failed"


def test_python_fire_refusing_local_rank_is_the_unread_argument():
    # fire/core.py _Fire (dev gh23-gpt4tools-18)
    assert first_cause("ERROR: Could not consume arg: --local_rank=3") == \
        "local-rank-arg-unread"
    assert first_cause("ERROR: Could not consume arg: --local-rank=0") == \
        "local-rank-arg-unread"


def test_near_miss_fire_refusing_another_argument_is_not():
    assert first_cause("ERROR: Could not consume arg: --lr=3") != "local-rank-arg-unread"


def test_llamas_model_parallel_assertion_is_a_world_size_mismatch():
    # llama/generation.py Llama.build (dev gh24-llama-415, gh24-llama-665)
    e = explain_texts([("job.log", "AssertionError: Loading a checkpoint for MP=2 but world "
                        "size is 1\n")])
    root = next(p for p in e.problems if not p.consequence_of)
    assert root.code == "world-size-mismatch" and "--nproc-per-node 2" in root.fix


def test_near_miss_another_assertion_about_world_size_is_not_read_so():
    assert first_cause("AssertionError: world size is 1") != "world-size-mismatch"


def test_nccls_duplicate_gpu_words_behind_another_header():
    # NCCL init.cc "Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx",
    # re-printed without its header (dev qa12-thomaskalnik-deepseek-v3-part4)
    assert first_cause("Error: rank 27 and rank 19 both on CUDA device 53000 "
                       "(PCI 53:00.0)") == "duplicate-device"
    assert first_cause("NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
                       "device 1000") == "duplicate-device"


def test_near_miss_two_ranks_on_one_cpu_are_no_duplicate_gpu():
    assert first_cause("Error: rank 1 and rank 0 both on CPU") != "duplicate-device"


def test_c10s_warning_behind_a_runners_prefix_is_a_warning():
    # c10/util/Logging.cpp severity W behind a job runner's stderr label (dev
    # gh19-pytorch-128998, healthy: the IPv6 socket falls back to IPv4)
    line = ("2024-05-22 06:25:20.552227-04:00 Error From <host>: [W socket.cpp:436] [c10d] "
            "The server socket cannot be initialized on [::]:22010 (errno: 97 - Address "
            "family not supported by protocol).")
    e = explain_texts([("job.log", line + "\n")])
    assert e.problems == [] or all(p.consequence_of for p in e.problems)
    assert not e.undetermined


def test_near_miss_c10s_error_mark_behind_the_same_prefix_is_a_failure():
    line = ("2024-05-22 06:25:20.552227-04:00 Error From <host>: [E socket.cpp:436] [c10d] "
            "The server socket has failed to listen on any local network address.")
    assert first_cause(line) != "none"


# NCCL init.cc ncclCommInitRankConfig, 2.14 (dev gh18-vllm-1726): the undefined sentinel of a
# newer nccl.h's NCCL_CONFIG_INITIALIZER reaching an older libnccl's check
NCCL_CONFIG = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
               "c10d/NCCLUtils.hpp:219, invalid argument, NCCL version 2.14.3",
               "ncclInvalidArgument: Invalid value for an argument.", "Last error:",
               "Invalid config blocking attribute value {value}")


def test_ncclconfigs_undefined_blocking_rejected_is_an_older_libnccl():
    lines = [line.format(value="-2147483648") for line in NCCL_CONFIG]
    assert first_cause(*lines) == "nccl-library-mismatch"


def test_near_miss_a_blocking_value_the_user_set_is_no_library_mismatch():
    lines = [line.format(value="5") for line in NCCL_CONFIG]
    assert first_cause(*lines) != "nccl-library-mismatch"


# c10d socket.cpp's warning for a name the worker dials, in a c10d-rendezvous job (dev
# gh19-vllm-15498): the rank-0 agent advertised its own name
# (torch/distributed/elastic/rendezvous/api.py RendezvousStoreInfo.build)
LAUNCH = ("worker # torchrun --nnodes 2 --nproc-per-node=gpu --rdzv_backend=c10d "
          "--rdzv_endpoint={endpoint} test.py")
GAI = ("[W323 01:38:19.204441686 socket.cpp:759] [c10d] The {family} network addresses of "
       "(leader-6b8cr, 35421) cannot be retrieved (gai error: -2 - Name or service not known).")


def _advertised(endpoint: str, *families: str, then: str = ""):
    lines = [LAUNCH.format(endpoint=endpoint), *(GAI.format(family=f) for f in families)]
    e = explain_texts([("job.log", "\n".join([*lines, then]) + "\n")])
    return e, next((p for p in e.problems if not p.consequence_of), None)


def test_a_name_other_than_the_endpoint_that_fails_in_both_families_is_the_advertised_one():
    e, root = _advertised("leader", "IPv6", "IPv4")
    assert root is not None and root.code == "advertised-name-unresolvable"
    assert "--local-addr" in root.fix and not e.undetermined


def test_the_ipv6_warning_alone_names_the_advertised_name_but_does_not_decide():
    e, root = _advertised("leader", "IPv6")
    assert e.undetermined and any(p.code == "advertised-name-unresolvable" for p in e.problems)


def test_the_ipv6_warning_then_the_store_client_giving_up_decides():
    e, root = _advertised("leader:29400", "IPv6", then="torch.distributed.DistNetworkError: "
                          "The client socket has timed out after 600000ms while trying to "
                          "connect to (leader-6b8cr, 35421).")
    assert root is not None and root.code == "advertised-name-unresolvable"


def test_near_miss_the_endpoint_itself_unresolvable_is_not_the_advertised_name():
    e, _ = _advertised("leader-6b8cr:29400", "IPv6", "IPv4")
    assert all(p.code != "advertised-name-unresolvable" for p in e.problems)


def test_near_miss_a_static_rendezvous_advertises_nothing():
    lines = [LAUNCH.format(endpoint="leader").replace("c10d", "static"),
             GAI.format(family="IPv6"), GAI.format(family="IPv4")]
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    assert all(p.code != "advertised-name-unresolvable" for p in e.problems)
