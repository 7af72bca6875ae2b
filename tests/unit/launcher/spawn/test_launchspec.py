"""Launch settings: init-method parsing, the ranks a node starts, the spawn defaults."""

from __future__ import annotations

import pytest

from ddpcheck.launcher.config import build_config
from ddpcheck.launcher.spawn.launchspec import InitMethod, parse_init_method, spec_of
from ddpcheck.parsing import UsageError


@pytest.mark.parametrize("raw,want", [
    ("env://", InitMethod("env")),
    ("tcp://10.1.0.5:23456", InitMethod("tcp", host="10.1.0.5", port=23456)),
    ("tcp://[fe80::1]:23456", InitMethod("tcp", host="fe80::1", port=23456)),
    ("TCP://gpu-a:29500/", InitMethod("tcp", host="gpu-a", port=29500)),
    ("file:///shared/run/init", InitMethod("file", path="/shared/run/init")),
])
def test_init_methods_parse_as_init_process_group_takes_them(raw, want) -> None:
    got = parse_init_method(raw)
    assert got == want
    assert parse_init_method(got.url) == got


@pytest.mark.parametrize("raw", ["gpu-a:29500", "udp://a:1", "tcp://a", "tcp://a:0",
                                 "tcp://a:70000", "env://a", "file://host/path", "file:///",
                                 "file:///shared/", "tcp://a:1?rank=0"])
def test_malformed_init_methods_are_refused(raw) -> None:
    with pytest.raises(ValueError):
        parse_init_method(raw)


def cfg(*flags: str, env: dict[str, str] | None = None):
    pairs = dict(zip(flags[::2], flags[1::2]))
    names = {"--launch": "launch", "--nodes": "nodes", "--node-rank": "node_rank",
             "--nproc-per-node": "nproc_per_node", "--init-method": "init_method",
             "--rank-offsets": "rank_offsets", "--world-size": "world_size",
             "--master-addr": "master_addr", "--rdzv-endpoint": "rdzv_endpoint"}
    return build_config({names[k]: v for k, v in pairs.items()}, env or {})


def test_ranks_are_node_rank_times_nproc_unless_offsets_say_otherwise() -> None:
    c = cfg("--launch", "spawn", "--nodes", "2", "--node-rank", "1", env={"MASTER_ADDR": "a"})
    s = spec_of(c, 8)
    assert (s.first_rank, s.world_size, list(s.ranks)[:2]) == (8, 16, [8, 9])
    c = cfg("--launch", "spawn", "--nodes", "2", "--node-rank", "1", "--rank-offsets", "0,8",
            "--world-size", "10", env={"MASTER_ADDR": "a"})
    s = spec_of(c, 2)
    assert (s.first_rank, s.world_size, s.hosts_rank0) == (8, 10, False)


def test_the_jobs_master_sets_the_master_and_ddpchecks_check_in_takes_the_next_port() -> None:
    c = cfg("--launch", "spawn", "--nodes", "2", "--node-rank", "0",
            env={"MASTER_ADDR": "gpu-a", "MASTER_PORT": "12355"})
    assert spec_of(c, 2).master == ("gpu-a", 12355)
    assert c.rdzv_endpoint == ("gpu-a", 12356) and "MASTER_ADDR" in c.sources["rdzv_endpoint"]
    t = cfg("--launch", "spawn", "--nodes", "2", "--node-rank", "0", "--init-method",
            "tcp://gpu-b:23456")
    assert spec_of(t, 1).master == ("gpu-b", 23456) and t.rdzv_endpoint == ("gpu-b", 23457)
    f = cfg("--launch", "spawn", "--nodes", "2", "--node-rank", "0", "--init-method",
            "file:///shared/init", "--rdzv-endpoint", "gpu-a:29500")
    assert spec_of(f, 1).master is None and f.rdzv_endpoint == ("gpu-a", 29500)


def test_one_node_defaults_to_a_loopback_master_and_torchrun_ignores_the_jobs_master() -> None:
    s = spec_of(cfg("--launch", "spawn"), 2)
    assert s.master == ("127.0.0.1", 29500) and s.world_size == 2 and s.init.scheme == "env"
    t = cfg(env={"MASTER_ADDR": "gpu-a", "MASTER_PORT": "1"})
    assert t.launch == "torchrun" and t.master_addr is None


def test_a_bad_master_port_in_the_jobs_environment_names_the_variable() -> None:
    with pytest.raises(UsageError, match="MASTER_PORT='x'"):
        cfg("--launch", "spawn", env={"MASTER_PORT": "x"})
