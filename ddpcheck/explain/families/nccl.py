"""NCCL system and internal errors, read from their ``NCCL WARN`` lines.

Line format "host:pid:tid [cudaDev] file:line NCCL WARN message" (NCCL src/debug.cc).
Shared memory: misc/shmutils.cc ("Error while creating shared memory segment", "failed to
extend ... No space left on device"; NCCL <= 2.11 include/shm.h's SYSCHECK "Call to
posix_fallocate failed : No space left on device") means /dev/shm is too small (NCCL
troubleshooting guide, "Shared memory"); an *attach* failure is not that and stays a plain
nccl-error.
"""

from __future__ import annotations

from ddpcheck.diagnoses import DEV_SHM_TOO_SMALL, DUPLICATE_DEVICE, NCCL_LIBRARY_MISMATCH
from ddpcheck.explain.codes import (
    COLLECTIVE_DESYNC,
    CUDA_OOM,
    DEV_SHM_UNWRITABLE,
    FABRIC_MANAGER_NOT_READY,
    NCCL_ERROR,
    NCCL_NET_ERROR,
    NCCL_NET_PLUGIN_UNUSABLE,
    NCCL_P2P_UNSUPPORTED,
)
from ddpcheck.explain.matching import pattern
from ddpcheck.node.gpustate import CUDA_UNUSABLE
from ddpcheck.node.nccl import NCCL_ENV_INVALID

COLL = "ddpcheck run --nodes N --backend nccl --stages collectives"
NODE = "ddpcheck run --stages node,collectives (the node stage measures /dev/shm)"

