"""Unit tests of ddpcheck.node."""
