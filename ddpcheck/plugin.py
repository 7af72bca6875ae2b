"""``pytest -p ddpcheck.plugin``: the name users give pytest for the ddpcheck plugin.

Runs in every worker. The plugin itself is :mod:`ddpcheck.worker.plugin`; pytest registers
it from here (``pytest_plugins`` of a plugin module), so the command line users know
(``torchrun ... -m pytest -p ddpcheck.plugin --pyargs ddpcheck.checks``) stays the same.
"""

pytest_plugins = ("ddpcheck.worker.plugin",)
