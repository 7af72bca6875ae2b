"""Unit tests of ddpcheck.cluster."""
