"""PNG plots of a run's measurements: all-reduce busbw vs message size, DDP scaling.

Launcher side, used by the launcher's report (the worker's bandwidth probes only produce
the figures). matplotlib is optional (``pip install 'ddpcheck[plot]'``) and is imported
only here, when plots are asked for; figures are drawn with the Agg canvas directly, never
through pyplot, so no GUI backend and no global matplotlib state is touched.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ddpcheck.judgements.bandwidth import human_size
from ddpcheck.judgements.links import scaling_table

BUSBW_PNG = "allreduce-busbw.png"
SCALING_PNG = "ddp-scaling.png"
INSTALL_HINT = "matplotlib is not installed: pip install 'ddpcheck[plot]'"


class PlotsUnavailable(RuntimeError):
    """Plots were asked for but matplotlib cannot be imported."""


def matplotlib_available() -> bool:
    """True when matplotlib can be imported."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        return False
    return True


def _figure_class() -> Any:
    try:
        figure = importlib.import_module("matplotlib.figure")
        importlib.import_module("matplotlib.backends.backend_agg")
    except ImportError as exc:
        raise PlotsUnavailable(INSTALL_HINT) from exc
    return figure.Figure


def _new_figure(figure_class: Any) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = figure_class(figsize=(7.0, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _plot_sweep(figure_class: Any, rows: Sequence[Mapping[str, Any]], title: str,
                path: Path) -> Path:
    rows = sorted(rows, key=lambda r: int(r["size"]))
    sizes = [int(r["size"]) for r in rows]
    fig, ax = _new_figure(figure_class)
    ax.plot(sizes, [float(r["busbw"]) for r in rows], marker="o", label="busbw")
    if all("algbw" in r for r in rows):
        ax.plot(sizes, [float(r["algbw"]) for r in rows], marker=".", linestyle="--",
                label="algbw")
    return _finish_sweep(fig, ax, sizes, "GB/s (10^9 bytes/s)", title, path)


def _finish_sweep(fig: Any, ax: Any, sizes: Sequence[int], ylabel: str, title: str,
                  path: Path) -> Path:
    """A bandwidth-vs-size plot's axes (message sizes on a log2 scale), saved as PNG."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(sizes))
    ax.set_xticklabels([human_size(s) for s in sizes], rotation=45, ha="right")
    ax.set_xlabel("message size")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    return _finish(fig, ax, title, path)


def _plot_scaling(figure_class: Any, rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    if any("efficiency" not in r for r in rows):
        rows = scaling_table(rows)
    rows = [r for r in sorted(rows, key=lambda r: int(r["world_size"]))
            if r.get("efficiency") is not None]
    sizes = [int(r["world_size"]) for r in rows]
    fig, ax = _new_figure(figure_class)
    ax.plot(sizes, [float(r["efficiency"]) * 100 for r in rows], marker="o",
            label="measured")
    ax.axhline(100, color="grey", linestyle="--", linewidth=1, label="perfect scaling")
    ax.set_xscale("log", base=2)  # world sizes grow by doubling
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(s) for s in sizes])
    ax.minorticks_off()
    ax.set_xlabel("world size (ranks)")
    ax.set_ylabel("scaling efficiency (%)")
    ax.set_ylim(0, max([110.0] + [float(r["efficiency"]) * 110 for r in rows]))
    return _finish(fig, ax, "DDP scaling efficiency (per-rank throughput vs the smallest world)",
                   path)


def _finish(fig: Any, ax: Any, title: str, path: Path) -> Path:
    """Title, grid and legend, then the PNG at path."""
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def write_plots(measurements: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """Write the PNGs the measurements allow into out_dir; return their paths.

    - ``allreduce-busbw.png`` from ``measurements["allreduce_sweep"]`` (rows with size,
      busbw and algbw): busbw and algbw vs message size, log2 x axis;
    - ``ddp-scaling.png`` from ``measurements["ddp_scaling"]`` (rows as scaling_table
      makes them, or with world_size and samples_per_s only): efficiency vs world size.

    Raises PlotsUnavailable when matplotlib is not installed, even if nothing is to plot.
    """
    figure_class = _figure_class()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    sweep = measurements.get("allreduce_sweep") or []
    if sweep:
        parts = ["all_reduce bus bandwidth"]
        if measurements.get("world_size"):
            parts.append(f"{measurements['world_size']} ranks")
        if measurements.get("backend"):
            parts.append(f"backend {measurements['backend']}")
        written.append(_plot_sweep(figure_class, sweep, ", ".join(parts), out_dir / BUSBW_PNG))
    scaling = measurements.get("ddp_scaling") or []
    if scaling and any(r.get("efficiency") is not None for r in scaling_table(scaling)):
        written.append(_plot_scaling(figure_class, scaling, out_dir / SCALING_PNG))
    return written


BASELINE_BUSBW_PNG = "baseline-allreduce-busbw.png"
BASELINE_LINKS_PNG = "baseline-links.png"


def _plot_baseline_sweep(figure_class: Any, base: Sequence[Mapping[str, Any]],
                         now: Sequence[Mapping[str, Any]], path: Path) -> Path:
    fig, ax = _new_figure(figure_class)
    sizes: set[int] = set()
    for rows, label in ((base, "baseline"), (now, "now")):
        rows = sorted(rows, key=lambda r: int(r["size"]))
        sizes |= {int(r["size"]) for r in rows}
        ax.plot([int(r["size"]) for r in rows], [float(r["busbw"]) for r in rows],
                marker="o", label=label)
    return _finish_sweep(fig, ax, sorted(sizes), "busbw GB/s (10^9 bytes/s)",
                         "all_reduce bus bandwidth: baseline vs now", path)


def _plot_baseline_links(figure_class: Any, base: Mapping[str, float],
                         now: Mapping[str, float], path: Path) -> Path:
    """Grouped bars, one pair per link of the matrix (matched by name, else by order)."""
    keys = sorted(base) if set(base) == set(now) else list(base)
    now_vals = ([float(now[k]) for k in keys] if set(base) == set(now)
                else [float(v) for v in list(now.values())[: len(keys)]])
    fig, ax = _new_figure(figure_class)
    xs = list(range(len(keys)))
    ax.bar([x - 0.2 for x in xs], [float(base[k]) for k in keys], width=0.4, label="baseline")
    ax.bar([x + 0.2 for x in xs[: len(now_vals)]], now_vals, width=0.4, label="now")
    ax.set_xticks(xs)
    ax.set_xticklabels(keys, rotation=45, ha="right")
    ax.set_ylabel("GB/s, one direction")
    ax.set_title("point-to-point links: baseline vs now")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def compare_plots(base: Mapping[str, Any], now: Mapping[str, Any], out_dir: Path) -> list[Path]:
    """Baseline-vs-now PNGs: busbw vs size, and every link of the link matrix."""
    figure_class = _figure_class()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if base.get("allreduce_sweep") and now.get("allreduce_sweep"):
        written.append(_plot_baseline_sweep(figure_class, base["allreduce_sweep"],
                                            now["allreduce_sweep"], out_dir / BASELINE_BUSBW_PNG))
    if base.get("link_matrix") and now.get("link_matrix"):
        written.append(_plot_baseline_links(figure_class, base["link_matrix"],
                                            now["link_matrix"], out_dir / BASELINE_LINKS_PNG))
    return written
