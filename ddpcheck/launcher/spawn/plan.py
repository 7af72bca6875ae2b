"""The launcher's plan for ``--launch spawn``: pre-checks, check-in card, rank environments.

Runs in the launcher of every node when the job starts its ranks itself (mp.spawn-style).
Ties together the pure parts (launchspec: which ranks this node starts; ranklayout: do the
nodes' ranks make one world; mastercheck and initfile: can the world form through the init
method) with the run: its problems go on this node's check-in card (so every node names
them, before any rank starts), the file:// share token is exchanged through the check-in
store, and each rank gets the environment ranks.rank_env builds.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Mapping
from typing import Any

from ddpcheck import results
from ddpcheck.cluster import board
from ddpcheck.diagnoses import Problem
from ddpcheck.judgements.ranklayout import NodeRanks
from ddpcheck.judgements.ranklayout import judge as judge_layout
from ddpcheck.launcher.spawn import initfile
from ddpcheck.launcher.spawn.formation import replace_generic, world_not_formed
from ddpcheck.launcher.spawn.launchspec import LaunchSpec, spec_of
from ddpcheck.launcher.spawn.mastercheck import master_problems
from ddpcheck.launcher.spawn.ranks import rank_env
from ddpcheck.node.interfaces import interfaces


class SpawnPlan:
    """One node's spawn-style launch, from the pre-checks to the cleanup."""

    def __init__(self, cfg: Any, nproc: int, node: str) -> None:
        self.cfg, self.node = cfg, node
        self.spec: LaunchSpec = spec_of(cfg, nproc)
        self.nonce = initfile.new_nonce()  # file://: the host's, learnt by the others
        self.token_written = False
        atexit.register(self.cleanup)  # after the verdict: the launcher exits last

    @property
    def world_size(self) -> int:
        return self.spec.world_size

    def layout(self) -> NodeRanks:
        s = self.spec
        return NodeRanks(self.node, s.node_rank, s.first_rank, s.nproc, s.world_size)

    def pre_checks(self) -> list[Problem]:
        """This node's problems before any rank starts (its layout alone on one node)."""
        own = {a.address for i in interfaces() for a in i.ipv4}
        problems = master_problems(self.spec, self.cfg.nodes, self.node, own)
        if self.spec.init.scheme == "file":
            problems += initfile.init_file_problems(self.spec.init.path, self.node)
        if self.cfg.nodes == 1:
            problems += judge_layout([self.layout()])
        return problems

    def checkin_hooks(self) -> dict[str, Any]:
        """lifecycle.connect's extras: the layout on the card, the share check before it."""
        return {"card_fields": {"first_rank": self.spec.first_rank,
                                "world_size": self.spec.world_size,
                                "master": self.spec.master[0] if self.spec.master else ""},
                "before_card": self.before_card}

    def before_card(self, st: Any) -> list[Problem]:
        """file:// on several nodes: the endpoint node writes a token next to the init file
        and posts its nonce; every other node must read the same token there."""
        path = self.spec.init.path
        if self.spec.init.scheme != "file" or self.cfg.nodes == 1:
            return []
        if st.is_host:
            found = initfile.post_token(st.store, path, self.nonce, self.node)
            self.token_written = not found
            return found
        raw = board.await_key(st.store, initfile.TOKEN_KEY,
                              time.monotonic() + self.cfg.rdzv_timeout)
        nonce, found = initfile.check_token(raw, path, self.node)
        self.nonce = nonce or self.nonce
        return found

    def init_url(self) -> str:
        """The URL the ranks form their world through: the user's, or for file:// a fresh
        file next to the user's (never the user's own path: no stale file left there)."""
        init = self.spec.init
        if init.scheme != "file":
            return init.url
        return "file://" + initfile.ranks_file(init.path, self.nonce)

    def rank_envs(self, base: Mapping[str, str]) -> list[dict[str, str]]:
        url = self.init_url()
        return [rank_env(base, self.spec, i, url) for i in range(self.spec.nproc)]

    def explain_exits(self, exits: dict[int, results.ExitStatus],
                      problems: list[Problem]) -> list[Problem]:
        """Ranks that ended forming the world: one world-not-formed problem, not bare exits."""
        found = world_not_formed(exits, self.node, self.spec.master)
        return replace_generic(problems, found) if found else problems

    def cleanup(self) -> None:
        """Remove the share token (endpoint node) and a ranks' file left by a failed run
        (the node of rank 0, once the verdict is out)."""
        if self.spec.init.scheme != "file":
            return
        if self.token_written:
            initfile.remove_quietly(initfile.token_path(self.spec.init.path, self.nonce))
        if self.spec.hosts_rank0:
            initfile.remove_quietly(initfile.ranks_file(self.spec.init.path, self.nonce))
