"""The environment variables that matter to distributed training, with secrets redacted.

Pure; used by the launcher (``ddpcheck env``, the JSON report) and by the rendezvous probes
that compare settings across ranks. Values of variables whose names look like tokens, keys
or passwords never leave this module unredacted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "TORCHELASTIC_", "MASTER_", "PET_", "SLURM_", "PBS_",
            "DDPCHECK_", "CUDA_", "FI_", "UCX_", "OMPI_", "PMI_")
NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
         "OMP_NUM_THREADS", "LD_LIBRARY_PATH", "HOSTNAME")
SECRET = re.compile(r"TOKEN|SECRET|PASSW|PASSPHRASE|(^|_)PASS($|_)|PWD$"
                    r"|API_?KEY|ACCESS_?KEY|PRIVATE|CREDENTIAL"
                    r"|AUTH|(^|_)KEY($|_)|COOKIE|SESSION", re.IGNORECASE)
REDACTED = "<redacted>"


def is_secret(name: str) -> bool:
    return bool(SECRET.search(name))


def redact(env: Mapping[str, str]) -> dict[str, str]:
    """Copy env with secret-looking values replaced by <redacted>."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in env.items()}


def distributed_env(env: Mapping[str, str]) -> dict[str, str]:
    """The distributed-relevant subset of env, sorted, secrets redacted."""
    picked = {k: v for k, v in env.items() if k.startswith(PREFIXES) or k in NAMES}
    return dict(sorted(redact(picked).items()))
