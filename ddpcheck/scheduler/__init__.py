"""What the job's environment says: Slurm, PBS or torchrun variables turned into a job shape.

Pure functions of an environment mapping; run in the launcher (and, for ranks srun starts
without torchrun, in the worker). ``detect`` works out the job's shape, ``hostlist`` parses
the schedulers' syntaxes, ``jobsettings`` turns the shape into settings for the run config
(each with the variable it came from), ``contradictions`` names where the shape and
ddpcheck's flags disagree, ``srunworld`` builds the torch.distributed environment of an
srun-started rank, ``gpubinding`` is srun's per-task GPU binding (detected, emulated for
``--launch srun``, judged), and ``jobidentity`` is what a training job computes as its rank
and world size.
"""
