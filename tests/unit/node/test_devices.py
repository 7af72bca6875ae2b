"""Tests for ddpcheck.node.devices: CUDA_VISIBLE_DEVICES as CUDA reads it, the device plan and
the GPU counts, on recorded nvidia-smi inventories (tests/data/gpu)."""

from __future__ import annotations

import pytest

from ddpcheck import diagnoses as dg
from ddpcheck.node import devices
from tests.unit.node.test_gpu import A100X7, A100X8, H100X4, MIG, codes

# --- CUDA_VISIBLE_DEVICES: parsing ------------------------------------------------------------

def test_cvd_unset_and_empty() -> None:
    unset = devices.parse_cuda_visible_devices(None)
    assert not unset.is_set and unset.effective == ()
    empty = devices.parse_cuda_visible_devices("")
    assert empty.is_set and empty.effective == () and empty.invalid is None


def test_cvd_indices_with_whitespace() -> None:
    vd = devices.parse_cuda_visible_devices(" 0, 1 ,2")
    assert vd.entries == ("0", "1", "2") and vd.indices == (0, 1, 2)
    assert vd.lenient == () and not vd.uses_uuids


def test_cvd_stops_at_first_invalid_entry() -> None:
    vd = devices.parse_cuda_visible_devices("0,1,-1,2")
    assert vd.effective == ("0", "1") and vd.invalid == "-1" and vd.ignored == ("2",)
    vd = devices.parse_cuda_visible_devices("0,,1")
    assert vd.effective == ("0",) and vd.invalid == "" and vd.ignored == ("1",)
    assert devices.parse_cuda_visible_devices("-1").effective == ()
    assert devices.parse_cuda_visible_devices("abc,0").invalid == "abc"


def test_cvd_strtoul_reading_is_lenient() -> None:
    vd = devices.parse_cuda_visible_devices("1gpu,2")
    assert vd.indices == (1, 2) and vd.lenient == ("1gpu",)
    assert devices.parse_cuda_visible_devices("01").lenient == ("01",)


def test_cvd_duplicates_expose_nothing() -> None:
    vd = devices.parse_cuda_visible_devices("0,1,1")
    assert vd.duplicates == ("1",) and vd.entries == ("0", "1") and vd.effective == ()
    assert vd.indices == ()


def test_cvd_uuids() -> None:
    vd = devices.parse_cuda_visible_devices(f"{A100X8[2].uuid},{A100X8[5].uuid}")
    assert vd.uses_uuids and vd.effective == (A100X8[2].uuid, A100X8[5].uuid)
    assert vd.indices == ()
    mixed = devices.parse_cuda_visible_devices(f"{A100X8[2].uuid},3")
    assert mixed.effective == (A100X8[2].uuid,) and mixed.invalid == "3"
    mig_then_gpu = devices.parse_cuda_visible_devices(f"{MIG[0].mig[0].uuid},{MIG[1].uuid}")
    assert mig_then_gpu.invalid == MIG[1].uuid
    index_then_uuid = devices.parse_cuda_visible_devices(f"0,{A100X8[1].uuid}")
    assert index_then_uuid.effective == ("0",) and index_then_uuid.invalid == A100X8[1].uuid
    padded = devices.parse_cuda_visible_devices(f"{A100X8[0].uuid}, {A100X8[1].uuid}")
    assert padded.entries == (A100X8[0].uuid, A100X8[1].uuid)
    assert padded.lenient == (f" {A100X8[1].uuid}",)


# --- CUDA_VISIBLE_DEVICES: checks -------------------------------------------------------------

def test_check_cvd_clean() -> None:
    assert devices.check_cuda_visible_devices(None, A100X8) == []
    assert devices.check_cuda_visible_devices("0,1,2,3", A100X8) == []
    assert devices.check_cuda_visible_devices("0,1,", A100X8) == []  # trailing comma: harmless
    assert devices.check_cuda_visible_devices(A100X8[7].uuid[:12], A100X8) == []  # unique prefix
    assert devices.check_cuda_visible_devices(MIG[0].mig[1].uuid, MIG) == []
    assert devices.check_cuda_visible_devices("-1", []) == []  # CPU node: nothing to hide


def test_check_cvd_duplicates() -> None:
    [p] = devices.check_cuda_visible_devices("0,1,1", A100X8)
    assert p.code == dg.CUDA_VISIBLE_DEVICES_INVALID.code
    assert p.observed == "CUDA_VISIBLE_DEVICES=0,1,1 repeats 1; CUDA then exposes no GPUs at all"
    assert p.fix == "list each GPU once: CUDA_VISIBLE_DEVICES=0,1"


