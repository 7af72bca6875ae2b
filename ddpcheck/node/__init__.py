"""Facts about this machine, read without torch: GPUs, NCCL, network interfaces, sockets.

Runs in the launcher's preflight and in the node-stage probes. ``gpu`` and ``gpustate``
read nvidia-smi and the device files, ``devices`` which GPUs the ranks get
(``CUDA_VISIBLE_DEVICES``, the device plan); ``nccl`` and ``ncclstack`` the NCCL settings and
the library actually loaded, ``ncclinfo`` the transports NCCL_DEBUG=INFO says each
connection used; ``interfaces``, ``socketifname``, ``nics`` and ``netprobe`` the
NICs, routes, ``*_SOCKET_IFNAME`` and the endpoint's reachability; ``envinfo`` and
``nodeinfo`` what ``ddpcheck env`` prints, with secrets redacted; ``diskspace`` the
checkpoint directory's free space. Node health, read by the
launcher before any rank runs (docs/node-health.md): ``gpuquery`` and ``gpuhealth`` (memory
errors, throttling, PCIe, leftover processes), ``nvlinkfabric`` (NVLink, Fabric Manager),
``xid`` (the kernel log), ``infiniband`` (ports, NCCL_IB_HCA, GPUDirect RDMA), ``findings``.
"""
