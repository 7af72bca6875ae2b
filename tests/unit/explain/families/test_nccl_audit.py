"""The stop-27 audit of the NCCL families: each line as NCCL's or torch's sources print it, in
every version that prints it, with a near miss (see docs/explain-rules.md, "Audit of the NCCL
families")."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

SHM = "n:1:2 [0] misc/shmutils.cc:71 NCCL WARN "
DUP = ("n:5:5 [1] init.cc:521 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA "
       "device 1a000")
TORCH = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
         "ProcessGroupNCCL.cpp:1275, unhandled system error (run with NCCL_DEBUG=INFO for "
         "details), NCCL version 2.19.3")
DETAIL = ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed "
          "or device error. ")


def _graded(*lines: str) -> list[tuple[str, str]]:
    e = explain_texts([("r.log", "\n".join(lines) + "\n")])
    return [(x.problem.code, x.grade) for x in e.found if not x.problem.consequence_of]


# --- /dev/shm: the errno decides, in every version's wording


def test_allocation_lines_are_dev_shm_too_small_only_with_enospc():
    # NCCL <= 2.3 include/shm.h: WARN("Unable to allocate shared memory (%d bytes) : %s")
    assert first_cause("n:1:2 [0] NCCL WARN Unable to allocate shared memory (4214784 bytes) : "
                       "No space left on device") == "dev-shm-too-small"
    # torch aten MapAllocator.cpp (DataLoader's shared tensors): the same words, its own errno
    assert first_cause("RuntimeError: unable to allocate shared memory(shm) for file "
                       "</torch_2851_3211254458_0>: No space left on device (28)") == \
        "dev-shm-too-small"
    # near miss: a signal interrupting posix_fallocate (NVIDIA/nccl#137) is no full /dev/shm
    assert first_cause("n:1:2 [0] NCCL WARN Unable to allocate shared memory (4214784 bytes) : "
                       "Interrupted system call") != "dev-shm-too-small"
    assert first_cause("RuntimeError: unable to allocate shared memory(shm) for file "
                       "</torch_2851_3211254458_0>: Interrupted system call (4)") != \
        "dev-shm-too-small"


def test_failed_to_extend_reads_its_errno_and_without_one_is_a_hint():
    # misc/shmutils.cc >= 2.22 (and os/linux.cc >= 2.27) print the errno: cause
    assert _graded(SHM + "Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes, error: "
                         "No space left on device (28)") == [("dev-shm-too-small", "cause")]
    # 2.12-2.21 print none: 2.12-2.18 use ftruncate (never ENOSPC on tmpfs), 2.19-2.21's
    # fallocate also fails with EINTR: a hint that answers alone ...
    bare = SHM + "Error: failed to extend /dev/shm/nccl-fjwOOB to 5967876 bytes"
    assert _graded(bare) == [("dev-shm-too-small", "hint")]
    # ... and gives way to a cause-grade line of another rank
    e = explain_texts([("r.log", bare + "\n"), ("o.log", DUP + "\n")])
    assert e.problems[0].code == "duplicate-device"
    # near miss: another errno is another cause (the generic NCCL error, abstaining)
    assert first_cause(SHM + "Error: failed to extend /dev/shm/nccl-a to 9637892 bytes, error: "
                             "File too large (27)") == "nccl-error"


def test_the_untouched_mkstemp_template_is_an_unwritable_dev_shm_hint():
    # 2.12-2.21 extend fd -1 under "/dev/shm/nccl-XXXXXX" when mkstemp failed, errno unprinted
    # (EACCES, EROFS, ENOENT, but also EMFILE)
    line = SHM + "Error: failed to extend /dev/shm/nccl-XXXXXX to 9637888 bytes"
    assert _graded(line) == [("dev-shm-unwritable", "hint")]
    e = explain_texts([("r.log", line + "\n"), ("o.log", DUP + "\n")])
    assert e.problems[0].code == "duplicate-device"
    # the errno itself stays cause-grade (2.22+: "failed to create shared memory file")
    assert _graded(SHM + "Error: failed to create shared memory file 0x7f12, error Permission "
                         "denied (13)") == [("dev-shm-unwritable", "cause")]


# --- P2P: only cudaErrorPeerAccessUnsupported is unsupported P2P


def test_failed_to_peer_is_p2p_unsupported_only_for_error_217():
    # transport/p2p.cc (2.7+) and transport/net.cc (2.12+, no bus id)
    assert first_cause("n:1:2 [0] transport/p2p.cc:306 NCCL WARN failed to peer with device "
                       "1(=3b000): 217 peer access is not supported between these two devices") \
        == "nccl-p2p-unsupported"
    assert first_cause("n:1:2 [0] transport/net.cc:302 NCCL WARN failed to peer with device 1: "
                       "217") == "nccl-p2p-unsupported"
    # near misses: an earlier kernel's sticky error, the peer-count limit
    assert first_cause("n:1:2 [0] transport/p2p.cc:306 NCCL WARN failed to peer with device "
                       "1(=3b000): 700 an illegal memory access was encountered") != \
        "nccl-p2p-unsupported"
    assert first_cause("n:1:2 [0] transport/p2p.cc:306 NCCL WARN failed to peer with device "
                       "9(=db000): 711 peer mapping resources exhausted") != \
        "nccl-p2p-unsupported"


# --- NCCL's own version checks (no rule read them before)


def test_nccls_own_version_checks_name_the_stack_mismatch():
    # init.cc initTransportsRank (2.23+), ras/ras.cc (2.24+ codes, 2.30 strings)
    for line in ("n:1:2 [1] init.cc:729 NCCL WARN Mismatched NCCL version detected : rank 0 "
                 "version 22105 rank 1 version 22304",
                 "n:1:9 [0] ras/ras.cc:430 NCCL WARN NCCL version mismatch with remote peer "
                 "10.0.0.2<36475> (local: 22405, remote 22304)",
                 "n:1:9 [0] ras/ras.cc:415 NCCL WARN NCCL version mismatch with remote peer "
                 "10.0.0.2<36475> (local: 2.30.7, remote 2.29.3)"):
        assert _graded(line) == [("nccl-stack-mismatch", "cause")], line
    # torch quotes the WARN after "Last error:"; its summary is the consequence
    assert first_cause("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1275, invalid usage "
                       "(run with NCCL_DEBUG=WARN for details), NCCL version 2.23.4",
                       "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.",
                       "Last error:", "Mismatched NCCL version detected : rank 1 version 22304 "
                       "rank 0 version 22105") == "nccl-stack-mismatch"
    # near misses: the ncclras client's protocol check (a tool, not the job), a version line
    assert first_cause("NCCL RAS protocol version mismatch (NCCL: 2.27.7; RAS client: 1)!") != \
        "nccl-stack-mismatch"
    assert first_cause("n:1:2 [0] NCCL INFO NCCL version 2.18.1+cuda12.1") == "none"


# --- torch's "Last error:" tail as users paste it


def test_the_last_error_tail_is_read_on_a_joined_line_and_after_a_literal_newline():
    # NCCLUtils.cpp getNcclErrorDetailStr: "...\nLast error:\n" + ncclGetLastError(NULL);
    # a paste that joined the lines, or a wrapper printing repr(e) (literal "\n")
    joined = f"{TORCH} {DETAIL}Last error: "
    assert first_cause(joined + "Error while creating shared memory segment /dev/shm/nccl-a "
                       "(size 9637888), error: No space left on device (28)") == \
        "dev-shm-too-small"
    assert _graded(joined + "NET/IB : Got completion from peer 10.0.0.2<4567> with error 12, "
                   "opcode 0, len 0, vendor err 129") == [("nccl-net-error", "hint")]
    assert first_cause(joined + "Call to ibv_modify_qp failed with error Connection timed out") \
        == "nccl-net-error"
    quoted = f"DistBackendError('{TORCH}\\n{DETAIL}\\nLast error:\\n"
    assert first_cause(quoted + "Call to shm_open failed : Permission denied')") == \
        "dev-shm-unwritable"
    assert _graded(quoted + "socketStartConnect: Connect to 172.17.0.3<40123> failed : "
                   "Software caused connection abort')") == [("nccl-wrong-interface", "hint")]
    # near misses: an informational IB event quoted, the words outside torch's tail
    assert first_cause(joined + "NET/IB : mlx5_2:1 Got async error event: LID change") != \
        "nccl-net-error"
    assert first_cause("see Last error handling: Mismatched collective detected docs") != \
        "collective-desync"


def test_the_last_error_tail_on_its_own_line_reads_ibverbs_failures():
    assert first_cause(TORCH, DETAIL, "Last error:",
                       "Call to ibv_modify_qp failed with error Connection timed out") == \
        "nccl-net-error"
    # near miss: the locked-memory limit keeps its own code
    assert first_cause(TORCH, DETAIL, "Last error:",
                       "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory") == \
        "memlock-limit-too-low"


# --- InfiniBand: the errno decides the memlock reading; the network NCCL chose


def test_ibverbs_registration_without_an_errno_is_a_memlock_hint():
    # misc/ibvwrap.cc <= 2.16 IBV_PTR_CHECK: no errno; 2.17+ IBV_PTR_CHECK_ERRNO adds it
    bare = "n:1:2 [0] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_reg_mr failed"
    assert _graded(bare) == [("memlock-limit-too-low", "hint")]
    e = explain_texts([("r.log", bare + "\n"), ("o.log", DUP + "\n")])
    assert e.problems[0].code == "duplicate-device"
    assert _graded("n:1:2 [0] misc/ibvwrap.cc:298 NCCL WARN Call to ibv_create_qp failed") == \
        [("memlock-limit-too-low", "hint")]
    assert _graded("n:1:2 [0] misc/ibvwrap.cc:134 NCCL WARN Call to ibv_reg_mr_iova2 failed "
                   "with error Cannot allocate memory") == [("memlock-limit-too-low", "cause")]
    # near miss: EFAULT is a GPU buffer the HCA cannot map, not the memlock limit
    assert first_cause("n:1:2 [0] misc/ibvwrap.cc:134 NCCL WARN Call to ibv_reg_mr_iova2 failed "
                       "with error Bad address") == "nccl-net-error"


def test_a_net_plugin_in_use_is_no_socket_fallback():
    # init.cc "Using network %s" (2.7+): a plugin's network carries the traffic
    hca = "node3:5:5 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0:1"
    none = "node3:5:5 [0] NCCL INFO NET/IB : No device found."
    assert first_cause(hca, none, "node3:5:5 [0] NCCL INFO Using network AWS Libfabric") == \
        "none"
    # near miss: NCCL naming its socket transport is the fallback itself
    assert first_cause(hca, none, "node3:5:5 [0] NCCL INFO Using network Socket") == \
        "nccl-socket-fallback"


# --- NCCL's start-up conditions do not explain a failure of another producer


def test_an_nccl_info_condition_does_not_explain_an_exception_no_rule_reads():
    # net_socket.cc's interface list, NCCL's plugin loader: INFO lines a job prints at start-up
    # whether or not it fails; their failures are NCCL's own (WARN, "NCCL error in:")
    for condition in ("h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> "
                      "[1]docker0:172.17.0.1<0>",
                      "h:1:1 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin symbol (>= "
                      "v5). ncclNetPlugin symbols v4 and lower are not supported."):
        for failure in (("Traceback (most recent call last):", '  File "train.py", line 3, in '
                         "<module>", "ValueError: bad batch"),
                        ("Segmentation fault (core dumped)",)):
            e = explain_texts([("r.log", "\n".join((condition, *failure)) + "\n")])
            # a Python exception the rank raised itself (causality.RAISED_BY_RANK) is the
            # cause: the condition is no root; a native crash leaves it undecided (stop 30)
            want = "unexplained" if "ValueError" in failure[-1] else "root-cause-ambiguous"
            assert e.undetermined and e.problems[0].code == want, failure
    # near miss: gloo's loopback fallback is followed by its own unread connectFullMesh error,
    # which it explains (a warning of another producer keeps the order rule)
    assert first_cause("[rank8] Warning: Unable to resolve hostname to a (local) address. Using "
                       "the loopback address as fallback. Manually set the network interface to "
                       "bind to with GLOO_SOCKET_IFNAME.",
                       "Traceback (most recent call last):",
                       "RuntimeError: Gloo connectFullMesh failed ...") == "hostname-loopback"


def test_nccl_tests_quote_the_last_warn_after_the_result_string():
    # nccl-tests common.h (NCCL >= 2.13): "%s: Test NCCL failure %s:%d '%s / %s'" with
    # ncclGetErrorString(res), ncclGetLastError(NULL)
    head = "node1: Test NCCL failure common.cu:958 'unhandled system error (run with " \
           "NCCL_DEBUG=INFO for details) / "
    assert first_cause(head + "Call to shm_open failed : Permission denied'") == \
        "dev-shm-unwritable"
    assert first_cause(head + "Error: failed to extend /dev/shm/nccl-a to 9637892 bytes, "
                       "error: No space left on device (28)'") == "dev-shm-too-small"
    assert _graded(head + "socketStartConnect: Connect to 169.254.3.1<40123> failed : No "
                   "route to host'") == [("nccl-wrong-interface", "hint")]
    # near miss: an empty last error (no WARN was printed) leaves the result string alone
    e = explain_texts([("r.log", head + "'\n")])
    assert e.undetermined and e.problems[0].code == "nccl-error"


def test_nodes_printing_different_versions_are_a_hint_that_a_named_cause_outranks():
    # init.cc "NCCL version 2.x.y+cudaA.B" per host: NCCL < 2.23 compares nothing, and nodes a
    # patch release apart often run together
    v1 = "node1:11:11 [0] NCCL INFO NCCL version 2.18.1+cuda12.1"
    v2 = "node2:22:22 [0] NCCL INFO NCCL version 2.18.3+cuda12.1"
    oom = ("node2:22:40 [0] NCCL WARN Cuda failure 'out of memory'")
    assert first_cause(v1, v2, oom) == "cuda-out-of-memory"
    # alone beside a garbled bootstrap record (the pre-2.23 symptom) it still answers
    assert _graded(v1, "node2:22:22 [0] NCCL INFO NCCL version 2.14.3+cuda11.7",
                   "node1:11:30 [0] bootstrap.cc:73 NCCL WARN Message truncated : received 48 "
                   "bytes instead of 56")[0] == ("nccl-stack-mismatch", "hint")


def test_nccl_oob_net_ifname_matching_no_device_is_the_variable():
    # bootstrap.cc 2.24+ (NCCL_OOB_NET_ENABLE=1)
    for line in ("h:1:2 [0] bootstrap.cc:577 NCCL WARN no device found matching exactly mlx5_9, "
                 "verify NCCL_OOB_NET_IFNAME",
                 "h:1:2 [0] bootstrap.cc:575 NCCL WARN no device found after excluding ib, "
                 "verify NCCL_OOB_NET_IFNAME"):
        assert _graded(line) == [("socket-ifname-invalid", "cause")], line
    # near miss: NCCL's IB transport finding no HCA is no variable of the user's
    assert first_cause("h:1:2 [0] NCCL INFO NET/IB : No device found.") == "none"


def test_a_sticky_kernel_fault_reported_in_nvls_is_not_the_fabric():
    # transport/nvls.cc CUCHECK (cudawrap.h: "Cuda failure '%s'" of cuGetErrorString)
    assert first_cause("h:1:2 [0] transport/nvls.cc:76 NCCL WARN Cuda failure 'operation not "
                       "supported'") == "fabric-manager-not-ready"
    # near misses: an earlier kernel's fault returned by the next driver call; NVLS's buffers
    # out of GPU memory
    e = explain_texts([("r.log", "h:1:2 [0] transport/nvls.cc:76 NCCL WARN Cuda failure 'an "
                        "illegal memory access was encountered'\n")])
    assert e.problems[0].code != "fabric-manager-not-ready" and e.undetermined
    assert first_cause("h:1:2 [0] transport/nvls.cc:76 NCCL WARN Cuda failure 2 'out of "
                       "memory'") == "cuda-out-of-memory"


def test_socket_data_truncation_is_a_size_mismatch_hint():
    # net_socket.cc 2.12+ names sizes *or* settings (NCCL_PROTO, NCCL_ALGO) between ranks
    line = ("n1:1:1 [0] transport/net_socket.cc:561 NCCL WARN NET/Socket : peer 10.0.0.2<4242> "
            "message truncated : receiving 1048576 bytes instead of 65536. If you believe your "
            "socket network is in a healthy state, there may be a mismatch in collective sizes "
            "or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks")
    assert _graded(line) == [("collective-size-mismatch", "hint")]
    e = explain_texts([("r.log", line + "\n"), ("o.log", DUP + "\n")])
    assert e.problems[0].code == "duplicate-device"


def test_ib_finding_no_ip_interface_is_the_interface_filter_not_the_fabric():
    # net_ib.cc ncclIbInit (2.7+): the bootstrap's interface search, for IB's out-of-band socket
    line = "h:1:2 [0] transport/net_ib.cc:402 NCCL WARN NET/IB : No IP interface found."
    assert first_cause("h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth9",
                       line) == "socket-ifname-invalid"
    e = explain_texts([("r.log", line + "\n")])
    assert e.undetermined and e.problems[0].code == "socket-ifname-invalid"
    # near miss: the IB transport's own failure is the fabric's
    assert first_cause("h:1:2 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_modify_qp failed "
                       "with error Connection timed out") == "nccl-net-error"


def test_an_hca_nccl_skips_at_init_and_informational_ib_events_are_no_failure():
    # net_ib.cc ncclIbInit: WARN then continue with the other HCAs (or sockets); async events
    # NCCL carries on through (failurewords.BENIGN)
    for line in ("h:1:2 [0] transport/net_ib.cc:426 NCCL WARN NET/IB : Unable to open device "
                 "mlx5_4",
                 "h:1:9 [0] transport/net_ib.cc:88 NCCL WARN NET/IB : mlx5_0:1 Got async event "
                 ": GID table change"):
        e = explain_texts([("r.log", "\n".join(("h:1:9 [0] NCCL INFO Init COMPLETE", line,
                                                "epoch 1 loss 0.2")) + "\n")])
        assert e.exit_code == 0, line
        # beside NCCL's failure it explains nothing (the failure stays undetermined)
        e = explain_texts([("r.log", "\n".join((line, TORCH, DETAIL)) + "\n")])
        assert e.undetermined and e.problems[0].code == "nccl-error", line
    # near miss: a port going down under a running job is the fabric's failure
    assert _graded("h:1:9 [0] NCCL WARN NET/IB : mlx5_0:1 Got async event : port error") == \
        [("nccl-net-error", "cause")]
