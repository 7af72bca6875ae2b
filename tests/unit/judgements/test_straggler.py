"""Tests for judgements.straggler: who is consistently last, on recorded and generated waits."""

from __future__ import annotations

import json
import random

import pytest

from ddpcheck.diagnoses import CATALOGUE
from ddpcheck.judgements.straggler import judge_stragglers, waits_from_work
from tests.helpers.paths import DATA

DATA = DATA / "links"


def load_waits(name: str) -> tuple[dict[int, list[float]], dict[int, str]]:
    data = json.loads((DATA / name).read_text())
    return ({int(r): w for r, w in data["waits"].items()},
            {int(r): h for r, h in data["hosts"].items()})


def test_straggler_code_is_registered_with_summary_cause_and_fix():
    d = CATALOGUE["straggler"]
    assert d.summary and d.cause and d.fix


# --- stragglers --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["waits_recorded_healthy.json", "waits_healthy_jitter_16.json",
                                  "waits_healthy_dataloader_spikes.json",
                                  "waits_healthy_rank0_bias.json"])
def test_healthy_jitter_is_not_a_straggler(name):
    waits, hosts = load_waits(name)
    assert judge_stragglers(waits, hosts) == []


def test_recorded_straggler_rank():
    waits, hosts = load_waits("waits_recorded_straggler.json")
    [p] = judge_stragglers(waits, hosts)
    assert p.code == "straggler" and p.ranks == (3,) and p.hosts == ("gpu-b",)
    assert p.observed.startswith("rank 3 (gpu-b) arrived last at 20 of 20 collectives, ")
    assert p.observed.endswith(" after the others (median)")


def test_straggler_message_counts_the_iterations_it_was_last():
    waits, hosts = load_waits("waits_straggler_rank3.json")
    [p] = judge_stragglers(waits, hosts)
    assert p.observed == ("rank 3 (gpu-b) arrived last at 19 of 20 collectives, 48 ms after "
                          "the others (median)")


@pytest.mark.parametrize("name, ranks, late", [("waits_recorded_slowhost.json", (2, 3), "ms"),
                                               ("waits_slow_host.json", tuple(range(8, 16)),
                                                "32 ms")])
def test_a_slow_host_whose_ranks_take_turns_being_last(name, ranks, late):
    waits, hosts = load_waits(name)
    [p] = judge_stragglers(waits, hosts)
    assert p.code == "straggler" and p.ranks == ranks and p.hosts == ("gpu-b",)
    assert p.observed.startswith(f"ranks {ranks[0]}-{ranks[-1]} (gpu-b) arrived last at 20 of "
                                 "20 collectives, ")
    assert f"{late} after the others" in p.observed


def test_min_share_is_respected():
    waits, hosts = load_waits("waits_straggler_rank3.json")
    assert judge_stragglers(waits, hosts, min_share=0.99) == []
    assert len(judge_stragglers(waits, hosts, min_share=0.95)) == 1


def test_lateness_below_the_absolute_floor_is_not_a_straggler():
    waits, hosts = load_waits("waits_healthy_rank0_bias.json")
    # rank 0 is last nearly every time, but only ~1.5 ms late
    last = sum(min(waits, key=lambda r: waits[r][i]) == 0 for i in range(20))
    assert last >= 16
    assert judge_stragglers(waits, hosts) == []
    [p] = judge_stragglers(waits, hosts, min_lateness_s=0.001)
    assert p.ranks == (0,)


def test_lateness_small_against_the_iteration_is_not_a_straggler():
    waits, hosts = load_waits("waits_straggler_rank3.json")
    assert judge_stragglers(waits, hosts, iteration_s=0.5) != []  # 48 ms of 0.5 s
    assert judge_stragglers(waits, hosts, iteration_s=2.0) == []   # 48 ms of 2 s


def test_lateness_within_the_others_spread_is_not_a_straggler():
    # the others arrive 0, 8 and 16 ms into the step (taking turns), rank 3 at 18 ms: it is
    # always last, its lateness (10 ms) is above the floor but only 2 ms behind the next one,
    # inside the others' spread (MAD 8 ms)
    waits: dict[int, list[float]] = {r: [] for r in range(4)}
    for i in range(20):
        arrival = {r: 0.008 * ((r + i) % 3) for r in range(3)}
        arrival[3] = 0.018
        for r in range(4):
            waits[r].append(0.0182 - arrival[r])
    hosts = {r: f"gpu-{r}" for r in range(4)}
    assert judge_stragglers(waits, hosts) == []
    [p] = judge_stragglers(waits, hosts, noise_factor=1.0)
    assert p.ranks == (3,) and "10 ms after the others" in p.observed


def test_too_few_iterations_or_ranks_give_no_verdict():
    waits, hosts = load_waits("waits_straggler_rank3.json")
    short = {r: w[:4] for r, w in waits.items()}
    assert judge_stragglers(short, hosts) == []
    assert judge_stragglers({0: waits[0]}, hosts) == []
    assert judge_stragglers({}, {}) == []


def test_random_jitter_never_makes_a_straggler():
    rnd = random.Random(3)
    for world in (2, 4, 16):
        hosts = {r: f"gpu-{r // 8}" for r in range(world)}
        for _ in range(100):
            waits: dict[int, list[float]] = {r: [] for r in range(world)}
            for _ in range(20):
                arrival = {r: rnd.expovariate(1 / 0.002) for r in range(world)}
                end = max(arrival.values()) + 0.0002
                for r in range(world):
                    waits[r].append(end - arrival[r])
            assert judge_stragglers(waits, hosts) == []




def test_a_rank_whose_work_is_consistently_slower_is_a_straggler():
    rng = random.Random(3)
    work = {r: [0.020 * (1.3 if r == 2 else 1.0) * rng.uniform(0.97, 1.03) for _ in range(20)]
            for r in range(4)}
    waits = waits_from_work(work)
    assert sum(w == 0.0 for w in waits[2]) == 20  # rank 2 is the slowest every time
    (problem,) = judge_stragglers(waits, {r: f"h{r // 2}" for r in range(4)}, iteration_s=0.026)
    assert problem.code == "straggler" and 2 in problem.ranks


def test_equal_work_with_jitter_names_no_straggler():
    rng = random.Random(4)
    work = {r: [0.020 * rng.uniform(0.7, 1.3) for _ in range(20)] for r in range(4)}
    assert judge_stragglers(waits_from_work(work), {r: "h" for r in range(4)},
                             iteration_s=0.02) == []
