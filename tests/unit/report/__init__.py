"""Unit tests of ddpcheck.report."""
