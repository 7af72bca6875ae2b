"""NCCL system and internal errors, read from their ``NCCL WARN`` lines.

Line format "host:pid:tid [cudaDev] file:line NCCL WARN message" (NCCL src/debug.cc), and the
same text after torch's "Last error:" (``ncclresult.WARN_START``). Creating its shared-memory
segment is ``ncclshm``'s; an *attach* failure is not a full /dev/shm and stays a plain
nccl-error here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.diagnoses import (
    BAD_SOCKET_IFNAME,
    DUPLICATE_DEVICE,
    NCCL_LIBRARY_MISMATCH,
)
from ddpcheck.explain.causality import HINT, Explained
from ddpcheck.explain.codes import (
    COLLECTIVE_DESYNC,
    COLLECTIVE_SIZE_MISMATCH,
    CUDA_OOM,
    FABRIC_MANAGER_NOT_READY,
    MEMLOCK_LIMIT_TOO_LOW,
    NCCL_ERROR,
    NCCL_NET_ERROR,
    NCCL_NET_PLUGIN_UNUSABLE,
    NCCL_NO_SOCKET_INTERFACE,
    NCCL_P2P_UNSUPPORTED,
)
from ddpcheck.explain.failurewords import BENIGN_IB, SKIPPED_HCA
from ddpcheck.explain.families.ncclresult import TAIL_START, WARN_START
from ddpcheck.explain.families.ncclshm import NODE
from ddpcheck.explain.matching import pattern
from ddpcheck.explain.reader import Record
from ddpcheck.node.gpustate import CUDA_UNUSABLE
from ddpcheck.node.nccl import NCCL_ENV_INVALID
from ddpcheck.node.ncclstack import NCCL_STACK_MISMATCH

COLL = "ddpcheck run --nodes N --backend nccl --stages collectives"
# CUDA runtime errors NCCL reports as "Cuda failure 'X'" (include/checks.h CUDACHECK) whose
# cause the device family names (device.py): left to it rather than to a generic NCCL error.
CUDA_RUNTIME_CAUSES = (r"invalid device ordinal|no CUDA-capable device|CUDA-capable device\(s\) "
                       r"is/are busy|all CUDA-capable devices are busy|uncorrectable ECC|"
                       r"system not yet initialized|no kernel image is available|"
                       r"system has unsupported display driver|CUDA driver is a stub library|"
                       r"(?:the provided )?PTX was compiled with an unsupported toolchain|"
                       r"uncorrectable NVLink error|"
                       r"API call is not supported in the installed CUDA driver|"
                       r"named symbol not found")

PATTERNS = [
    pattern(DUPLICATE_DEVICE,
            # init.cc's WARN; its words after the header as wrappers re-print them ("Error:
            # rank 27 and rank 19 both on CUDA device 53000")
            r"(?:Duplicate GPU detected : )?rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA "
            r"device (?P<dev>\w+)", "ddpcheck run --stages node,placement",
            cause="ranks {a} and {b} drive the same GPU (bus id {dev}): the device was chosen "
                  "from the global rank, or CUDA_VISIBLE_DEVICES / set_device is the same on "
                  "both"),
    # NCCL include/checks.h CUDACHECK: <= 2.18 "Cuda failure 'out of memory'", later "Cuda
    # failure 2 'out of memory'" (the error number first)
    pattern(CUDA_OOM, r"Cuda failure (?:\d+ )?'?out of memory|"
            r"NCCL WARN.*(?:cudaMalloc|Failed to CUDA calloc).*(?:out of memory|\b2\b)",
            "ddpcheck run --stages node (GPU memory in use by other processes)",
            cause="NCCL could not allocate its GPU buffers: the GPU was already full (the "
                  "model, the caching allocator, or another process)"),
    pattern(NCCL_LIBRARY_MISMATCH, r"undefined symbol: nccl\w+|libnccl\S*: version `NCCL_",
            "ddpcheck run --stages node (reports the libnccl each rank loads)"),
    # init.cc ncclCommInitRankConfig: NCCL 2.14 accepts a config's blocking of 0 or 1 only
    # ("Invalid config blocking attribute value %d"); later headers' NCCL_CONFIG_INITIALIZER
    # leave it NCCL_CONFIG_UNDEF_INT (INT_MIN, -2147483648), which later libraries read as
    # "use the default". That value reaching the check is a caller (torch) compiled against a
    # newer nccl.h than the libnccl it loaded: a second, older libnccl first on the library path.
    pattern(NCCL_LIBRARY_MISMATCH, r"Invalid config blocking attribute value -2147483648\b",
            "ddpcheck run --stages node (reports the libnccl each rank loads)",
            cause="torch was built against a newer NCCL than the libnccl it loaded: its config "
                  "initialiser leaves 'blocking' undefined (-2147483648), which an older "
                  "libnccl (2.14 and before accept 0 or 1 only) rejects; that older libnccl "
                  "(a system or conda copy, a second nvidia-nccl package) comes first on the "
                  "library path",
            fix="load the libnccl torch was built with: remove the older copy (pip list | "
                "grep nccl; conda list nccl) or put site-packages/nvidia/nccl/lib first in "
                "LD_LIBRARY_PATH; python -c 'import torch; print(torch.cuda.nccl.version())' "
                "shows the version torch expects"),
    # transport/p2p.cc (2.7 onwards) and net.cc (2.12 on, "failed to peer with device 1: 217
    # ...") print cudaDeviceEnablePeerAccess's error after the topology chose P2P: "failed to
    # peer with device 1(=3b000): 217 peer access is not supported between these two devices".
    # Only 217 (cudaErrorPeerAccessUnsupported, its string printed by NCCL's CUDACHECK on the
    # lazy-peer IPC open and by any other CUDA caller alike) is unsupported P2P: 711
    # cudaErrorTooManyPeers is a limit of how many peers one GPU maps, and the CUDA runtime
    # documents that the call "may also return error codes from previous, asynchronous
    # launches" (a 700 illegal address of an earlier kernel): other causes.
    pattern(NCCL_P2P_UNSUPPORTED,
            r"peer access is not supported between these two devices|"
            r"failed to peer with device \d+(?:\(=\w+\))?: 217\b", COLL),
    # bootstrap.cc (2.24 onwards) with NCCL_OOB_NET_ENABLE=1: the bootstrap's network device
    # is picked by NCCL_OOB_NET_IFNAME, and "no device found matching [exactly ]X, verify
    # NCCL_OOB_NET_IFNAME" / "no device found after excluding X, ..." says the filter the
    # user set matched no device: the variable, in the line's own words.
    pattern(BAD_SOCKET_IFNAME,
            r"no device found (?:matching|after excluding) (?:exactly )?(?P<value>\S+), verify "
            r"NCCL_OOB_NET_IFNAME", COLL,
            cause="NCCL_OOB_NET_IFNAME ({value}) matches no network device NCCL found on this "
                  "node (with NCCL_OOB_NET_ENABLE=1 the bootstrap uses that device)",
            fix="set NCCL_OOB_NET_IFNAME to a device NCCL lists on every node (the 'NET/IB : "
                "Using [0]mlx5_0:1/IB ...' or 'NET/Socket : Using [0]eth0' INFO line), or unset "
                "NCCL_OOB_NET_ENABLE"),
    # NCCL's own version check (init.cc initTransportsRank, 2.23 onwards, after the first
    # allgather of every rank's peer info; then ncclInvalidUsage): "Mismatched NCCL version
    # detected : rank 1 version 22304 rank 0 version 22105"; and its RAS thread's (ras/ras.cc,
    # 2.24 onwards) "NCCL version mismatch with remote peer 10.0.0.2<36475> (local: 22405,
    # remote 22304)" (2.30: versions as strings). Nothing else prints them: the line names the
    # cause. (Before 2.23 mixed versions show only as garbled bootstrap records: "Message
    # truncated", an address "with family 0", read below as undetermined.)
    pattern(NCCL_STACK_MISMATCH,
            r"Mismatched NCCL version detected : rank \d+ version \d+ rank \d+ version \d+|"
            r"NCCL version mismatch with remote peer \S+ \(local: ", COLL,
            cause="the ranks run different NCCL versions (NCCL compared their version codes "
                  "and stopped): another libnccl first on LD_LIBRARY_PATH, or another torch / "
                  "nvidia-nccl-cu* wheel, on some nodes",
            fix="install one NCCL everywhere (pip list | grep nccl and python -c 'import torch; "
                "print(torch.cuda.nccl.version())' on every node); unset LD_LIBRARY_PATH "
                "entries that carry another libnccl"),
    # A plugin that exists but cannot load (a missing symbol version, an undefined symbol);
    # "dlerror=libnccl-net.so: cannot open shared object file" is no plugin at all: benign.
    pattern(NCCL_NET_PLUGIN_UNUSABLE,
            r"NET/Plugin ?: ?dlerror=.*(?:version `|undefined symbol|required by)|"
            r"Failed to find ncclNetPlugin symbol|NET/OFI Could not find any optimal provider",
            COLL),
    # net_ib.cc ncclIbInit (2.7 onwards) looks for its out-of-band interface with the same
    # search as the bootstrap (misc/socket.cc ncclFindInterfaces: NCCL_SOCKET_IFNAME, else ib*,
    # any but docker/lo, docker, lo): "NET/IB : No IP interface found." is the bootstrap's "no
    # socket interface found" (a filter that excludes every interface), not the IB fabric;
    # netcontext reads it with that line.
    pattern(NCCL_NO_SOCKET_INTERFACE, WARN_START + r"NET/IB ?: ?No IP interface found",
            "ddpcheck run --stages node (lists each node's interfaces)"),
    # A work completion with IBV_WC_RETRY_EXC_ERR (12), IBV_WC_RNR_RETRY_EXC_ERR (13) or
    # IBV_WC_WR_FLUSH_ERR (5): the remote QP stopped answering or posting receives, a link
    # down or a peer process that died (killed, crashed, or aborted by its watchdog): a hint,
    # which another cause in the log outranks. net_ib.cc prints "with error 12, opcode"
    # (<= 2.19), "with status=12 opcode=" (2.20-2.2x), "with status=IBV_WC_RETRY_EXC_ERR(12)"
    # (2.30, also "NET/IB/GIN:").
    pattern(NCCL_NET_ERROR,
            WARN_START + r"NET/IB(?:/GIN)? ?: ?Got completion (?:from "
            r"peer \S+ )?with (?:error |status=(?:\w+\()?)(?:12|13|5)\b",
            "ddpcheck run --nodes N --stages collectives,bandwidth", grade="hint"),
    # net_ib.cc ncclIbIsend (2.12 onwards; also NET/FuseLink): "NET/IB : req 0/1 tag 7 peer
    # 10.0.0.2<1234> collective mismatch error, local size 65536 remote size 32768", returned
    # as ncclInvalidUsage ("Sanity checks to catch user collective call count/size
    # mismatches"): the IB twin of net_socket's "message truncated : receiving" and, like it,
    # printed also when ranks size NCCL's chunks differently (NCCL_PROTO / NCCL_BUFFSIZE set
    # on some nodes only): a hint of a size mismatch, not a network fault.
    pattern(COLLECTIVE_SIZE_MISMATCH,
            WARN_START + r"NET/\w+ ?: .*collective mismatch error, local size \d+ remote size",
            COLL, grade="hint",
            cause="a peer posted a smaller receive than this rank sent for the same step: the "
                  "ranks ran different collectives, the same one with other sizes, or other "
                  "NCCL_PROTO / NCCL_ALGO / NCCL_BUFFSIZE settings (net_ib.cc's own check)"),
    # NCCL's user guide (troubleshooting, "Troubleshooting NCCL errors"): "NCCL WARN Call to
    # ibv_reg_mr failed" or "Call to ibv_create_qp failed" is the pinned-memory limit; NCCL
    # >= 2.18 misc/ibvwrap.cc adds the errno ("Call to ibv_reg_mr_iova2 failed with error
    # Cannot allocate memory"). "Bad address" is GPU memory without GPUDirect RDMA: not this.
    pattern(MEMLOCK_LIMIT_TOO_LOW,
            r"Call to ibv_(?:reg_mr\w*|create_qp) failed with error Cannot allocate memory",
            "ulimit -l (inside the job, on every node); ddpcheck run --stages collectives"),
    # NCCL <= 2.16 misc/ibvwrap.cc IBV_PTR_CHECK prints no errno ("Call to ibv_reg_mr
    # failed"), so the same line follows ENOMEM (memlock) and EFAULT (a GPU buffer the HCA
    # cannot map: nvidia-peermem / dma-buf missing, an IOMMU) or EINVAL; ibv_create_qp fails
    # with ENOMEM for the memlock limit and for the HCA's own QP resources, EINVAL for queue
    # sizes beyond its caps: the user guide's memlock reading is the likely one, a hint.
    pattern(MEMLOCK_LIMIT_TOO_LOW, r"Call to ibv_(?:reg_mr\w*|create_qp) failed\s*$",
            "ulimit -l (inside the job, on every node); ddpcheck run --stages collectives",
            grade="hint",
            cause="NCCL could not register (pin) memory with the InfiniBand/RoCE HCA or create "
                  "a queue pair, most often the locked-memory limit (ulimit -l) inside the job; "
                  "this NCCL version prints no errno, and a GPU buffer the HCA cannot map "
                  "(nvidia-peermem not loaded, an IOMMU) prints the same line"),
    # torch >= 2.0 quotes NCCL's last WARN after "Last error:" on a line of its own, without
    # the "NCCL WARN" prefix (the patterns above read that form too, so the tail of a hint
    # stays a hint) (ProcessGroupNCCL getNcclErrorDetailStr / ncclGetLastError)
    # (net_ib's "Got non-fatal async event: ..." and "GID table changed" report events NCCL
    # carries on through: not a failure)
    pattern(NCCL_NET_ERROR,
            r"NCCL WARN (?!" + BENIGN_IB + r"|" + SKIPPED_HCA + r")"
            r"(?:Call to ibv_\w+ failed|NET/IB|NET/OFI|.*\bibv_|.*\bfi_\w+ failed)|"
            + TAIL_START + r"(?!" + BENIGN_IB + r"|" + SKIPPED_HCA + r")(?:NET/(?:IB|OFI) ?: "
            r".*(?:error|failed|[Uu]nable)|Call to ibv_\w+ failed)|"
            r"NET/Plugin.*(?:failed|\berror\b)",
            "ddpcheck run --nodes N --stages collectives,bandwidth"),
    # transport/nvls.cc creates NVLink SHARP multicast objects (cuMulticastCreate, cuMemMap):
    # a CUDA failure there is the NVSwitch fabric not set up for multicast (Fabric Manager
    # missing, of another version, or restarted); NCCL_NVLS_ENABLE=0 avoids NVLS.
    # Not every CUDA error there is the fabric: CUCHECK reports what cuGetErrorString says,
    # and the driver API returns an earlier kernel's sticky fault (an illegal address, a
    # launch failure, an ECC error) from any later call, and OOM (CUDA_OUT_OF_MEMORY) for
    # NVLS's large buffers (read as cuda-out-of-memory above).
    pattern(FABRIC_MANAGER_NOT_READY,
            r"transport/nvls\.cc:\d+ NCCL WARN Cuda failure (?!.*(?:illegal (?:memory access|"
            r"address|instruction)|unspecified launch failure|misaligned address|device-side "
            r"assert|uncorrectable ECC|launch timed out|out of memory|fallen off the bus))", COLL,
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
    # cudaErrorSymbolNotFound (500) from NCCL's kernel lookup (enqueue.cc cudaFuncGetAttributes
    # of its device functions): libnccl carries no code for this GPU's architecture, as an
    # NCCL 2.14 of a CUDA 11.8 torch on an sm_120 GPU (stop-31 dev, pytorch/pytorch#152077:
    # "PyTorch-2.0.0 is too old (as well as CUDA-11.8) to support 5090"). A hint: a libnccl
    # built against another CUDA than the one loaded prints it too.
    pattern(CUDA_UNUSABLE, r"NCCL WARN Cuda failure (?:\d+ )?'named symbol not found'",
            "ddpcheck run --stages node", grade="hint",
            cause="NCCL could not find its CUDA kernels for this GPU: the libnccl in use (the "
                  "torch wheel's) was built for older GPU architectures, or against another "
                  "CUDA than the one loaded",
            fix="install a torch build whose CUDA and NCCL support the GPU (pip install torch "
                "--index-url https://download.pytorch.org/whl/cuXYZ; torch.cuda.get_arch_list() "
                "must list the GPU's sm_XY) and no other libnccl on LD_LIBRARY_PATH"),
    # NCCL's own cross-rank check (init.cc): ranks called different collectives
    pattern(COLLECTIVE_DESYNC, WARN_START + r"Mismatched collective detected", COLL,
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
    # Benign WARNs: misc/ibvwrap.cc "Failed to open libibverbs.so[.1]" (no IB stack: NCCL
    # uses sockets); cudaErrorPeerAccessUnsupported (217) probed during topology detection.
    # bootstrap.cc (2.7 onwards) "Message truncated : received 48 bytes instead of 56": the
    # out-of-band exchange of fixed-size records disagreed, as between ranks on different
    # NCCL versions or connection setups of different collectives; net_socket.cc's data-path
    # "message truncated : receiving" (watchdog.py) names collective sizes itself.
    # Its own words (2.12+: "... there may be a mismatch in collective sizes or environment
    # settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks") name two causes, and a setting
    # that sizes NCCL's chunks (NCCL_BUFFSIZE, NCCL_PROTO set on some nodes only) is not a
    # collective of another size: a hint.
    pattern(COLLECTIVE_SIZE_MISMATCH,
            r"NET/Socket : (?:peer \S+ )?message truncated : receiving \d+ bytes instead of",
            COLL, grade="hint",
            cause="a peer sent more bytes than this rank posted for the same step: the ranks "
                  "ran different collectives, the same one with other sizes, or other "
                  "NCCL_PROTO / NCCL_ALGO / NCCL_BUFFSIZE settings (net_socket.cc's own "
                  "hint)"),
    pattern(NCCL_ERROR, r"Message truncated : received \d+(?:,\d+)? bytes instead of", COLL,
            cause="NCCL's bootstrap received a record of another size than it expected: ranks "
                  "running different NCCL versions, or ranks setting up different "
                  "collectives; compare the 'NCCL version' lines of every node"),
    # misc/shmutils.cc (2.12 onwards) ncclShmOpen with create=0: the peer's segment is not
    # there to attach ("Error while attaching to shared memory segment /dev/shm/nccl-X (size
    # N), error: No such file or directory (2)"): not a full /dev/shm but one the ranks do not
    # share, or a regression (NVIDIA/nccl#1589: 2.23 fixed by 2.21.5).
    # A system limit rather than the transport: the open-files limit (EMFILE) on NCCL's
    # shared-memory files, sockets or CUDA IPC handles ("Too many open files", 2.23+ errno)
    # (not torch's own "unable to open shared memory object </torch_..> in read-write mode:
    # Too many open files (24)", aten MapAllocator.cpp: DataLoader tensors, open-file-limit)
    pattern(NCCL_ERROR, r"NCCL WARN .*Too many open files|^\s*(?:Last error:\s*)?.*shared "
            r"memory(?! object <[^>]*torch_).*Too many open files", NODE,
            cause="NCCL ran out of file descriptors (the open-files limit, ulimit -n): each "
                  "peer connection, shared-memory segment and IPC handle holds one",
            fix="raise the limit for the job (ulimit -n 65536; Slurm/systemd LimitNOFILE; "
                "docker --ulimit nofile=65536:65536)"),
    pattern(NCCL_ERROR, r"Error while attaching to shared memory segment", NODE,
            cause="NCCL could not open a peer's shared-memory segment: the ranks of this node "
                  "do not share one /dev/shm (separate containers or pods without --ipc=host "
                  "or a shared IPC namespace), something removed NCCL's files from /dev/shm "
                  "(systemd-logind RemoveIPC=yes, a cleanup script), or an NCCL regression",
            fix="run the node's ranks in one container or with --ipc=host (a shared /dev/shm); "
                "set RemoveIPC=no in /etc/systemd/logind.conf; if it persists, try another "
                "NCCL version, or NCCL_SHM_DISABLE=1 to confirm"),
    pattern(NCCL_ERROR,
            r"NCCL WARN (?!.*Cuda failure 217)(?!Failed to open libibverbs)"
            r"(?!" + BENIGN_IB + r"|" + SKIPPED_HCA + r")"
            r"(?!.*Cuda failure (?:\d+ )?'?(?:" + CUDA_RUNTIME_CAUSES + r"))", COLL),
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
    # NCCL's INFO back trace ("bootstrap.cc:270 -> 2") and result strings ("unhandled
    # system error"): families/ncclresult.py
]


# "NCCL INFO NCCL version 2.18.1+cuda12.1" (init.cc, printed by rank 0 of each communicator
# and with NCCL_DEBUG=INFO by every rank), and torch's error tail ", NCCL version 2.14.3".
NCCL_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)")


def version_mismatch(found: Sequence[Explained], records: Sequence[Record]) -> list[Explained]:
    """Nodes that print different NCCL versions, in a log that shows a failure: the stack
    differs across nodes. Told by host, and only where no host printed two versions (a log
    holding a run before and after an upgrade is not a mixed job)."""
    by_host: dict[str, set[str]] = {}
    first: dict[str, Record] = {}
    for r in records:
        if r.host and (m := NCCL_VERSION.search(r.text)):
            by_host.setdefault(r.host, set()).add(m["v"])
            first.setdefault(m["v"], r)
    versions = {v for vs in by_host.values() for v in vs}
    if not found or len(versions) < 2 or any(len(vs) > 1 for vs in by_host.values()):
        return list(found)
    seen = sorted(first.values(), key=lambda r: r.order)
    hosts = {v: sorted(h for h, vs in by_host.items() if v in vs) for v in versions}
    problem = NCCL_STACK_MISMATCH.problem(
        "; ".join(f"NCCL {v} on {', '.join(hs)}" for v, hs in sorted(hosts.items())),
        hosts=tuple(sorted(by_host)))
    # A hint: NCCL before 2.23 compares no versions, and nodes a patch release apart often
    # run together; a job that then fails of something else (an OOM hours in) prints the same
    # two version lines. From 2.23 NCCL says so itself ("Mismatched NCCL version detected",
    # cause-grade above).
    return [Explained(problem, seen[0], True, COLL,
                      tuple(f"{r.source}:{r.lineno}" for r in seen[:4]), HINT), *found]
