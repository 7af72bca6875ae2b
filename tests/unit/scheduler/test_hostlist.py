"""Slurm hostlist / per-node count syntaxes and the small value parsers in scheduler.hostlist."""

from __future__ import annotations

import pytest

from ddpcheck.scheduler.hostlist import (
    MAX_HOSTS,
    compress_hostlist,
    count_devices,
    expand_slurm_nodelist,
    parse_gpus_per_node,
    parse_nnodes,
    parse_nproc_per_node,
    parse_slurm_tasks_per_node,
    same_host,
)

EXPANSIONS = [
    # (hostlist, expansion) -- what `scontrol show hostnames` prints
    ("gpu-01", ["gpu-01"]),
    ("gpu-[01-04,07]", ["gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-07"]),
    ("a[09-11]", ["a09", "a10", "a11"]),
    ("a[9-11]", ["a9", "a10", "a11"]),
    ("a[098-101]", ["a098", "a099", "a100", "a101"]),
    ("n[0001-0003]", ["n0001", "n0002", "n0003"]),
    ("a[1-010]", ["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "a10"]),  # width of lo
    ("a[5]", ["a5"]),
    ("a[007]", ["a007"]),
    ("a[1,3,5]", ["a1", "a3", "a5"]),
    ("a[3,1-2]", ["a3", "a1", "a2"]),  # order kept, never sorted
    ("[1-3]", ["1", "2", "3"]),
    ("node1,gpu-[1-3],login", ["node1", "gpu-1", "gpu-2", "gpu-3", "login"]),
    ("gpu-[01-02],cpu-[1-2]", ["gpu-01", "gpu-02", "cpu-1", "cpu-2"]),
    ("hgx-h100-[003,017]", ["hgx-h100-003", "hgx-h100-017"]),
    ("a[1-2]-b[3-4]", ["a1-b3", "a1-b4", "a2-b3", "a2-b4"]),
    ("rack[0-1]_blade[0-1]", ["rack0_blade0", "rack0_blade1", "rack1_blade0", "rack1_blade1"]),
    # three groups: Slurm's recursion makes the middle group the outer loop
    ("x[1-2]y[3-4]z[5-6]", ["x1y3z5", "x1y3z6", "x2y3z5", "x2y3z6",
                            "x1y4z5", "x1y4z6", "x2y4z5", "x2y4z6"]),
    ("a[1-2],a[1-2]", ["a1", "a2", "a1", "a2"]),  # duplicates kept
    ("a, b\tc\nd", ["a", "b", "c", "d"]),  # Slurm also splits on whitespace
    ("a,,b,", ["a", "b"]),  # empty tokens skipped
    ("a[1, 3]", ["a1", "a3"]),  # strtoul skips the blank, so Slurm accepts it
    ("gpu1.cluster,gpu2.cluster", ["gpu1.cluster", "gpu2.cluster"]),
    ("10.0.0.1,10.0.0.2", ["10.0.0.1", "10.0.0.2"]),
    ("", []),
    ("  ", []),
]


@pytest.mark.parametrize("hostlist,expected", EXPANSIONS)
def test_expand(hostlist: str, expected: list[str]) -> None:
    assert expand_slurm_nodelist(hostlist) == expected


MALFORMED = [
    ("a[1-3", "never closed"),
    ("a1-3]", "without '['"),
    ("a[[1-2]]", "nested"),
    ("a[1-2]]", "without '['"),
    ("a[]", "empty bracket group"),
    ("a[3-1]", "runs backwards"),
    ("a[1-]", "'1-' is not a number"),
    ("a[-1]", "'-1' is not a number"),
    ("a[x]", "'x' is not a number"),
    ("a[1:3]", "'1:3' is not a number"),
    ("a[1-2,]", "'' is not a number"),
    ("unit[0-31]rack", "text after its last bracket group"),
    ("gpu[1-2].cluster", "text after its last bracket group"),
    ("a[0-99999]", f"more than {MAX_HOSTS}"),
    ("a[0-999]b[0-999]", f"more than {MAX_HOSTS}"),
]


@pytest.mark.parametrize("hostlist,message", MALFORMED)
def test_expand_rejects_malformed(hostlist: str, message: str) -> None:
    with pytest.raises(ValueError, match="bad Slurm hostlist") as info:
        expand_slurm_nodelist(hostlist)
    assert message in str(info.value)
    assert repr(hostlist) in str(info.value)


def test_expand_total_is_capped_across_tokens() -> None:
    with pytest.raises(ValueError, match="more than"):
        expand_slurm_nodelist("a[0-40000],b[0-40000]")


TASKS = [
    ("4(x2),2", [4, 4, 2]),
    ("1", [1]),
    ("8(x2)", [8, 8]),
    ("1(x2)", [1, 1]),
    ("2,1(x3),3", [2, 1, 1, 1, 3]),
    ("128(x4)", [128] * 4),
    (" 4(x2) , 2 ", [4, 4, 2]),
]


@pytest.mark.parametrize("text,expected", TASKS)
def test_tasks_per_node(text: str, expected: list[int]) -> None:
    assert parse_slurm_tasks_per_node(text) == expected


@pytest.mark.parametrize("text", ["", "4(x0)", "4(2)", "x", "4(x2", "-1", "4,,2", "4 (x2)"])
def test_tasks_per_node_rejects_malformed(text: str) -> None:
    with pytest.raises(ValueError, match="per-node count"):
        parse_slurm_tasks_per_node(text)


COMPRESSIONS = [
    (["gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-07"], "gpu-[01-04,07]"),
    (["gpu-07", "gpu-08"], "gpu-[07-08]"),
    (["gn017", "gn018"], "gn[017-018]"),
    (["a9", "a10", "a11"], "a[9-11]"),
    (["a09", "a10"], "a[09-10]"),
    (["a1", "a3"], "a[1,3]"),
    (["node5"], "node5"),
    (["login", "node1", "node2"], "login,node[1-2]"),
    (["b2", "b1"], "b[2,1]"),  # order kept
    (["a01", "a3"], "a01,a3"),  # widths that cannot share a bracket
    ([], ""),
]


@pytest.mark.parametrize("hosts,text", COMPRESSIONS)
def test_compress(hosts: list[str], text: str) -> None:
    assert compress_hostlist(hosts) == text
    assert expand_slurm_nodelist(text) == hosts


@pytest.mark.parametrize("hostlist,_", EXPANSIONS)
def test_compress_round_trips(hostlist: str, _: list[str]) -> None:
    hosts = expand_slurm_nodelist(hostlist)
    assert expand_slurm_nodelist(compress_hostlist(hosts)) == hosts


@pytest.mark.parametrize("text,count", [("0,1,2,3", 4), ("3", 1), ("GPU-a,GPU-b", 2),
                                        ("NoDevFiles", None)])
def test_count_devices(text: str, count: int | None) -> None:
    assert count_devices(text) == count


@pytest.mark.parametrize("text,count", [("4", 4), ("a100:4", 4), ("a100:2,v100:2", 4),
                                        ("gpu:h100:8", 8)])
def test_gpus_per_node(text: str, count: int) -> None:
    assert parse_gpus_per_node(text) == count


def test_gpus_per_node_rejects_malformed() -> None:
    with pytest.raises(ValueError):
        parse_gpus_per_node("a100")


def test_torchrun_specs() -> None:
    assert parse_nnodes("2") == 2
    assert parse_nnodes("2:2") == 2
    assert parse_nnodes("1:4") is None  # elastic range: no single count
    assert parse_nproc_per_node("8") == 8
    assert parse_nproc_per_node("gpu") is None
    with pytest.raises(ValueError):
        parse_nnodes("two")


@pytest.mark.parametrize("a,b,same", [
    ("gn017", "gn017.hpc.example.org", True),
    ("GPU-01", "gpu-01", True),
    ("gpu-01", "gpu-010", False),
    ("10.0.0.1", "10.0.0.12", False),
    ("10.0.0.1", "10.0.0.1", True),
])
def test_same_host(a: str, b: str, same: bool) -> None:
    assert same_host(a, b) is same
