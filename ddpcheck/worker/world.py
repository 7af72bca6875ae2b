"""The worker's view of the world: identity, the control store, agreement with deadlines.

Runs inside every torchrun worker (or a plain single-process pytest). The control channel
is a c10d TCPStore, not a process group: a store wait can poll with a deadline and tell
exactly which ranks did not arrive, and it keeps working when the backend under test is
broken. Under torchrun the store is the agent's (it outlives a stopped or killed rank 0);
when ranks are started without torchrun, rank 0 hosts it.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable

import torch
import torch.distributed as dist

from ddpcheck import storekeys
from ddpcheck.cluster import deadlines
from ddpcheck.cluster.store import gather_keys
from ddpcheck.diagnoses import COLLECTIVE_FAILED
from ddpcheck.node import ncclinfo
from ddpcheck.node.gpustate import first_device
from ddpcheck.scheduler.srunworld import is_srun_rank, torch_env
from ddpcheck.worker import initmethod
from ddpcheck.worker.settings import WorkerSettings


def _env_int(env: dict[str, str], *names: str, default: int) -> int:
    for name in names:
        if env.get(name, "").strip():
            return int(env[name])
    return default


@dataclass
class World:
    """This rank's identity and the control store shared by all ranks."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    host: str
    backend: str
    timeout: float
    store: Any = field(repr=False)
    lost: set = field(default_factory=set)  # ranks that missed a deadline: never waited for again
    hosts_by_rank: dict = field(default_factory=dict)  # every rank's host, from the hello
    gpus_per_replica: int = 1  # devices each local rank drives (--gpus-per-replica)
    nccl_debug_dir: str | None = None  # where NCCL writes this rank's INFO lines (results dir)
    _pg_ready: bool = field(default=False, repr=False)

    # --- agreement: rank 0 collects, decides and publishes; O(R) store operations ---------
    def gather(self, key: str, payload: Any, timeout: float | None = None) -> Exchange:
        """Rank 0 gets every rank's payload; the others get their own and who was missing."""
        return self._collect(key, payload, timeout, lambda ex: None)[0]

    def exchange(self, key: str, payload: Any, timeout: float | None = None) -> Exchange:
        """Every rank gets every rank's payload (rank 0 gathers, then publishes them all).

        Costs O(R) store operations but O(R) bytes read by every rank: for small payloads
        or small worlds; ``gather`` and ``decide`` keep large worlds linear in bytes too.
        """
        ex, values = self._collect(key, payload, timeout,
                                   lambda ex: {str(r): v for r, v in ex.values.items()})
        if self.rank == 0 or values is None:
            return ex
        return Exchange({int(r): v for r, v in values.items()}, ex.missing)

    def decide(self, key: str, payload: Any, rule: Callable[[Exchange], Any],
               timeout: float | None = None) -> tuple[Any, tuple[int, ...]]:
        """Rank 0 applies ``rule`` to every rank's payload; every rank obeys its result.

        Returns (decision, missing ranks); the decision is None when rank 0 itself did not
        publish in time (then rank 0 is the missing one).
        """
        ex, decision = self._collect(key, payload, timeout, rule)
        return decision, ex.missing

    def decide_each(self, key: str, payload: Any,
                    rule: Callable[[Exchange], dict[int, Any]],
                    timeout: float | None = None) -> tuple[Any, tuple[int, ...]]:
        """Rank 0 applies ``rule`` to every rank's payload; each rank gets only its own part.

        ``rule`` returns {rank: part}; rank 0 posts every part in one ``multi_set`` and each
        rank reads its own key: O(1) bytes per rank for a world-sized plan (rank 0 writes
        O(R) once). Costs a non-zero rank 3 store operations (set, wait, get); the missing
        ranks come back only to rank 0 (a part that never came is None, as with ``decide``).
        """
        wait = self.deadline(timeout)
        mine = json.dumps(payload, default=str)
        self.store.set(f"{key}/{self.rank}", mine)
        if self.rank != 0:
            if 0 in self.lost:
                return None, (0,)
            got, missing = gather_keys(self.store, {0: f"{key}/part/{self.rank}"},
                                       wait + RESULT_GRACE_S)
            if 0 not in got:
                self.lost.add(0)
                return None, (0,)
            return json.loads(got[0]), ()
        ex = self._gather_at_zero(key, json.loads(mine), wait)
        parts = rule(ex)
        others = [r for r in range(1, self.world_size) if r not in self.lost]
        if others:
            self.store.multi_set([f"{key}/part/{r}" for r in others],
                                 [json.dumps(parts.get(r), default=str) for r in others])
        return parts.get(0), ex.missing

    def deadline(self, timeout: float | None = None) -> float:
        """The probe timeout (or the caller's) plus rank 0's share of reading R payloads
        (``cluster.deadlines.agreement``): it grows with the world."""
        return deadlines.agreement(self.timeout if timeout is None else timeout,
                                   self.world_size)

    def _gather_at_zero(self, key: str, payload: Any, wait: float) -> Exchange:
        live = [r for r in range(1, self.world_size) if r not in self.lost]
        got, missing = gather_keys(self.store, {r: f"{key}/{r}" for r in live}, wait)
        values = {0: payload, **{r: json.loads(v) for r, v in got.items()}}
        all_missing = tuple(sorted({*missing, *self.lost}))
        self.lost.update(missing)
        return Exchange(dict(sorted(values.items())), all_missing)

    def _collect(self, key: str, payload: Any, timeout: float | None,
                 publish: Callable[[Exchange], Any]) -> tuple[Exchange, Any]:
        """Everyone posts one key; rank 0 waits for all of them at once (one store wait,
        never past the deadline), reads them in one multi_get, and posts one result key
        that the others wait on. Ranks that missed a deadline are never waited for again,
        so one stuck rank costs one deadline; a stuck rank 0 ends every later agreement."""
        wait = self.deadline(timeout)
        mine = json.dumps(payload, default=str)
        self.store.set(f"{key}/{self.rank}", mine)
        payload = json.loads(mine)  # every rank sees the same JSON form, its own included
        if self.rank != 0:
            return self._await_result(key, payload, wait + RESULT_GRACE_S)
        ex = self._gather_at_zero(key, payload, wait)
        result = publish(ex)
        self.store.set(f"{key}/result", json.dumps({"result": result, "missing": ex.missing},
                                                   default=str))
        return ex, result

    def _await_result(self, key: str, payload: Any, wait: float) -> tuple[Exchange, Any]:
        posted = {} if 0 in self.lost else gather_keys(self.store, {0: f"{key}/result"}, wait)[0]
        if 0 in posted:
            got = json.loads(posted[0])
            missing = tuple(int(r) for r in got["missing"])
            self.lost.update(missing)
            return Exchange({self.rank: payload}, missing), got["result"]
        self.lost.add(0)  # the coordinator is gone: nothing can be agreed from here on
        return Exchange({self.rank: payload}, tuple(sorted(self.lost))), None

    # --- the process group under test ----------------------------------------------------
    def init_process_group(self) -> None:
        """Create the default process group of the backend under test (idempotent)."""
        if self._pg_ready:
            return
        eager: dict[str, Any] = {}
        if self.backend == "nccl":
            if self.nccl_debug_dir:  # read by NCCL at its first log line, i.e. at init below
                os.environ.update(ncclinfo.capture_env(os.environ, self.nccl_debug_dir))
            torch.cuda.set_device(first_device(
                self.local_rank, self.local_world_size, torch.cuda.device_count(),
                self.gpus_per_replica, is_srun_rank(os.environ)))
            # device_id binds the group to this GPU and creates the NCCL communicator now
            # (torch docs, init_process_group), so a later p2p batch of a subset of ranks
            # never has to create it (batch_isend_irecv docstring).
            if "device_id" in inspect.signature(dist.init_process_group).parameters:  # 2.3+
                eager["device_id"] = torch.device("cuda", torch.cuda.current_device())
        try:
            dist.init_process_group(
                self.backend, store=dist.PrefixStore("pg", self.store), rank=self.rank,
                world_size=self.world_size, timeout=timedelta(seconds=self.timeout), **eager)
        except Exception as exc:  # torch raises RuntimeError/DistNetworkError/ValueError
            raise COLLECTIVE_FAILED.fail(
                f"init_process_group({self.backend!r}) failed: {first_line(exc)}") from exc
        self._pg_ready = True

    @property
    def device(self) -> torch.device:
        if self.backend == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def close(self) -> None:
        if self._pg_ready and dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # a broken group may fail to tear down; the process ends anyway
                pass
            self._pg_ready = False


