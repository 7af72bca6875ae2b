"""The ``ddpcheck`` command: the process the user starts once per node.

The story of ``ddpcheck run``: ``cli`` parses the command line and hands a ``config.Config``
(flags > ``DDPCHECK_*`` > the scheduler's environment) to ``runner``. The runner checks this
node before anything starts (``preflight``, ``fdlimit``; for ``--launch spawn/srun`` also
``launchspec``, ``mastercheck`` and ``initfile``), meets the other nodes through
``ddpcheck.cluster``, then ``launch`` starts torchrun with one ``ddpcheck.worker`` per rank
(or ``spawn`` starts the ranks itself, as mp.spawn or srun would) and watches them under
deadlines while ``progress`` prints what the ranks write. ``postmortem`` (and
``spawnpostmortem``) turn what the launcher saw (exit codes, signals, stopped ranks, a
deadline) into diagnoses, and the report is built and printed. ``compare_command`` is
``ddpcheck compare``. No module here imports torch.
"""
