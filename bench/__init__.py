"""Benchmarks and proofs that print figures; run from the repo root: ``python -m bench.NAME``.

They import the test helpers (``tests.helpers``, ``tests.cluster.netns``) as ordinary modules.
"""
