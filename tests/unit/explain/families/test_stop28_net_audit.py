"""Stop-28 audit of the network and rendezvous rules: each line as its producer prints it
(source and version cited), the other causes that print it, and a near miss.

Producers read: torch/csrc/distributed/c10d/socket.cpp (SocketListenOp, SocketConnectOp,
1.10-2.13), TCPStoreLibUvBackend.cpp (makeWithPort, init), TCPStore.cpp (waitForWorkers),
Utils.hpp (recvBytes/sendBytes), torch/distributed/elastic/rendezvous/*.py, gloo
transport/tcp/device.cc, pair.cc, helpers.h, error.cc (2017-2026).
"""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

HEALTHY = ("epoch 1 loss 0.31", "Training completed.")


def _verdict(*lines: str) -> tuple[str, bool]:
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    causes = [p.code for p in e.problems if not p.consequence_of]
    return (causes[0] if causes else "none"), e.undetermined


def test_per_address_connect_warning_is_no_failure():
    # socket.cpp SocketConnectOp::tryConnect: recordError (C10D_WARNING) for one address,
    # then the next address (IPv4 after ::1); a healthy job prints it where localhost is ::1
    # without IPv6, or a dual-stack name's IPv6 address has no route
    for errno in ("99 - Cannot assign requested address", "97 - Address family not supported "
                  "by protocol", "101 - Network is unreachable"):
        line = (f"[W1124 08:52:25.123 socket.cpp:697] [c10d] The client socket has failed to "
                f"connect to [localhost]:29500 (errno: {errno}).")
        assert first_cause(line, *HEALTHY) == "none", errno
    # near miss: the thrown error (every address failed) is read, by its errno
    assert first_cause("torch.distributed.DistNetworkError: The client socket has failed to "
                       "connect to any network address of (node1, 29500). The client socket "
                       "has failed to connect to [node1]:29500 (errno: 113 - No route to "
                       "host).") == "endpoint-no-route"
    assert _verdict("RuntimeError: The client socket has failed to connect to any network "
                    "address of (localhost, 29500). The client socket has failed to connect to "
                    "[localhost]:29500 (errno: 99 - Cannot assign requested address).") == \
        ("endpoint-unreachable", True)
    # near miss: one address timing out is still read
    assert first_cause("The client socket has failed to connect to [node1]:29500 (errno: 110 "
                       "- Connection timed out).") == "endpoint-unreachable"


def test_store_waiting_for_clients_is_a_rendezvous_timeout_symptom():
    # TCPStore.cpp waitForWorkers (2.2+): the store's host counted who connected
    line = ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. "
            "1/2 clients joined.")
    assert _verdict(line) == ("rendezvous-timeout", True)
    e = explain_texts([("job.log", line + "\n")])
    assert "only 1 of 2" in e.problems[0].cause
    # near miss: the client's own wait for a key is the watchdog's (another family)
    assert first_cause("torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: "
                       "/default_pg/0//cuda//0") != "rendezvous-timeout"


def test_store_connection_lost_wordings_by_torch_version():
    # Utils.hpp recvBytes: "failed to recv, got 0 bytes" (2.x to 2.6); 2.7+ capitalised with
    # "Connection was likely closed. Did the remote server shutdown or crash?"; sendBytes'
    # twin; SYSCHECK's strerror (EPIPE)
    for line in ("torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection "
                 "was likely closed. Did the remote server shutdown or crash?",
                 "torch.distributed.DistNetworkError: Failed to send, sent 0 bytes. Connection "
                 "was likely closed. Did the remote server shutdown or crash?",
                 "torch.distributed.DistNetworkError: failed to recv, got 0 bytes",
                 "torch.distributed.DistNetworkError: Broken pipe"):
        assert _verdict(line) == ("peer-unreachable", True), line
    # near miss: TCPStore.cpp's teardown warning, printed by healthy jobs whose store host
    # exits first, is no failure
    assert first_cause("[W522 11:47:45.949247853 TCPStore.cpp:125] [c10d] recvValue failed on "
                       "SocketImpl(fd=77, addr=[::ffff:127.0.0.1]:39732, remote=[::ffff:127.0."
                       "0.1]:29600): failed to recv, got 0 bytes", *HEALTHY) == "none"
    # near miss: a Python BrokenPipeError (a closed stdout pipe) is not the store
    assert first_cause("BrokenPipeError: [Errno 32] Broken pipe") != "peer-unreachable"


