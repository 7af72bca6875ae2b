"""Unit tests, one folder per package of ddpcheck (no processes, no sockets but loopback)."""
