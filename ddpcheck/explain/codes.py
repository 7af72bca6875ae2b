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
    "hides some), the device was chosen from the global RANK instead of LOCAL_RANK, or srun "
    "--gpus-per-task / --gpu-bind gave each task only its own GPU (numbered 0 inside the task)",
    "use torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) and --nproc-per-node <= "
    "GPUs per node; under srun per-task binding use set_device(0) (or LOCAL_RANK % "
    "torch.cuda.device_count()); ddpcheck run --stages node,placement checks these")
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
PG_INIT_TWICE = register(
    "process-group-init-twice", "init_process_group was called when the default process "
    "group already existed",
    "the script (or a library it calls: a trainer, a launcher helper, a model's setup) calls "
    "init_process_group a second time without checking torch.distributed.is_initialized()",
    "initialise once: guard the call with if not torch.distributed.is_initialized(), or let "
    "only one layer (yours or the framework's) create the group")
DDP_WRAPPED_ATTRIBUTE = register(
    "ddp-wrapped-attribute", "the script read a model attribute through the DDP wrapper",
    "code written for one process reads model.config, model.dtype, a submodule or its own "
    "attribute on the DistributedDataParallel wrapper (accelerator.prepare or "
    "DistributedDataParallel(model) wraps the model only when more than one process runs, so "
    "single-process runs work)",
    "read it from the wrapped model: model.module.NAME, or accelerator.unwrap_model(model).NAME "
    "(keep calling the wrapper itself for the forward pass, so gradients are synchronised)")
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
ROOT_CAUSE_AMBIGUOUS = register(
    "root-cause-ambiguous", "the log shows several possible root causes and not which came "
    "first",
    "two failures that each name a cause were printed by different files or ranks without "
    "timestamps that order them: either may be the root and the other its consequence",
    "rerun with timestamps on every rank's lines (torchrun --log-dir, or a logging format "
    "with %(asctime)s) and look at each candidate's lines; fix the candidate that failed "
    "first")
# --- codes the explain corpus needed (tests/data/explain/NEW_CODES-*.md) -----------------
HOST_OOM = register(
    "host-out-of-memory", "a rank or DataLoader worker was killed by the kernel's OOM killer",
    "the node's RAM (or the Slurm/cgroup memory limit) ran out: every rank loading the whole "
    "model or dataset on the CPU, too many DataLoader workers, a host memory leak (SIGKILL, "
    "exitcode -9, 'Killed', oom-kill; a scheduler or user kill looks the same, its own line "
    "says CANCELLED)",
    "lower host RAM per rank (fewer DataLoader workers, load weights with mmap / "
    "low_cpu_mem_usage=True, shard the dataset), raise --mem / the container's memory limit, "
    "or run fewer ranks per node; dmesg / sacct show the OOM kill")
DEV_SHM_UNWRITABLE = register(
    "dev-shm-unwritable", "NCCL or a DataLoader cannot create segments in /dev/shm",
    "/dev/shm is not writable by the job's user (wrong mode, read-only mount)",
    "make /dev/shm a world-writable tmpfs (chmod 1777 /dev/shm) or mount one into the "
    "container (docker --ipc=host or --shm-size)")
RANK_ZERO_ONLY_STEP_TIMEOUT = register(
    "rank-zero-only-step-timeout", "the other ranks waited in a collective (often a barrier) "
    "for a rank busy with work of its own until the process-group timeout",
    "one rank (usually rank 0) ran a step alone (dataset preprocessing or tokenisation, "
    "evaluation, saving a checkpoint) longer than the process-group timeout (30 min by "
    "default) while the others waited in the next collective",
    "run that step before init_process_group or on every rank (cache the preprocessed "
    "dataset first), or raise the timeout: init_process_group(timeout=timedelta(hours=2)), "
    "ddp_timeout in HF TrainingArguments, InitProcessGroupKwargs(timeout=...) in Accelerate")
