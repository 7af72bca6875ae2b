"""explain.stores: whose store a port in use or an unknown name belongs to, the master's or
the c10d rendezvous endpoint's."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

BIND = ("[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:{port} "
        "(errno: 98 - Address already in use).")
LISTEN = ("torch.distributed.DistNetworkError: The server socket has failed to listen on any "
          "local network address. port: {port}, useIpv6: 0, code: -98, name: EADDRINUSE, "
          "message: address already in use")
C10D_FRAME = ('  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/'
              'rendezvous/c10d_rendezvous_backend.py", line 256, in create_backend')
ENV_FRAME = ('  File "/usr/lib/python3/site-packages/torch/distributed/rendezvous.py", line '
             '{n}, in _env_rendezvous_handler')


def _problem(*lines: str):
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    return next(p for p in e.problems if not p.consequence_of)


def test_a_port_in_use_the_log_ties_to_no_store_is_the_master_port_torch_defaults_to():
    for port in (29500, 38211, 12355):
        assert first_cause(BIND.format(port=port)) == "master-port-in-use"
        assert first_cause(LISTEN.format(port=port)) == "master-port-in-use"
    assert first_cause("RuntimeError: Address already in use") == "master-port-in-use"
    # which flag sets it is not known: the fix names both
    fix = _problem(LISTEN.format(port=29500)).fix
    assert "--master-port" in fix and "--rdzv-endpoint" in fix and "grep 29500" in fix


def test_the_c10d_rendezvous_in_the_log_keeps_the_endpoint_port():
    assert first_cause(BIND.format(port=29400)) == "endpoint-port-in-use"  # c10d's default
    assert first_cause(LISTEN.format(port=29400)) == "endpoint-port-in-use"
    assert first_cause("Traceback (most recent call last):", C10D_FRAME,
                       LISTEN.format(port=29500)) == "endpoint-port-in-use"
    assert first_cause("+ torchrun --rdzv_backend=c10d --rdzv_endpoint=n1:29500 train.py",
                       LISTEN.format(port=29500)) == "endpoint-port-in-use"
    assert first_cause("torchrun --standalone --nproc_per_node=2 train.py",
                       BIND.format(port=47531)) == "endpoint-port-in-use"


def test_the_master_store_in_the_traceback_gives_the_catalogue_fix():
    p = _problem("Traceback (most recent call last):", ENV_FRAME.format(n=185),
                 "    store = TCPStore(master_addr, master_port, world_size, start_daemon)",
                 "RuntimeError: Address already in use")
    assert p.code == "master-port-in-use" and "MASTER_PORT" in p.fix
    assert "--rdzv-endpoint" not in p.fix


def test_nccls_own_bind_is_neither_store():
    assert first_cause("node1:99:99 [0] misc/socket.cc:430 NCCL WARN Call to bind failed : "
                       "Address already in use") == "endpoint-port-in-use"


def test_a_name_not_found_in_the_master_stores_frame_is_master_addr():
    lines = ("Traceback (most recent call last):", ENV_FRAME.format(n=143),
             "    store = TCPStore(master_addr, master_port, start_daemon)",
             "ValueError: host not found: Name or service not known")
    assert first_cause(*lines) == "master-addr-unresolvable"
    tcp = ENV_FRAME.format(n=142).replace("_env_", "_tcp_")
    assert first_cause(lines[0], tcp, *lines[2:]) == "master-addr-unresolvable"
    # no traceback says whose name: the rendezvous rule's reading stays
    assert first_cause(lines[-1]) != "master-addr-unresolvable"


def test_another_files_c10d_rendezvous_says_nothing_of_this_files_store():
    healthy = "+ torchrun --nproc_per_node=8 --rdzv_backend c10d --rdzv_endpoint=localhost:0 -m t\n"
    e = explain_texts([("healthy.log", healthy), ("job.log", LISTEN.format(port=29500) + "\n")])
    assert next(p for p in e.problems if not p.consequence_of).code == "master-port-in-use"


def test_a_dialed_name_no_dns_server_answered_for_is_the_masters_under_static_rendezvous():
    """Recorded (runs/netns-master-addr-not-in-hosts): node1's /etc/hosts lacks --master-addr
    node0 and no DNS server answers, so getaddrinfo says EAI_AGAIN (-3), not -2."""
    lines = ("[W1124 13:56:24.919947338 socket.cpp:764] [c10d] The IPv6 network addresses of "
             "(node0, 56241) cannot be retrieved (gai error: -3 - Temporary failure in name "
             "resolution).",
             "[E1124 13:56:31.735772926 socket.cpp:1028] [c10d] The client socket has timed out "
             "after 8000ms while trying to connect to (node0, 56241).",
             "Traceback (most recent call last):",
             '  File "/v/lib/python3.11/site-packages/torch/distributed/elastic/rendezvous/'
             'static_tcp_rendezvous.py", line 67, in next_rendezvous',
             "torch.distributed.DistNetworkError: The client socket has timed out after 8000ms "
             "while trying to connect to (node0, 56241).")
    p = _problem(*lines)
    assert p.code == "master-addr-unresolvable"
    assert "node0:56241" in p.observed and "Temporary failure in name resolution" in p.observed
    # the same lines under the c10d rendezvous: the endpoint's name
    c10d = lines[3].replace("static_tcp_rendezvous.py", "c10d_rendezvous_backend.py")
    assert first_cause(*lines[:3], c10d, lines[4]) == "endpoint-unresolvable"


# socket.cpp's bind refused with EACCES (torch 2.x), as users paste it: a port below 1024
DENIED = ("The server socket has failed to listen on any local network address. The server "
          "socket has failed to bind to [::]:{port} (errno: 13 - Permission denied).")


def test_a_refused_bind_the_log_ties_to_no_store_is_the_master_port_too():
    p = _problem(DENIED.format(port=520))
    assert p.code == "master-port-unavailable"
    assert "port 520 was refused" in p.fix and "--master-port" in p.fix
    assert "--rdzv-endpoint" in p.fix and "ss -ltnp" not in p.fix  # not the port-in-use fix
    # the c10d rendezvous seen: the endpoint's own code stays
    assert first_cause("+ torchrun --rdzv_backend=c10d --rdzv_endpoint=n1:520 train.py",
                       DENIED.format(port=520)) == "endpoint-bind-failed"


CREATE_FRAME = ('  File "/usr/lib/python3/site-packages/torch/distributed/rendezvous.py", line '
                '186, in _create_c10d_store')
STATIC_FRAME = ('  File "/opt/venv/lib/python3.11/site-packages/torch/distributed/elastic/'
                'rendezvous/static_tcp_rendezvous.py", line 120, in create_rdzv_handler')


def test_a_port_out_of_range_keeps_its_own_cause_and_fix_under_the_master_twin():
    # real run s33-env-master-port-out-of-range (torch 2.13, env://): MASTER_PORT=70000
    p = _problem("Traceback (most recent call last):", CREATE_FRAME,
                 '    raise ValueError(f"port must have value from 0 to 65535 but was {port}.")',
                 "ValueError: port must have value from 0 to 65535 but was 70000.")
    assert p.code == "master-port-unavailable"
    assert "70000 is not a TCP port" in p.cause and "MASTER_PORT" in p.fix
    # torchrun's parser of --master-port (static rendezvous) and of --rdzv-endpoint
    parsed = ("ValueError: The port number of the rendezvous endpoint '10.0.0.1:70000' must be "
              "an integer between 0 and 65536.")
    p = _problem("Traceback (most recent call last):", STATIC_FRAME, parsed)
    assert p.code == "master-port-unavailable" and "70000 is not a TCP port" in p.cause
    assert first_cause("+ torchrun --rdzv_backend=c10d --rdzv_endpoint=n1:70000 train.py",
                       parsed) == "endpoint-bind-failed"
    # near miss: a port in range that is refused is the privileged-port rule's
    assert "not a TCP port" not in _problem(DENIED.format(port=520)).cause


def test_a_ping_the_log_ties_to_no_store_says_another_program_holds_the_port():
    # stop-32b noticed: the master twin of endpoint-not-a-store said EADDRINUSE's cause
    p = _problem("[W1125 02:59:47.705735658 TCPStore.cpp:340] [c10d] TCP client failed to "
                 "connect/validate to host 127.0.0.1:58505 - retrying (try=0, timeout=6000ms, "
                 "delay=325ms): Ping failed, invalid value returned from server. Expected: "
                 "32578, Got: 759714643")
    assert p.code == "master-port-in-use"
    assert "no c10d store answers" in p.cause and "grep 58505" in p.fix
