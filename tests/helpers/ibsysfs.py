"""Build a /sys/class/infiniband tree from recorded ``ibstatus`` or ``ibstat`` output.

``ibstatus`` prints the sysfs files verbatim (state, phys state, rate, link_layer); ``ibstat``
prints the same facts in words ("State: Active", "Rate: 56"), turned here into the sysfs form
(state "4: ACTIVE", rate "56 Gb/sec"). Sources: tests/data/gpu/SOURCES.md.
"""

from __future__ import annotations

import re
from pathlib import Path

STATES = {"down": "1: DOWN", "initializing": "2: INIT", "init": "2: INIT",
          "armed": "3: ARMED", "active": "4: ACTIVE"}


def _write(root: Path, dev: str, port: str, files: dict[str, str]) -> None:
    pdir = root / dev / "ports" / port
    pdir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (pdir / name).write_text(text + "\n")


def from_ibstatus(text: str, root: Path) -> Path:
    blocks = re.split(r"^Infiniband device ", text, flags=re.M)
    for block in blocks[1:]:
        head = re.match(r"'([^']+)' port (\d+) status:", block)
        if not head:
            continue
        fields = dict(re.findall(r"^\s+([a-z_ ]+):\s+(.+?)\s*$", block, re.M))
        _write(root, head.group(1), head.group(2),
               {"state": fields.get("state", ""), "phys_state": fields.get("phys state", ""),
                "rate": fields.get("rate", ""), "link_layer": fields.get("link_layer", "")})
    return root


def from_ibstat(text: str, root: Path) -> Path:
    dev = ""
    for block in re.split(r"^(?=CA '|\s+Port \d+:)", text, flags=re.M):
        ca = re.match(r"CA '([^']+)'", block)
        port = re.match(r"\s+Port (\d+):", block)
        if ca:
            dev = ca.group(1)
        elif port and dev:
            f = dict(re.findall(r"^\s+([A-Za-z ]+):\s+(.+?)\s*$", block, re.M))
            _write(root, dev, port.group(1),
                   {"state": STATES.get(f.get("State", "").lower(), f.get("State", "")),
                    "phys_state": f.get("Physical state", ""),
                    "rate": f"{f.get('Rate', '')} Gb/sec", "link_layer": f.get("Link layer", "")})
    return root
