"""What a probe records for the report: one key figure and any measurements.

Runs inside every worker; the plugin hands a fresh Recorder to each probe (``record`` fixture)
and writes its contents into the rank file. Measurement is kept apart from judgement: probes
record figures here and the verdicts compare them with expectations.
"""

from __future__ import annotations

from typing import Any


class Recorder:
    """Collects one probe's figures. ``figure`` is what the report table shows."""

    def __init__(self) -> None:
        self.figure: str = ""
        self.measurements: dict[str, Any] = {}

    def key_figure(self, text: str) -> None:
        """Set the short figure shown in the report table, e.g. "1.02 GB/s busbw"."""
        self.figure = text

    def measure(self, name: str, value: Any) -> None:
        """Record a measurement (JSON-serialisable) under a name for the JSON report."""
        self.measurements[name] = value