def test_check_cvd_invalid_entry_drops_rest() -> None:
    [p] = devices.check_cuda_visible_devices("0,1,-1,2", A100X8)
    assert p.observed == ("CUDA_VISIBLE_DEVICES=0,1,-1,2: entry '-1' is not a GPU index or "
                          "UUID; CUDA stops at the first invalid entry, so it exposes only 0,1 "
                          "and ignores 2")
    assert p.fix == "remove '-1' from CUDA_VISIBLE_DEVICES, or unset it"
    [p] = devices.check_cuda_visible_devices("-1", A100X8)
    assert "exposes no GPUs" in p.observed
    [p] = devices.check_cuda_visible_devices(f"0,{A100X8[1].uuid}", A100X8)
    assert "mixed into a list of indices" in p.cause


def test_check_cvd_empty_hides_all() -> None:
    [p] = devices.check_cuda_visible_devices("", A100X8)
    assert p.observed == ("CUDA_VISIBLE_DEVICES is set but empty, which hides all 8 GPUs "
                          "nvidia-smi lists")
    assert devices.check_cuda_visible_devices("", []) == []


def test_check_cvd_lenient_entry() -> None:
    [p] = devices.check_cuda_visible_devices("0,1gpu", A100X8)
    assert p.observed == "CUDA_VISIBLE_DEVICES=0,1gpu: CUDA reads '1gpu' loosely (as 0,1)"
    assert p.fix == "write it plainly: CUDA_VISIBLE_DEVICES=0,1"


def test_check_cvd_index_beyond_count() -> None:
    [p] = devices.check_cuda_visible_devices("0,1,7", A100X7)
    assert p.observed == ("CUDA_VISIBLE_DEVICES=0,1,7 names GPU 7 but nvidia-smi lists 7 GPUs "
                          "(0-6); CUDA stops there, so it exposes only 0,1")
    assert p.fix == "use indices 0-6 (see nvidia-smi -L), or unset CUDA_VISIBLE_DEVICES"
    assert devices.check_cuda_visible_devices("0,1,7", []) == []  # no inventory: cannot tell


def test_check_cvd_unknown_and_ambiguous_uuid() -> None:
    [p] = devices.check_cuda_visible_devices(f"{H100X4[0].uuid},{A100X8[0].uuid}", H100X4)
    assert p.observed == (f"CUDA_VISIBLE_DEVICES={H100X4[0].uuid},{A100X8[0].uuid} names "
                          f"{A100X8[0].uuid}, which nvidia-smi -L does not list; CUDA stops "
                          f"there, so it exposes only {H100X4[0].uuid}")
    assert "another node" in p.cause
    [p] = devices.check_cuda_visible_devices("GPU-", A100X8)
    assert "which matches 8 devices" in p.observed and "exposes no GPUs" in p.observed


def test_check_cvd_reports_duplicates_and_missing_together() -> None:
    found = devices.check_cuda_visible_devices("9,9", A100X8)
    assert codes(found) == [dg.CUDA_VISIBLE_DEVICES_INVALID.code] * 2
    assert "repeats 9" in found[0].observed and "names GPU 9" in found[1].observed
    dup_and_bad = devices.check_cuda_visible_devices("0,0,x,1", A100X8)
    assert "so it exposes no GPUs and ignores 1" in dup_and_bad[1].observed


def test_visible_count() -> None:
    assert devices.visible_count(None, A100X8) == 8
    assert devices.visible_count("0,1,9,2", A100X8) == 2
    assert devices.visible_count("3,2", A100X8) == 2
    assert devices.visible_count("0,0", A100X8) == 0
    assert devices.visible_count(f"{H100X4[1].uuid},GPU-0000", H100X4) == 1


# --- device plan -------------------------------------------------------------------------------

def test_device_plan_local_rank_blocks() -> None:
    assert devices.device_plan(4, 2, 8) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert devices.device_plan(8, 1, 8) == [(i,) for i in range(8)]
    assert devices.device_plan(1, 4, 4) == [(0, 1, 2, 3)]
    assert devices.check_device_plan(2, 2, 8) == []  # spare devices are fine


def test_device_plan_too_few_devices() -> None:
    [p] = devices.check_device_plan(4, 2, 6, cuda_visible_devices="0,1,2,3,4,5")
    assert p.code == dg.DEVICE_PLAN_INVALID.code
    assert p.observed == ("local rank 3 needs cuda:6-7 but only 6 devices are visible "
                          "(CUDA_VISIBLE_DEVICES=0,1,2,3,4,5)")
    assert p.fix == ("pass --nproc-per-node 3 or --gpus-per-replica 1 to fit the 6 visible "
                     "devices, or expose 8 GPUs to the node (e.g. Slurm --gres=gpu:8)")
    assert "LOCAL_RANK (not the global RANK)" in p.cause
    with pytest.raises(dg.ProblemFound) as err:
        devices.device_plan(4, 2, 6, cuda_visible_devices="0,1,2,3,4,5")
    assert err.value.problems == (p,)


def test_device_plan_many_ranks_and_one_gpu_per_rank() -> None:
    [p] = devices.check_device_plan(8, 1, 4)
    assert p.code == dg.TOO_FEW_GPUS.code
    assert p.observed == ("local ranks 4-7 need cuda:4-7 but only 4 devices are visible "
                          "(CUDA_VISIBLE_DEVICES unset)")
    assert p.fix.startswith("pass --nproc-per-node 4 to fit the 4 visible devices")
    [p] = devices.check_device_plan(2, 1, 1)
    assert p.observed.startswith("local rank 1 needs cuda:1 but only 1 device is visible")


