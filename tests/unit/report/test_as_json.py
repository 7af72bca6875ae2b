"""Tests for ddpcheck.report.as_json: the JSON report mirrors the text one."""

from __future__ import annotations

import json

from ddpcheck.report.as_json import to_json
from ddpcheck.report.build import build_report
from tests.unit.report.events import STAGES, all_pass, failing_report


# --- JSON --------------------------------------------------------------------------------------
def test_to_json_mirrors_the_report_and_is_serialisable():
    report = failing_report()
    data = json.loads(json.dumps(to_json(report, {"config": {"nodes": 2}})))
    assert data["ready"] is False and data["exit_code"] == 1
    assert data["verdict"].startswith("NOT READY")
    assert [(s["name"], s["status"]) for s in data["stages"]] == [
        ("node", "FAIL"), ("rendezvous", "FAIL"), ("collectives", "BLOCKED"),
        ("bandwidth", "BLOCKED")]
    assert data["stages"][2]["blocked_by"] == "node"
    first = data["problems"][0]
    assert {"code", "hosts", "ranks", "observed", "cause", "fix"} <= set(first)
    assert (first["code"], first["ranks"], first["hosts"]) == ("rank-killed", [3], ["host1"])
    assert data["hosts"] == {"0": "host0", "1": "host0", "2": "host1", "3": "host1"}
    assert data["measurements"] == {} and data["config"] == {"nodes": 2}
    assert data["world_size"] == 4


def test_to_json_of_a_ready_report():
    data = to_json(build_report({0: all_pass(0)}, STAGES, [], 0))
    assert data["ready"] is True and data["exit_code"] == 0 and data["problems"] == []
    assert data["stages"][0]["ranks"] == {"0": "PASS"}
