"""The ``ddpcheck`` command: the process the user starts once per node.

The story of ``ddpcheck run``: ``cli`` parses the command line and hands a ``config.RunConfig``
(flags > ``DDPCHECK_*`` > the scheduler's environment) to ``runner``. The runner checks this
node before anything starts (``preflight`` with ``nodehealth``, ``fdlimit``; for ``--launch
spawn/srun`` also the ``spawn`` package's pre-checks), meets the other nodes through
``ddpcheck.cluster``, then ``launch`` starts torchrun with one ``ddpcheck.worker`` per rank
(or ``spawn`` starts the ranks itself, as mp.spawn or srun would) and watches them under
deadlines while ``progress`` prints what the ranks write. ``postmortem`` (and
``spawn.formation``) turn what the launcher saw (exit codes, signals, stopped ranks, a
deadline) into diagnoses; everything the node learns goes into one ``noderun.NodeRun``, and
the report is built from it once. ``compare_command`` is ``ddpcheck compare``. No module
here imports torch.
"""
