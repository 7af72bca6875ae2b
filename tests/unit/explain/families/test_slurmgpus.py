"""srun's per-task GPU binding behind an invalid device ordinal (families/slurmgpus.py)."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause


def test_an_invalid_ordinal_under_per_task_gpu_binding_is_srun_device_ordinal():
    ordinal = "RuntimeError: CUDA error: invalid device ordinal"
    for bind in ("srun --ntasks-per-node=4 --gpus-per-task=1 python train.py",
                 "#SBATCH --gpus-per-task=1",
                 "srun --ntasks-per-gpu=1 python train.py",
                 "srun --gpu-bind=closest python train.py",
                 "SLURM_GPUS_PER_TASK=1"):
        assert first_cause(bind, ordinal) == "srun-device-ordinal", bind
    # no binding, or binding turned off: the plain ordinal
    assert first_cause("srun --gpus-per-node=4 --gpu-bind=none python train.py", ordinal) == \
        "invalid-device-ordinal"
    assert first_cause("torchrun --nproc-per-node 8 train.py", ordinal) == \
        "invalid-device-ordinal"
    # binding alone is no failure
    assert first_cause("srun --gpus-per-task=1 python train.py", "epoch 1 loss 0.3") == "none"