def test_gloo_peer_lost_wordings_by_gloo_version():
    # gloo pair.cc <= 2022 (torch <= 2.0): connect/writev with strerror, socket closed;
    # gloo >= 2023 helpers.h ConnectOperation: "timed out connecting: SO_ERROR: ..., remote="
    for line in ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect "
                 "[10.0.3.7]:40331: Connection refused",
                 "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:331] writev "
                 "[10.0.3.7]:40331: Broken pipe",
                 "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:193] Socket "
                 "unexpectedly closed [10.0.3.7]:40331",
                 "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:812] Socket "
                 "closed [10.0.3.7]:40331",
                 "[../third_party/gloo/gloo/transport/tcp/pair.cc:152] timed out connecting: "
                 "SO_ERROR: No route to host, remote=[10.0.3.7]:40331"):
        assert _verdict(line) == ("peer-unreachable", True), line
    # near miss: a socket closed in prose names no peer address
    assert first_cause("INFO: Socket closed by client") != "peer-unreachable"


def test_gloo_host_name_lookups_by_gloo_version():
    # device.cc lookupAddrForHostname, gloo >= 2019-07: the name resolves, but no address
    # it resolves to is this node's (EADDRNOTAVAIL): a hint, and not MASTER_ADDR's problem
    line = ("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:"
            "128] bind_rv == 0. Unable to find address for node01; bind(2) for [10.1.2.3]:0 "
            "failed with: Cannot assign requested address")
    assert _verdict(line) == ("hostname-unresolvable", False)
    e = explain_texts([("job.log", line + "\n")])
    assert e.found[0].grade == "hint"
    assert "10.1.2.3" in e.problems[0].cause
    # gloo >= 2025-04 (GLOO_ENFORCE_EQ(rv, 0)): getaddrinfo's EAI_NONAME
    assert first_cause("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
                       "device.cc:99] rv == 0. -2 vs 0") == "hostname-unresolvable"
    # older gloo: "rp != nullptr. Unable to find address for: host" (unchanged)
    assert first_cause("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
                       "device.cc:127] rp != nullptr. Unable to find address for: dgx-1.ai") \
        == "hostname-unresolvable"
    # near miss: another enforce on rv in another file is not a name lookup
    assert first_cause("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
                       "pair.cc:99] rv == 0. -2 vs 0") != "hostname-unresolvable"


def test_store_binds_wildcards_so_eaddrnotavail_names_no_master_addr():
    # TCPStoreLibUvBackend.cpp makeWithPort binds "::", then "0.0.0.0" (2.4+): a symptom
    assert _verdict("torch.distributed.DistNetworkError: The server socket has failed to "
                    "listen on any local network address. port: 29500, useIpv6: 0, code: -99, "
                    "name: EADDRNOTAVAIL, message: address not available") == \
        ("master-addr-not-rank0-node", True)
    # a program binding a named address (NCCL_COMM_ID, a launcher's socket.bind): a hint
    e = explain_texts([("job.log", "node1:9:9 [0] misc/socket.cc:430 NCCL WARN Call to bind "
                        "failed : Cannot assign requested address\n")])
    assert e.found[0].grade == "hint"
    # near miss: EADDRINUSE in the same wording is the port in use, a cause
    assert _verdict("torch.distributed.DistNetworkError: The server socket has failed to "
                    "listen on any local network address. port: 29500, useIpv6: 0, code: -98, "
                    "name: EADDRINUSE, message: address already in use") == \
        ("master-port-in-use", False)


