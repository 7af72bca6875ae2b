"""``ddpcheck explain``: a failed job's log turned into the cause, the place and the fix.

Runs on the user's machine, after the fact, with no cluster: it reads text only.
The story: ``reader`` splits any mix of launcher output (torchrun --tee / --log-dir, srun -l,
mpirun, Lightning, Accelerate, DeepSpeed), NCCL debug lines, tracebacks and torchelastic
error files into records carrying rank, host and time; every module in ``families`` holds
the matchers of one failure family, each turning records into a Problem of the same
catalogue ``ddpcheck run`` uses; ``causality`` puts the rank that failed first, and why,
before what the other ranks saw; ``engine`` renders the problem blocks, the verdict and the
JSON with the run report's own code.
"""

from __future__ import annotations

from ddpcheck.explain.engine import Explanation, explain_texts

__all__ = ["Explanation", "explain_texts"]
