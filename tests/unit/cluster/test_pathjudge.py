"""Tests for cluster.pathjudge: payload stalls turned into one problem naming the path, the
interfaces and MTUs at both ends, and the fix."""

from __future__ import annotations

from typing import Any

from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.cluster.pathjudge import cluster_mtus, judge_bulk


def card(host: str, addr: str, mtu: int, dev: str = "eth0") -> NodeCard:
    return NodeCard(host, 3, "job", 2, 1, advertised=addr, addresses={dev: [addr], "lo": []},
                    mtus={dev: mtu, "lo": 65536})


def ok() -> dict[str, Any]:
    return {"outcome": "ok", "bulk": {"outcome": "ok", "largest_ok": 2 << 20}}


def stalled(dev: str = "eth0", mtu: int = 9000, largest_ok: int = 1024) -> dict[str, Any]:
    return {"outcome": "ok", "bulk": {"outcome": "stalled", "largest_ok": largest_ok,
                                      "failed_size": 65536, "sent": 65536, "received": 0,
                                      "elapsed": 4.0, "dev": dev, "mtu": mtu}}


def test_clean_exchanges_are_no_problem() -> None:
    results = {"a": {"b": ok()}, "b": {"a": ok()}}
    assert judge_bulk(results, [card("a", "10.0.0.1", 1500), card("b", "10.0.0.2", 1500)]) == []


def test_rows_without_payload_results_are_no_problem() -> None:
    assert judge_bulk({"a": {"b": {"outcome": "timeout"}}}, []) == []


def test_jumbo_hosts_behind_a_small_switch_name_both_ends_and_the_mtus() -> None:
    cards = [card("a", "10.0.0.1", 9000), card("b", "10.0.0.2", 9000)]
    [p] = judge_bulk({"a": {"b": stalled()}, "b": {"a": stalled()}}, cards)
    assert p.code == "large-frames-dropped" and p.hosts == ("a", "b")
    assert "a (eth0, MTU 9000) -> b (eth0, MTU 9000): 1 KiB went both ways, 64 KiB stalled" \
        in p.observed
    assert "Every node's cluster interface has MTU 9000" in p.observed
    assert "on a: ip link set dev eth0 mtu 1500" in p.fix
    assert "on b: ip link set dev eth0 mtu 1500" in p.fix


def test_the_one_jumbo_node_is_blamed_and_its_mtu_named() -> None:
    cards = [card("a", "10.0.0.1", 1500), card("b", "10.0.0.2", 1500),
             card("c", "10.0.0.3", 9000, dev="ib0")]
    results = {"a": {"b": ok(), "c": stalled(mtu=1500)}, "b": {"a": ok(), "c": stalled(mtu=1500)},
               "c": {"a": stalled("ib0"), "b": stalled("ib0")}}
    [p] = judge_bulk(results, cards)
    assert p.hosts == ("c",)
    assert "most have MTU 1500, c (ib0 MTU 9000) do not" in p.observed
    assert "on c: ip link set dev ib0 mtu 1500" in p.fix


def test_the_far_end_comes_from_its_card_when_it_did_not_probe_back() -> None:
    cards = [card("a", "10.0.0.1", 9000), card("b", "10.0.0.2", 1500, dev="bond0")]
    [p] = judge_bulk({"a": {"b": stalled()}}, cards)
    assert "a (eth0, MTU 9000) -> b (bond0, MTU 1500)" in p.observed


def test_nothing_arriving_at_all_is_not_called_an_mtu_problem() -> None:
    cards = [card("a", "10.0.0.1", 1500), card("b", "10.0.0.2", 1500)]
    [p] = judge_bulk({"a": {"b": stalled(largest_ok=0)}}, cards)
    assert p.code == "peer-data-stalled" and "1 KiB" not in p.observed.split(":")[1][:12]


def test_cluster_mtus_take_the_interface_of_the_advertised_address() -> None:
    assert cluster_mtus([card("a", "10.0.0.1", 9000, dev="ib0")]) == {"a": ("ib0", 9000)}


def test_a_stall_after_full_frames_went_both_ways_is_a_slow_link_not_a_path_fault() -> None:
    cards = [card("a", "10.0.0.1", 1500), card("b", "10.0.0.2", 1500)]
    assert judge_bulk({"a": {"b": stalled(largest_ok=64 << 10)}}, cards) == []
