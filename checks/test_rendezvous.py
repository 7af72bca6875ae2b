"""Stage *rendezvous*: the world forms with the expected size and every rank runs one stack.

Runs inside every worker. Rank 0 gathers what each rank reports through the control store
and judges it (O(R) store operations and bytes); the agreement after each probe makes its
verdict every rank's.
"""

from __future__ import annotations

import os
import time

from ddpcheck.diagnoses import (
    ARCH_MISMATCH,
    DUPLICATE_LOCAL_RANK,
    ENV_MISMATCH,
    VERSION_MISMATCH,
    WORLD_SIZE_MISMATCH,
    ProblemFound,
)
from ddpcheck.judgements.consistency import describe_disagreement, odd_ranks
from ddpcheck.node.envinfo import distributed_env
from ddpcheck.ranges import format_ranks
from ddpcheck.stages import stage
from ddpcheck.worker.world import node_facts

# Variables whose value must be the same everywhere (interface names may differ per node).
MUST_AGREE = ("NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_NET",
              "NCCL_ALGO", "NCCL_PROTO", "NCCL_CROSS_NIC", "TORCH_NCCL_BLOCKING_WAIT")


@stage("rendezvous")
def test_world_forms_with_the_expected_size(world, settings, record):
    """Every rank joined and the world has the size the job asked for."""
    expected = settings.expected_world_size or world.world_size
    got = world.gather("size", world.world_size)
    sizes = set(got.values.values())
    record.key_figure(f"{world.world_size} ranks")
    if sizes != {expected}:
        raise WORLD_SIZE_MISMATCH.fail(
            f"ranks see world sizes {sorted(sizes)}, expected {expected} "
            f"(nodes x nproc-per-node)")


@stage("rendezvous")
def test_process_group_initialises(world, record):
    """The process group of the backend under test forms within the deadline."""
    start = time.monotonic()
    world.init_process_group()
    record.key_figure(f"{world.backend} in {time.monotonic() - start:.1f} s")


@stage("rendezvous")
def test_each_host_has_distinct_local_ranks(world):
    """No two ranks on one host share a local rank (one launcher per node)."""
    got = world.gather("local-rank", [world.host, world.local_rank])
    seen: dict[tuple, list[int]] = {}
    for rank, (host, local) in got.values.items():
        seen.setdefault((host, local), []).append(rank)
    dups = {k: v for k, v in seen.items() if len(v) > 1}
    if dups:
        (host, local), ranks = next(iter(dups.items()))
        raise DUPLICATE_LOCAL_RANK.fail(
            f"ranks {format_ranks(ranks)} on {host} all have local rank {local}",
            ranks=ranks, hosts=[host])


@stage("rendezvous")
def test_all_ranks_run_the_same_stack(world, record):
    """torch, CUDA, NCCL, Python versions and CPU architecture agree on every rank."""
    got = world.gather("facts", node_facts())
    facts = got.values
    record.measure("ranks", facts)
    hosts = {r: f["host"] for r, f in facts.items()}
    problems = []
    for key in ("torch", "cuda", "nccl", "python"):
        line = describe_disagreement(f"{key} version", {r: f[key] for r, f in facts.items()},
                                     hosts)
        if line:
            problems.append(VERSION_MISMATCH.problem(line, ranks=_odd(facts, key)))
    line = describe_disagreement("CPU architecture", {r: f["arch"] for r, f in facts.items()},
                                 hosts)
    if line:
        problems.append(ARCH_MISMATCH.problem(line, ranks=_odd(facts, "arch")))
    if problems:
        raise ProblemFound(*problems)


@stage("rendezvous")
def test_distributed_settings_agree(world):
    """NCCL/gloo settings that must match are the same (and set or unset) on every rank."""
    got = world.gather("env", distributed_env(os.environ))
    envs = got.values
    hosts = world.hosts_by_rank
    names = sorted({n for e in envs.values() for n in e if n.startswith(("NCCL_", "GLOO_"))})
    problems = []
    for name in names:
        strict = name in MUST_AGREE
        values = {r: (e.get(name, "<unset>") if strict else name in e) for r, e in envs.items()}
        line = describe_disagreement(name if strict else f"{name} is set", values, hosts)
        if line:
            problems.append(ENV_MISMATCH.problem(line, ranks=_odd_values(values)))
    if problems:
        raise ProblemFound(*problems)


def _odd(facts, key):
    return _odd_values({r: f[key] for r, f in facts.items()})


def _odd_values(values):
    _, others = odd_ranks(values)
    return sorted(r for ranks in others.values() for r in ranks)
