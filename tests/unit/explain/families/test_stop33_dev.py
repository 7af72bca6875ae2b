"""Producers' wordings read at stop 33, from the stop-33 batch's dev part (read after the
whole batch was scored unread): a model attribute read through the DDP wrapper, and torchft's
lighthouse port in use. Each with a near miss."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

# diffusers' train_dreambooth.py under accelerate --multi_gpu (dev gh41-diffusers-2044)
WRAPPED = [
    "Traceback (most recent call last):",
    '  File "train_dreambooth.py", line 701, in main',
    "    if unet.dtype != torch.float32:",
    '  File "/home/u/.local/lib/python3.8/site-packages/torch/nn/modules/module.py", line '
    "1269, in __getattr__",
    "    raise AttributeError(\"'{}' object has no attribute '{}'\".format(",
    "AttributeError: 'DistributedDataParallel' object has no attribute 'dtype'",
]


def test_an_attribute_read_through_the_ddp_wrapper_names_the_attribute_and_module():
    assert first_cause(*WRAPPED) == "ddp-wrapped-attribute"
    p = explain_texts([("job.log", "\n".join(WRAPPED) + "\n")]).problems[0]
    assert ".dtype" in p.cause and "model.module.dtype" in p.fix
    assert first_cause("AttributeError: 'DataParallel' object has no attribute 'config'") == \
        "ddp-wrapped-attribute"


def test_near_miss_other_attribute_errors_are_not_the_wrapper():
    # FSDP forwards unknown attributes to the module; a plain module's missing attribute is
    # the user's own bug
    for line in ("AttributeError: 'FullyShardedDataParallel' object has no attribute 'foo'",
                 "AttributeError: 'Linear' object has no attribute 'dtype'",
                 "AttributeError: module 'torch.distributed' has no attribute "
                 "'DistributedDataParallel'"):
        assert first_cause(line) != "ddp-wrapped-attribute"


def test_torchfts_lighthouse_port_in_use_is_a_rendezvous_service_port_not_master_port():
    # dev gh40-torchft-30
    assert first_cause("$ torchft_lighthouse --min_replicas 1 --join_timeout_ms 1000",
                       "RuntimeError: Address already in use (os error 98)") == \
        "endpoint-port-in-use"


def test_near_miss_the_same_line_without_the_lighthouse_is_the_master_port():
    assert first_cause("$ python train.py",
                       "RuntimeError: Address already in use (os error 98)") == \
        "master-port-in-use"


def test_cuda_initialised_before_a_fork_is_named_by_torch_accelerate_and_lightning():
    # stop-33b dev gh44-accelerate-940, gh44-xturing-194 (and torch's own check)
    for line in ("RuntimeError: CUDA has been initialized before the `notebook_launcher` could "
                 "create a forked subprocess. This likely stems from an outside import",
                 "RuntimeError: Lightning can't create new processes if CUDA is already "
                 "initialized. Did you manually call `torch.cuda.*` functions",
                 "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA "
                 "with multiprocessing, you must use the 'spawn' start method"):
        assert first_cause(line) == "cuda-initialized-before-fork"


def test_near_miss_a_cuda_initialisation_error_is_not_a_fork():
    assert first_cause("RuntimeError: CUDA error: initialization error") != \
        "cuda-initialized-before-fork"


def test_destroy_process_group_without_a_group_is_process_group_not_initialized():
    # stop-33c dev gh47-torchtitan-655 (torch 2.x's bare assert) and torch 2.13's message
    assert first_cause('  File "/t/distributed_c10d.py", line 2014, in destroy_process_group',
                       "    assert pg is not None", "AssertionError") == \
        "process-group-not-initialized"
    assert first_cause("AssertionError: Process group cannot be None") == \
        "process-group-not-initialized"


def test_near_miss_another_assertion_is_not_a_missing_group():
    assert first_cause("    assert model is not None", "AssertionError") != \
        "process-group-not-initialized"


def test_a_launcher_agent_built_for_another_torch_is_launch_failed():
    # stop-33c dev gh48-deepspeed-4985
    assert first_cause("rogpt1: TypeError: DSElasticAgent._set_master_addr_port() takes 3 "
                       "positional arguments but 4 were given") == "launch-failed"


def test_near_miss_a_type_error_of_the_users_own_function_is_not_the_launcher():
    assert first_cause("TypeError: forward() takes 2 positional arguments but 3 were given") \
        != "launch-failed"


def test_a_tensor_off_the_bound_device_is_a_duplicate_device_hint():
    # stop-33b dev gh45-pytorch-146767 (torch 2.3+: init_process_group(device_id=...))
    assert first_cause("torch.distributed.DistBackendError: Attempt to perform collective on "
                       "tensor not on device passed to init_process_group") == \
        "duplicate-device"


def test_near_miss_a_cpu_tensor_in_an_nccl_collective_is_not_this_rule():
    assert first_cause("RuntimeError: Tensors must be CUDA and dense") != "duplicate-device"
