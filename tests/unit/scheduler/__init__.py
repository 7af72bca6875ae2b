"""Unit tests of ddpcheck.scheduler."""
