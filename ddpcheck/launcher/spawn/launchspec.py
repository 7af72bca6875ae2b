"""How the user's job starts its ranks: ``--launch``, ``--init-method``, the master, the layout.

Runs in the launcher (pure, no torch). Parses the launch settings (errors name the flag or
variable: exit 2), fills in what a spawn-style job implies (MASTER_ADDR/MASTER_PORT from the
job's environment, ranks ``node_rank * nproc + local_rank`` unless ``--rank-offsets`` says
otherwise, ddpcheck's own check-in one port above the master's), and says which ranks this
node starts (:func:`spec_of`).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from ddpcheck import parsing
from ddpcheck.parsing import UsageError
from ddpcheck.scheduler.hostlist import expand_slurm_nodelist
from ddpcheck.scheduler.jobsettings import DEFAULT_PORT
from ddpcheck.scheduler.srunworld import torch_env

LAUNCHES = ("torchrun", "spawn", "srun")
EXPLICIT = ("--", "DDPCHECK_")  # sources the user chose for this run (not the job's env)


@dataclass(frozen=True)
class InitMethod:
    """A parsed ``init_method`` URL: env://, tcp://HOST:PORT or file:///PATH."""

    scheme: str
    host: str = ""
    port: int = 0
    path: str = ""

    @property
    def url(self) -> str:
        if self.scheme == "tcp":
            return f"tcp://{parsing.join_host_port(self.host, self.port)}"
        return f"file://{self.path}" if self.scheme == "file" else "env://"


ENV = InitMethod("env")
FORMS = "env://, tcp://HOST:PORT or file:///PATH"


def parse_init_method(raw: str) -> InitMethod:
    """Parse an init_method as torch.distributed.init_process_group takes it."""
    scheme, sep, rest = raw.strip().partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("env", "tcp", "file"):
        raise ValueError(f"expected {FORMS}")
    if "?" in rest:  # rank and world_size are ddpcheck's to set, as init_process_group does
        raise ValueError("leave out the query (?rank=...): ddpcheck sets rank and world size")
    if scheme == "env":
        if rest.strip("/"):
            raise ValueError("env:// takes nothing after it (MASTER_ADDR/MASTER_PORT come from "
                             "--master-addr/--master-port or the environment)")
        return ENV
    if scheme == "tcp":
        try:
            host, port = parsing.endpoint(rest.rstrip("/"))
        except ValueError:
            raise ValueError("expected tcp://HOST:PORT with a port from 1 to 65535") from None
        return InitMethod("tcp", host=host, port=port)
    if not rest.startswith("/") or rest.startswith("//") or len(rest) < 2:
        raise ValueError("expected file:///ABSOLUTE/PATH (three slashes: no host part)")
    if rest.endswith("/"):
        raise ValueError("file:// must name a file, not a directory")
    return InitMethod("file", path=rest)


