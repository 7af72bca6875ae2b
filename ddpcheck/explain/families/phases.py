"""Where in the job the rank that timed out was: after its training loop had ended.

Runs wherever ``ddpcheck explain`` runs (text only). ``timeouts.refine`` asks it whether the
rank that timed out had printed its framework's end-of-training line just before: Lightning's
fit loop ("`Trainer.fit` stopped: `max_epochs=N` reached." / "`max_steps=N`", from
``rank_zero_info`` in ``loops/fit_loop.py``: rank 0 prints it) or transformers' Trainer
("Training completed. Do not forget to share your model on huggingface.co/models =)", from
``Trainer._inner_training_loop``, logged by the main process). Every rank runs the same number
of epochs or steps, so when rank 0 alone then times out in a collective, the others had left
training as well and did not call it: a collective only rank 0 calls after training (a
``save_checkpoint``, ``test`` or barrier under ``if trainer.is_global_zero`` / ``rank == 0``),
a desync. Another rank's crash would print its own error, which stays the root cause.

Only rank 0 alone decides: when other ranks time out too, or the log does not say which rank
timed out, the line shows nothing about the others and the timeout stays undetermined.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpcheck.explain.reader import Record

# lightning/pytorch/loops/fit_loop.py (_FitLoop.done) and transformers/trainer.py.
TRAINING_ENDED = re.compile(r"`Trainer\.fit` stopped: `max_(?:epochs|steps)=[^`]*` reached|"
                            r"Training completed\. Do not forget to share your model")
# The end-of-training line must be what the rank did last before it waited: a few lines
# before the first timeout in the same stream, not the end of an earlier fit.
WINDOW = 20


# The watchdog's own lines of a rank that timed out or failed in a collective
# (ProcessGroupNCCL.cpp: checkTimeout and the summaries, ``waiters``): who printed them.
WATCHDOG = re.compile(r"Watchdog caught collective operation timeout|Timeout at NCCL work: \d|"
                      r"detected by watchdog at work|timed out in blocking wait")


def ended_alone(first: Record, records: Sequence[Record]) -> Record | None:
    """The end-of-training line shortly before ``first`` (the first timeout line) in its
    stream, when the watchdog's lines are rank 0's alone (each naming it); None otherwise."""
    if {r.rank for r in records if WATCHDOG.search(r.text)} != {0}:
        return None
    return next((r for r in reversed(records) if r.source == first.source
                 and 0 < first.lineno - r.lineno <= WINDOW and r.rank in (None, 0)
                 and TRAINING_ENDED.search(r.text)), None)