def test_device_plan_fewer_devices_than_one_replica() -> None:
    [p] = devices.check_device_plan(2, 4, 3)
    assert p.observed.startswith("local ranks 0-1 need cuda:0-7 but only 3 devices")
    assert p.fix.startswith("pass --gpus-per-replica 1 or --nproc-per-node 1 "
                            "--gpus-per-replica 3 to fit the 3 visible devices")
    [p] = devices.check_device_plan(2, 2, 0, cuda_visible_devices="")
    assert p.fix.startswith("this node exposes no GPUs")


def test_device_plan_nonpositive_arguments() -> None:
    [p] = devices.check_device_plan(0, 2, 8)
    assert p.code == dg.DEVICE_PLAN_INVALID.code
    assert p.observed == "--nproc-per-node 0 x --gpus-per-replica 2: both must be at least 1"
    assert codes(devices.check_device_plan(2, 0, 8)) == [dg.DEVICE_PLAN_INVALID.code]


# --- GPU counts ----------------------------------------------------------------------------------

def test_expected_gpus() -> None:
    assert devices.expected_gpus(4, 2) == 8
    assert devices.expected_gpus(8, 1) == 8
    assert devices.expected_gpus(0, 2) == 0


def test_counts_all_good() -> None:
    assert devices.check_gpu_counts(A100X8, 8, 8, True) == []
    assert devices.check_gpu_counts(A100X8, 4, 4, True, cuda_visible_devices="0,1,2,3") == []
    assert devices.check_gpu_counts(None, 0, 0, False) == []  # CPU run on a CPU node


def test_counts_cpu_only_torch_on_gpu_node() -> None:
    [p] = devices.check_gpu_counts(H100X4, 0, 4, False)
    assert p.code == dg.CPU_ONLY_TORCH.code
    assert p.observed == ("nvidia-smi lists 4 GPUs (NVIDIA H100 80GB HBM3) but torch is a "
                          "CPU-only build (torch.version.cuda is None)")
    assert "download.pytorch.org/whl/cu" in p.fix
    assert devices.check_gpu_counts(H100X4, 0, 0, False) == []  # the job asked for no GPUs


def test_counts_cpu_only_torch_without_gpus() -> None:
    [p] = devices.check_gpu_counts(None, 0, 2, False)
    assert p.code == dg.TOO_FEW_GPUS.code
    assert p.observed == ("the job needs 2 GPUs per node (--nproc-per-node 2 x "
                          "--gpus-per-replica 1) but torch is a CPU-only build "
                          "(CUDA_VISIBLE_DEVICES unset); nvidia-smi is not installed")


def test_counts_mismatch_with_lost_gpu() -> None:
    found = devices.check_gpu_counts(A100X7, 6, 8, True, lost_bus_ids=["0000:4E:00.0"])
    assert codes(found) == [dg.GPU_COUNT_MISMATCH.code, dg.TOO_FEW_GPUS.code]
    assert found[0].observed == ("nvidia-smi lists 7 GPUs but torch.cuda.device_count() is 6 "
                                 "(CUDA_VISIBLE_DEVICES unset); nvidia-smi cannot reach GPU "
                                 "0000:4E:00.0")
    assert found[1].fix.startswith("pass --nproc-per-node 6 to fit the 6 visible devices")


def test_counts_seven_of_eight_is_too_few() -> None:
    [p] = devices.check_gpu_counts(A100X7, 7, 8, True, gpus_per_replica=2)
    assert p.code == dg.TOO_FEW_GPUS.code
    assert p.observed == ("the job needs 8 GPUs per node (--nproc-per-node 4 x "
                          "--gpus-per-replica 2) but torch sees 7 (CUDA_VISIBLE_DEVICES unset)")
    assert p.fix.startswith("pass --nproc-per-node 3 or --gpus-per-replica 1 to fit the 7")


def test_counts_mismatch_ignored_when_cvd_set() -> None:
    found = devices.check_gpu_counts(A100X8, 2, 4, True, cuda_visible_devices="0,1")
    assert codes(found) == [dg.TOO_FEW_GPUS.code]
    assert "(CUDA_VISIBLE_DEVICES=0,1)" in found[0].observed


def test_counts_mismatch_causes() -> None:
    [p] = devices.check_gpu_counts(A100X8, 0, 0, True)
    assert "driver older than torch's CUDA" in p.cause
    [p] = devices.check_gpu_counts(MIG, 1, 1, True)
    assert p.code == dg.GPU_COUNT_MISMATCH.code and "MIG is enabled" in p.cause
    [p] = devices.check_gpu_counts(A100X8, 7, 0, True)
    assert p.cause == dg.GPU_COUNT_MISMATCH.cause
