"""Accelerate's port check and Lightning's Slurm task check, as those libraries print them."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

# accelerate/commands/launch.py (prepare_multi_gpu_env); old releases print "----main..."
ACCELERATE = ("ConnectionError: Tried to launch distributed communication on port `29500`, but "
              "another process is utilizing it. Please specify a different port (such as using "
              "the `--main_process_port` flag or specifying a different `main_process_port` in "
              "your config file) and rerun your script.")
# lightning_fabric/plugins/environments/slurm.py _validate_srun_variables
LIGHTNING = ("RuntimeError: You set `--ntasks=200` in your SLURM bash script, but this variable "
             "is not supported. HINT: Use `--ntasks-per-node=200` instead.")


def test_accelerate_port_in_use_names_the_port():
    assert first_cause(ACCELERATE) == "master-port-in-use"
    e = explain_texts([("job.log", ACCELERATE + "\n")])
    assert "29500" in e.problems[0].cause and "--main_process_port" in e.problems[0].fix


def test_a_port_message_of_another_kind_is_not_accelerates():
    assert first_cause("Tried to launch distributed communication on port `29500` and it "
                       "worked") != "master-port-in-use"


def test_lightning_ntasks_without_ntasks_per_node():
    assert first_cause(LIGHTNING) == "scheduler-env-invalid"
    e = explain_texts([("job.log", LIGHTNING + "\n")])
    assert "SLURM_NTASKS=200" in e.problems[0].cause


def test_ntasks_per_node_in_a_script_is_not_the_error():
    assert first_cause("#SBATCH --ntasks-per-node=4", "srun python train.py") == "none"
