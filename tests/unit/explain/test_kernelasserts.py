"""A CUDA device-side assert quoted with the kernel's own assertion (explain.kernelasserts),
on the real run recorded on an H100 (runs-gpu/gpu-device-assert) and its near misses."""

from __future__ import annotations

from ddpcheck.explain import explain_texts, kernelasserts
from ddpcheck.explain.reader import Record
from tests.helpers.paths import DATA

ASSERT = (DATA / "explain" / "runs-gpu" / "gpu-device-assert" / "console.log").read_text()
GATHER = ("/pytorch/aten/src/ATen/native/cuda/IndexKernelUtils.cu:16: vectorized_gather_kernel: "
          "block: [0,0,0], thread: [0,0,0] Assertion `ind >=0 && ind < ind_dim_size && "
          "\"vectorized gather kernel index out of bounds\"` failed.")


def _first(text: str):
    ex = explain_texts([("console.log", text)])
    return next(p for p in ex.problems if not p.consequence_of)


def test_the_real_device_assert_names_the_kernel_check_and_what_it_means():
    p = _first(ASSERT)
    assert p.code == "unexplained" and p.ranks == (0,)
    assert "the kernel's assertion: IndexKernelUtils.cu:16 vectorized_gather_kernel" in p.observed
    assert "real_runs_gpu_train.py:81 in main" in p.observed  # the user's frame stays
    assert "an index outside a tensor's size" in p.cause
    assert "num_embeddings" in p.fix and "CUDA_LAUNCH_BLOCKING=1" in p.fix


def test_without_the_kernel_line_the_answer_is_the_plain_user_exception():
    """Near miss: the assertion lines scrolled away (or went to another file)."""
    text = "\n".join(line for line in ASSERT.splitlines() if "Assertion `" not in line)
    p = _first(text)
    assert p.code == "unexplained" and "kernel's assertion" not in p.observed
    assert "CUDA_LAUNCH_BLOCKING" not in p.fix


def test_another_ranks_assertion_or_another_error_is_not_quoted():
    line = Record("a.log", 3, "[rank1]: " + GATHER, 1, "", None)
    assert kernelasserts.first([line], 0) is None  # rank 1's kernel, rank 0's crash
    found = kernelasserts.first([line], 1)
    assert found is not None and found.where == "IndexKernelUtils.cu:16"
    # an assertion that bounds no index is named as a kernel check, without the index story
    other = Record("a.log", 4, GATHER.replace(
        'ind >=0 && ind < ind_dim_size && "vectorized gather kernel index out of bounds"',
        "input_val >= zero && input_val <= one"), None, "", None)
    k = kernelasserts.first([other], 0)
    assert k is not None and "index" not in k.meaning() and "check inside a CUDA kernel" in \
        k.meaning()
    assert "num_embeddings" not in k.fix("train.py:9 in main")  # no index story in the fix
    assert "vectorized_gather_kernel rejects" in k.fix("train.py:9 in main")
    assert "num_embeddings" in found.fix("train.py:9 in main")
