"""DistributedDataParallel usage errors (torch/nn/parallel/distributed.py, reducer.cpp)."""

from __future__ import annotations

from ddpcheck.explain.codes import (
    DDP_MODEL_MISMATCH,
    DDP_MODULE_DEVICE_INVALID,
    DDP_PARAM_READY_TWICE,
    DDP_UNUSED_PARAMETERS,
    DDP_WRAPPED_ATTRIBUTE,
    NCCL_CPU_TENSOR,
    PG_INIT_TWICE,
    PG_NOT_INITIALIZED,
)
from ddpcheck.explain.matching import pattern

DDP = "ddpcheck run --stages ddp (proves DDP itself works on these nodes)"

PATTERNS = [
    pattern(DDP_UNUSED_PARAMETERS,
            r"Expected to have finished reduction in the prior iteration|"
            r"(?:Parameter indices|Parameters) which did not receive grad for rank|"
            # the same message wrapped onto its next line (reducer.cpp), and Lightning's own
            # ("It looks like your LightningModule has parameters that were not used in
            # producing the loss returned by training_step", lightning/pytorch/strategies)
            r"has parameters that were not used in producing (?:the )?loss", DDP),
    pattern(DDP_PARAM_READY_TWICE,
            r"Expected to mark a variable ready only once|marked as ready twice|"
            r"has been marked as ready twice", DDP),
    # torch/nn/parallel/distributed.py __init__'s device checks, all versions since 1.8
    pattern(DDP_MODULE_DEVICE_INVALID,
            r"device_ids and output_device arguments only work with single-device|"
            r"input module must be on the same type of devices, but input module parameters "
            r"locate in|device_ids can only be None or contain a single element", DDP),
    pattern(NCCL_CPU_TENSOR,
            r"Tensors must be CUDA and dense|No backend type associated with device type cpu",
            DDP),
    # A count of 0 says one of two things: the model really has no (trainable) parameters on
    # that rank (PEFT/LoRA set up on one rank only: flow_grpo#245), or the all-gather of the
    # counts delivered zeros (an NCCL transport or network setting): a symptom.
    pattern(DDP_MODEL_MISMATCH,
            r"DDP expects same model across all ranks, but Rank (?P<a>\d+) has (?P<na>\d+) "
            r"params, while rank (?P<b>\d+) has inconsistent 0 params", DDP, grade="symptom",
            cause="rank {b} reported 0 parameters against rank {a}'s {na}: either its model has "
                  "no trainable parameters (PEFT/LoRA or freezing set up on one rank only), or "
                  "DDP's first collective delivered zeros (a broken NCCL transport: P2P, shared "
                  "memory or network settings); the line does not say which"),
    pattern(DDP_MODEL_MISMATCH,
            r"DDP expects same model across all ranks, but Rank (?P<a>\d+) has (?P<na>\d+) "
            r"params, while rank (?P<b>\d+) has inconsistent (?P<nb>\d+) params|"
            r"appears not to match (?:sizes|strides) of the same param in process 0", DDP,
            cause="rank {a} built a model with {na} parameters, rank {b} with {nb}: the model "
                  "is built or frozen differently per rank (a rank-dependent branch, PEFT/LoRA "
                  "set up on one rank only)"),
    # distributed_c10d.py: torch >= 1.13 "Default process group has not been initialized,
    # please make sure to call init_process_group.", older "Default process group is not
    # initialized"
    pattern(PG_NOT_INITIALIZED,
            r"Default process group (?:has not been|is not) initialized", DDP),
    # destroy_process_group / abort_process_group with no default group (never initialised,
    # or destroyed already): torch 2.4+ "AssertionError: Process group cannot be None", older
    # releases' bare "assert pg is not None" under that frame (stop-33c dev
    # gh47-torchtitan-655: a script's destroy_process_group() after a single-process run)
    pattern(PG_NOT_INITIALIZED,
            r"AssertionError: Process group cannot be None|^\s*assert pg is not None\s*$", DDP,
            cause="destroy_process_group() (or abort) ran with no default process group: "
                  "init_process_group was never called in this process (a single-process "
                  "run), or the group was destroyed already",
            fix="call destroy_process_group() only if torch.distributed.is_initialized(), "
                "once, at the end"),
    # distributed_c10d.py init_process_group: ValueError (torch 2.x), RuntimeError (1.x)
    # "trying to initialize the default process group twice!" (stop-31 dev
    # gh30-megatron-lm-521; the real run runs/s30b-init-twice)
    pattern(PG_INIT_TWICE, r"trying to initialize the default process group twice", DDP),
    # nn.Module.__getattr__ on the wrapper: "AttributeError: 'DistributedDataParallel' object
    # has no attribute 'config'" (stop-33 dev gh41-diffusers-2044, -3651, -6278,
    # gh41-imagen-pytorch-209: diffusers' and imagen's training scripts under accelerate
    # --multi_gpu). DataParallel wraps the same way; FSDP and DeepSpeed's engine forward
    # unknown attributes to the module, so they never say it.
    pattern(DDP_WRAPPED_ATTRIBUTE,
            r"AttributeError: '(?P<wrapper>DistributedDataParallel|DataParallel)' object has "
            r"no attribute '(?P<attr>\w+)'", DDP,
            cause="the script read .{attr} on the {wrapper} wrapper, which has no such "
                  "attribute: the model is wrapped only when more than one process runs, so "
                  "code written for one process breaks here",
            fix="read it from the wrapped model: model.module.{attr}, or "
                "accelerator.unwrap_model(model).{attr} (keep calling the wrapper itself for "
                "the forward pass)"),
]