def test_listen_path_gai_error_yields_to_the_bind_error_beside_it():
    # socket.cpp joins every family's error into the thrown message: the errno 98 decides
    assert _verdict("RuntimeError: The server socket has failed to listen on any local network "
                    "address. The local IPv6 network addresses cannot be retrieved (gai error: "
                    "-2 - Name or service not known). The server socket has failed to bind to "
                    "0.0.0.0:29500 (errno: 98 - Address already in use).") == \
        ("master-port-in-use", False)
    # alone it is shown and undecided (the listen path looks up no name)
    assert _verdict("[W socket.cpp:558] [c10d] The local IPv4 network addresses cannot be "
                    "retrieved (gai error: -2 - Name or service not known).")[1]


def test_c10d_rendezvous_connection_error_is_a_wrapper():
    # c10d_rendezvous_backend.py: wraps the store's own exception ("See inner exception")
    assert _verdict("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The "
                    "connection to the C10d store has failed. See inner exception for "
                    "details.") == ("endpoint-unreachable", True)
    # near miss: the state error of the same module is not a connection failure
    assert first_cause("torch.distributed.elastic.rendezvous.api.RendezvousStateError: The "
                       "state object is corrupt. See inner exception for details.") != \
        "endpoint-unreachable"


def test_gloo_loopback_fallback_names_the_unresolved_name():
    # ProcessGroupGloo createDefaultDevice: printed when the name does not resolve to a local
    # address (a name at 127.0.1.1 binds and prints nothing)
    e = explain_texts([("job.log", "[W ProcessGroupGloo.cpp:694] Warning: Unable to resolve "
                        "hostname to a (local) address. Using the loopback address as "
                        "fallback. Manually set the network interface to bind to with "
                        "GLOO_SOCKET_IFNAME. (function operator())\n")])
    assert e.problems[0].code == "hostname-loopback"
    assert "does not resolve to an address of its own" in e.problems[0].cause


def test_python_name_lookup_on_macos():
    # CPython socket.gaierror with macOS's EAI_NONAME (8)
    assert first_cause("socket.gaierror: [Errno 8] nodename nor servname provided, or not "
                       "known") == "endpoint-unresolvable"
    # near miss: another errno 8 (ENOEXEC) is not a name lookup
    assert first_cause("OSError: [Errno 8] Exec format error") != "endpoint-unresolvable"


def test_per_address_refused_or_timed_out_warning_is_no_failure():
    # socket.cpp warns per address and retries a refused connect until the store host
    # listens: a job whose workers start before rank 0 prints it, then runs
    for errno in ("111 - Connection refused", "110 - Connection timed out"):
        line = (f"[W socket.cpp:558] [c10d] The client socket has failed to connect to "
                f"[node0]:29500 (errno: {errno}).")
        assert first_cause(line, *HEALTHY) == "none", errno
    # near miss: the same words as C10D_ERROR (the connect gave up) are read
    assert _verdict("[E socket.cpp:1019] [c10d] The client socket has failed to connect to "
                    "[node0]:29500 (errno: 111 - Connection refused).") == \
        ("endpoint-refused", True)
    assert first_cause("[W socket.cpp:558] [c10d] The client socket has failed to connect to "
                       "[node0]:29500 (errno: 111 - Connection refused).",
                       "ConnectionRefusedError: [Errno 111] Connection refused") == \
        "endpoint-refused"


def test_per_address_warnings_that_end_their_file_are_a_connect_that_never_got_through():
    # the same warnings with nothing after them (a job that hung retrying until it was
    # stopped, the paste's end): the store refused or did not answer, as at stop 27
    for errno, code in (("111 - Connection refused", "endpoint-refused"),
                        ("110 - Connection timed out", "endpoint-unreachable")):
        line = (f"[W socket.cpp:558] [c10d] The client socket has failed to connect to "
                f"[node0]:29500 (errno: {errno}).")
        assert first_cause(*HEALTHY[:1], *[line] * 6) == code, errno
        # six retries, then the job ran: the evidence shows four of them, all followed
        assert first_cause(*[line] * 6, *HEALTHY) == "none", errno
    # another file's progress says nothing of this file's connect
    e = explain_texts([("node1.log", "[W socket.cpp:558] [c10d] The client socket has failed "
                        "to connect to [node0]:29500 (errno: 111 - Connection refused).\n"),
                       ("node0.log", "epoch 1 loss 0.31\n")])
    assert [p.code for p in e.problems] == ["endpoint-refused"]


