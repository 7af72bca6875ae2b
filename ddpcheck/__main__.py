"""``python -m ddpcheck``: same as the ``ddpcheck`` console script (launcher)."""

from ddpcheck.cli import main

raise SystemExit(main())
