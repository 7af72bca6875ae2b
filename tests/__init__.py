"""ddpcheck's tests: ``unit/`` mirrors the package, ``world/``, ``cluster/`` and ``gpu/`` are tiers.

A package, so that shared helpers are ordinary imports (``from tests.helpers import ...``)
for the tests and for ``bench/``.
"""
