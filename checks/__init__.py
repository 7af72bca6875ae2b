"""The probes of ddpcheck, one pytest module per stage (installed as ``ddpcheck.checks``).

They run inside every torchrun worker under the ddpcheck plugin:
``torchrun --nproc-per-node 2 -m pytest -p ddpcheck.plugin --pyargs ddpcheck.checks``.
"""
