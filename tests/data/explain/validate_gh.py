"""Check corpus-gh.json: every file exists, ids and sources unique, split matches the hash."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
FAMILIES = {"network", "rendezvous", "nccl", "watchdog", "device", "ddp", "slurm", "signals",
            "launcher", "memory", "healthy", "other"}


def expected_split(case_id: str) -> str:
    digest = int(hashlib.sha1(case_id.encode()).hexdigest(), 16)
    return "heldout" if digest % 5 < 2 else "dev"


def problems(manifest: dict) -> list[str]:
    found: list[str] = []
    ids: set[str] = set()
    sources: set[str] = set()
    for case in manifest["cases"]:
        cid = case["id"]
        if not cid.startswith("gh-"):
            found.append(f"{cid}: id does not start with gh-")
        if cid in ids:
            found.append(f"{cid}: duplicate id")
        if case["source"] in sources:
            found.append(f"{cid}: duplicate source {case['source']}")
        ids.add(cid)
        sources.add(case["source"])
        if case["split"] != expected_split(cid):
            found.append(f"{cid}: split {case['split']} but the hash says {expected_split(cid)}")
        if case["file"] != f"{case['split']}/{cid}.log":
            found.append(f"{cid}: file {case['file']} does not match split/id")
        path = HERE / case["file"]
        if not path.is_file() or not path.read_text().strip():
            found.append(f"{cid}: {case['file']} missing or empty")
        if case["family"] not in FAMILIES:
            found.append(f"{cid}: unknown family {case['family']}")
        for key in ("cause", "confirmed_by"):
            if not case.get(key):
                found.append(f"{cid}: no {key}")
    return found


if __name__ == "__main__":
    data = json.loads((HERE / "corpus-gh.json").read_text())
    errors = problems(data)
    print("\n".join(errors) or f"ok: {len(data['cases'])} cases")
    sys.exit(1 if errors else 0)
