"""Unit tests of ddpcheck.explain."""
