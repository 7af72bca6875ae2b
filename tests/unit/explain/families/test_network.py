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
