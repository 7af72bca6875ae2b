"""Unit tests of ddpcheck.launcher."""
