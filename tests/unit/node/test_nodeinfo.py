"""Tests for ddpcheck.node.nodeinfo: the facts ``ddpcheck env`` prints, fast and without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata

import pytest

from ddpcheck.node import nodeinfo
from tests.helpers.paths import ROOT


@pytest.fixture(scope="module")
def summary() -> dict[str, object]:
    return nodeinfo.node_summary()


def test_node_summary_is_json_serialisable(summary: dict[str, object]) -> None:
    assert json.loads(json.dumps(summary)) == summary


def test_node_summary_has_the_expected_facts(summary: dict[str, object]) -> None:
    assert set(summary) == {"hostname_resolves_to", "arch", "cpus", "torch", "nvidia_nccl",
                            "gpus", "interfaces", "dev_shm_free_bytes"}
    assert summary["cpus"] == os.cpu_count()


def test_torch_version_comes_from_package_metadata(summary: dict[str, object]) -> None:
    assert summary["torch"] == metadata.version("torch")


def test_interfaces_include_loopback(summary: dict[str, object]) -> None:
    lo = summary["interfaces"]["lo"]  # type: ignore[index]
    assert lo["up"] is True
    assert "127.0.0.1/8" in lo["ipv4"]


def test_gpus_are_none_without_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodeinfo.gpu, "list_gpus", lambda *a, **k: None)
    assert nodeinfo.node_summary()["gpus"] is None


def test_gpus_are_listed_by_index_name_and_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    found = [nodeinfo.gpu.GpuInfo(0, "NVIDIA H100 80GB HBM3", "GPU-0f0e", bus_id="0:1b:0.0")]
    monkeypatch.setattr(nodeinfo.gpu, "list_gpus", lambda *a, **k: found)
    assert nodeinfo.node_summary()["gpus"] == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0f0e"}]


def test_missing_packages_have_no_version() -> None:
    assert nodeinfo._version("ddpcheck-no-such-package") is None


def test_importing_and_running_nodeinfo_does_not_import_torch() -> None:
    code = ("import sys, ddpcheck.node.nodeinfo as n; n.node_summary(); "
            "assert 'torch' not in sys.modules, 'torch was imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)