# What confirms a cause that no ddpcheck run stage can see (the user's own step), by code;
# the engine gives it whichever rule found the code.
NEXT_RUN = {
    RANK_ZERO_ONLY_STEP_TIMEOUT.code:
        "time that step on its rank alone (the busy rank's last line above names it), or "
        "py-spy dump --pid <pid> on that rank while the others wait; ddpcheck run checks the "
        "cluster, not your own steps",
}
LAUNCHER_ENV_MISSING = register(
    "launcher-env-missing", "init_process_group found no RANK / WORLD_SIZE / MASTER_ADDR / "
    "MASTER_PORT in the environment",
    "the script was started with plain python instead of torchrun (or srun with a wrapper "
    "that exports the variables), so env:// has nothing to read",
    "launch with torchrun --nproc-per-node N script.py (or export RANK, WORLD_SIZE, "
    "MASTER_ADDR, MASTER_PORT and LOCAL_RANK yourself, e.g. from SLURM_PROCID)")
SLURM_WITHOUT_SRUN = register(
    "slurm-without-srun", "a multi-node Slurm batch script started the training once, not "
    "once per node",
    "the launcher ran on the first node only (no srun), so the other nodes' ranks never "
    "joined and the job waited at initialisation",
    "start the launcher with srun (srun --ntasks-per-node=1 torchrun ... for torchrun, one "
    "task per GPU for scripts that read SLURM_PROCID)")
SLURM_JOB_REJECTED = register(
    "slurm-job-rejected", "sbatch / salloc refused the job at submission",
    "the request (cores, memory, GPUs per node, a constraint) exceeds what any node of the "
    "partition offers, or the gres is misspelt",
    "lower the per-node request (--ntasks-per-node, --cpus-per-task, --gres=gpu:N, --mem) or "
    "pick a partition whose nodes have it (sinfo -o '%P %c %m %G')")
HOSTNAME_UNRESOLVABLE = register(
    "hostname-unresolvable", "this node's own hostname does not resolve",
    "the hostname is in neither /etc/hosts nor DNS (common in containers and fresh VMs), "
    "so gloo / c10d cannot find an address to advertise",
    "add '<cluster-ip> <hostname>' to /etc/hosts, or set GLOO_SOCKET_IFNAME (and "
    "NCCL_SOCKET_IFNAME) to the cluster interface and MASTER_ADDR to an address")
NCCL_NO_SOCKET_INTERFACE = register(
    "nccl-no-socket-interface", "NCCL found no usable IP interface for its bootstrap",
    "the process runs in a network namespace with only loopback (a container without host "
    "networking) or an address family the host lacks",
    "run the container with --network=host (or give it a routable interface) and set "
    "NCCL_SOCKET_IFNAME to an interface that exists")
NCCL_NET_PLUGIN_UNUSABLE = register(
    "nccl-net-plugin-unusable", "NCCL's external network plugin failed to load or initialise",
    "the plugin (aws-ofi-nccl, the IB SHARP plugin) was built against another NCCL or "
    "libfabric version, so NCCL falls back to sockets or fails",
    "install the plugin build matching NCCL and libfabric (or unset NCCL_NET_PLUGIN); "
    "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET shows which plugin loads")
NCCL_WRONG_INTERFACE = register(
    "nccl-wrong-interface", "NCCL picked interfaces that cannot reach the peers",
    "NCCL_SOCKET_IFNAME is unset and NCCL chose (or spread over) docker bridges, veths, "
    "link-local or other non-routable NICs",
    "set NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) to the routable NIC, e.g. "
    "NCCL_SOCKET_IFNAME=eth0")
GPU_ECC_ERROR = register(
    "gpu-ecc-error", "a GPU reported an uncorrectable ECC (memory) error",
    "failing GPU memory, or a row-remapping event pending a GPU reset (Xid 48/63/64/94/95)",
    "drain the node, reset the GPU (nvidia-smi -r) or reboot; check nvidia-smi -q -d "
    "ECC,ROW_REMAPPER and replace the GPU if it repeats")
DDP_PARAM_READY_TWICE = register(
    "ddp-param-ready-twice", "DDP saw a parameter's gradient ready twice in one iteration",
    "reentrant activation checkpointing (checkpoint(use_reentrant=True), HF "
    "gradient_checkpointing) or a parameter reused across several forward/backward passes "
    "in one DDP step",
    "use checkpoint(..., use_reentrant=False) / gradient_checkpointing_kwargs="
    "{'use_reentrant': False}, or DistributedDataParallel(static_graph=True) when the graph "
    "does not change")
