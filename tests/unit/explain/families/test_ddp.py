"""DistributedDataParallel's own checks (torch/nn/parallel/distributed.py, reducer.cpp)."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause


def test_ddp_device_checks_of_other_wordings_are_module_device_invalid():
    # torch/nn/parallel/distributed.py __init__
    for line in ("RuntimeError: DistributedDataParallel's input module must be on the same "
                 "type of devices, but input module parameters locate in {'cpu', 'cuda'}.",
                 "AssertionError: device_ids can only be None or contain a single element."):
        assert first_cause(line) == "ddp-module-device-invalid", line


def test_a_single_device_module_message_without_the_check_is_not_matched():
    assert first_cause("INFO: DistributedDataParallel wraps a single-device module on cuda:0") \
        == "none"
