"""Problem codes only a failed job's log shows (``ddpcheck explain``), in the shared catalogue.

Runs wherever the catalogue is loaded. The other codes explain reports (endpoint-unreachable,
socket-ifname-invalid, dev-shm-too-small, duplicate-device, rank-killed...) are the ones
``ddpcheck run`` raises, so a log and a run name one cause with one code.
"""

from __future__ import annotations

from ddpcheck.diagnoses import register

RENDEZVOUS_TIMEOUT = register(
    "rendezvous-timeout", "torchrun's rendezvous timed out before every node joined",
    "a node was not started (or started late), a firewall drops the rendezvous port, or the "
    "nodes disagree on --rdzv-id / --nnodes (or one used --standalone): the log alone does "
    "not decide between these",
    "run ddpcheck run --nodes N --stages rendezvous on every node; start all nodes with the "
    "same --rdzv-id, --nnodes and --rdzv-endpoint")
COLLECTIVE_TIMEOUT = register(
    "collective-timeout", "a collective did not complete before the process-group timeout",
    "a rank stopped, crashed or is far slower (check for an earlier error on another rank), "
    "or the link between nodes stalls large transfers",
    "fix the first error of another rank if there is one; otherwise check the network with "
    "ddpcheck run --stages collectives,bandwidth and raise timeout= in init_process_group "
    "only for slow steps (e.g. checkpointing)")
COLLECTIVE_DESYNC = register(
    "collective-desync", "ranks were waiting in different collectives when the watchdog fired",
    "the ranks do not call the same collectives in the same order (a rank-dependent branch, "
    "uneven data, rank 0 doing extra work such as evaluation or logging)",
    "make every rank call the same collectives in the same order; set "
    "TORCH_NCCL_DESYNC_DEBUG=1 (or TORCH_DISTRIBUTED_DEBUG=DETAIL) to name the mismatch")
COLLECTIVE_SIZE_MISMATCH = register(
    "collective-size-mismatch", "ranks called the same collective with different sizes "
    "or dtypes",
    "the tensors differ per rank (uneven last batch, a rank-dependent shape, a parameter "
    "frozen or added on some ranks only, mixed precision set up on some ranks)",
    "give the collective the same shape and dtype on every rank (pad the last batch or use "
    "drop_last=True in the DistributedSampler/DataLoader); TORCH_DISTRIBUTED_DEBUG=DETAIL "
    "checks shapes at every call")
RANK_NEVER_JOINED = register(
    "rank-never-joined", "ranks never joined a collective the others were waiting in",
    "those ranks were elsewhere: still in a long step of their own (evaluation, a dataset "
    "scan, saving a checkpoint on one rank), stuck, or dead (crashed, OOM-killed) before "
    "they reached it",
    "look at what the named ranks did instead (their stack: py-spy dump --pid PID, their "
    "log's last lines); make a one-rank step shorter than the process-group timeout or run "
    "it on every rank, and raise timeout= in init_process_group only for known-slow steps")
NCCL_NET_ERROR = register(
    "nccl-net-error", "NCCL's network transport (InfiniBand/RoCE/EFA plugin) failed",
    "an IB/RoCE port is down or misconfigured (GID index, subnet), or the net plugin does "
    "not match the fabric",
    "check ibstat / ibv_devinfo on the named host; rerun with NCCL_IB_DISABLE=1 to confirm "
    "the sockets path works; ddpcheck run --stages collectives,bandwidth on the same nodes")
NCCL_P2P_UNSUPPORTED = register(
    "nccl-p2p-unsupported", "GPU peer-to-peer access is not supported between the devices",
    "the GPUs cannot map each other's memory (consumer GPUs, PCIe ACS or IOMMU settings, "
    "a VM without P2P)",
    "set NCCL_P2P_DISABLE=1 (and NCCL_CUMEM_HOST_ENABLE=0 on NCCL >= 2.23); on bare metal "
    "disable PCIe ACS / IOMMU for the GPUs")
NCCL_ERROR = register(
    "nccl-error", "NCCL reported an error that ddpcheck does not classify further",
    "the NCCL WARN line names it; common ones are a version regression, a container missing "
    "/dev/shm or IPC namespaces, or a transport failure",
    "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET; try another NCCL version; "
    "ddpcheck run --stages collectives on the same nodes")
INVALID_DEVICE_ORDINAL = register(
    "invalid-device-ordinal", "a rank selected a GPU index that does not exist on its node",
    "more ranks per node than visible GPUs (--nproc-per-node > GPUs, or CUDA_VISIBLE_DEVICES "
    "hides some), or the device was chosen from the global RANK instead of LOCAL_RANK",
    "use torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) and --nproc-per-node <= "
    "GPUs per node; ddpcheck run --stages node,placement checks both")
CUDA_OOM = register(
    "cuda-out-of-memory", "a rank ran out of GPU memory",
    "the batch, model or activations do not fit the GPU, or another process holds memory "
    "on the same GPU",
    "lower the per-GPU batch size, use activation checkpointing / mixed precision, or "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation; check "
    "nvidia-smi for other processes on that GPU")
DDP_UNUSED_PARAMETERS = register(
    "ddp-unused-parameters", "DDP waited for gradients of parameters that took no part in the loss",
    "the model has parameters (or branches) not used in forward on some steps",
    "pass find_unused_parameters=True to DistributedDataParallel, or make every parameter "
    "take part in the loss (TORCH_DISTRIBUTED_DEBUG=DETAIL names them)")
DDP_MODEL_MISMATCH = register(
    "ddp-model-mismatch", "ranks built different models when DDP was constructed",
    "a rank-dependent branch builds or freezes the model differently (e.g. LoRA/PEFT set up "
    "on one rank, requires_grad differs), or the processes run different code",
    "build the same model with the same trainable parameters on every rank before DDP")
PG_NOT_INITIALIZED = register(
    "process-group-not-initialized", "torch.distributed was used before init_process_group",
    "the script was run with plain python (no torchrun) or a distributed-only layer "
    "(SyncBatchNorm, DistributedSampler) runs in a single process",
    "launch with torchrun --nproc-per-node N, or call init_process_group first; for one "
    "process use BatchNorm instead of SyncBatchNorm")
SLURM_STEP_REJECTED = register(
    "slurm-step-rejected", "Slurm refused to start the job step (srun)",
    "srun asked for nodes, tasks or GPUs the allocation does not have (--nodelist outside "
    "the job, --ntasks/--gres larger than allocated)",
    "make srun's --nodes/--ntasks/--gres fit the allocation (one torchrun per node: srun "
    "--ntasks-per-node=1); ddpcheck run --nodes N checks the layout")
LOCAL_RANK_ARG_UNREAD = register(
    "local-rank-arg-unread", "the script does not accept the --local-rank argument its "
    "launcher passes",
    "python -m torch.distributed.launch (without --use-env) appends --local-rank=N to the "
    "script's arguments; since torch 2.0 it is spelled with a dash, so a parser that only "
    "declares --local_rank (or none) stops with 'unrecognized arguments'",
    "read LOCAL_RANK from the environment and launch with torchrun (or --use-env), or "
    "declare both spellings: parser.add_argument('--local-rank', '--local_rank', type=int)")
UNEXPLAINED = register(
    "unexplained", "the log shows a failure that ddpcheck does not recognise",
    "unknown: the first error lines are quoted",
    "run ddpcheck run --nodes N on the same nodes to test the cluster itself; report the "
    "log to ddpcheck if it is a distributed failure")