NCCL_CPU_TENSOR = register(
    "nccl-cpu-tensor", "a collective on the NCCL backend was given a CPU (or sparse) tensor",
    "the tensor or model was not moved to the rank's GPU before DDP / the collective, or the "
    "code fell back to CPU while keeping backend='nccl'",
    "move tensors to torch.cuda.current_device() first, or use gloo (or "
    "'cpu:gloo,cuda:nccl') for CPU tensors")
DDP_MODULE_DEVICE_INVALID = register(
    "ddp-module-device-invalid", "DistributedDataParallel was given a module not on the one "
    "GPU its device_ids name",
    "the model was wrapped before .to(local_rank), or loaded with device_map='auto' / model "
    "parallel so it spans several GPUs",
    "move the model to torch.device('cuda', local_rank) before wrapping; do not combine "
    "device_map sharding with DDP (device_ids=None for a multi-GPU module)")
SLURM_JOB_CANCELLED = register(
    "slurm-job-cancelled", "Slurm cancelled the job or step (time limit, preemption, scancel)",
    "the job ran past its --time limit, was preempted by a higher-priority job, or was "
    "cancelled by a user or admin; its ranks were then killed (SIGTERM, then SIGKILL), which "
    "is not a crash of their own",
    "for DUE TO TIME LIMIT raise --time or checkpoint and requeue (--signal=USR1@120 to save "
    "before the kill); for DUE TO PREEMPTION use a non-preemptible partition/QOS or requeue")
FABRIC_MANAGER_NOT_READY = register(
    "fabric-manager-not-ready", "CUDA reports the system not yet ready for CUDA work "
    "(cudaErrorSystemNotReady, error 802)",
    "on an NVSwitch system (HGX/DGX) the NVIDIA Fabric Manager is not running, is not of "
    "the driver's exact version, or was restarted under live processes: CUDA refuses work "
    "until the NVLink fabric is set up (CUDA runtime API, cudaErrorSystemNotReady: 'verify "
    "... all required driver daemons are actively running')",
    "install nvidia-fabricmanager of exactly the driver's version and systemctl enable --now "
    "nvidia-fabricmanager (after a restart, reset the GPUs: nvidia-smi -r); ddpcheck run "
    "--stages node checks the fabric state")
MEMLOCK_LIMIT_TOO_LOW = register(
    "memlock-limit-too-low", "NCCL's InfiniBand/RoCE transport could not register (pin) its "
    "buffers",
    "the locked-memory limit (ulimit -l) of the job's processes is too small: 64 KB / 8 MB "
    "defaults, or limits not carried into mpirun, srun or a container (NCCL troubleshooting: "
    "'Call to ibv_reg_mr failed' / 'Call to ibv_create_qp failed')",
    "raise the limit to unlimited: '* soft memlock unlimited' and '* hard memlock unlimited' "
    "in /etc/security/limits.conf, docker --ulimit memlock=-1, for Slurm the slurmd's "
    "LimitMEMLOCK=infinity / PropagateResourceLimits; check ulimit -l inside the job")
DISK_FULL = register(
    "disk-full", "a rank could not write: the filesystem is full or the quota is used up",
    "a directory the job writes to (checkpoints, outputs, a cache such as HF_HOME, "
    "HF_DATASETS_CACHE, TORCH_EXTENSIONS_DIR, or TMPDIR and /tmp) is on a filesystem with no "
    "space left (ENOSPC) or over the user's quota (EDQUOT)",
    "df -h and quota -s on the failing node for the path in the error; free space or point "
    "those writes at a larger volume (--output_dir, HF_HOME, TMPDIR); ddpcheck run --stages "
    "checkpoint --checkpoint-dir DIR --checkpoint-size SIZE checks a checkpoint directory "
    "before the job")
TCPSTORE_LIBUV_UNAVAILABLE = register(
    "tcpstore-libuv-unavailable", "the rendezvous store could not start: this torch build "
    "has no libuv",
    "since torch 2.4 TCPStore uses its libuv backend by default (torch/distributed/"
    "rendezvous.py: USE_LIBUV defaults to 1), and builds without libuv (the Windows wheels) "
    "refuse it, so torchrun and env:// fail before any rank connects",
    "set USE_LIBUV=0 in the job's environment (or add ?use_libuv=0 to the init_method URL); "
    "on Windows prefer WSL or Linux for multi-process jobs")
