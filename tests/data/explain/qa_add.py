"""Add one qa- case to corpus-qa.json (log text on stdin); validate the manifest with --check."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
MANIFEST = HERE / "corpus-qa.json"
FAMILIES = {"network", "rendezvous", "nccl", "watchdog", "device", "ddp", "slurm", "signals",
            "launcher", "memory", "healthy", "other"}


def split_of(case_id: str) -> str:
    return "heldout" if int(hashlib.sha1(case_id.encode()).hexdigest(), 16) % 5 < 2 else "dev"


def load() -> dict:
    if MANIFEST.exists():
        return json.loads(MANIFEST.read_text())
    return {"about": ("Real PyTorch distributed failure (and healthy) logs from public forum, Q&A "
                      "and smaller-project GitHub threads whose cause the thread confirms; each log "
                      "verbatim, only trimmed. cause: the problem code explain must give first "
                      "('none' = healthy). split fixed at collection by sha1(id) % 5 < 2 -> heldout."),
            "cases": []}


def gh_sources() -> set[str]:
    """Sources the gh- collector already holds (its worktree, if present)."""
    path = Path("/work/wt-corpus-gh/tests/data/explain/corpus-gh.json")
    if not path.exists():
        path = HERE / "corpus-gh.json"
    if not path.exists():
        return set()
    return {c["source"] for c in json.loads(path.read_text())["cases"]}


def check(data: dict) -> None:
    seen = set()
    gh = gh_sources()
    old = {x["source"] for x in json.loads((HERE.parent / "logs" / "CORPUS.json").read_text())["logs"]}
    for c in data["cases"]:
        assert c["id"].startswith("qa-") and c["id"] not in seen, c["id"]
        seen.add(c["id"])
        assert c["split"] == split_of(c["id"]), c["id"]
        assert c["file"] == f'{c["split"]}/{c["id"]}.log', c["id"]
        assert (HERE / c["file"]).read_text().strip(), c["id"]
        assert c["family"] in FAMILIES, c["id"]
        assert c["source"] not in old, c["id"]
        assert c["source"] not in gh, ("also in corpus-gh.json", c["id"])
        assert c["cause"] and c["confirmed_by"], c["id"]
    srcs = [c["source"] for c in data["cases"]]
    assert len(srcs) == len(set(srcs)), "duplicate source"
    print(len(data["cases"]), "cases ok")


def main() -> None:
    data = load()
    if sys.argv[1] == "--check":
        check(data)
        return
    case_id, source, cause, family, confirmed_by = sys.argv[1:6]
    assert case_id not in {c["id"] for c in data["cases"]}, "id exists"
    assert source not in {c["source"] for c in data["cases"]}, "source exists"
    assert source not in gh_sources(), "source already in corpus-gh.json"
    old = {x["source"] for x in json.loads((HERE.parent / "logs" / "CORPUS.json").read_text())["logs"]}
    assert source not in old, "source already in tests/data/logs/CORPUS.json"
    assert family in FAMILIES
    split = split_of(case_id)
    text = sys.stdin.read().strip("\n") + "\n"
    (HERE / split / f"{case_id}.log").write_text(text)
    data["cases"].append({"id": case_id, "split": split, "file": f"{split}/{case_id}.log",
                          "source": source, "cause": cause, "family": family,
                          "confirmed_by": confirmed_by})
    MANIFEST.write_text(json.dumps(data, indent=1) + "\n")
    print(split, case_id, len(data["cases"]))


if __name__ == "__main__":
    main()
