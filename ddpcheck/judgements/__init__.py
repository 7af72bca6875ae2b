"""Pure judgements: numbers and results in, problems out. No I/O, no processes.

Used by both sides: ``bandwidth`` (bus bandwidth arithmetic and its judging rule),
``links`` (node-to-node links and scaling), ``expectations`` (what a GPU model should
reach), ``straggler``, ``consistency`` (the odd ranks out), ``ranklayout`` (do the nodes'
ranks of a spawn-style launch make one world), ``readiness`` (the one READY rule, the run's
verdict) and ``compare`` (a run against a baseline).
"""
