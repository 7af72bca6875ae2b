"""Store and rendezvous lines as torch prints them across versions."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause


def _abstains_with(line: str, code: str) -> bool:
    e = explain_texts([("r.log", line + "\n")])
    return e.problems[0].code == code and e.undetermined


def test_store_based_barrier_timeout_is_a_symptom_that_counts_the_missing_ranks():
    # torch 1.8-1.13 distributed_c10d.py _store_based_barrier
    line = ("RuntimeError: Timed out initializing process group in store based barrier on "
            "rank: 0, for key: store_based_barrier_key:1 (world_size=8, worker_count=1, "
            "timeout=0:30:00)")
    assert _abstains_with(line, "rendezvous-timeout")
    e = explain_texts([("r.log", line + "\n")])
    assert "only 1 of 8" in e.problems[0].cause
    # torch 2.0 spells the count num_workers_joined
    assert _abstains_with(line.replace("rank: 0", "rank 0").replace("worker_count",
                                                                    "num_workers_joined"),
                          "rendezvous-timeout")


def test_tcpstore_client_retry_timeout_is_an_unreachable_endpoint():
    # torch >= 2.3 TCPStore.cpp; torch 1.x tcputils connect()
    assert _abstains_with("torch.distributed.DistNetworkError: TCP client failed to "
                          "connect/validate to host node0:29500 - timed out (try=7, "
                          "timeout=600000ms): ", "endpoint-unreachable")
    assert _abstains_with("RuntimeError: connect() timed out. Original timeout was 1800000 ms.",
                          "endpoint-unreachable")


def test_a_c10d_lookup_failure_is_the_nodes_name_whatever_the_gai_code():
    # socket.cpp: gai -2 and -3 are the same failure (the name is in neither /etc/hosts nor DNS)
    for gai in ("-2 - Name or service not known", "-3 - Temporary failure in name resolution",
                "-5 - No address associated with hostname"):
        assert first_cause(f"[W socket.cpp:663] [c10d] The IPv4 network addresses of (gpu-07, "
                           f"29500) cannot be retrieved (gai error: {gai}).") == \
            "hostname-unresolvable"


def test_pythons_own_gaierror_stays_the_endpoint():
    assert first_cause("socket.gaierror: [Errno -2] Name or service not known") == \
        "endpoint-unresolvable"


def test_pythons_connection_refused_is_a_refused_endpoint_symptom():
    assert _abstains_with("ConnectionRefusedError: [Errno 111] Connection refused",
                          "endpoint-refused")


def test_no_route_to_the_master_or_endpoint_is_its_own_cause():
    # recorded (dev qa5-uq-rcc-hpc-docs-2), then torch >= 2.3's wording, ENETUNREACH, Python's
    assert first_cause("RuntimeError: The client socket has failed to connect to any network "
                       "address of (bun003, 9901). The client socket has failed to connect to "
                       "bun003.admin:9901 (errno: 113 - No route to host).") == \
        "endpoint-no-route"
    assert first_cause("torch.distributed.DistNetworkError: The client socket has failed to "
                       "connect to [10.1.2.3]:29500 (errno: 101 - Network is unreachable).") == \
        "endpoint-no-route"
    assert first_cause("OSError: [Errno 113] No route to host") == "endpoint-no-route"
    # a timeout is not a refusal of the route: the silent firewall stays unreachable
    assert first_cause("RuntimeError: The client socket has failed to connect to any network "
                       "address of (n1, 29500). The client socket has failed to connect to "
                       "n1:29500 (errno: 110 - Connection timed out).") == "endpoint-unreachable"


# runs/s32-netns-rdzv-endpoint-no-route (torch 2.13 prints each address's sockaddr garbled)
NO_ROUTE_WARNINGS = [
    "[W1125 00:27:19.206861194 socket.cpp:764] [c10d] The client socket has failed to connect "
    "to [4cf8:0:c19f:0:7fde::]:60309 (errno: 101 - Network is unreachable).",
    "[W1125 00:27:19.206881645 socket.cpp:764] [c10d] The client socket has failed to connect "
    "to 119.85.0.0:60280 (errno: 101 - Network is unreachable).",
]
THROWN = ("[E1125 00:27:19.206884329 socket.cpp:818] [c10d] The client socket has failed to "
          "connect to any network address of (10.123.0.1, 41201).")


def test_the_thrown_connect_error_under_no_route_warnings_is_endpoint_no_route():
    e = explain_texts([("job.log", "\n".join([*NO_ROUTE_WARNINGS, THROWN]) + "\n")])
    first = [p for p in e.problems if not p.consequence_of][0]
    assert first.code == "endpoint-no-route" and not e.undetermined
    assert "10.123.0.1:41201" in first.cause  # the endpoint, not the garbled sockaddr


def test_the_thrown_connect_error_under_a_refused_warning_stays_a_symptom():
    refused = NO_ROUTE_WARNINGS[1].replace("101 - Network is unreachable",
                                           "111 - Connection refused")
    e = explain_texts([("job.log", "\n".join([NO_ROUTE_WARNINGS[0], refused, THROWN]) + "\n")])
    assert [p for p in e.problems if not p.consequence_of][0].code != "endpoint-no-route"
    assert first_cause(THROWN) == "endpoint-unreachable"


def test_a_store_ping_answered_by_something_else_is_the_port_held_by_another_program():
    # stop-32b dev gh37-tensorrt-llm-10366: another process took the port the test picked
    line = ("[W1229 12:47:08.489869130 TCPStore.cpp:340] [c10d] TCP client failed to "
            "connect/validate to host 127.0.0.1:30325 - retrying (try=0, timeout=600000ms, "
            "delay=385ms): Ping failed, invalid value returned from server. Expected: 297731, "
            "Got: 68681728")
    e = explain_texts([("job.log", line + "\n")])
    first = [p for p in e.problems if not p.consequence_of][0]
    assert first.code == "master-port-in-use" and "30325" in first.fix
    # tied to the c10d rendezvous (its backend in the log), the endpoint's own code
    rdzv = "  File \"/x/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py\"\n"
    assert first_cause(rdzv + line) == "endpoint-not-a-store"


def test_a_name_none_of_whose_addresses_has_a_route_is_its_resolution_on_this_node():
    # runs/s32d-netns-stale-hosts-entry: node1's /etc/hosts maps node0 to 10.77.0.1
    named = [w.replace("(10.123.0.1, 41201)", "(node0, 50415)")
             for w in [*NO_ROUTE_WARNINGS, THROWN]]
    e = explain_texts([("job.log", "\n".join(named) + "\n")])
    first = [p for p in e.problems if not p.consequence_of][0]
    assert first.code == "dial-name-wrong-address" and "getent hosts node0" in first.fix
    # the same with an address, or with a host that is down (113), stays endpoint-no-route
    assert first_cause("\n".join([*NO_ROUTE_WARNINGS, THROWN])) == "endpoint-no-route"
    down = [w.replace("101 - Network is unreachable", "113 - No route to host") for w in named]
    assert first_cause("\n".join(down)) == "endpoint-no-route"