C10D_FRAME = ('  File "/usr/lib/python3/site-packages/torch/distributed/elastic/rendezvous/'
              'c10d_rendezvous_backend.py", line 174, in _create_tcp_store')
C10D_TIMEOUT = ("torch.distributed.DistNetworkError: The client socket has timed out after 60s "
                "while trying to connect to (gpu-a01, 29400).")


def test_own_name_wait_after_any_server_failure_is_not_the_endpoint_unrecognised():
    # c10d_rendezvous_backend.py _create_tcp_store: "for is_server in [is_host, False]" retries
    # as a client after any ValueError/RuntimeError/TimeoutError of the server, not only
    # EADDRINUSE: a privileged port (EACCES) too
    code = first_cause("[W socket.cpp:426] [c10d] The server socket has failed to bind to "
                       "0.0.0.0:400 (errno: 13 - Permission denied).", C10D_FRAME,
                       C10D_TIMEOUT, "  host      : gpu-a01")
    assert code != "endpoint-not-recognised"
    # the agent that hosted the store logs it: its client wait is something else
    assert first_cause("INFO:torch.distributed.elastic.rendezvous.c10d_rendezvous_backend:"
                       "Process 4711 hosts the TCP store for the C10d rendezvous backend.",
                       C10D_FRAME, C10D_TIMEOUT, "  host      : gpu-a01") != \
        "endpoint-not-recognised"
    # near miss: IPv6 turned off ([::] errno 97), then the IPv4 bind succeeded: still
    # the endpoint not recognised
    assert first_cause("[W socket.cpp:436] [c10d] The server socket cannot be initialized on "
                       "[::]:29400 (errno: 97 - Address family not supported by protocol).",
                       C10D_FRAME, C10D_TIMEOUT, "  host      : gpu-a01") == \
        "endpoint-not-recognised"


def test_nccl_bootstrap_root_sees_a_rank_twice_or_sizes_disagree():
    # NCCL bootstrap.cc bootstrapRoot, 2.4-2.30, as the WARN line prints it
    assert first_cause("node2:51:51 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 3 of "
                       "8 ranks has already checked in") == "rank-overlap"
    assert first_cause("node2:51:51 [0] bootstrap.cc:127 NCCL WARN Bootstrap Root : mismatch "
                       "in rank count from procs 8 : 16") == "world-size-differs"
    assert first_cause("node2:51:51 [0] bootstrap.cc:203 NCCL WARN Bootstrap Root : mismatch "
                       "in info from procs, nranks 8 vs 16, nroots 1 vs 1, iroot 0 vs 0") == \
        "world-size-differs"
    # near miss: the INFO line of a rank checking in is no failure
    assert first_cause("node2:51:51 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>") == "none"


def test_gloo_remote_at_127_0_1_1_in_its_error_cc_format():
    # gloo error.cc SystemError::what: "<syscall>: <strerror>, remote=[ip]:port" (no space)
    line = ("[../third_party/gloo/gloo/transport/tcp/pair.cc:152] timed out connecting: "
            "SO_ERROR: Connection timed out, remote=[127.0.1.1]:29500")
    assert first_cause(line) == "hostname-loopback"
    # near miss: a routable remote is a peer that did not answer, not a loopback address
    assert first_cause(line.replace("127.0.1.1", "10.0.1.1")) == "peer-unreachable"