def parse_rank_offsets(raw: str) -> tuple[int, ...]:
    """Each node's first rank, in node-rank order: ``0,8`` (8 ranks on node 0)."""
    parts = [p.strip() for p in raw.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError("expected each node's first rank as a comma list, e.g. 0,8")
    return tuple(int(p) for p in parts)


def parse_host(raw: str) -> str:
    text = raw.strip()
    if not text or any(c.isspace() for c in text) or "/" in text:
        raise ValueError("expected a host name or address")
    return text


@dataclass(frozen=True)
class LaunchSpec:
    """This node's part of a spawn-style launch, resolved."""

    launch: str
    init: InitMethod
    master: tuple[str, int] | None  # where rank 0 hosts the store (env://, tcp://)
    master_source: str  # "MASTER_ADDR", "--init-method tcp://..." (for messages)
    node_rank: int
    first_rank: int
    nproc: int
    world_size: int

    @property
    def ranks(self) -> range:
        return range(self.first_rank, self.first_rank + self.nproc)

    @property
    def hosts_rank0(self) -> bool:
        return self.first_rank == 0


def spec_of(cfg: Any, nproc: int) -> LaunchSpec:
    """The resolved launch of this node (cfg: launcher RunConfig, validated)."""
    node_rank = cfg.node_rank or 0
    offsets = cfg.rank_offsets
    first = offsets[node_rank] if offsets else node_rank * nproc
    init = cfg.init_method or ENV
    master: tuple[str, int] | None = None
    source = ""
    if init.scheme == "tcp":
        master, source = (init.host, init.port), f"--init-method {init.url}"
    elif init.scheme == "env":
        master = (cfg.master_addr or "127.0.0.1", cfg.master_port or DEFAULT_PORT)
        source = "MASTER_ADDR"
    world = cfg.world_size or cfg.nodes * nproc
    return LaunchSpec(cfg.launch, init, master, source, node_rank, first, nproc, world)


def job_settings(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """MASTER_ADDR/MASTER_PORT of the job's environment, as a spawn-style job reads them."""
    found: dict[str, tuple[Any, str]] = {}
    for name, var, parse in (("master_addr", "MASTER_ADDR", parse_host),
                             ("master_port", "MASTER_PORT", parsing.port_number)):
        raw = env.get(var, "").strip()
        if raw:
            found[name] = (parsing.convert(var, raw, parse), var)
    return found


def srun_master(env: Mapping[str, str]) -> dict[str, tuple[Any, str]]:
    """Where srun-started ranks find rank 0 (ddpcheck.scheduler.srunworld): MASTER_ADDR or
    the step's first node, MASTER_PORT or a port derived from the job id."""
    if not (env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")):
        raise UsageError("--launch srun: not inside a Slurm job (SLURM_JOB_ID is unset); "
                         "use --launch spawn")
    nodes = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
    first = parsing.convert("SLURM_JOB_NODELIST", nodes, expand_slurm_nodelist)[:1]
    port = torch_env({**env, "SLURM_PROCID": "0", "SLURM_NTASKS": "1",
                      "SLURM_JOB_NODELIST": nodes or "localhost"})["MASTER_PORT"]
    found = {"master_port": (parsing.convert("MASTER_PORT", port, parsing.port_number),
                             "srun (job id)")}
    if first:
        found["master_addr"] = (first[0], "srun (first node of the step)")
    return found


def derive(values: MutableMapping[str, Any], sources: MutableMapping[str, str],
           env: Mapping[str, str]) -> None:
    """Fill the spawn defaults into the settings before the RunConfig is built."""
    if values.get("launch", "torchrun") == "torchrun":
        return
    job = job_settings(env)
    if values["launch"] == "srun":
        job = {**srun_master(env), **job}
    for name, (value, source) in job.items():
        if name not in values:
            values[name], sources[name] = value, source
    init = values.get("init_method") or ENV
    if init.scheme == "tcp":
        addr, port = init.host, init.port
    else:
        addr, port = values.get("master_addr"), values.get("master_port") or DEFAULT_PORT
    chosen = sources.get("rdzv_endpoint", "").startswith(EXPLICIT)
    if values.get("nodes", 1) > 1 and not chosen and addr and init.scheme != "file":
        # The master port is rank 0's; ddpcheck's check-in store takes the next one.
        values["rdzv_endpoint"] = (addr, port + 1 if port < 65535 else port - 1)
        sources["rdzv_endpoint"] = f"{'MASTER_ADDR' if init.scheme == 'env' else 'tcp://'}" \
                                   f" (port + 1, --launch {values['launch']})"


def check(cfg: Any) -> None:
    """Reject launch settings that cannot work together, naming them (exit 2)."""
    def given(name: str) -> str:
        return cfg.sources.get(name, "") if cfg.sources.get(name, "").startswith(EXPLICIT) \
            else ""

    if cfg.launch == "torchrun":
        for name in ("master_addr", "master_port", "rank_offsets", "world_size"):
            if given(name):
                raise UsageError(f"{given(name)}: applies to --launch spawn or srun "
                                 "(torchrun's agents choose the master and the ranks)")
        if cfg.init_method and cfg.init_method.scheme != "env":
            raise UsageError(f"{given('init_method') or '--init-method'}: torchrun's workers "
                             "form their world through env://; use --launch spawn")
        return
    if cfg.nodes > 1 and cfg.node_rank is None:
        raise UsageError(f"--launch {cfg.launch} on {cfg.nodes} nodes needs --node-rank N on "
                         "each node: its ranks are node_rank * nproc + local_rank")
    init = cfg.init_method or ENV
    if cfg.nodes > 1 and init.scheme == "env" and not cfg.master_addr:
        raise UsageError(f"--launch {cfg.launch} on {cfg.nodes} nodes needs MASTER_ADDR "
                         "(or --master-addr): the host of rank 0")
    if cfg.nodes > 1 and cfg.rdzv_endpoint is None:
        raise UsageError(f"--init-method {init.url} on {cfg.nodes} nodes needs --rdzv-endpoint "
                         "HOST:PORT for ddpcheck's check-in (file:// has no master address)")
    if cfg.rank_offsets is not None and len(cfg.rank_offsets) != cfg.nodes:
        raise UsageError(f"{given('rank_offsets') or '--rank-offsets'}: "
                         f"{len(cfg.rank_offsets)} entries for {cfg.nodes} nodes (one first "
                         "rank per node, in node-rank order)")
    spec = spec_of(cfg, cfg.nproc_per_node or 1)
    if spec.master and cfg.rdzv_endpoint and cfg.nodes > 1 \
            and tuple(cfg.rdzv_endpoint) == tuple(spec.master):
        raise UsageError(f"--rdzv-endpoint {spec.master[0]}:{spec.master[1]} is the master's "
                         "own port: rank 0 binds it, so ddpcheck's check-in needs another "
                         f"(e.g. {spec.master[0]}:{spec.master[1] + 1})")
