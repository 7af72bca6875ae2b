"""``python -m ddpcheck.worker``: what torchrun starts for every rank (see ``wrapper``)."""

import sys

from ddpcheck.worker.wrapper import main

sys.exit(main())
