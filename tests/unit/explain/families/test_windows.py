"""A Windows process that asks for NCCL (families/windows.py)."""

from __future__ import annotations

from ddpcheck.explain import explain_texts
from tests.unit.explain.families.helpers import first_cause

# gh8-torchgeo-1198 (dev): Lightning on a Windows GPU box, cut before torch's error line.
TORCHGEO = [
    "GPU available: True (cuda), used: True",
    "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/2",
    r"[W C:\actions-runner\_work\pytorch\pytorch\builder\windows\pytorch\torch\csrc\distributed"
    r"\c10d\socket.cpp:601] [c10d] The client socket has failed to connect to [t2]:58152 "
    "(system error: 10049 - The requested address is not valid in its context.).",
    "Initializing distributed: GLOBAL_RANK: 1, MEMBER: 2/2",
]


def _explain(*lines: str):
    return explain_texts([("job.log", "\n".join(lines) + "\n")])


def test_lightnings_cuda_default_on_windows_is_a_missing_nccl_hint():
    e = _explain(*TORCHGEO)
    assert first_cause(*TORCHGEO) == "backend-unavailable" and not e.undetermined
    assert e.found[0].grade == "hint" and "Lightning's default" in e.problems[0].cause
    # variant: Lightning 1.x wording, another Winsock error, a user's own Windows paths
    assert first_cause("GPU available: True, used: True",
                       "initializing ddp: GLOBAL_RANK: 3, MEMBER: 4/4",
                       r'  File "D:\conda\envs\seg\lib\site-packages\torch\distributed'
                       r'\distributed_c10d.py", line 602, in init_process_group') == \
        "backend-unavailable"
    assert first_cause("GPU available: True (cuda), used: True",
                       "Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/4",
                       "[W socket.cpp:558] [c10d] The client socket has failed to connect to "
                       "[kubernetes.docker.internal]:29500 (system error: 10061 - No connection "
                       "could be made because the target machine actively refused it.).") == \
        "backend-unavailable"


def test_nccl_asked_for_in_words_on_windows_is_cause_grade():
    e = _explain(r"[2024-03-02 10:11:12,001] [INFO] [comm.py:668:init_distributed] Initializing "
                 "TorchBackend in DeepSpeed with backend nccl",
                 r'  File "C:\Users\me\miniconda3\envs\ds\lib\site-packages\deepspeed\comm'
                 r'\torch.py", line 112, in init_process_group')
    assert e.problems[0].code == "backend-unavailable" and e.found[0].grade == "cause"


def test_no_windows_no_cuda_or_another_backend_is_not_a_missing_nccl():
    linux = [TORCHGEO[0], TORCHGEO[1], TORCHGEO[3]]
    assert first_cause(*linux) != "backend-unavailable"  # a Linux log: NCCL is there
    cpu = ["GPU available: True (cuda), used: False", *TORCHGEO[1:]]
    assert first_cause(*cpu) != "backend-unavailable"  # Lightning on CPU picks gloo
    gloo = [*TORCHGEO, "distributed_backend=gloo",
            "All distributed processes registered. Starting with 2 processes"]
    assert first_cause(*gloo) != "backend-unavailable"  # the world formed with gloo


def test_a_cause_grade_line_comes_before_the_lightning_default():
    libuv = ("RuntimeError: use_libuv was requested but PyTorch was built without libuv "
             "support, run with USE_LIBUV=0 to disable it.")
    assert first_cause(*TORCHGEO, libuv) == "tcpstore-libuv-unavailable"
    # torch's own words are read as before (device.py), never twice
    e = _explain(*TORCHGEO, "RuntimeError: Distributed package doesn't have NCCL built in")
    assert [p.code for p in e.problems if not p.consequence_of] == ["backend-unavailable"]