@dataclass(frozen=True)
class Exchange:
    """What every rank published under one key; ``missing`` ranks never arrived."""

    values: dict[int, Any]
    missing: tuple[int, ...]


RESULT_GRACE_S = 5.0  # the others wait this much longer than rank 0 for its result


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def resolve_backend(requested: str) -> str:
    if requested in ("", "auto"):
        return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    return requested


def connect(env: dict[str, str] | None = None, timeout: float = 30.0,
            settings: WorkerSettings | None = None) -> World:
    """Build this rank's World from torchrun's (or Slurm's) environment and connect the store.

    The backend comes from the worker settings (read from ``env`` when not given)."""
    env = dict(os.environ if env is None else env)
    settings = settings or WorkerSettings.from_env(env)
    if is_srun_rank(env):  # started by srun directly: Slurm's variables give the layout
        env.update(torch_env(env))
    rank = _env_int(env, "RANK", default=0)
    world_size = _env_int(env, "WORLD_SIZE", default=1)
    # torch.distributed.launch sets LOCAL_RANK and passes --local-rank (read by the wrapper)
    local_rank = _env_int(env, "LOCAL_RANK", "DDPCHECK_LOCAL_RANK_ARG", default=0)
    local_world = _env_int(env, "LOCAL_WORLD_SIZE", default=world_size)
    node_rank = _env_int(env, "GROUP_RANK", default=0)
    backend = resolve_backend(settings.backend)
    store = _connect_store(env, rank, world_size, timeout, settings.init_method)
    host = hostname()
    return World(rank, world_size, local_rank, local_world, node_rank, host, backend,
                 timeout, store, hosts_by_rank={rank: host},
                 gpus_per_replica=settings.gpus_per_replica,
                 nccl_debug_dir=str(settings.results_dir) if settings.results_dir else None)


