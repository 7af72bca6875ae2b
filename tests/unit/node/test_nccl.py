"""Tests for ddpcheck.node.nccl: NCCL versions, the loaded libnccl, *_SOCKET_IFNAME syntax,
and NCCL_* variables.
"""

from __future__ import annotations

import pytest

from ddpcheck import diagnoses as dg
from ddpcheck.node import nccl
from tests.helpers.paths import DATA

DATA = DATA / "gpu"
MAPS = (DATA / "proc-self-maps-libnccl.txt").read_text()
WHEEL_NCCL = "/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"
SYSTEM_NCCL = "/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3"


def read(name: str) -> str:
    return (DATA / name).read_text()


def maps_line(path: str) -> str:
    return f"7f0000000000-7f0000100000 r-xp 00000000 fd:01 123456                    {path}\n"


# --- versions ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    ((2, 21, 5), (2, 21, 5)),
    ((2, 26, 2, "a0"), (2, 26, 2)),
    ([2, 18, 1], (2, 18, 1)),
    (22105, (2, 21, 5)),        # NCCL >= 2.9 code: major*10000 + minor*100 + patch
    (21005, (2, 10, 5)),
    (2708, (2, 7, 8)),          # NCCL < 2.9 code: major*1000 + minor*100 + patch
    ((2 << 32) | (21 << 16) | 5, (2, 21, 5)),  # torch's packed _nccl_version()
    ("2.21.5+cuda12.4", (2, 21, 5)),
    (None, None),
    (True, None),
    (999, None),
    ("two", None),
    ((2, 21), None),
    (("2", "21", "5"), None),
])
def test_parse_nccl_version(value: object, expected: object) -> None:
    assert nccl.parse_nccl_version(value) == expected  # type: ignore[arg-type]


def test_format_version() -> None:
    assert nccl.format_version((2, 21, 5)) == "2.21.5"
    assert nccl.format_version(None) == "unknown"


# --- the loaded libnccl ------------------------------------------------------------------------

def test_loaded_libnccl_from_maps() -> None:
    assert nccl.loaded_libnccls(MAPS) == [WHEEL_NCCL]
    assert nccl.loaded_libnccls("") == []  # libnccl-net.so (the OFI plugin) is not it
    assert nccl.loaded_libnccls(maps_line(SYSTEM_NCCL + " (deleted)")) == [SYSTEM_NCCL]


def test_nccl_version_from_path() -> None:
    assert nccl.nccl_version_from_path(SYSTEM_NCCL) == (2, 18, 3)
    assert nccl.nccl_version_from_path(
        "/opt/nccl_2.19.3-1+cuda12.3_x86_64/lib/libnccl.so.2") == (2, 19, 3)
    assert nccl.nccl_version_from_path(WHEEL_NCCL) is None


def test_check_nccl_library_clean() -> None:
    assert nccl.check_nccl_library(MAPS, (2, 21, 5)) == []  # wheel path has no version
    assert nccl.check_nccl_library(MAPS, (2, 21, 5), (2, 21, 5)) == []
    assert nccl.check_nccl_library(MAPS, None) == []
    assert nccl.check_nccl_library("", (2, 21, 5)) == []


def test_check_nccl_library_two_libraries() -> None:
    [p] = nccl.check_nccl_library(MAPS + maps_line(SYSTEM_NCCL), (2, 21, 5))
    assert p.code == dg.NCCL_LIBRARY_MISMATCH.code
    assert p.observed == f"this process has 2 libnccl mapped: {WHEEL_NCCL}, {SYSTEM_NCCL}"


def test_check_nccl_library_version_differs() -> None:
    [p] = nccl.check_nccl_library(maps_line(SYSTEM_NCCL), (2, 21, 5))
    assert p.observed == (f"loaded {SYSTEM_NCCL} is NCCL 2.18.3 but torch's build "
                          "is 2.21.5: the loaded library is older")
    [p] = nccl.check_nccl_library(MAPS, (2, 21, 5), (2, 20, 5), expected_from="torch build")
    assert p.observed.endswith("is NCCL 2.20.5 but torch build is 2.21.5: the loaded library "
                               "is older")
    assert "2.21.5 or a newer 2.x" in p.fix


def test_a_newer_nccl_2x_than_torch_was_built_with_is_shown_not_failed() -> None:
    assert nccl.check_nccl_library(MAPS, (2, 21, 5), (2, 23, 4)) == []
    assert nccl.check_nccl_library(maps_line(SYSTEM_NCCL), (2, 17, 1)) == []
    assert nccl.version_relation((2, 23, 4), (2, 21, 5)) == "newer"
    assert nccl.version_relation((2, 21, 5), (2, 21, 5)) == "same"


