"""Check corpus-gh3.json: every file exists, ids and sources unique, split matches the hash,
and no source is already used by corpus-gh.json, corpus-qa.json or tests/data/logs/CORPUS.json."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
FAMILIES = {"network", "rendezvous", "nccl", "watchdog", "device", "ddp", "slurm", "signals",
            "launcher", "memory", "healthy", "other"}
# corpus-qa.json lives on another branch until merged; read it from there when it is not here.
QA_CANDIDATES = (HERE / "corpus-qa.json",
                 Path("/work/wt-corpus-qa/tests/data/explain/corpus-qa.json"))


def expected_split(case_id: str) -> str:
    digest = int(hashlib.sha1(case_id.encode()).hexdigest(), 16)
    return "heldout" if digest % 5 < 2 else "dev"


def normalise(url: str) -> str:
    url = url.split("#", 1)[0].rstrip("/").lower()
    return url.replace("http://", "https://").replace("://www.", "://")


def other_sources() -> dict[str, str]:
    """Normalised source -> the manifest that already uses it."""
    used: dict[str, str] = {}
    gh = HERE / "corpus-gh.json"
    if gh.is_file():
        for case in json.loads(gh.read_text())["cases"]:
            used[normalise(case["source"])] = "corpus-gh.json"
    for qa in QA_CANDIDATES:
        if qa.is_file():
            for case in json.loads(qa.read_text())["cases"]:
                used[normalise(case["source"])] = "corpus-qa.json"
            break
    logs = HERE.parent / "logs" / "CORPUS.json"
    if logs.is_file():
        for entry in json.loads(logs.read_text())["logs"]:
            used[normalise(entry["source"])] = "tests/data/logs/CORPUS.json"
    return used


def problems(manifest: dict, used: dict[str, str]) -> list[str]:
    found: list[str] = []
    ids: set[str] = set()
    sources: set[str] = set()
    for case in manifest["cases"]:
        cid = case["id"]
        if not cid.startswith("gh-"):
            found.append(f"{cid}: id does not start with gh-")
        if cid in ids:
            found.append(f"{cid}: duplicate id")
        src = normalise(case["source"])
        if src in sources:
            found.append(f"{cid}: duplicate source {case['source']}")
        if src in used:
            found.append(f"{cid}: source {case['source']} already in {used[src]}")
        ids.add(cid)
        sources.add(src)
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
    data = json.loads((HERE / "corpus-gh3.json").read_text())
    errors = problems(data, other_sources())
    print("\n".join(errors) or f"ok: {len(data['cases'])} cases")
    sys.exit(1 if errors else 0)
