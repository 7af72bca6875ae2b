"""Import every module of the installed ddpcheck (its probes, ddpcheck.checks, included).

Run with the python of an environment made the way users make it (torch, then
`pip install .`), isolated (`python -I`) so that no checkout on the path stands in for the
install. A module that imports a package ddpcheck does not declare fails here, as it would
on a user's fresh machine. Used by .ci/run and tests/world/test_fresh_clone.py.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import traceback


def main() -> int:
    import ddpcheck

    if "site-packages" not in (ddpcheck.__file__ or ""):
        print(f"ddpcheck comes from {ddpcheck.__file__}, not from an installed copy")
        return 1
    names = [m.name for m in pkgutil.walk_packages(ddpcheck.__path__, "ddpcheck.")]
    failed = []
    for name in names:
        try:
            if name.endswith(".__main__"):  # importing it would run the command
                importlib.import_module(name.rpartition(".")[0])
                continue
            importlib.import_module(name)
        except Exception:  # every failure is listed, not only the first
            failed.append(name)
            print(f"cannot import {name}:\n{traceback.format_exc(limit=3)}")
    print(f"{len(names) - len(failed)} of {len(names)} modules of the installed ddpcheck import")
    return 1 if failed or len(names) < 50 else 0


if __name__ == "__main__":
    sys.exit(main())