def test_another_major_version_is_a_problem() -> None:
    [p] = nccl.check_nccl_library(MAPS, (2, 21, 5), (3, 0, 0))
    assert p.code == dg.NCCL_LIBRARY_MISMATCH.code and "another major" in p.observed


# --- NCCL_* variables ----------------------------------------------------------------------------

def test_nccl_env_clean() -> None:
    assert nccl.check_nccl_env({}) == []
    good = {"NCCL_DEBUG": "info", "NCCL_IB_DISABLE": "1", "NCCL_P2P_DISABLE": "0",
            "NCCL_SHM_DISABLE": "0x1", "NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "16",
            "NCCL_ALGO": "Ring,tree", "NCCL_PROTO": "^LL128", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    assert nccl.check_nccl_env(good) == []
    assert nccl.check_nccl_env({"NCCL_ALGO": "allreduce:tree,ring;broadcast:ring"}) == []


def test_nccl_env_registered_diagnosis() -> None:
    assert dg.CATALOGUE["nccl-env-invalid"] is nccl.NCCL_ENV_INVALID


def test_nccl_debug_level() -> None:
    [p] = nccl.check_nccl_env({"NCCL_DEBUG": "verbose"})
    assert p.code == "nccl-env-invalid"
    assert p.observed == ("NCCL_DEBUG=verbose is not a level NCCL knows (VERSION, WARN, INFO, "
                          "ABORT, TRACE); NCCL ignores it and logs nothing")


def test_nccl_disable_flags_read_like_strtoll() -> None:
    [p] = nccl.check_nccl_env({"NCCL_IB_DISABLE": "true"})
    assert p.observed == ("NCCL_IB_DISABLE=true is not an integer; NCCL reads it as 0, "
                          "so InfiniBand is enabled")
    assert p.fix == ("set NCCL_IB_DISABLE=1 to disable InfiniBand, NCCL_IB_DISABLE=0 to keep "
                     "it, or unset it")
    [p] = nccl.check_nccl_env({"NCCL_P2P_DISABLE": "1 "})
    assert "reads it as 1, so peer-to-peer (NVLink/PCIe) is disabled" in p.observed
    [p] = nccl.check_nccl_env({"NCCL_SHM_DISABLE": "yes"})
    assert p.observed.startswith("NCCL_SHM_DISABLE=yes is not an integer")


def test_nccl_socket_threads() -> None:
    [p] = nccl.check_nccl_env({"NCCL_SOCKET_NTHREADS": "8", "NCCL_NSOCKS_PERTHREAD": "16"})
    assert p.observed == ("NCCL_SOCKET_NTHREADS=8 x NCCL_NSOCKS_PERTHREAD=16 = 128 sockets, over "
                          "NCCL's limit of 64; NCCL lowers NCCL_NSOCKS_PERTHREAD to 8")
    assert p.fix == ("keep the product at most 64, e.g. NCCL_SOCKET_NTHREADS=8 "
                     "NCCL_NSOCKS_PERTHREAD=8")
    assert nccl.check_nccl_env({"NCCL_NSOCKS_PERTHREAD": "64"}) == []
    assert len(nccl.check_nccl_env({"NCCL_NSOCKS_PERTHREAD": "65"})) == 1


def test_nccl_socket_threads_out_of_range() -> None:
    [p] = nccl.check_nccl_env({"NCCL_SOCKET_NTHREADS": "32"})
    assert p.observed == ("NCCL_SOCKET_NTHREADS=32 is not an integer from 1 to 16 "
                          "(NCCL reads it as 32)")
    [p] = nccl.check_nccl_env({"NCCL_SOCKET_NTHREADS": "four"})
    assert p.observed.endswith("(NCCL reads it as 0)")
    [p] = nccl.check_nccl_env({"NCCL_NSOCKS_PERTHREAD": "0"})
    assert p.fix == "set NCCL_NSOCKS_PERTHREAD to an integer from 1 to 64, or unset it"


def test_nccl_algo_and_proto_names() -> None:
    [p] = nccl.check_nccl_env({"NCCL_ALGO": "ring,trees"})
    assert p.observed == ("NCCL_ALGO=ring,trees names trees, which NCCL does not know (known: "
                          "Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT, CollNet)")
    [p] = nccl.check_nccl_env({"NCCL_PROTO": "^LL,LL256"})
    assert "names LL256" in p.observed and p.fix.startswith("use names from LL, LL128, Simple")


def test_nccl_env_reports_every_problem() -> None:
    env = {"NCCL_DEBUG": "all", "NCCL_IB_DISABLE": "True", "NCCL_ALGO": "fast"}
    assert len(nccl.check_nccl_env(env)) == 3
