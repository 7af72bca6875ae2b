"""The scored explain corpus (tests/data/explain) holds together: one split, fixed once.

Every manifest ``corpus-*.json`` is checked as one corpus: ids and sources unique across all
of them and the older tuned corpus (tests/data/logs/CORPUS.json), each case's split the one
its id hashes to (a held-out case that was looked at moves to dev, saying why), its log in
``<split>/<id>.log`` and not empty, its family known and its cause given with who confirmed
it. The test reads whether held-out logs exist, never what they say.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from tests.helpers.paths import DATA

CORPUS = DATA / "explain"
FAMILIES = {"network", "rendezvous", "nccl", "watchdog", "device", "ddp", "slurm", "signals",
            "launcher", "memory", "healthy", "other"}
MANIFESTS = sorted(CORPUS.glob("corpus-*.json"))
CASES = [(m.name, c) for m in MANIFESTS for c in json.loads(m.read_text())["cases"]]


def hashed_split(case_id: str) -> str:
    """The split rule, fixed at collection time (tests/data/explain/README.md)."""
    return "heldout" if int(hashlib.sha1(case_id.encode()).hexdigest(), 16) % 5 < 2 else "dev"


def same_thread(url: str) -> str:
    url = url.lower().split("#")[0].rstrip("/").replace("://www.", "://")
    return url.replace("/pull/", "/issues/")


def test_the_corpus_is_large_and_both_splits_are_used() -> None:
    splits = [c["split"] for _, c in CASES]
    assert len(CASES) >= 200
    assert splits.count("heldout") >= 0.3 * len(CASES)


def test_ids_and_threads_are_unique_across_every_manifest_and_the_old_corpus() -> None:
    ids = [c["id"] for _, c in CASES]
    assert len(ids) == len(set(ids)), "duplicate ids"
    old = json.loads((DATA / "logs" / "CORPUS.json").read_text())["logs"]
    threads = [same_thread(c["source"]) for _, c in CASES] + [
        same_thread(o["source"]) for o in old]
    dupes = sorted({t for t in threads if threads.count(t) > 1})
    assert not dupes, dupes


@pytest.mark.parametrize("manifest,case", CASES, ids=[c["id"] for _, c in CASES])
def test_each_case_is_in_its_split_with_its_log_family_cause_and_confirmation(
        manifest: str, case: dict) -> None:
    cid = case["id"]
    assert re.fullmatch(r"(gh|qa)\d*-[a-z0-9._-]+", cid, re.I), cid
    if case["split"] != hashed_split(cid):
        assert case["split"] == "dev" and case.get("moved"), \
            "only a held-out case that was looked at moves, to dev, saying why in 'moved'"
    assert case["file"] == f"{case['split']}/{cid}.log"
    log = CORPUS / case["file"]
    assert log.is_file() and log.stat().st_size > 0, f"{case['file']} missing or empty"
    assert case["family"] in FAMILIES
    assert case["cause"] and case["confirmed_by"] and case["source"].startswith("http")
