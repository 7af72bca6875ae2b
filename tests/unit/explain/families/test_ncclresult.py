"""NCCL's INFO back trace and result strings, as NCCL's and torch's sources print them."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause


def _first(*lines: str):
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    return e, next(p for p in e.problems if not p.consequence_of)


# --- the back trace: include/checks.h NCCLCHECK / SYSCHECKGOTO / NCCLCHECKTHREAD / INFO_LOC


def test_each_versions_back_trace_is_an_nccl_failure_that_abstains():
    for line in ("h:1:2 [0] NCCL INFO transport/shm.cc:114 -> 2",  # 2.4-2.30.3
                 "h:1:2 [0] NCCL INFO misc/socket.cc:484 -> 2 (Connection refused)",  # 2.19+
                 "h:1:2 [1] NCCL INFO group.cc:64 -> 1 [Async thread]",  # group.cc
                 "h:1:2 [0] NCCL INFO misc/shmutils.cc:90 (ncclShmOpen) -> 2",  # 2.30.7
                 "gpu-1:18553:18611 [0] INFO transport/net_socket.cu:118 -> 2",  # <= 2.3
                 "h:1:2 [0] NCCL INFO /usr/src/debug/rccl/build/hipify/src/init.cc:1358 -> 5"):
        e, p = _first(line)
        assert p.code == "nccl-error" and e.undetermined, line


def test_lines_with_arrows_that_are_no_back_trace_are_not_failures():
    for line in ("h:1:2 [0] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct",
                 "h:1:2 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1",
                 "h:1:2 [0] NCCL INFO Ring 00 : 0 -> 1 -> 2",
                 "h:1:2 [0] NCCL INFO bootstrap.cc:270 -> 0",  # ncclSuccess: never printed
                 "h:1:2 [0] NCCL INFO bootstrap.cc:270 -> 7",  # ncclInProgress: not a failure
                 "INFO train.py:12 -> 3 batches left"):
        assert first_cause(line) == "none", line


def test_teardown_frames_after_a_healthy_run_are_not_failures():
    # misc/socket.cc 2.19-2.2x socketProgressOpt "abort called" (ncclInternalError) when
    # ncclCommDestroy stops the proxy's service thread: a healthy job prints it (dev case
    # qa-doc-daekeun-dtaws-03)
    assert first_cause("[Rank 0] Training job finished successfully!",
                       "h:7070:11027 [0] NCCL INFO misc/socket.cc:47 -> 3",
                       "h:7070:11027 [0] NCCL INFO misc/socket.cc:58 -> 3",
                       "h:7070:7147 [0] NCCL INFO proxy.cc:1520 -> 3") == "none"
    # the same file with a system error is a failure
    assert first_cause("h:7070:11027 [0] NCCL INFO misc/socket.cc:47 -> 2") == "nccl-error"


def test_the_first_informative_frame_says_where_and_what_to_check():
    _, shm = _first("h:1:2 [3] NCCL INFO transport/shm.cc:114 -> 2",
                    "h:1:2 [3] NCCL INFO transport.cc:33 -> 2",
                    "h:1:2 [3] NCCL INFO init.cc:1089 -> 2")
    assert "shared-memory" in shm.cause and "--shm-size" in shm.cause and "-> 2" in shm.cause
    _, boot = _first("h:1:2 [2] NCCL INFO misc/socket.cc:567 -> 2",
                     "h:1:2 [2] NCCL INFO bootstrap.cc:270 -> 2")
    assert "bootstrap" in boot.cause and "NCCL_SOCKET_IFNAME" in boot.cause
    _, other = _first("h:1:2 [0] NCCL INFO init.cc:903 -> 5")
    assert "init.cc" in other.cause and "ncclInvalidUsage" in other.cause


def test_a_back_trace_after_the_warn_that_names_the_cause_is_its_consequence():
    e, p = _first("h:1:2 [3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No "
                  "space left on device",
                  "h:1:2 [3] NCCL INFO include/shm.h:41 -> 2",
                  "h:1:2 [3] NCCL INFO transport/shm.cc:114 -> 2")
    assert p.code == "dev-shm-too-small" and not e.undetermined


# --- result strings: init.cc ncclGetErrorString in torch's, nccl-tests' and Horovod's lines


def test_unhandled_system_error_alone_abstains_and_lists_what_to_check():
    for line in ("RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:"
                 "272, unhandled system error, NCCL version 2.4.8",
                 "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
                 "c10d/ProcessGroupNCCL.cpp:1691, unhandled system error (run with "
                 "NCCL_DEBUG=INFO for details), NCCL version 2.19.3",
                 "ncclSystemError: System call (e.g. socket, malloc) or external library call "
                 "failed or device error. ",
                 "fastmoe: Test NCCL failure common.cu:777 'unhandled system error'",
                 "horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: "
                 "unhandled system error"):
        e, p = _first(line)
        assert p.code == "nccl-error" and e.undetermined, line
        assert "/dev/shm" in p.cause and "--ipc=host" in p.cause, line
        assert "NCCL_SOCKET_IFNAME" in p.cause and "NCCL_DEBUG=WARN" in p.fix, line


def test_each_result_code_lists_its_own_likely_causes():
    _, usage = _first("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:514, invalid usage, "
                      "NCCL version 2.7.8")
    assert "two ranks on one GPU" in usage.cause
    _, internal = _first("torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:"
                         "219, internal error - please report this issue to the NCCL "
                         "developers, NCCL version 2.19.3")
    assert "different NCCL versions" in internal.cause
    _, cuda = _first("ncclUnhandledCudaError: Call to CUDA function failed.")
    assert "NCCL_P2P_DISABLE=1" in cuda.cause


def test_the_same_words_outside_an_nccl_line_are_not_read():
    for line in ("RuntimeError: internal error in the tokenizer",
                 "ValueError: invalid argument 'lr'",
                 "ncclSystemError is documented in nccl.h"):
        assert first_cause(line) != "nccl-error", line


def test_a_result_string_does_not_hide_a_cause_in_nccls_last_error_tail():
    assert first_cause("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:"
                       "1691, unhandled system error (run with NCCL_DEBUG=INFO for details), "
                       "NCCL version 2.19.3",
                       "ncclSystemError: System call (e.g. socket, malloc) or external library "
                       "call failed or device error. ", "Last error:",
                       "Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size "
                       "9637888)") == "dev-shm-too-small"


# --- the bootstrap's own interface (netcontext.refine -> ncclinterfaces.bootstrap_interface)

BOOT_FAIL = ("h:1:2 [2] NCCL INFO misc/socket.cc:567 -> 2",
             "h:1:2 [2] NCCL INFO misc/socket.cc:618 -> 2",
             "h:1:2 [2] NCCL INFO bootstrap.cc:270 -> 2")
OOB = ("h:1:3 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP; OOB "
       "ibp75s0:192.168.0.103<0>")


def test_a_silent_bootstrap_failure_over_an_interface_nccl_picked_is_a_wrong_interface_hint():
    e, p = _first(OOB, *BOOT_FAIL)
    assert p.code == "nccl-wrong-interface" and not e.undetermined
    assert "ibp75s0" in p.cause and "NCCL_SOCKET_IFNAME" in p.fix
    assert first_cause("h:1:3 [0] NCCL INFO Bootstrap : Using docker0:172.17.0.1<0>",
                       *BOOT_FAIL) == "nccl-wrong-interface"
    # NCCL >= 2.24 bootstrap.cc: "Bootstrap: Using%s" (no space before the colon)
    assert first_cause("gpu7:88:88 [1] NCCL INFO Bootstrap: Using ib1:192.168.40.7<0>",
                       *BOOT_FAIL) == "nccl-wrong-interface"


def test_near_misses_of_the_bootstrap_interface_stay_an_nccl_error():
    # NCCL_SOCKET_IFNAME set: the user chose the interface
    assert first_cause("h:1:3 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ib0",
                       OOB, *BOOT_FAIL) == "nccl-error"
    # an Ethernet interface: nothing points at the interface
    assert first_cause("h:1:3 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.3<0>",
                       *BOOT_FAIL) == "nccl-error"
    assert first_cause("h:1:3 [0] NCCL INFO Bootstrap: Using enp90s0np0:10.168.192.89<0>",
                       *BOOT_FAIL) == "nccl-error"
    # NCCL >= 2.24's bootstrap over a net device names no interface address
    assert first_cause("h:1:3 [0] NCCL INFO Bootstrap: Using mlx5_0:1", *BOOT_FAIL) == \
        "nccl-error"
    # another result than a system error: not the silent connect path
    assert first_cause(OOB, "h:1:2 [2] NCCL INFO bootstrap.cc:270 -> 3") == "nccl-error"
    # a WARN that says the peer refused: the address was reachable
    assert first_cause(OOB, "h:1:2 [2] misc/socket.cc:480 NCCL WARN socketStartConnect: "
                       "Connect to 192.168.0.103<43419> failed : Connection refused",
                       *BOOT_FAIL) == "peer-unreachable"


def test_the_bootstrap_interface_hint_yields_to_a_cause():
    e = explain_texts([("a.log", "\n".join([OOB, *BOOT_FAIL]) + "\n"),
                       ("b.log", "h:9:9 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate "
                                 "failed : No space left on device\n")])
    assert e.problems[0].code == "dev-shm-too-small"


def test_torchs_remote_error_summary_is_the_consequence_of_a_cause_in_its_last_error_tail():
    # NCCLUtils getNcclErrorDetailStr: the ncclRemoteError summary, then "Last error:" and
    # NCCL's last WARN text (misc/ibvwrap.cc >= 2.17, errno named: cause-grade)
    lines = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
             "remote process exited or there was a network error, NCCL version 2.19.3",
             "ncclRemoteError: A call failed possibly due to a network error or a remote "
             "process exiting prematurely.",
             "Last error:",
             "Call to ibv_reg_mr failed with error Cannot allocate memory")
    assert first_cause(*lines) == "memlock-limit-too-low"
    # near miss: a hint in the tail (a connect to a bridge address: a peer that exited
    # leaves it too, as the summary says) leaves both standing: explain abstains
    hint = (*lines[:3], "socketStartConnect: Connect to 172.17.0.2<45678> failed : Software "
            "caused connection abort")
    assert explain_texts([("r.log", "\n".join(hint) + "\n")]).undetermined
