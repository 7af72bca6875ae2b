"""Unit tests of ddpcheck.verdicts."""
