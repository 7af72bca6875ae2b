"""Host names, interfaces and NCCL's socket choices."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause

GLOO = ("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:{n}] "
        "{expr}. Unable to find address for: {name}")


def test_gloo_tells_an_unresolvable_hostname_from_a_missing_interface():
    assert first_cause(GLOO.format(n=127, expr="rp != nullptr", name="dgx-1.ai")) == \
        "hostname-unresolvable"
    assert first_cause(GLOO.format(n=84, expr="ifa != nullptr", name="eth9")) == \
        "socket-ifname-invalid"


def test_c10d_cannot_retrieve_its_own_addresses():
    assert first_cause("[W socket.cpp:601] [c10d] The IPv6 network addresses of (user, 53821) "
                       "cannot be retrieved (gai error: -3 - Temporary failure in name "
                       "resolution).") == "hostname-unresolvable"


def test_gloo_loopback_fallback():
    assert first_cause("[W ProcessGroupGloo.cpp:694] Warning: Unable to resolve hostname to a "
                       "(local) address. Using the loopback address as fallback. Manually set "
                       "the network interface to bind to with GLOO_SOCKET_IFNAME.") == \
        "hostname-loopback"


def test_nccl_spread_over_docker_bridges():
    assert first_cause("node:1:1 [0] NCCL INFO NET/Socket : Using [0]bond0:192.168.1.161<0> "
                       "[1]br-05ab815fa14e:172.19.0.1<0>") == "nccl-wrong-interface"


def test_launcher_env_missing_and_slurm_rejection():
    assert first_cause("ValueError: Error initializing torch.distributed using env:// "
                       "rendezvous: environment variable RANK expected, but not set") == \
        "launcher-env-missing"
    assert first_cause("sbatch: error: Batch job submission failed: Requested node "
                       "configuration is not available") == "slurm-job-rejected"


def test_an_address_of_no_family_is_the_interface_only_when_one_was_set():
    odd = "ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor " \
          "AF_INET6(10)"
    assert first_cause(odd) == "nccl-error"  # the line alone cannot tell: hedged
    assert first_cause("node:1:1 [3] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth2",
                       odd) == "socket-ifname-invalid"


def test_gloo_finds_no_interface_with_the_address_its_name_resolved_to():
    # gloo/transport/tcp/device.cc sockaddrToInterfaceName
    assert first_cause("RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/"
                       "tcp/device.cc:212] ifa != nullptr. Unable to find interface for: "
                       "[0.0.0.189]") == "hostname-unresolvable"


def test_a_gloo_peer_at_127_0_1_1_is_the_hostname_on_loopback():
    # gloo/transport/tcp/pair.cc "Connection closed by peer " << peer_.str(), "Read error "
    assert first_cause("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
                       "Connection closed by peer [127.0.1.1]:57365") == "hostname-loopback"
    assert first_cause("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:"
                       "575] Connection closed by peer [10.0.3.17]:57365") != \
        "hostname-loopback"


def test_bind_address_not_local_in_torch_2_3_wording():
    # socket.cpp >= 2.3: "failed to listen on any local network address. port: ..., code:"
    assert first_cause("torch.distributed.DistNetworkError: The server socket has failed to "
                       "listen on any local network address. port: 29500, useIpv6: 0, code: "
                       "-99, name: EADDRNOTAVAIL, message: address not available") == \
        "master-addr-not-rank0-node"
    assert first_cause("torch.distributed.DistNetworkError: The server socket has failed to "
                       "listen on any local network address. port: 29500, useIpv6: 0, code: "
                       "-98, name: EADDRINUSE, message: address already in use") == \
        "master-port-in-use"


def test_errno_98_from_python_and_from_nccl_is_a_port_in_use():
    assert first_cause("OSError: [Errno 98] Address already in use") == "master-port-in-use"
    assert first_cause("node1:99:99 [0] misc/socket.cc:430 NCCL WARN Call to bind failed : "
                       "Address already in use") == "endpoint-port-in-use"


def test_c10d_listen_path_gai_error_is_a_symptom():
    # socket.cpp SocketListenOp looks up no name (getaddrinfo(nullptr, ...)): shown, undecided
    assert first_cause("[W socket.cpp:558] [c10d] The local IPv4 network addresses cannot be "
                       "retrieved (gai error: -2 - Name or service not known).") == \
        "hostname-unresolvable"


def test_a_peer_that_went_away_is_a_symptom():
    from ddpcheck.explain import explain_texts

    for line in ("node2:7:7 [0] misc/socket.cc:58 NCCL WARN socketProgress: Connection closed "
                 "by remote peer node1<54321>",
                 "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
                 "closed by peer [10.0.3.17]:57365",
                 "torch.distributed.DistNetworkError: failed to recv, got 0 bytes"):
        e = explain_texts([("r.log", line + "\n")])
        assert e.problems[0].code == "peer-unreachable" and e.undetermined, line


def test_a_peer_that_went_away_after_an_oom_is_its_consequence():
    assert first_cause("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                       "2.00 GiB",
                       "[rank0]: torch.distributed.DistNetworkError: failed to recv, got 0 "
                       "bytes") == "cuda-out-of-memory"


ZERO = ("RuntimeError: DDP expects same model across all ranks, but Rank 0 has 382 params, "
        "while rank 1 has inconsistent 0 params.")


def test_zero_params_next_to_nccl_transport_lines_is_undetermined():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r.log", "node1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>"
                        "\n" + ZERO + "\n")])
    assert e.undetermined


def test_zero_params_alone_and_a_real_count_difference_stay_a_model_mismatch():
    assert first_cause(ZERO) == "ddp-model-mismatch"
    assert first_cause("node1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
                       ZERO.replace("inconsistent 0", "inconsistent 380")) == \
        "ddp-model-mismatch"


def test_nccl_connecting_to_a_docker_bridge_address_is_the_wrong_interface():
    # NCCL <= 2.11 include/socket.h, 2.12-2.18 misc/socket.cc, >= 2.19 os/linux.cc
    for line in ("node2:9:9 [0] include/socket.h:403 NCCL WARN Connect to 172.17.0.2<43210> "
                 "failed : No route to host",
                 "node2:9:9 [0] misc/socket.cc:450 NCCL WARN Net : Connect to "
                 "169.254.3.1<43210> failed : Connection timed out",
                 "node2:9:9 [0] os/linux.cc:288 NCCL WARN socketPollConnect: connect to "
                 "172.17.0.5<43210> returned Connection refused, exceeded error retry count "
                 "after 35 attempts"):
        assert first_cause(line) == "nccl-wrong-interface", line


def test_nccl_connecting_to_a_routable_address_is_only_a_symptom():
    from ddpcheck.explain import explain_texts

    for line in ("node2:9:9 [0] include/socket.h:403 NCCL WARN Connect to 10.2.0.7<43210> "
                 "failed : Connection refused",
                 "node2:9:9 [0] os/linux.cc:288 NCCL WARN socketPollConnect: connect to "
                 "10.2.0.7<43210> returned Connection refused, exceeded error retry count "
                 "after 35 attempts",
                 "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/"
                 "transport/tcp/pair.cc:144] no error"):
        e = explain_texts([("r.log", line + "\n")])
        assert e.problems[0].code == "peer-unreachable" and e.undetermined, line


C10D_TIMEOUT = ("torch.distributed.DistNetworkError: The client socket has timed out after 60s "
                "while trying to connect to (gpu-a01, 29400).")
C10D_FRAME = ('  File "/usr/lib/python3/site-packages/torch/distributed/elastic/rendezvous/'
              'c10d_rendezvous_backend.py", line 174, in _create_tcp_store')


def test_a_c10d_agent_timing_out_on_its_own_name_is_the_endpoint_not_recognised():
    # c10d_rendezvous_backend.py: is_host = _matches_machine_hostname(host); the summary's
    # "host : gpu-a01" (elastic errors/__init__.py _FAILURE_FORMAT_TEMPLATE) is this node
    assert first_cause(C10D_FRAME, C10D_TIMEOUT, "  host      : gpu-a01") == \
        "endpoint-not-recognised"


def test_a_timeout_to_another_node_or_without_c10d_stays_unreachable():
    assert first_cause(C10D_FRAME, C10D_TIMEOUT, "  host      : gpu-a02") == \
        "endpoint-unreachable"
    assert first_cause(C10D_TIMEOUT, "  host      : gpu-a01") == "endpoint-unreachable"


def test_a_gaierror_raised_looking_up_the_nodes_own_name_is_hostname_unresolvable():
    # Python's socket module, called as torch's elastic agent (_get_fq_hostname) and many
    # scripts call it: the traceback shows whose name was looked up
    assert first_cause(
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        "    ip = socket.gethostbyname(socket.gethostname())",
        "socket.gaierror: [Errno -2] Name or service not known") == "hostname-unresolvable"


def test_a_gaierror_for_another_name_stays_the_endpoint():
    assert first_cause(
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        "    ip = socket.gethostbyname(os.environ['MASTER_ADDR'])",
        "socket.gaierror: [Errno -2] Name or service not known") == "endpoint-unresolvable"


LOOPBACK_WARNING = ("[W ProcessGroupGloo.cpp:694] Warning: Unable to resolve hostname to a "
                    "(local) address. Using the loopback address as fallback. Manually set the "
                    "network interface to bind to with GLOO_SOCKET_IFNAME.")


def test_a_start_up_warning_yields_to_a_failure_of_another_kind():
    # printed at init on single-node jobs too: a later CUDA OOM is the cause
    assert first_cause(LOOPBACK_WARNING, "torch.OutOfMemoryError: CUDA out of memory. Tried to "
                       "allocate 2.00 GiB") == "cuda-out-of-memory"
    assert first_cause("node1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> "
                       "[1]docker0:172.17.0.1<0>",
                       "RuntimeError: CUDA error: invalid device ordinal") == \
        "invalid-device-ordinal"


def test_a_start_up_warning_explains_the_connection_failures_that_follow():
    assert first_cause(LOOPBACK_WARNING,
                       "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:"
                       "575] Connection closed by peer [10.0.3.17]:57365") == "hostname-loopback"


def test_gloos_loopback_fallback_says_the_host_name_found_no_local_address():
    """Recorded (runs/netns-own-hostname-not-in-hosts): node1's name is missing from its
    /etc/hosts; gloo falls back to 127.0.0.1 and node0 is refused there."""
    from ddpcheck.explain import explain_texts

    e = explain_texts([("console-node1.log",
                        "[default0]:[W1124 13:57:24.772778635 ProcessGroupGloo.cpp:524] Warning: "
                        "Unable to resolve hostname to a (local) address. Using the loopback "
                        "address as fallback. Manually set the network interface to bind to "
                        "with GLOO_SOCKET_IFNAME. (function operator())\n"),
                       ("console.log",
                        "[default0]:[E1124 13:57:24.992835843 ProcessGroupGloo.cpp:67] Gloo "
                        "connectFullMesh failed with [/__w/pytorch/pytorch/third_party/gloo/gloo"
                        "/transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection "
                        "refused, remote=[127.0.0.1]:29606$0\n")])
    root = next(p for p in e.problems if not p.consequence_of)
    assert root.code == "hostname-loopback" and not e.undetermined
    assert "missing from /etc/hosts and DNS" in root.cause and "127.0.1.1" not in root.cause


def test_nccl_proxy_call_failures_are_symptoms():
    from ddpcheck.explain import explain_texts

    for line in ("node1:1:1 [0] proxy.cc:808 NCCL WARN Proxy Call to rank 3 failed (Connect)",
                 "node1:1:9 [0] proxy.cc:1905 NCCL WARN [Proxy Service 3] Failed to execute "
                 "operation Connect from rank 1, retcode 3"):
        e = explain_texts([("r.log", line + "\n")])
        assert e.problems[0].code == "peer-unreachable" and e.undetermined, line


def test_gloo_names_an_interface_only_where_its_check_or_the_name_says_so():
    # gloo/transport/tcp/device.cc: lookupAddrForIface and lookupAddrForHostname print the
    # same words; "ifa != nullptr" or an interface-like name is the interface
    assert first_cause("RuntimeError: Unable to find address for: eth0") == \
        "socket-ifname-invalid"
    assert first_cause(GLOO.format(n=84, expr="ifa != nullptr", name="data01")) == \
        "socket-ifname-invalid"
    # a bare name that reads as neither: gloo says the same for a host that does not resolve
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r.log", "RuntimeError: Unable to find address for: node01\n")])
    assert e.problems[0].code == "socket-ifname-invalid" and e.undetermined
    assert "host name" in e.problems[0].cause


def test_an_address_of_no_family_after_nccl_found_the_named_interface_stays_hedged():
    # misc/socket.cc: with NCCL_SOCKET_IFNAME set and found ("Bootstrap : Using eth2:..."),
    # the odd family is a peer's bytes (ranks on different NCCL versions), not the variable
    odd = "ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor " \
          "AF_INET6(10)"
    assert first_cause("node:1:1 [3] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth2",
                       "node:1:1 [3] NCCL INFO Bootstrap : Using eth2:10.128.0.32<0>",
                       odd) == "nccl-error"
    # NCCL >= 2.24 writes "Bootstrap: Using" (no space): the same interface found
    assert first_cause("gpu-3:40:40 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens7",
                       "gpu-3:40:40 [0] NCCL INFO Bootstrap: Using ens7:10.128.0.9<0>",
                       odd) == "nccl-error"
    # net_socket.cc's thread count line names no interface: the variable stays the reading
    assert first_cause("gpu-3:40:40 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ens7",
                       "gpu-3:40:40 [0] NCCL INFO NET/Socket: Using 2 threads and 8 sockets "
                       "per thread", odd) == "socket-ifname-invalid"


def test_a_docker_bridge_address_is_a_hint_that_yields_to_a_cause():
    # 172.17.0.0/16 is also one host's containers on Docker's bridge (and RFC 1918 space):
    # a cause-grade line elsewhere in the job wins over it
    from ddpcheck.explain import explain_texts

    e = explain_texts([("a.log", "node2:9:9 [0] include/socket.h:403 NCCL WARN Connect to "
                                 "172.17.0.2<43210> failed : Connection refused\n"),
                       ("b.log", "node1:5:5 [0] init.cc:521 NCCL WARN Duplicate GPU detected : "
                                 "rank 1 and rank 0 both on CUDA device 1a000\n")])
    assert e.problems[0].code == "duplicate-device"
    # torch's "Last error:" tail repeats the WARN without its prefix
    assert first_cause("Last error:", "socketStartConnect: Connect to 172.17.0.3<52811> failed "
                       ": No route to host") == "nccl-wrong-interface"


def test_no_usable_listening_interface_is_nccl_comm_ids_subnet():
    # bootstrap.cc with NCCL_COMM_ID set: no local interface in that address's subnet
    from ddpcheck.explain import explain_texts

    e = explain_texts([("r.log", "h:1:1 [0] bootstrap.cc:41 NCCL WARN NET/Socket : No usable "
                                 "listening interface found\n")])
    assert e.problems[0].code == "nccl-no-socket-interface"
    assert "NCCL_COMM_ID" in e.problems[0].cause


def test_another_files_interface_line_does_not_hedge_the_odd_family():
    from ddpcheck.explain import explain_texts

    odd = ("node:1:1 [3] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth2\n"
           "ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor "
           "AF_INET6(10)\n")
    healthy = "other:5:5 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.9<0>\n"
    e = explain_texts([("failed.log", odd), ("healthy.log", healthy)])
    assert e.problems[0].code == "socket-ifname-invalid"


def test_a_peer_at_a_loopback_address_is_a_hint():
    # across nodes: the host name on loopback; in one node: a peer that exited (loopback works)
    from ddpcheck.explain import explain_texts

    line = ("timed out connecting: SO_ERROR: Connection refused, remote=[127.0.1.1]:29501\n")
    e = explain_texts([("r.log", line)])
    assert [(x.problem.code, x.grade) for x in e.found] == [("hostname-loopback", "hint")]
    # 127.0.0.1 is also every one-node job's store that exited: a symptom (test_shared_lines)
    e = explain_texts([("r.log", line), ("o.log", "torch.OutOfMemoryError: CUDA out of memory. "
                                                  "Tried to allocate 2.00 GiB\n")])
    assert e.problems[0].code == "cuda-out-of-memory"


def test_an_interface_list_names_no_cause_when_every_peer_is_inside_the_node():
    # transport.cc: only "via NET/..." connections cross nodes over the listed interfaces
    listing = "node:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]docker0:" \
              "172.17.0.1<0>"
    timeout = ("[E ProcessGroupNCCL.cpp:1] [Rank 1] Watchdog caught collective operation "
               "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for "
               "600012 milliseconds before timing out.")
    p2p = "node:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"
    net = "node:1:1 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/1"
    assert first_cause(listing, p2p, timeout) == "collective-timeout"
    # near miss: a connection over the network keeps the interface as the lead
    assert first_cause(listing, net, timeout) == "nccl-wrong-interface"


def test_another_files_connection_lines_do_not_clear_an_interface_list():
    from ddpcheck.explain import explain_texts

    e = explain_texts([("a.log", "node:1:1 [0] NCCL INFO NET/Socket : Using [0]bond0:192.168.1."
                                 "161<0> [1]br-05ab815fa14e:172.19.0.1<0>\n"),
                       ("b.log", "other:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via "
                                 "P2P/IPC\n")])
    assert e.problems[0].code == "nccl-wrong-interface"


# runs/netns-socket-ifname-lo: a job script with `set -x`, two hosts, torch 2.13
IFNAME_LO_REFUSED = ("[default0]:[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
                     "debug_logger.cc:9] ERROR failed to connect, willRetry=1, retry=1, "
                     "retryLimit=3, rank=1, size=2, local=[127.0.0.1]:4264, "
                     "remote=[127.0.0.1]:10642$1, error=SO_ERROR: Connection refused, "
                     "remote=[127.0.0.1]:10642$1")


def test_gloo_dialled_at_loopback_when_the_job_exports_gloo_socket_ifname_lo():
    assert first_cause("+ export GLOO_SOCKET_IFNAME=lo", "+ exec torchrun --nnodes 2 t.py",
                       IFNAME_LO_REFUSED) == "socket-ifname-unreachable"
    assert first_cause("GLOO_SOCKET_IFNAME=lo torchrun --nnodes 2 t.py",
                       IFNAME_LO_REFUSED) == "socket-ifname-unreachable"
    # another interface, or advice in prose, says nothing of why gloo used loopback
    assert first_cause("+ export GLOO_SOCKET_IFNAME=lo0", IFNAME_LO_REFUSED) == \
        "hostname-loopback"
    assert first_cause("try to set GLOO_SOCKET_IFNAME=lo", IFNAME_LO_REFUSED) == \
        "hostname-loopback"


def test_a_gloo_connect_with_no_reply_names_both_a_drop_and_an_unreachable_address():
    """gloo pair.h "Connect timeout" (runs/s30-netns-peer-ports-dropped: iptables DROP): a
    symptom whose candidate text names the firewall as well as the interface."""
    from ddpcheck.explain import explain_texts

    line = ("RuntimeError: Gloo connectFullMesh failed with [/__w/pytorch/pytorch/third_party/"
            "gloo/gloo/transport/tcp/pair.h:311] Connect timeout [none]")
    ex = explain_texts([("job.log", line + "\n")])
    (p,) = [p for p in ex.problems if not p.consequence_of]
    assert p.code == "peer-unreachable" and ex.undetermined
    assert "drops" in p.cause and "iptables" in p.fix
    # near miss: a reset is an answer, not "no reply"
    refused = line.replace("Connect timeout [none]", "no error")
    ex = explain_texts([("job.log", refused + "\n")])
    assert all("iptables" not in p.fix for p in ex.problems)
