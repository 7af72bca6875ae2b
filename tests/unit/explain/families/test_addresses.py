"""Gloo's IP-family check (gloo/transport/tcp/device.cc Device::isInitiator) and torch's
connectFullMesh wrapper of gloo's connect errors."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

ENFORCE = ("[rank0]: RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
           "device.cc:276] ss1.ss_family == ss2.ss_family. 2 vs 10")


def test_mixed_ipv4_and_ipv6_peers():
    assert first_cause(ENFORCE) == "address-family-mismatch"


def test_another_gloo_enforce_is_not_an_address_family():
    assert first_cause("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
                       "pair.cc:490] op.preamble.length <= op.nbytes. 8 vs 4") != \
        "address-family-mismatch"


def _causes(*lines: str) -> tuple[list[str], bool]:
    e = explain_texts([("job.log", "\n".join(lines) + "\n")])
    return [p.code for p in e.problems if not p.consequence_of], e.undetermined


def test_the_connectfullmesh_wrapper_is_the_consequence_of_the_gloo_error_it_wraps():
    # dev gh-aws-do-eks-69, wrapped over three lines as pasted
    assert _causes("RuntimeError: Gloo connectFullMesh failed with [/pytorch/third_party/gloo/"
                   "gloo/transport/tcp/pair.cc:152]",
                   "  timed out connecting: SO_ERROR: Connection refused, "
                   "remote=[127.0.0.1]:<port>",
                   "  (rank=8, size=16, local=[127.0.0.1])") == (["hostname-loopback"], False)
    # variant: one line, another rank prefix, port and loopback address
    assert _causes("[rank3]: RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/"
                   "gloo/transport/tcp/pair.cc:144] timed out connecting: SO_ERROR: Connection "
                   "refused, remote=[127.0.1.1]:40517") == (["hostname-loopback"], False)
    # variant: the IP-family enforce wrapped by the same message
    assert _causes("RuntimeError: Gloo connectFullMesh failed with",
                   ENFORCE) == (["address-family-mismatch"], False)


def test_the_wrapper_alone_or_far_from_the_error_stays_a_symptom():
    assert _causes("RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/"
                   "transport/tcp/pair.cc:144] no error")[1]
    # the gloo error further down is another message: the wrapper came first, unexplained
    far = ["RuntimeError: Gloo connectFullMesh failed with [pair.cc:144] no error",
           "step 1", "step 2", "step 3",
           "timed out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:4242"]
    assert _causes(*far)[1]


def test_a_real_gloo_world_whose_ranks_advertise_loopback_across_two_hosts():
    # recorded here (torch 2.13, CPU): two network namespaces joined by a veth, MASTER_ADDR
    # the first one's address, GLOO_SOCKET_IFNAME=lo on both: rank 1 dials rank 0's 127.0.0.1
    # and reaches itself. c10d's reverse-lookup warning (no DNS in the namespace) is no failure.
    debug = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/debug_logger.cc:9] "
             "ERROR failed to connect, willRetry={w}, retry={n}, retryLimit=3, rank=1, size=2, "
             "local=[127.0.0.1]:62638, remote=[127.0.0.1]:2477$1, error=SO_ERROR: Connection "
             "refused, remote=[127.0.0.1]:2477$1")
    lines = ["[W1124 08:52:25.791986871 socket.cpp:207] [c10d] The hostname of the client "
             "socket cannot be retrieved. err=-3",
             *(debug.format(w=int(n < 4), n=n) for n in range(1, 5)),
             "[E1124 08:52:25.808657781 ProcessGroupGloo.cpp:67] Gloo connectFullMesh failed "
             "with [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:152] timed "
             "out connecting: SO_ERROR: Connection refused, remote=[127.0.0.1]:2477$1",
             "RuntimeError: Gloo connectFullMesh failed with [/__w/pytorch/pytorch/third_party/"
             "gloo/gloo/transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection "
             "refused, remote=[127.0.0.1]:2477$1"]
    assert _causes(*lines) == (["hostname-loopback"], False)
    # rank 0's log of the same run: only the warning, no failure
    e = explain_texts([("r0.log", lines[0] + "\n")])
    assert e.exit_code == 0
    # variant: torch 2.0-2.3's warning format; a paste without the prefix stays a symptom
    assert explain_texts([("r.log", "[W socket.cpp:601] [c10d] The hostname of the client "
                                    "socket cannot be retrieved. err=-3\n")]).exit_code == 0
    assert _causes("The hostname of the server socket cannot be retrieved. err=-3") == \
        (["hostname-unresolvable"], True)
