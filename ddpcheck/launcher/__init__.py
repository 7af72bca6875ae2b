"""The ``ddpcheck`` command: the process the user starts once per node.

The story of ``ddpcheck run``: ``cli`` parses the command line and hands a ``config.Config``
(flags > ``DDPCHECK_*`` > the scheduler's environment) to ``runner``. The runner checks this
node before anything starts (``preflight``, ``fdlimit``, ``userjob``: would the user's own
torchrun start here?), meets the other nodes through ``ddpcheck.cluster``, then ``launch``
starts torchrun with one ``ddpcheck.worker`` per rank and watches it under deadlines while
``progress`` prints what the ranks write. ``postmortem`` turns what the launcher saw (exit
codes, signals, stopped ranks, a deadline) into diagnoses, and the report is built and
printed. ``compare_command`` is ``ddpcheck compare``. No module here imports torch.
"""
