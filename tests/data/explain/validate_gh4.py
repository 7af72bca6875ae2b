"""Check corpus-gh4.json: every file exists, ids and sources unique, split matches the hash,
and no source is already used by another corpus (corpus-gh.json, corpus-qa.json,
tests/data/logs/CORPUS.json, corpus-gh3.json)."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent.parent.parent
FAMILIES = {"network", "rendezvous", "nccl", "watchdog", "device", "ddp", "slurm", "signals",
            "launcher", "memory", "healthy", "other"}
OTHER_MANIFESTS = [
    HERE / "corpus-gh.json",
    HERE / "corpus-qa.json",
    Path("/work/wt-corpus-qa/tests/data/explain/corpus-qa.json"),
    REPO / "tests/data/logs/CORPUS.json",
    HERE / "corpus-gh3.json",
    Path("/work/wt-corpus-gh3/tests/data/explain/corpus-gh3.json"),
]


def norm(url: str) -> str:
    url = url.strip().split("#")[0].rstrip("/").lower()
    return url.replace("http://", "https://").replace("/pull/", "/issues/")


def other_sources() -> dict[str, str]:
    seen: dict[str, str] = {}
    for path in OTHER_MANIFESTS:
        if not path.is_file():
            continue
        data = json.loads(path.read_text())
        for entry in data.get("cases", []) + data.get("logs", []):
            if entry.get("source"):
                seen.setdefault(norm(entry["source"]), path.name)
    return seen


def expected_split(case_id: str) -> str:
    digest = int(hashlib.sha1(case_id.encode()).hexdigest(), 16)
    return "heldout" if digest % 5 < 2 else "dev"


def problems(manifest: dict) -> list[str]:
    found: list[str] = []
    ids: set[str] = set()
    sources: set[str] = set()
    taken = other_sources()
    for case in manifest["cases"]:
        cid = case["id"]
        if not cid.startswith("gh-"):
            found.append(f"{cid}: id does not start with gh-")
        if cid in ids:
            found.append(f"{cid}: duplicate id")
        src = norm(case["source"])
        if src in sources:
            found.append(f"{cid}: duplicate source {case['source']}")
        if src in taken:
            found.append(f"{cid}: source {case['source']} already in {taken[src]}")
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
    if len(sys.argv) > 1:  # `validate_gh4.py URL...`: is this source already taken?
        taken = other_sources()
        mine = {norm(c["source"]) for c in json.loads((HERE / "corpus-gh4.json").read_text())["cases"]}
        for url in sys.argv[1:]:
            print(url, "TAKEN by " + taken[norm(url)] if norm(url) in taken
                  else "TAKEN by corpus-gh4.json" if norm(url) in mine else "free")
        sys.exit(0)
    data = json.loads((HERE / "corpus-gh4.json").read_text())
    errors = problems(data)
    print("\n".join(errors) or f"ok: {len(data['cases'])} cases")
    sys.exit(1 if errors else 0)
