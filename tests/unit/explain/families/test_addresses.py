"""Gloo's IP-family check (gloo/transport/tcp/device.cc Device::isInitiator)."""

from __future__ import annotations

from tests.unit.explain.families.helpers import first_cause

ENFORCE = ("[rank0]: RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
           "device.cc:276] ss1.ss_family == ss2.ss_family. 2 vs 10")


def test_mixed_ipv4_and_ipv6_peers():
    assert first_cause(ENFORCE) == "address-family-mismatch"


def test_another_gloo_enforce_is_not_an_address_family():
    assert first_cause("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/"
                       "pair.cc:490] op.preamble.length <= op.nbytes. 8 vs 4") != \
        "address-family-mismatch"
