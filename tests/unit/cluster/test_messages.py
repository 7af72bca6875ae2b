"""The launchers' messages: typed and versioned on the wire, read leniently, never confused."""

from __future__ import annotations

import json

import pytest

from ddpcheck.cluster import messages
from ddpcheck.cluster.board import CheckinDecision
from ddpcheck.cluster.checkin import NodeCard
from ddpcheck.cluster.ending import Outcome
from ddpcheck.diagnoses import BAD_SOCKET_IFNAME, RANK_KILLED

PROBLEM = BAD_SOCKET_IFNAME.problem("GLOO_SOCKET_IFNAME=eth9", hosts=["b"], stage="preflight")


def test_every_message_says_its_kind_and_version_and_round_trips() -> None:
    sent = [NodeCard("a", 2, "job", 4, 1, problems=(PROBLEM,)),
            CheckinDecision([PROBLEM], [("a", "10.0.0.1", 4000)], "a"),
            Outcome("b", False, (RANK_KILLED.problem("rank 3 killed", ranks=[3]),))]
    for message in sent:
        text = message.to_json()
        data = json.loads(text)
        assert (data["message"], data["version"]) == (message.KIND, messages.VERSION)
        assert type(message).from_json(text.encode()) == message


def test_a_message_without_kind_or_version_of_an_older_node_still_reads() -> None:
    old = json.dumps({"host": "b", "ready": False, "problems": [PROBLEM.to_dict()]})
    assert Outcome.from_json(old) == Outcome("b", False, (PROBLEM,))
    old = json.dumps({"problems": [], "nodes": [["a", "10.0.0.1", 4000]], "host": "a"})
    assert CheckinDecision.from_json(old).nodes == [("a", "10.0.0.1", 4000)]


def test_a_message_of_another_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="run-outcome"):
        Outcome.from_json(CheckinDecision([], [], "a").to_json())
