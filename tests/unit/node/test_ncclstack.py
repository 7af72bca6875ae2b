"""Tests for node.ncclstack: the loaded NCCL asked through ctypes, plugins, cross-rank view.

ask_version is exercised on a real shared library built here with cc, exporting the same
ncclGetVersion symbol libnccl does, so the dlopen + call path is the one a GPU node runs.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ddpcheck.node import nccl, ncclstack
from tests.helpers.paths import DATA

DATA = DATA / "gpu"
MAPS = (DATA / "proc-self-maps-libnccl.txt").read_text()
TWO = (DATA / "proc-self-maps-two-libnccl.txt").read_text()
WHEEL = "/opt/venv/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"
SYSTEM = "/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.3"


@pytest.fixture(scope="module")
def fake_libnccl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real .so whose ncclGetVersion answers NCCL 2.21.5's code, 22105."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in libnccl")
    folder = tmp_path_factory.mktemp("nccl")
    (folder / "v.c").write_text("int ncclGetVersion(int *v) { *v = 22105; return 0; }\n")
    lib = folder / "libnccl.so.2"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(lib), str(folder / "v.c")], check=True)
    return lib


def test_ask_version_calls_ncclgetversion_of_the_library(fake_libnccl: Path) -> None:
    assert ncclstack.ask_version(str(fake_libnccl)) == (2, 21, 5)


def test_ask_version_is_none_for_a_missing_or_foreign_library(tmp_path: Path) -> None:
    assert ncclstack.ask_version(str(tmp_path / "libnccl.so.2")) is None
    libc = "libc.so.6"  # loads, but has no ncclGetVersion
    assert ncclstack.ask_version(libc) is None


def test_two_libnccl_mapped_is_a_library_mismatch() -> None:
    assert nccl.loaded_libnccls(TWO) == [SYSTEM, WHEEL]
    [p] = nccl.check_nccl_library(TWO, (2, 21, 5))
    assert p.code == "nccl-library-mismatch" and SYSTEM in p.observed and WHEEL in p.observed


def test_loaded_version_wins_over_the_build_constant() -> None:
    [p] = nccl.check_nccl_library(MAPS, (2, 21, 5), (2, 20, 3))
    assert p.observed == (f"loaded {WHEEL} is NCCL 2.20.3 but torch's build is 2.21.5: "
                          "the loaded library is older")
    assert nccl.check_nccl_library(MAPS, (2, 21, 5), (2, 21, 5)) == []


def test_mapped_plugin_and_candidates(tmp_path: Path) -> None:
    assert ncclstack.mapped_net_plugins(MAPS) == ["/opt/amazon/ofi-nccl/lib/libnccl-net.so"]
    assert ncclstack.mapped_net_plugins(TWO.replace("libnccl-net.so", "x.so")) == []
    (tmp_path / "libnccl-net-ofi.so").touch()
    (tmp_path / "libnccl.so.2").touch()
    assert ncclstack.plugin_candidates({"LD_LIBRARY_PATH": f"/nonexistent:{tmp_path}"}) == [
        str(tmp_path / "libnccl-net-ofi.so")]


def facts(loaded: str = "2.21.5", plugin: str = "libnccl-net.so", driver: str = "535.104.05",
          provider: str = "efa") -> dict[str, str]:
    env = {"FI_PROVIDER": provider} if provider else {}
    maps = MAPS if plugin else MAPS.replace("libnccl-net.so", "other.so")
    return ncclstack.stack_facts(maps, env, driver, (2, 21, 5),
                                 {WHEEL: nccl.parse_nccl_version(loaded)})


def test_stack_facts_read_from_maps_and_env() -> None:
    f = facts()
    assert f["nccl_loaded"] == "2.21.5" and f["nccl_build"] == "2.21.5"
    assert f["net_plugin"] == "libnccl-net.so" and f["FI_PROVIDER"] == "efa"
    assert f["NCCL_NET_PLUGIN"] == "-" and f["driver"] == "535.104.05"


def test_identical_stacks_agree() -> None:
    assert ncclstack.compare_stacks({r: facts() for r in range(4)}, {}) == []


def test_each_difference_is_a_problem_naming_the_ranks() -> None:
    hosts = {0: "a", 1: "a", 2: "b", 3: "b"}
    got = {0: facts(), 1: facts(), 2: facts("2.18.3", "", "550.54.15", ""),
           3: facts("2.18.3", "", "550.54.15", "")}
    got[1] = facts()
    problems = ncclstack.compare_stacks({**got, 4: facts()}, {**hosts, 4: "c"})
    assert [p.code for p in problems] == ["nccl-stack-mismatch"] * 4
    texts = [p.observed for p in problems]
    assert texts[0].startswith("loaded NCCL (ncclGetVersion): 2.21.5 on most ranks, but "
                               "2.18.3 on rank 2-3")
    assert any(t.startswith("NCCL network plugin") for t in texts)
    assert any(t.startswith("NVIDIA driver") and "550.54.15" in t for t in texts)
    assert all(p.ranks == (2, 3) and p.hosts == ("b",) for p in problems)
