"""The launcher's configuration: one frozen dataclass built by a pure function.

Runs in the launcher. Precedence: flags > DDPCHECK_* environment > scheduler environment
(Slurm, PBS, torchrun) > defaults. Every bad value raises a UsageError whose one line names
the flag or variable it came from.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, TypeVar

from ddpcheck import parsing
from ddpcheck.cluster import deadlines
from ddpcheck.cluster.pairing import initial_rounds
from ddpcheck.launcher.spawn import launchspec
from ddpcheck.launcher.spawn.launchspec import InitMethod
from ddpcheck.parsing import UsageError
from ddpcheck.stages import PREFLIGHT, parse_stages
from ddpcheck.worker.settings import DEFAULT_PROBE_TIMEOUT, DEFAULT_SLOW_LINK_RATIO

T = TypeVar("T")

DEFAULT_TIMEOUT = 300.0
DEFAULT_RDZV_TIMEOUT = 30.0


@dataclass(frozen=True)
class RunConfig:
    """Everything ``ddpcheck run`` needs, validated."""

    nodes: int = 1
    node_rank: int | None = None
    nproc_per_node: int | None = None  # None = auto: GPUs on this node, else 2
    rdzv_endpoint: tuple[str, int] | None = None
    rdzv_id: str = ""
    backend: str = "auto"
    gpus_per_replica: int = 1
    stages: tuple[str, ...] = ()
    timeout: float = DEFAULT_TIMEOUT
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT
    rdzv_timeout: float = DEFAULT_RDZV_TIMEOUT
    json_path: Path | None = None
    checkpoint_dir: Path | None = None
    checkpoint_size: int | None = None  # bytes one checkpoint needs (--checkpoint-size)
    results_dir: Path | None = None
    expect_busbw: float | None = None
    slow_link_ratio: float = DEFAULT_SLOW_LINK_RATIO
    plot_dir: Path | None = None
    junit_path: Path | None = None
    baseline: Path | None = None
    regression_ratio: float = 0.8
    launch: str = "torchrun"  # how the job starts its ranks (launchspec)
    init_method: InitMethod | None = None
    master_addr: str | None = None
    master_port: int | None = None
    rank_offsets: tuple[int, ...] | None = None
    world_size: int | None = None  # None = nodes x nproc
    verbose: bool = False
    quiet: bool = False
    strict_health: bool = False  # performance-only health findings fail the run
    traceback: bool = False
    sources: Mapping[str, str] = field(default_factory=dict)  # setting -> where it came from

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rdzv_endpoint"] = endpoint_text(self.rdzv_endpoint)
        for key in ("json_path", "checkpoint_dir", "results_dir", "plot_dir", "junit_path",
                    "baseline"):
            data[key] = str(data[key]) if data[key] else None
        data["init_method"] = self.init_method.url if self.init_method else None
        return data


def endpoint_text(ep: tuple[str, int] | None) -> str | None:
    if not ep:
        return None
    return parsing.join_host_port(*ep)


def _path(what: str) -> Callable[[str], Path]:
    """A parser of a non-empty path setting; ``what`` names it in the error."""
    return lambda raw: Path(_nonempty(raw, what))


# (setting, flag, environment variable, parser)
SETTINGS: tuple[tuple[str, str, str, Callable[[str], Any]], ...] = (
    ("nodes", "--nodes", "DDPCHECK_NODES", parsing.positive_int),
    ("node_rank", "--node-rank", "DDPCHECK_NODE_RANK", parsing.non_negative_int),
    ("nproc_per_node", "--nproc-per-node", "DDPCHECK_NPROC_PER_NODE",
     lambda raw: None if raw.strip().lower() == "auto" else parsing.positive_int(raw)),
    ("rdzv_endpoint", "--rdzv-endpoint", "DDPCHECK_RDZV_ENDPOINT", parsing.endpoint),
    ("rdzv_id", "--rdzv-id", "DDPCHECK_RDZV_ID", lambda raw: _nonempty(raw, "a run id")),
    ("backend", "--backend", "DDPCHECK_BACKEND", parsing.choice("auto", "nccl", "gloo")),
    ("gpus_per_replica", "--gpus-per-replica", "DDPCHECK_GPUS_PER_REPLICA", parsing.positive_int),
    ("stages", "--stages", "DDPCHECK_STAGES", lambda raw: parse_run_stages(raw)),
    ("timeout", "--timeout", "DDPCHECK_TIMEOUT", parsing.positive_float),
    ("probe_timeout", "--probe-timeout", "DDPCHECK_PROBE_TIMEOUT", parsing.positive_float),
    ("rdzv_timeout", "--rdzv-timeout", "DDPCHECK_RDZV_TIMEOUT", parsing.positive_float),
    ("json_path", "--json", "DDPCHECK_JSON", _path("a file path")),
    ("checkpoint_dir", "--checkpoint-dir", "DDPCHECK_CHECKPOINT_DIR", _path("a directory")),
    ("checkpoint_size", "--checkpoint-size", "DDPCHECK_CHECKPOINT_SIZE", parsing.byte_size),
    ("results_dir", "--results-dir", "DDPCHECK_RESULTS_DIR", _path("a directory")),
    ("expect_busbw", "--expect-busbw", "DDPCHECK_EXPECT_BUSBW", parsing.positive_number),
    ("slow_link_ratio", "--slow-link-ratio", "DDPCHECK_SLOW_LINK_RATIO", parsing.ratio),
    ("plot_dir", "--plot", "DDPCHECK_PLOT", _path("a directory")),
    ("junit_path", "--junitxml", "DDPCHECK_JUNITXML", _path("a file path")),
    ("baseline", "--baseline", "DDPCHECK_BASELINE", _path("a file path")),
    ("regression_ratio", "--regression-ratio", "DDPCHECK_REGRESSION_RATIO", parsing.ratio),
    ("launch", "--launch", "DDPCHECK_LAUNCH", parsing.choice(*launchspec.LAUNCHES)),
    ("init_method", "--init-method", "DDPCHECK_INIT_METHOD", launchspec.parse_init_method),
    ("master_addr", "--master-addr", "DDPCHECK_MASTER_ADDR", launchspec.parse_host),
    ("master_port", "--master-port", "DDPCHECK_MASTER_PORT", parsing.port_number),
    ("rank_offsets", "--rank-offsets", "DDPCHECK_RANK_OFFSETS", launchspec.parse_rank_offsets),
    ("world_size", "--world-size", "DDPCHECK_WORLD_SIZE", parsing.positive_int),
)
QUIET_ENV = "DDPCHECK_QUIET"
STRICT_HEALTH_ENV = "DDPCHECK_STRICT_HEALTH"



NETWORK_ONLY = (PREFLIGHT,)


def parse_run_stages(text: str) -> tuple[str, ...]:
    """Stages of ``--stages``; ``preflight`` alone is the network-only mode.

    Preflight always runs; named with other stages it adds nothing. Alone, the run stops
    after preflight, check-in and peer probes: no torchrun, no worker.
    """
    names = [s.strip() for s in text.split(",") if s.strip()]
    if names == [PREFLIGHT]:
        return NETWORK_ONLY
    return parse_stages(",".join(n for n in names if n != PREFLIGHT) or "all")


def _nonempty(raw: str, what: str) -> str:
    if not raw.strip():
        raise ValueError(f"expected {what}")
    return raw.strip()


def build_config(flags: Mapping[str, str | None], env: Mapping[str, str],
                 scheduler: Mapping[str, tuple[Any, str]] | None = None) -> RunConfig:
    """Build the RunConfig from raw flag strings, the environment and scheduler facts.

    ``flags`` maps setting names to the raw string given on the command line (or None);
    ``scheduler`` maps setting names to (value, source) worked out from the job's environment.
    """
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, flag, var, parse in SETTINGS:
        raw = flags.get(name)
        if raw is not None:
            values[name], sources[name] = parsing.convert(flag, raw, parse), flag
        elif env.get(var, "").strip():
            values[name], sources[name] = parsing.convert(var, env[var], parse), var
        elif scheduler and name in scheduler:
            values[name], sources[name] = scheduler[name]
    values.setdefault("stages", parse_stages("all"))
    values.setdefault("rdzv_id", "ddpcheck")  # one fixed id, so by-hand nodes agree
    launchspec.derive(values, sources, env)  # spawn: the master and ddpcheck's check-in port
    quiet = bool(flags.get("quiet")) or parsing.convert(
        QUIET_ENV, env.get(QUIET_ENV, "0"), parsing.boolean)
    strict = bool(flags.get("strict_health")) or parsing.convert(
        STRICT_HEALTH_ENV, env.get(STRICT_HEALTH_ENV, "0"), parsing.boolean)
    cfg = RunConfig(**values, verbose=bool(flags.get("verbose")), quiet=quiet,
                 strict_health=strict, traceback=bool(flags.get("traceback")),
                 sources=sources)
    check_consistency(cfg)
    return cfg


def check_consistency(cfg: RunConfig) -> None:
    """Reject combinations that cannot work, naming the settings involved."""
    def src(name: str) -> str:
        """The setting as the user wrote it: "--nodes 3", "DDPCHECK_NODES=3", "SLURM_NNODES=3"."""
        flag = next(f for n, f, _, _ in SETTINGS if n == name)
        source, value = cfg.sources.get(name, flag), getattr(cfg, name)
        value = f"{value:g}" if isinstance(value, float) else value
        if "=" in source or " (" in source:
            return source
        return f"{source} {value}" if source.startswith("-") else f"{source}={value}"

    launchspec.check(cfg)
    if cfg.nodes > 1 and cfg.rdzv_endpoint is None:
        raise UsageError(f"{src('nodes')}: a multi-node run needs --rdzv-endpoint "
                         "HOST:PORT (the host of node rank 0), or run it inside Slurm/PBS")
    if cfg.node_rank is not None and cfg.node_rank >= cfg.nodes:
        raise UsageError(f"{src('node_rank')}: must be below --nodes "
                         f"({cfg.nodes})")
    if cfg.timeout <= cfg.rdzv_timeout:
        raise UsageError(f"{src('timeout')}: the whole-run deadline must be longer than the "
                         f"rendezvous deadline ({src('rdzv_timeout')})")
    if cfg.json_path is not None:
        check_writable_file(cfg.json_path, cfg.sources.get("json_path", "--json"))
    if cfg.results_dir is not None:
        check_writable_dir(cfg.results_dir, cfg.sources.get("results_dir", "--results-dir"))
    if cfg.junit_path is not None:
        check_writable_file(cfg.junit_path, cfg.sources.get("junit_path", "--junitxml"))
    if cfg.baseline is not None:
        from ddpcheck.judgements.compare import load_report

        load_report(cfg.baseline, cfg.sources.get("baseline", "--baseline"))
    if cfg.plot_dir is not None:
        from ddpcheck.report.plots import matplotlib_available

        if not matplotlib_available():
            raise UsageError(f"{src('plot_dir')}: matplotlib is not installed: "
                             "pip install 'ddpcheck[plot]' (or drop --plot)")


def check_writable_file(path: Path, source: str) -> None:
    """Fail now, not after the run, when the report cannot be written to path."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{source} {path}: is a directory, expected a file path")
    if not parent.is_dir():
        raise UsageError(f"{source} {path}: directory {parent} does not exist")
    existed = path.exists()
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise UsageError(f"{source} {path}: cannot write there ({exc.strerror})") from None
    if not existed:
        path.unlink()


def check_writable_dir(path: Path, source: str) -> None:
    """Fail now when the results directory cannot be made or written (it is made here)."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{source} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".ddpcheck-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"{source} {path}: cannot write there ({exc.strerror})") from None


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def run_timeout(cfg: RunConfig, nproc: int) -> float:
    """The whole-run deadline: the user's ``--timeout`` / DDPCHECK_TIMEOUT as given, else the
    default grown with the world (``cluster.deadlines.whole_run``): 300 s on a few nodes,
    about 30 minutes at 8,192 ranks on 1,024 nodes, where each agreement alone may take 16 s."""
    if "timeout" in cfg.sources:
        return cfg.timeout
    nodes = max(cfg.nodes, 1)
    ranks = cfg.world_size or nodes * nproc
    rounds = len(initial_rounds(nodes)) + 4 if nodes > 1 else 0
    return deadlines.whole_run(cfg.timeout, ranks, nodes, rounds)
