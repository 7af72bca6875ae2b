"""ddpcheck: is this allocation ready for PyTorch distributed training?

Two kinds of process take part in a run, and the packages follow them:

- ``launcher`` is the ``ddpcheck`` command the user starts once per node. It reads the job
  (``scheduler``) and this machine (``node``), meets the other nodes' launchers through the
  rendezvous endpoint (``cluster``), starts torchrun, and turns what happened into the report
  (``report``) and the exit code.
- ``worker`` runs once per rank under torchrun (or srun): a pytest session of the probes in
  ``ddpcheck.checks`` with the ddpcheck plugin; ranks agree on every outcome through the store.

``judgements`` holds the pure judgements both sides use (bandwidth, links, stragglers, the
READY rule). The contracts between the two processes sit at the top: ``diagnoses`` (the
problem catalogue), ``stages``, ``results`` (the rank files, the only channel from workers to
the launcher), ``storekeys`` (every key of the stores), ``parsing`` and ``ranges``;
``plugin`` is the ``-p ddpcheck.plugin`` name users give pytest. ``explain`` reads a
failed job's log after the fact. Only ``worker``, the probes and the one place that opens
torch's store (``cluster.store``) import torch, the last one lazily.
"""

__version__ = "0.1.0"
