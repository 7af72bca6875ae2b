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


def test_unused_parameters_in_lightnings_words_and_a_wrapped_line():
    assert first_cause("RuntimeError: It looks like your LightningModule has parameters that "
                       "were not used in producing the loss returned by training_step. If this "
                       "is intentional, you must enable the detection of unused parameters in "
                       "DDP") == "ddp-unused-parameters"
    assert first_cause("[rank0]: This error indicates that your module has parameters that were "
                       "not used in producing loss. You can enable unused parameter detection") \
        == "ddp-unused-parameters"


def test_older_default_process_group_wording():
    # torch <= 1.12 distributed_c10d._check_default_pg
    assert first_cause("RuntimeError: Default process group is not initialized") == \
        "process-group-not-initialized"
    assert first_cause("INFO: default process group initialized with backend nccl") == "none"
