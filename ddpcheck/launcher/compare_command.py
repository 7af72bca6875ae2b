"""``ddpcheck compare BASE.json NEW.json`` and the ``run --baseline`` hook: render and exit.

Runs in the launcher. The rules live in judgements/compare.py and the text in
report/comparison.py (a table of the figures that are not the same, then one block per
regression); this module prints it, writes the baseline-vs-now plots when asked, and maps
the outcome to exit codes: 0 no regression, 1 regression, 2 bad input.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ddpcheck.judgements.compare import DEFAULT_RATIO, compare_reports, load_report
from ddpcheck.parsing import UsageError, convert, ratio
from ddpcheck.report.comparison import render_comparison


def add_compare_parser(sub: Any) -> None:
    cmp = sub.add_parser("compare", help="compare two reports (--json files): exit 1 on a "
                         "regression")
    cmp.add_argument("base", metavar="BASE.json", help="the baseline report")
    cmp.add_argument("new", metavar="NEW.json", help="the report to judge")
    cmp.add_argument("--regression-ratio", metavar="RATIO", default=None,
                     help="a figure below RATIO x the baseline (beyond the trials' min-max) "
                          "is a regression (default 0.8) [env DDPCHECK_REGRESSION_RATIO]")
    cmp.add_argument("--plot", metavar="DIR", default=None,
                     help="write baseline-vs-now PNGs here (needs matplotlib) [env DDPCHECK_PLOT]")


def cmd_compare(args: argparse.Namespace) -> int:
    """The compare subcommand; UsageError propagates to the CLI's one-line handler."""
    threshold = _ratio(args.regression_ratio)
    plot_dir = args.plot or os.environ.get("DDPCHECK_PLOT", "").strip() or None
    if plot_dir:
        from ddpcheck.report.plots import matplotlib_available

        if not matplotlib_available():
            raise UsageError(f"--plot {plot_dir}: matplotlib is not installed: "
                             "pip install 'ddpcheck[plot]' (or drop --plot)")
    base, new = load_report(Path(args.base)), load_report(Path(args.new))
    result = compare_reports(base, new, threshold)
    if plot_dir:
        from ddpcheck.report.plots import compare_plots

        paths = compare_plots(base["measurements"], new["measurements"], Path(plot_dir))
        result.notes.append("plots: " + ", ".join(str(p) for p in paths))
    print(render_comparison(result, threshold, args.base, args.new), end="")
    return 1 if result.regressions else 0


def _ratio(flag: str | None) -> float:
    if flag is not None:
        return convert("--regression-ratio", flag, ratio)
    raw = os.environ.get("DDPCHECK_REGRESSION_RATIO", "").strip()
    return convert("DDPCHECK_REGRESSION_RATIO", raw, ratio) if raw else DEFAULT_RATIO


def against_baseline(report_json: dict[str, Any], baseline: Path,
                     threshold: float) -> tuple[list, list[str]]:
    """For ``run --baseline``: (regression problems, notes for the report)."""
    base = load_report(baseline, "--baseline")
    result = compare_reports(base, report_json, threshold)
    head = (f"baseline {baseline}: {len(result.rows)} figures compared, "
            f"{len(result.regressions)} regression(s)")
    # A failed stage is already a problem of this report: only figures become new ones.
    return result.problems(threshold, statuses=False), [head, *result.notes]
