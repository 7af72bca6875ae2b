"""Recorded job environments (tests/data/jobs/*.json) for the scheduler-side unit tests.

Each file holds a real job's environment as one task saw it (`env`), that task's `hostname`,
and stored copies of files it read (`files`, e.g. PBS_NODEFILE).
"""

from __future__ import annotations

import json
from typing import Any, Callable

from ddpcheck.scheduler.detect import JobEnv, detect
from tests.helpers.paths import DATA

JOBS = DATA / "jobs"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((JOBS / f"{name}.json").read_text())


def reader(doc: dict[str, Any]) -> Callable[[str], str]:
    """A read_file seam serving the recorded copies of the job's files."""
    files = {path: (JOBS / stored).read_text() for path, stored in doc.get("files", {}).items()}

    def read(path: str) -> str:
        if path not in files:
            raise FileNotFoundError(2, "No such file or directory", path)
        return files[path]
    return read


def env_of(name: str, **changes: str | None) -> dict[str, str]:
    """The recorded environment; changes set (or, with None, remove) variables."""
    env = dict(recorded(name)["env"])
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def job_of(name: str, hostname: str | None = None, **changes: str | None) -> JobEnv:
    """detect() on a recorded environment, with changes applied."""
    doc = recorded(name)
    return detect(env_of(name, **changes), read_file=reader(doc),
                  hostname=hostname or doc["hostname"])
