"""One rank of a run: the process torchrun (or srun) starts for every rank.

``python -m ddpcheck.worker`` runs ``wrapper``: it starts pytest with the ddpcheck plugin on
the probes in ``ddpcheck.checks`` and records the rank's exit in its exit file whatever
happens. ``plugin`` turns the pytest session into one rank (stage order, agreement on every
probe's outcome, the rank file), with rank 0's rules in ``agreement``; ``world`` is the
rank's view of the world (identity, the control store, agreement with deadlines, the process
group), with ``initmethod`` (env://, tcp://, file://) and ``subgroups`` (node and leader
groups, made once); ``blame`` tells the transport's failure from ddpcheck's own;
``settings`` are what the launcher passes down (defined once, read by both sides);
``timing``, ``recorder`` and ``precision`` (the job's TF32 settings) are the probes'
measuring tools. This package imports torch
(``world``, ``timing``, ``agreement``); ``settings`` and ``wrapper`` do not.
"""
