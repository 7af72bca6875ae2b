"""The recorded and hand-made link figures of tests/data/links, as the verdicts take them."""

from __future__ import annotations

import json

from tests.helpers.paths import DATA

LINKS = DATA / "links"


def load_matrix(name: str) -> dict[tuple[str, str], float]:
    """A node x node GB/s matrix: {(sender, receiver): GB/s}."""
    data = json.loads((LINKS / name).read_text())
    return {(src, dst): v for src, row in data["matrix"].items() for dst, v in row.items()}


def scaling_rows() -> list[dict]:
    """DDP step times at several world sizes (tests/data/links/ddp_scaling.json)."""
    return json.loads((LINKS / "ddp_scaling.json").read_text())["rows"]