def test_gaierror_in_the_c10d_host_test_is_this_nodes_own_name():
    # elastic/rendezvous/utils.py _matches_machine_hostname: socket.getaddrinfo(this_host, ...)
    # outside any try (1.9-2.13); the call spans lines, the frame name says whose lookup
    tb = ("Traceback (most recent call last):",
          '  File "/opt/conda/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/'
          'utils.py", line 149, in _matches_machine_hostname',
          "    addr_list = socket.getaddrinfo(",
          '  File "/opt/conda/lib/python3.10/socket.py", line 955, in getaddrinfo',
          "    for res in _socket.getaddrinfo(host, port, family, type, proto, flags):",
          "socket.gaierror: [Errno -2] Name or service not known")
    assert first_cause(*tb) == "hostname-unresolvable"
    # near miss: a gaierror under another frame does not say whose name
    other = tuple(t.replace("_matches_machine_hostname", "_create_tcp_store") for t in tb)
    assert _verdict(*other) == ("endpoint-unresolvable", True)


RETRY = ("[W1124 08:52:25.123456 TCPStore.cpp:343] [c10d] TCP client failed to connect/validate "
         "to host node1:29500 - retrying (try=0, timeout=1800000ms, delay=496ms): The client "
         "socket has failed to connect to any network address of (node1, 29500). The client "
         "socket has failed to connect to [node1]:29500 (errno: 113 - No route to host).")


def test_tcpstore_retry_warning_is_no_failure_its_last_word_is():
    # TCPStore.cpp TCPClient::connect (2.3+): warns and retries; a store host that comes up
    # later ends the loop
    assert first_cause(RETRY, *HEALTHY) == "none"
    # near miss: the loop's last word, "- timed out (try=N, ...): <error>", is read by the
    # error it carries
    final = RETRY.replace("[W1124", "[E1124").replace("retrying (try=0, timeout=1800000ms, "
                                                      "delay=496ms)", "timed out (try=7, "
                                                      "timeout=1800000ms)")
    assert first_cause(final) == "endpoint-no-route"


def test_pythons_own_eaddrinuse_is_a_hint():
    # CPython OSError from a Python bind(): torch's store (C++) never prints it
    e = explain_texts([("job.log", "OSError: [Errno 98] Address already in use\n")])
    assert e.problems[0].code == "master-port-in-use" and e.found[0].grade == "hint"
    # near miss: socket.cpp's own words stay a cause
    e = explain_texts([("job.log", "torch.distributed.DistNetworkError: The server socket has "
                        "failed to listen on any local network address. The server socket has "
                        "failed to bind to [::]:29500 (errno: 98 - Address already in use).\n")])
    assert e.problems[0].code == "master-port-in-use" and e.found[0].grade == "cause"


def test_the_prefilter_changes_nothing_on_these_wordings(monkeypatch):
    # the rules above use leading lookaheads (a [W] socket.cpp / TCPStore.cpp prefix): the
    # literal prefilter and the gates must keep every line they match
    from ddpcheck.explain import prefilter

    lines = [RETRY, C10D_TIMEOUT, *HEALTHY,
             "[W socket.cpp:558] [c10d] The client socket has failed to connect to [node0]:29500 "
             "(errno: 111 - Connection refused).",
             "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was "
             "likely closed. Did the remote server shutdown or crash?",
             "[W522 11:47:45.949247853 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl("
             "fd=77): failed to recv, got 0 bytes",
             "[../third_party/gloo/gloo/transport/tcp/pair.cc:152] timed out connecting: "
             "SO_ERROR: Connection timed out, remote=[127.0.1.1]:29500",
             "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:128]"
             " bind_rv == 0. Unable to find address for node01; bind(2) for [10.1.2.3]:0 failed "
             "with: Cannot assign requested address",
             "OSError: [Errno 98] Address already in use",
             "node2:51:51 [0] bootstrap.cc:131 NCCL WARN Bootstrap Root : rank 3 of 8 ranks has "
             "already checked in"]

    def each() -> list[tuple[tuple[str, str, bool], ...]]:
        out = []
        for line in lines:
            e = explain_texts([("job.log", line + "\n")])
            out.append(tuple((p.code, p.consequence_of, e.undetermined) for p in e.problems))
        return out

    on = each()
    monkeypatch.setattr(prefilter, "ENABLED", False)
    monkeypatch.setattr(prefilter, "GATES", False)
    assert each() == on
