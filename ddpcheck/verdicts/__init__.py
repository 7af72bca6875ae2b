"""Pure judgements: numbers and results in, verdicts (problems) out. No I/O, no processes.

Used by both sides: ``bandwidth`` (bus bandwidth arithmetic), ``links`` (node-to-node links
and scaling), ``expectations`` (what a GPU model should reach), ``straggler``,
``consistency`` (the odd ranks out), ``readiness`` (the one READY rule) and ``compare`` (a
run against a baseline).
"""
