"""Helpers shared by tests and bench/: recorded data, installs, counting stores, spawned ranks."""
