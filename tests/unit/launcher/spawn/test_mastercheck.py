"""The master address and port of a spawn-style launch, judged on each node."""

from __future__ import annotations

from ddpcheck.launcher.spawn.launchspec import ENV, InitMethod, LaunchSpec
from ddpcheck.launcher.spawn.mastercheck import master_problems
from ddpcheck.node.netprobe import BindResult, Resolution


def spec(first: int, host: str = "gpu-a", port: int = 29500, init=ENV) -> LaunchSpec:
    return LaunchSpec("spawn", init, (host, port), "MASTER_ADDR", first // 2, first, 2, 4)


def resolver(table: dict[str, str]):
    return lambda h: Resolution(h, (table[h],)) if h in table else \
        Resolution(h, (), "[Errno -2] Name or service not known")


FREE = lambda port: BindResult(True, port, "0.0.0.0")  # noqa: E731
ADDRS = {"gpu-a": "10.0.0.1", "localhost": "127.0.0.1"}


def codes(problems) -> list[str]:
    return [p.code for p in problems]


def test_the_rank0_node_owning_the_master_with_a_free_port_is_fine() -> None:
    assert master_problems(spec(0), 2, "gpu-a", {"10.0.0.1"}, resolver(ADDRS), FREE) == []
    assert master_problems(spec(2), 2, "gpu-b", {"10.0.0.2"}, resolver(ADDRS), FREE) == []


def test_unresolvable_and_loopback_masters_are_named_where_they_are_seen() -> None:
    got = master_problems(spec(2, "gpu-z"), 2, "gpu-b", {"10.0.0.2"}, resolver(ADDRS), FREE)
    assert codes(got) == ["master-addr-unresolvable"] and "MASTER_ADDR=gpu-z" in got[0].observed
    got = master_problems(spec(0, "localhost"), 2, "gpu-a", {"10.0.0.1"}, resolver(ADDRS), FREE)
    assert codes(got) == ["master-addr-loopback"]
    assert master_problems(spec(0, "localhost"), 1, "gpu-a", set(), resolver(ADDRS), FREE) == []


def test_a_master_that_is_not_the_rank0_node_is_named_on_both_sides() -> None:
    tcp = InitMethod("tcp", host="gpu-a", port=23456)
    wrong = LaunchSpec("spawn", tcp, ("gpu-a", 23456), "--init-method tcp://gpu-a:23456", 0, 0,
                       2, 4)
    got = master_problems(wrong, 2, "gpu-b", {"10.0.0.2"}, resolver(ADDRS), FREE)
    assert codes(got) == ["master-addr-not-rank0-node"] and "nobody serves" in got[0].observed
    got = master_problems(spec(2), 2, "gpu-a", {"10.0.0.1"}, resolver(ADDRS), FREE)
    assert codes(got) == ["master-addr-not-rank0-node"] and "not rank 0" in got[0].observed


def test_a_taken_port_names_its_holder_and_another_port() -> None:
    taken = lambda port: BindResult(False, port, "0.0.0.0", "Address already in use",  # noqa: E731
                                    "EADDRINUSE", 4242, "python", "", "alice", "/usr/bin/python")
    got = master_problems(spec(0), 2, "gpu-a", {"10.0.0.1"}, resolver(ADDRS), taken)
    assert codes(got) == ["master-port-in-use"]
    assert "pid 4242 (user alice, /usr/bin/python)" in got[0].observed
    assert "29502" in got[0].fix
