"""Unit tests of ddpcheck.judgements."""
