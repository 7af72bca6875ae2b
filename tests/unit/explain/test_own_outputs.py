"""ddpcheck run's own failure outputs fed back into explain give the same codes.

Recorded with: GLOO_SOCKET_IFNAME=eth9 ddpcheck run --nproc-per-node 2 --json ifname-eth9.json
(> ifname-eth9.txt), and GLOO_SOCKET_IFNAME=eth9 torchrun --nproc-per-node 2 --tee 3 on a
script calling init_process_group("gloo") (torchrun-gloo-ifname-eth9.log).
"""

from __future__ import annotations

import json

from ddpcheck.explain import explain_texts
from tests.helpers.paths import DATA

RUN = DATA / "logs" / "ddpcheck-run"


def _codes(*names: str) -> list[str]:
    e = explain_texts([(n, (RUN / n).read_text()) for n in names])
    return [p.code for p in e.problems if not p.consequence_of]


def test_report_json_and_text_and_torchrun_log_give_the_run_codes():
    run_codes = [p["code"] for p in json.loads((RUN / "ifname-eth9.json").read_text())["problems"]
                 if not p.get("consequence_of")]
    assert run_codes == ["socket-ifname-invalid"]
    assert _codes("ifname-eth9.json") == run_codes
    assert _codes("ifname-eth9.txt") == run_codes
    assert _codes("torchrun-gloo-ifname-eth9.log") == run_codes
