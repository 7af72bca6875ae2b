"""NCCL WARN lines as NCCL's sources print them (src/debug.cc prefix, include/checks.h)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

PREFIX = "node1:2101:2187 [0] include/shm.h:48 NCCL WARN "


def test_posix_fallocate_out_of_space_is_dev_shm_too_small():
    # NCCL <= 2.11 include/shm.h: SYSCHECKVAL(shm_allocate(fd, shmSize), "posix_fallocate", res)
    assert first_cause(PREFIX + "Call to posix_fallocate failed : No space left on device",
                       "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/"
                       "ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.10.3"
                       ) == "dev-shm-too-small"


def test_unhandled_system_error_alone_stays_hedged():
    assert first_cause("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/"
                       "ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version "
                       "2.10.3") in {"unexplained", "nccl-error"}


def test_shm_open_permission_denied_is_dev_shm_unwritable_not_too_small():
    # NCCL <= 2.11 include/shm.h: SYSCHECK's errno line, then the segment line
    assert first_cause("node08:27106:27302 [0] include/shm.h:27 NCCL WARN Call to shm_open "
                       "failed : Permission denied",
                       "node08:27106:27302 [0] include/shm.h:48 NCCL WARN Error while creating "
                       "shared memory segment nccl-shm-recv-b79-0-3-0 (size 4460544)") == \
        "dev-shm-unwritable"


BOOTSTRAP = "node1:77:77 [0] bootstrap.cc:45 NCCL WARN Bootstrap : no socket interface found"


def test_no_socket_interface_with_ifname_set_is_the_ifname():
    # misc/socket.cc ncclFindInterfaces: INFO line when the variable is set, then the WARN
    assert first_cause("node1:77:77 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to "
                       "=eth0", BOOTSTRAP) == "socket-ifname-invalid"


def test_no_socket_interface_without_the_ifname_line_stays_hedged():
    # unset, NCCL falls back to docker and lo: a filter set outside the log, value unseen:
    # the likely code, shown as a symptom (explain abstains)
    e = explain_texts([("r.log", BOOTSTRAP + "\n")])
    assert e.problems[0].code == "socket-ifname-invalid" and e.undetermined


def test_no_socket_interface_with_the_jobs_own_export_is_the_ifname():
    # dev gh5-open-r1-multimodal-7's lines, with the script's hard-coded variable pasted
    # beside them (the thread's confirmed cause); variants: pdsh's exports, an inline
    # assignment, an env listing with a prompt
    tail = ["[rank0]: ncclInternalError: Internal check failed.", "[rank0]: Last error:",
            "[rank0]: Bootstrap : no socket interface found"]
    for shown in ("export NCCL_SOCKET_IFNAME=eth0",
                  "cmd = pdsh -S -w 10.0.0.1,10.0.0.2 export NCCL_IB_DISABLE=1; export "
                  "NCCL_SOCKET_IFNAME=ens3f0; cd /work",
                  "NCCL_SOCKET_IFNAME=^docker,lo,veth torchrun --nnodes 2 train.py",
                  "$ env | grep NCCL", "$ NCCL_SOCKET_IFNAME=bond0"):
        e = explain_texts([("r.log", "\n".join([shown, *tail]) + "\n")])
        causes = [p.code for p in e.problems if not p.consequence_of]
        if shown.startswith("$ env"):
            assert e.undetermined, shown  # no value shown
            continue
        assert causes[0] == "socket-ifname-invalid" and not e.undetermined, shown


def test_advice_or_an_empty_value_is_no_variable_set():
    for prose in ("try to set NCCL_SOCKET_IFNAME=eth0 on both nodes", "NCCL_SOCKET_IFNAME= "):
        e = explain_texts([("r.log", prose + "\n" + BOOTSTRAP + "\n")])
        assert e.problems[0].code == "socket-ifname-invalid" and e.undetermined, prose


def test_no_socket_interface_quoted_by_torch_or_xla_is_hedged_the_same():
    # dev gh5-open-r1-multimodal-7 (torch 2.x, NCCL 2.21.5: ncclInternalError) and a variant
    # in XLA's wording with NCCL >= 2.23's ncclInvalidUsage: the result line is a consequence
    torch_tail = ["[rank0]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/"
                  "csrc/distributed/c10d/ProcessGroupNCCL.cpp:2588, internal error - please "
                  "report this issue to the NCCL developers, NCCL version 2.21.5",
                  "[rank0]: ncclInternalError: Internal check failed.", "[rank0]: Last error:",
                  "[rank0]: Bootstrap : no socket interface found"]
    xla = ["Failed to create NCCL communicator: INTERNAL: ncclCommInitRankConfig(...) failed:",
           "invalid usage (run with NCCL_DEBUG=WARN for details) Last NCCL warning(error): "
           "'Bootstrap : no socket interface found'"]
    for lines in (torch_tail, xla):
        e = explain_texts([("r.log", "\n".join(lines) + "\n")])
        causes = [p.code for p in e.problems if not p.consequence_of]
        assert causes[0] == "socket-ifname-invalid" and e.undetermined


def test_a_cuda_failure_in_the_nvls_transport_is_the_fabric():
    # NCCL 2.18+ transport/nvls.cc CUCHECK around cuMulticastCreate / cuMemMap
    assert first_cause("node2:2431:2479 [5] transport/nvls.cc:158 NCCL WARN Cuda failure 1 "
                       "'invalid argument'") == "fabric-manager-not-ready"


def test_insufficient_driver_is_cuda_unusable():
    # misc/cudawrap.cc, cudaErrorInsufficientDriver's string
    assert first_cause("host:2871:2871 [0] misc/cudawrap.cc:182 NCCL WARN Cuda failure 'CUDA "
                       "driver version is insufficient for CUDA runtime version'") == \
        "cuda-unusable"


def test_nccls_own_mismatch_check_is_a_desync():
    assert first_cause("init.cc:1247 NCCL WARN Mismatched collective detected, please check "
                       "your collective calls at and around rank 39.") == "collective-desync"


def test_no_algorithm_with_nccl_algo_set_is_the_variable():
    # enqueue.cc topoGetAlgoInfo's WARN, as torch's "Last error:" repeats it
    assert first_cause("Error : no algorithm/protocol available for function Broadcast with "
                       "datatype ncclInt8. NCCL_ALGO was set to NVLS.") == "nccl-env-invalid"


# --- NCCL's shm and IB wordings across versions (include/shm.h, misc/shmutils.cc,
# os/linux.cc, misc/ibvwrap.cc; NCCL user guide "Troubleshooting")

def test_failed_to_extend_any_shm_path_is_dev_shm_too_small():
    # the NCCL user guide's own example; >= 2.27 adds the errno
    assert first_cause("node1:1:1 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend "
                       "/dev/shm/nccl-03v824 to 4194660 bytes") == "dev-shm-too-small"
    assert first_cause("node1:1:1 [0] os/linux.cc:795 NCCL WARN Error: failed to extend "
                       "/dev/shm/nccl-03v824 to 4194660 bytes, error: No space left on device "
                       "(28)") == "dev-shm-too-small"


def test_attaching_to_a_segment_is_not_dev_shm_too_small():
    assert first_cause("node1:1:1 [0] misc/shmutils.cc:113 NCCL WARN Error while attaching to "
                       "shared memory segment /dev/shm/nccl-x (size 9637888)") != \
        "dev-shm-too-small"


def test_ibv_reg_mr_failure_is_the_memlock_limit():
    # NCCL <= 2.17 (no errno) and >= 2.18 (errno) misc/ibvwrap.cc
    assert first_cause("node1:1:1 [0] misc/ibvwrap.cc:252 NCCL WARN Call to ibv_reg_mr "
                       "failed") == "memlock-limit-too-low"
    assert first_cause("node1:1:1 [0] misc/ibvwrap.cc:150 NCCL WARN Call to ibv_reg_mr_iova2 "
                       "failed with error Cannot allocate memory") == "memlock-limit-too-low"
    assert first_cause("node1:1:1 [0] misc/ibvwrap.cc:98 NCCL WARN Call to ibv_create_qp "
                       "failed") == "memlock-limit-too-low"


def test_ibv_reg_mr_bad_address_is_not_the_memlock_limit():
    # EFAULT: GPU memory registered without GPUDirect RDMA support
    assert first_cause("node1:1:1 [0] misc/ibvwrap.cc:150 NCCL WARN Call to ibv_reg_mr_iova2 "
                       "failed with error Bad address") == "nccl-net-error"


def test_missing_libibverbs_is_benign():
    # misc/ibvwrap.cc: no IB stack, NCCL goes on over sockets
    assert first_cause("node1:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open "
                       "libibverbs.so[.1]") in {"none", "unexplained"}


def test_failed_to_peer_is_p2p_unsupported():
    # transport/p2p.cc since 2.7
    assert first_cause("node1:1:1 [0] transport/p2p.cc:128 NCCL WARN failed to peer with "
                       "device 1(=3b000): 217 peer access is not supported between these two "
                       "devices") == "nccl-p2p-unsupported"


def test_torch_quotes_nccls_last_ib_error_without_its_prefix():
    # torch >= 2.0: "... Last error:" then NCCL's WARN text on its own line. The IB line is
    # read (nccl-net-error), but a completion with error 12 (retry exceeded) is also what a
    # peer that died leaves, as torch's own words say: explain names it and abstains.
    from ddpcheck.explain import explain_texts

    lines = ["torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
             "c10d/ProcessGroupNCCL.cpp:1691, remote process exited or there was a network "
             "error, NCCL version 2.19.3",
             "ncclRemoteError: A call failed possibly due to a network error or a remote process "
             "exiting prematurely.",
             "Last error:",
             "NET/IB : Got completion from peer 10.1.0.7<45318> with error 12, opcode 0, len 0, "
             "vendor err 129 (Recv)"]
    e = explain_texts([("r.log", "\n".join(lines) + "\n")])
    assert e.undetermined and "nccl-net-error" in [p.code for p in e.problems]


def test_an_ib_info_line_is_not_an_error():
    assert first_cause("node1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0"
                       ".1<0>") == "none"


# --- bootstrap truncation (bootstrap.cc) and NCCL versions across nodes (init.cc)

def test_bootstrap_truncation_is_not_called_a_collective_size_mismatch():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r.log", "node1:1:1 [0] bootstrap.cc:73 NCCL WARN Message truncated : "
                        "received 48 bytes instead of 56\n")])
    assert e.problems[0].code == "nccl-error" and e.undetermined


def test_socket_data_truncation_stays_a_size_mismatch():
    # net_socket.cc names the collective sizes itself
    assert first_cause("node1:1:1 [0] transport/net_socket.cc:483 NCCL WARN NET/Socket : peer "
                       "10.0.0.2<4242> message truncated : receiving 1048576 bytes instead of "
                       "65536. If you believe your socket network is in healthy state, there "
                       "may be a mismatch in collective sizes or environment settings") == \
        "collective-size-mismatch"


TIMEOUT = ("[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout:"
           " WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, "
           "Timeout(ms)=1800000) ran for 1800572 milliseconds before timing out.")


def test_nodes_on_different_nccl_versions_in_a_failed_job_are_a_stack_mismatch():
    assert first_cause("node1:11:11 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
                       "node2:22:22 [0] NCCL INFO NCCL version 2.14.3+cuda11.7",
                       TIMEOUT) == "nccl-stack-mismatch"


def test_one_node_printing_two_versions_is_two_runs_not_a_mixed_job():
    assert first_cause("node1:11:11 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
                       "node1:33:33 [0] NCCL INFO NCCL version 2.14.3+cuda11.7",
                       TIMEOUT) != "nccl-stack-mismatch"


def test_the_same_version_everywhere_is_no_mismatch():
    assert first_cause("node1:11:11 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
                       "node2:22:22 [0] NCCL INFO NCCL version 2.18.1+cuda12.1",
                       TIMEOUT) != "nccl-stack-mismatch"


def test_the_net_socket_twin_of_no_socket_interface_reads_the_same():
    # transport/net_socket.cc "NET/Socket : no interface found" (same search as bootstrap.cc)
    line = "node1:77:77 [0] transport/net_socket.cc:61 NCCL WARN NET/Socket : no interface found"
    assert first_cause("node1:77:77 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to "
                       "ens9", line) == "socket-ifname-invalid"
    assert first_cause(line) == "socket-ifname-invalid"
    assert explain_texts([("r.log", line + "\n")]).undetermined


def test_a_cuda_failure_inside_nccl_is_read_for_its_cuda_cause():
    # include/checks.h CUDACHECK: NCCL quotes cudaGetErrorString
    assert first_cause("node1:1:1 [1] init.cc:1101 NCCL WARN Cuda failure 'invalid device "
                       "ordinal'") == "invalid-device-ordinal"
    assert first_cause("node1:1:1 [0] init.cc:1101 NCCL WARN Cuda failure 802 'system not yet "
                       "initialized'") == "fabric-manager-not-ready"
    assert first_cause("node1:1:1 [0] enqueue.cc:1101 NCCL WARN Cuda failure 'an illegal memory "
                       "access was encountered'") == "nccl-error"


def test_ib_non_fatal_events_are_not_failures():
    # transport/net_ib: NCCL carries on after a non-fatal async event or a GID table change
    for line in ("node1:1:9 [0] transport/net_ib/init.cc:120 NCCL WARN NET/IB : mlx5_0:1 Got "
                 "non-fatal async event: GID table change(18)",
                 "node1:1:9 [0] transport/net_ib/init.cc:131 NCCL WARN NET/IB : mlx5_0:1 GID "
                 "table changed"):
        assert first_cause(line) not in {"nccl-net-error", "nccl-error"}, line
    assert first_cause("node1:1:9 [0] transport/net_ib/init.cc:110 NCCL WARN NET/IB : mlx5_0:1 "
                       "async fatal event: local catastrophic error") == "nccl-net-error"


def test_an_attach_failure_says_what_to_check_and_stays_hedged():
    # misc/shmutils.cc ncclShmOpen(create=0): the peer's segment is not there (NVIDIA/nccl#1589)
    e = explain_texts([("r.log", "g148:1:2 [0] misc/shmutils.cc:129 NCCL WARN Error while "
                        "attaching to shared memory segment /dev/shm/nccl-glnlGK (size "
                        "14156128), error: No such file or directory (2)\n")])
    assert e.problems[0].code == "nccl-error" and e.undetermined
    assert "--ipc=host" in e.problems[0].fix and "RemoveIPC" in e.problems[0].cause


def test_no_socket_interface_hedged_says_where_to_look_for_the_variable():
    e = explain_texts([("r.log", BOOTSTRAP + "\n")])
    assert e.undetermined and "env | grep NCCL_" in e.problems[0].fix


def test_torchs_last_error_tail_keeps_the_grade_of_the_warn_it_quotes():
    # ProcessGroupNCCL getNcclErrorDetailStr: "Last error:" then NCCL's last WARN, unprefixed
    assert first_cause("Last error:", "Call to shm_open failed : Permission denied") == \
        "dev-shm-unwritable"
    assert first_cause("Last error:", "Mismatched collective detected, please check") == \
        "collective-desync"
    # an IB retry-exceeded completion is a hint as a WARN; quoted, it is no more than that
    e = explain_texts([("r.log", "\n".join((
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1333, remote "
        "process exited or there was a network error, NCCL version 2.18.1",
        "ncclRemoteError: A call failed possibly due to a network error or a remote process "
        "exiting prematurely.", "Last error:",
        "NET/IB : Got completion from peer 10.0.0.2<1234> with error 12, opcode 0, len 0, "
        "vendor err 129 (Send)")) + "\n")])
    assert e.undetermined
    # near miss: the same words not at the start of the tail line
    assert first_cause("echo Mismatched collective detected in the docs") == "none"


def test_torchs_remote_error_detail_alone_is_a_peer_symptom():
    e = explain_texts([("r.log", "ncclRemoteError: A call failed possibly due to a network "
                        "error or a remote process exiting prematurely.\n")])
    assert e.problems[0].code == "peer-unreachable" and e.undetermined


def test_ib_completion_errors_of_a_peer_that_went_away_are_hints_in_every_wording():
    # net_ib.cc: <= 2.19 "with error 12, opcode", 2.20-2.2x "with status=12 opcode=", 2.30
    # "with status=IBV_WC_RETRY_EXC_ERR(12)"; 13 is RNR retry exceeded, 5 a flushed request
    for tail in ("with error 12, opcode 0, len 0, vendor err 129",
                 "with status=12 opcode=0 len=0 vendor err 129 (Transport retry counter "
                 "exceeded) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_0",
                 "with status=IBV_WC_RNR_RETRY_EXC_ERR(13) opcode=IBV_WC_SEND(0) vendor_err=0",
                 "with status=5 opcode=1 len=0 vendor err 249 (Work Request Flushed Error)"):
        line = f"n1:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from " \
               f"peer 10.0.0.2<43010> {tail}"
        e = explain_texts([("r.log", line + "\n")])
        assert [(x.problem.code, x.grade) for x in e.found] == [("nccl-net-error", "hint")], tail
        # beside a cause in another file, the hint yields instead of making it ambiguous
        e = explain_texts([("r.log", line + "\n"), ("o.log", "Traceback (most recent call "
                           "last):\ntorch.OutOfMemoryError: CUDA out of memory. Tried to "
                           "allocate 2.00 GiB\n")])
        assert e.problems[0].code == "cuda-out-of-memory", tail
    # near miss: a local protection error (4) is the transport's own failure
    assert first_cause("n1:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
                       "from peer 10.0.0.2<43010> with status=4 opcode=0 len=0 vendor err 81") \
        == "nccl-net-error"


def test_ib_informational_async_events_are_not_failures_in_older_wordings():
    for line in ("n1:1:9 [0] NCCL WARN NET/IB : Got async event : port active",
                 "n1:1:9 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : GID table change",
                 "n1:1:9 [0] NCCL WARN NET/IB : mlx5_2:1 Got async error event: LID change",
                 "Last error:\nNET/IB : mlx5_2:1 Got async error event: client reregistration"):
        assert first_cause(*line.split("\n")) not in {"nccl-net-error", "nccl-error"}, line
    # near miss: the port going down is a failure of the fabric
    assert first_cause("n1:1:9 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error") \
        == "nccl-net-error"


SEG = "n:1:2 [0] misc/shmutils.cc:113 NCCL WARN Error while creating shared memory segment " \
      "/dev/shm/nccl-a (size 9637888)"


def test_the_segment_line_reads_its_errno_and_alone_is_a_hint():
    # misc/shmutils.cc >= 2.23 appends the errno; 2.19-2.22 extend mkstemp's untouched template
    assert first_cause(SEG + ", error: No space left on device (28)") == "dev-shm-too-small"
    assert first_cause(SEG + ", error: Permission denied (13)") == "dev-shm-unwritable"
    assert first_cause("n:1:2 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend "
                       "/dev/shm/nccl-XXXXXX to 9637888 bytes") == "dev-shm-unwritable"
    e = explain_texts([("r.log", SEG + ", error: Too many open files (24)\n")])
    assert e.problems[0].code == "nccl-error" and "ulimit -n" in e.problems[0].cause
    # without the errno (<= 2.22) it follows a full or an unwritable /dev/shm: a hint, which
    # answers alone and gives way to a cause elsewhere
    e = explain_texts([("r.log", SEG + "\n")])
    assert [(x.problem.code, x.grade) for x in e.found] == [("dev-shm-too-small", "hint")]
    e = explain_texts([("r.log", SEG + "\n"), ("o.log", "node1:5:5 [0] init.cc:521 NCCL WARN "
                                               "Duplicate GPU detected : rank 1 and rank 0 both "
                                               "on CUDA device 1a000\n")])
    assert e.problems[0].code == "duplicate-device"


def test_a_dataloader_bus_error_is_a_hint_as_torch_words_it():
    e = explain_texts([("r.log", "RuntimeError: DataLoader worker (pid 46794) is killed by "
                        "signal: Bus error. It is possible that dataloader's workers are out of "
                        "shared memory. Please try to raise your shared memory limit.\n")])
    assert [(x.problem.code, x.grade) for x in e.found] == [("dev-shm-too-small", "hint")]


def test_torchs_summary_line_is_the_consequence_of_the_warn_it_quotes():
    # ProcessGroupNCCL: "NCCL error in: ..., unhandled system error" then "Last error:" and
    # NCCL's last WARN: the quoted hint answers, the summary is its consequence
    e = explain_texts([("r.log", "\n".join((
        "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:268, unhandled "
        "system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed "
        "or device error. ", "Last error:",
        "Error while creating shared memory segment /dev/shm/nccl-1YsMbG (size 7340384)"))
        + "\n")])
    assert e.problems[0].code == "dev-shm-too-small" and not e.undetermined
    assert e.problems[1].consequence_of == "dev-shm-too-small"
    # near miss: the same hint in another file, no tail: the summary may have come first
    e = explain_texts([("a.log", "torch.distributed.DistBackendError: NCCL error in: x.cpp:1, "
                        "unhandled system error, NCCL version 2.21.5\n"),
                       ("b.log", "Error while creating shared memory segment /dev/shm/nccl-1 "
                        "(size 7340384)\n")])
    assert e.undetermined


def test_too_many_peers_is_not_unsupported_p2p():
    # transport/p2p.cc: cudaDeviceEnablePeerAccess's error after the colon
    assert first_cause("n:1:1 [0] transport/p2p.cc:155 NCCL WARN failed to peer with device "
                       "1(=3b000): 217 peer access is not supported between these two devices"
                       ) == "nccl-p2p-unsupported"
    assert first_cause("n:1:1 [0] transport/p2p.cc:155 NCCL WARN failed to peer with device "
                       "9(=b1000): 711 peer mapping resources exhausted") == "nccl-error"


def test_nccl_quoting_a_cuda_error_of_the_driver_or_the_gpu_is_that_error():
    # NCCL include/checks.h CUDACHECK: "Cuda failure <n> '<cudaGetErrorString>'"; the CUDA
    # runtime's strings for a stub libcuda (34), a driver too old for the PTX (222), a lost
    # NVLink (220): the device family reads them, NCCL only quotes them
    warn = "node1:123:456 [0] include/alloc.h:48 NCCL WARN Cuda failure "
    assert first_cause(warn + "34 'CUDA driver is a stub library'") == "cuda-unusable"
    assert first_cause(warn + "222 'the provided PTX was compiled with an unsupported "
                       "toolchain.'") == "cuda-unusable"
    assert first_cause(warn + "220 'uncorrectable NVLink error was detected during the "
                       "execution'") == "nvlink-down"
    # near miss: a CUDA error no device rule reads stays NCCL's
    assert first_cause(warn + "700 'an illegal memory access was encountered'") != \
        "cuda-unusable"


def test_net_ibs_collective_mismatch_check_is_a_size_mismatch_hint():
    # net_ib.cc ncclIbIsend: "Sanity checks to catch user collective call count/size
    # mismatches", returned as ncclInvalidUsage: no network fault
    line = ("node1:1:2 [0] transport/net_ib.cc:1234 NCCL WARN NET/IB : req 0/1 tag 7 peer "
            "10.0.0.2<1234> collective mismatch error, local size 65536 remote size 32768")
    assert first_cause(line) == "collective-size-mismatch"
    e = explain_texts([("r.log", line + "\n")])
    assert [p.code for p in e.problems if p.code == "nccl-net-error"] == []
    # near miss: an IB completion error stays the network's
    assert first_cause("node1:1:2 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1>"
                       " with error 4, opcode 0, len 0, vendor err 81 (Recv)") == "nccl-net-error"