PATTERNS = [
    # The errno NCCL's SYSCHECK prints before "Error while creating shared memory segment"
    # (include/checks.h "Call to %s failed : %s"; misc/shmutils.cc "failed to create shared
    # memory file ... error Permission denied"): /dev/shm is there but not writable.
    pattern(DEV_SHM_UNWRITABLE,
            r"NCCL WARN (?:Call to (?:shm_open|open|mkstemp) failed ?: ?|Error: failed to create "
            r"shared memory file .*)(?:Permission denied|Read-only file system)", NODE),
    pattern(DEV_SHM_TOO_SMALL,
            r"Error while creating shared memory segment|failed to extend /dev/shm\S* to|"
            r"Call to posix_fallocate failed ?: ?No space left on device|"
            r"unable to allocate shared memory|Unexpected bus error encountered in worker", NODE,
            cause="/dev/shm is too small for NCCL's shared-memory transport or the "
                  "DataLoader workers (containers default to 64 MB)"),
    # SIGBUS alone: most often /dev/shm, but a bad mmap of a file does it too (a hint)
    pattern(DEV_SHM_TOO_SMALL, r"killed by signal: Bus error", NODE, grade="hint",
            cause="a DataLoader worker died of SIGBUS, most often a /dev/shm too small for its "
                  "shared tensors (containers default to 64 MB)"),
    pattern(DUPLICATE_DEVICE,
            r"Duplicate GPU detected : rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device "
            r"(?P<dev>\w+)", "ddpcheck run --stages node,placement",
            cause="ranks {a} and {b} drive the same GPU (bus id {dev}): the device was chosen "
                  "from the global rank, or CUDA_VISIBLE_DEVICES / set_device is the same on "
                  "both"),
    pattern(CUDA_OOM, r"Cuda failure '?out of memory|"
            r"NCCL WARN.*(?:cudaMalloc|Failed to CUDA calloc).*(?:out of memory|\b2\b)",
            "ddpcheck run --stages node (GPU memory in use by other processes)",
            cause="NCCL could not allocate its GPU buffers: the GPU was already full (the "
                  "model, the caching allocator, or another process)"),
    pattern(NCCL_LIBRARY_MISMATCH, r"undefined symbol: nccl\w+|libnccl\S*: version `NCCL_",
            "ddpcheck run --stages node (reports the libnccl each rank loads)"),
    pattern(NCCL_P2P_UNSUPPORTED,
            r"peer access is not supported between these two devices", COLL),
    # A plugin that exists but cannot load (a missing symbol version, an undefined symbol);
    # "dlerror=libnccl-net.so: cannot open shared object file" is no plugin at all: benign.
    pattern(NCCL_NET_PLUGIN_UNUSABLE,
            r"NET/Plugin ?: ?dlerror=.*(?:version `|undefined symbol|required by)|"
            r"Failed to find ncclNetPlugin symbol|NET/OFI Could not find any optimal provider",
            COLL),
    # A work completion with IBV_WC_RETRY_EXC_ERR (12) or IBV_WC_WR_FLUSH_ERR (5): the remote
    # QP stopped answering, a link down or a peer process that died (killed, crashed, or
    # aborted by its watchdog): a hint, which another cause in the log outranks.
    pattern(NCCL_NET_ERROR,
            r"NCCL WARN NET/IB ?: ?Got completion (?:from peer \S+ )?with error (?:12|5)\b",
            "ddpcheck run --nodes N --stages collectives,bandwidth", grade="hint"),
    pattern(NCCL_NET_ERROR,
            r"NCCL WARN (?:Call to ibv_\w+ failed|NET/IB|NET/OFI|.*\bibv_|.*\bfi_\w+ failed)|"
            r"NET/Plugin.*(?:failed|\berror\b)",
            "ddpcheck run --nodes N --stages collectives,bandwidth"),
    # transport/nvls.cc creates NVLink SHARP multicast objects (cuMulticastCreate, cuMemMap):
    # a CUDA failure there is the NVSwitch fabric not set up for multicast (Fabric Manager
    # missing, of another version, or restarted); NCCL_NVLS_ENABLE=0 avoids NVLS.
    pattern(FABRIC_MANAGER_NOT_READY, r"transport/nvls\.cc:\d+ NCCL WARN Cuda failure", COLL,
            cause="NCCL's NVLS transport could not create NVLink SHARP multicast objects: the "
                  "NVSwitch fabric is not set up (NVIDIA Fabric Manager not running, not of "
                  "the driver's version, or restarted under live processes)",
            fix="install and start nvidia-fabricmanager of exactly the driver's version "
                "(systemctl enable --now nvidia-fabricmanager); until then NCCL_NVLS_ENABLE=0"),
    # cudaErrorInsufficientDriver, as NCCL's cudawrap.cc and torch print it
    pattern(CUDA_UNUSABLE, r"CUDA driver version is insufficient for CUDA runtime version",
            "ddpcheck run --stages node",
            cause="the NVIDIA driver is older than the CUDA runtime this torch / NCCL was "
                  "built with",
            fix="upgrade the NVIDIA driver, or install a torch build for an older CUDA "
                "(pip install torch --index-url https://download.pytorch.org/whl/cuXYZ)"),
    # NCCL's own cross-rank check (init.cc): ranks called different collectives
    pattern(COLLECTIVE_DESYNC, r"NCCL WARN Mismatched collective detected", COLL,
            cause="NCCL saw ranks call different collectives (or the same with another "
                  "count, type or root) at the same point: a rank skipped, added or "
                  "reordered one"),
    # enqueue.cc: no algorithm fits the call; NCCL names the variable when the user set one
    # (and then returns ncclInvalidUsage): "... NCCL_ALGO was set to NVLS."
    pattern(NCCL_ENV_INVALID,
            r"no algorithm/protocol available for function \w+ with datatype \w+\..*"
            r"(?P<var>NCCL_(?:ALGO|PROTO)) was set to (?P<val>[^.\s]+)", COLL,
            cause="{var}={val} leaves NCCL no algorithm or protocol for this collective and "
                  "data type (set by the job, or leaked from an earlier step's environment)",
            fix="unset {var} (NCCL picks per call), or set it to a list that includes a "
                "fallback, e.g. NCCL_ALGO=Ring,Tree"),
    pattern(NCCL_ERROR, r"NCCL WARN (?!.*Cuda failure 217)", COLL),
    # stop24 dev: transport/nvls.cc (NCCL >= 2.18) when cuMulticastBindMem fails: "Failed to
    # bind NVLink SHARP (NVLS) Multicast memory of size N ... : CUDA error 401 '...'.\nThis is
    # usually caused by a system or configuration error in the Fabric Manager or NVSwitches."
    # (torch repeats it after "Last error:"; a WARN line is NCCL_ERROR above, its second line
    # is not).
    pattern(FABRIC_MANAGER_NOT_READY,
            r"Failed to bind NVLink SHARP \(NVLS\) Multicast memory|"
            r"usually caused by a system or configuration error in the Fabric Manager or "
            r"NVSwitches", COLL,
            cause="NCCL could not bind NVLink SHARP (NVLS) multicast memory: the NVSwitch "
                  "fabric is not set up for it (Fabric Manager not running, of another "
                  "version than the driver, or the NVSwitches in a bad state)",
            fix="check systemctl status nvidia-fabricmanager (same version as the driver) and "
                "nvidia-smi -q | grep -A2 Fabric on the node; until fixed, NCCL_NVLS_ENABLE=0 "
                "avoids NVLS"),
    # stop24 dev: NCCL's error back trace, printed at INFO level only when a call fails
    # (include/checks.h NCCLCHECK / SYSCHECKGOTO: INFO(NCCL_ALL, "%s:%d -> %d", __FILE__,
    # __LINE__, res), res a ncclResult_t: 2 system, 3 internal, 6 remote error; 7 is
    # ncclInProgress). Healthy jobs print such traces from misc/socket.cc and the proxy at
    # teardown, when peers close first; one from bootstrap.cc is the communicator's setup
    # failing, a failure even with no WARN line.
    pattern(NCCL_ERROR, r"NCCL INFO bootstrap\.cc:\d+ -> (?:[1-689]|\d{2,})\s*$", COLL,
            cause="NCCL's bootstrap (the TCP exchange that builds the communicator) failed: "
                  "its INFO back trace 'bootstrap.cc:line -> code' shows where, without the "
                  "WARN line that would name why"),
]
