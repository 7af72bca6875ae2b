"""What a CUDA "device-side assert triggered" was: the kernel's own assertion line.

Runs inside ``ddpcheck explain`` (pure, over a log's records). A failed ``CUDA_KERNEL_ASSERT``
prints, from the GPU, one line per failing thread before the host sees the error
(c10/macros/Macros.h: ``__assert_fail`` with the kernel's file, line and function):

    /pytorch/aten/src/ATen/native/cuda/IndexKernelUtils.cu:16: vectorized_gather_kernel:
    block: [0,0,0], thread: [0,0,0] Assertion `ind >=0 && ind < ind_dim_size && "vectorized
    gather kernel index out of bounds"` failed.

(one line in the log; recorded on an H100, tests/data/explain/runs-gpu/gpu-device-assert).
The host's exception (``torch.AcceleratorError: CUDA error: device-side assert triggered``)
names neither the kernel nor the check; the first such line does. Index checks (an embedding
id past the table, a class label past the classes, a gather index) are most of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ddpcheck.explain.reader import Record

ASSERTION = re.compile(
    r"(?P<file>[\w.+/-]+\.cu[h]?):(?P<line>\d+): (?P<kernel>\w+): block: \[[\d, ]+\], "
    r"thread: \[[\d, ]+\] Assertion `(?P<check>.+)` failed\.")
# the checks that bound an index: ATen's gather/index/embedding/loss kernels
INDEX_CHECK = re.compile(r"index out of bounds|srcIndex <|ind_dim_size|n_classes|"
                         r"idx_dim >= 0|index >= -|t >= 0 && t <|< numel|out of range",
                         re.IGNORECASE)
DEVICE_ASSERT = "device-side assert triggered"


@dataclass(frozen=True)
class KernelAssertion:
    """The first failed kernel assertion of a rank (or of the log, where lines have no rank)."""

    kernel: str  # "vectorized_gather_kernel"
    where: str  # "IndexKernelUtils.cu:16"
    check: str  # the asserted condition, as printed
    record: Record

    def observed(self) -> str:
        return f"the kernel's assertion: {self.where} {self.kernel}: `{self.check[:160]}` failed"

    @property
    def bounds_an_index(self) -> bool:
        return INDEX_CHECK.search(self.check) is not None

    def meaning(self) -> str:
        if self.bounds_an_index:
            return ("an index outside a tensor's size on the GPU (a token id at or past the "
                    "embedding's num_embeddings, a class label outside 0..num_classes-1, a "
                    "gather/scatter index): the data or the model's sizes are wrong, not the GPU")
        return ("a check inside a CUDA kernel failed on this rank's inputs; the CUDA error "
                "itself names only the assert")

    def fix(self, call: str) -> str:
        """What to check at ``call`` (the user's frame, or "the failing line")."""
        what = ("against the sizes it indexes (ids < num_embeddings, 0 <= labels < "
                "num_classes)" if self.bounds_an_index else
                f"for the values {self.kernel} rejects (its check is quoted above)")
        return (f"check the inputs of the call at {call} {what}; rerun with "
                "CUDA_LAUNCH_BLOCKING=1 for the exact line; ")


def first(records: Sequence[Record], rank: int | None) -> KernelAssertion | None:
    """The first kernel assertion printed by ``rank`` (or by a line without a rank)."""
    for r in records:
        if "Assertion `" not in r.text or (r.rank is not None and r.rank != rank):
            continue
        if m := ASSERTION.search(r.text):
            where = f"{m['file'].rsplit('/', 1)[-1]}:{m['line']}"
            return KernelAssertion(m["kernel"], where, m["check"], r)
    return None
