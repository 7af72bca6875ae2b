"""``python -m ddpcheck``: same as the ``ddpcheck`` console script (launcher)."""

from ddpcheck.launcher.cli import main

raise SystemExit(main())
