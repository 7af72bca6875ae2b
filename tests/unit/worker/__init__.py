"""Unit tests of ddpcheck.worker."""