def _connect_store(env: dict[str, str], rank: int, world_size: int, timeout: float,
                   url: str | None = None) -> Any:
    run_id = env.get("TORCHELASTIC_RUN_ID") or env.get("SLURM_JOB_ID") or "local"
    prefix = storekeys.world_prefix(run_id, env.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if url:  # --launch spawn: the world forms through the job's own init method
        return dist.PrefixStore(prefix, initmethod.open_store(url, rank, world_size, timeout))
    if world_size == 1 and "MASTER_ADDR" not in env:
        return dist.PrefixStore(prefix, dist.HashStore())
    addr, port = env.get("MASTER_ADDR", "127.0.0.1"), int(env.get("MASTER_PORT", "29500"))
    agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    store = dist.TCPStore(addr, port, world_size, is_master=(rank == 0 and not agent_store),
                          timeout=timedelta(seconds=timeout), wait_for_workers=False)
    return dist.PrefixStore(prefix, store)


def hostname() -> str:
    return socket.gethostname()


def node_facts() -> dict[str, Any]:
    """The facts every rank publishes at rendezvous, compared across ranks."""
    nccl = None
    if torch.cuda.is_available() and dist.is_nccl_available():
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    return {
        "host": hostname(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": nccl,
        "arch": platform.machine(),
        "python": platform.python_version(),
        "pid": os.getpid(),
    }
