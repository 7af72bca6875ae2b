"""Tests for ddpcheck.parsing: value parsers and UsageErrors that name their source."""

from __future__ import annotations

import pytest

from ddpcheck import parsing
from ddpcheck.parsing import UsageError, convert


# --- convert: where the bad value came from ---------------------------------------------------
def test_convert_returns_the_parsed_value():
    assert convert("--nodes", "4", parsing.positive_int) == 4
    assert convert("DDPCHECK_NODES", "4", parsing.positive_int) == 4


def test_convert_error_from_a_flag_names_the_flag_and_quotes_the_value():
    with pytest.raises(UsageError) as err:
        convert("--nodes", "abc", parsing.positive_int)
    assert str(err.value) == "--nodes: expected a positive integer, got 'abc'"


def test_convert_error_from_the_environment_names_the_variable_and_value():
    with pytest.raises(UsageError) as err:
        convert("DDPCHECK_NODES", "abc", parsing.positive_int)
    message = str(err.value)
    assert message.startswith("DDPCHECK_NODES=")
    assert "abc" in message and "(environment)" in message
    assert "expected a positive integer" in message
    assert "--nodes" not in message


def test_usage_errors_are_one_line_value_errors_without_a_chained_cause():
    with pytest.raises(UsageError) as err:
        convert("--timeout", "soon", parsing.positive_float)
    assert isinstance(err.value, ValueError)
    assert "\n" not in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


# --- positive_int / non_negative_int ---------------------------------------------------------
@pytest.mark.parametrize("raw, value", [("1", 1), (" 8 ", 8), ("0042", 42)])
def test_positive_int_accepts_positive_integers(raw, value):
    assert parsing.positive_int(raw) == value


@pytest.mark.parametrize("raw", ["0", "-1", "1.5", "abc", "", " ", "1e3", "nan"])
def test_positive_int_rejects_everything_else(raw):
    with pytest.raises(ValueError, match="expected a positive integer"):
        parsing.positive_int(raw)


@pytest.mark.parametrize("raw, value", [("0", 0), ("3", 3), (" 7\n", 7)])
def test_non_negative_int_accepts_zero_and_up(raw, value):
    assert parsing.non_negative_int(raw) == value


@pytest.mark.parametrize("raw", ["-1", "x", "", "2.0"])
def test_non_negative_int_rejects_negatives_and_non_integers(raw):
    with pytest.raises(ValueError, match="expected an integer >= 0"):
        parsing.non_negative_int(raw)


# --- positive_float ----------------------------------------------------------------------------
@pytest.mark.parametrize("raw, value", [("1", 1.0), ("0.5", 0.5), (" 300 ", 300.0), ("1e2", 100.0)])
def test_positive_float_accepts_finite_positive_seconds(raw, value):
    assert parsing.positive_float(raw) == value


@pytest.mark.parametrize("raw", ["0", "-1", "-0.0", "nan", "NaN", "inf", "Infinity", "-inf",
                                 "abc", ""])
def test_positive_float_rejects_zero_negative_nan_and_inf(raw):
    with pytest.raises(ValueError, match="expected a number of seconds > 0"):
        parsing.positive_float(raw)


# --- choice ------------------------------------------------------------------------------------
def test_choice_normalises_case_and_whitespace():
    parse = parsing.choice("auto", "nccl", "gloo")
    assert parse(" GLOO ") == "gloo"


def test_choice_error_lists_the_allowed_values():
    with pytest.raises(ValueError, match="expected one of auto, nccl, gloo"):
        parsing.choice("auto", "nccl", "gloo")("mpi")


# --- endpoint ----------------------------------------------------------------------------------
@pytest.mark.parametrize("raw, expected", [
    ("node0:29500", ("node0", 29500)),
    (" 10.0.0.1:1 ", ("10.0.0.1", 1)),
    ("h:65535", ("h", 65535)),
    ("[::1]:29500", ("::1", 29500)),
    ("[fe80::1%eth0]:29400", ("fe80::1%eth0", 29400)),
])
def test_endpoint_parses_host_and_port_including_bracketed_ipv6(raw, expected):
    assert parsing.endpoint(raw) == expected


@pytest.mark.parametrize("raw", ["host", "", ":29500", "[::1]"])
def test_endpoint_without_host_or_port_is_rejected(raw):
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        parsing.endpoint(raw)


@pytest.mark.parametrize("raw", ["h:0", "h:65536", "h:70000", "h:-1", "h:http", "h:", "h:80.5"])
def test_endpoint_port_must_be_1_to_65535(raw):
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        parsing.endpoint(raw)


def test_endpoint_error_through_convert_names_the_flag():
    with pytest.raises(UsageError) as err:
        convert("--rdzv-endpoint", "h:70000", parsing.endpoint)
    assert str(err.value).startswith("--rdzv-endpoint: expected HOST:PORT with a port from 1")
    assert "'h:70000'" in str(err.value)


@pytest.mark.parametrize("raw", ["fe80::1", "[]:29500"])
def test_endpoint_rejects_unbracketed_ipv6_and_empty_brackets(raw):
    with pytest.raises(ValueError):
        parsing.endpoint(raw)


def test_the_scheduler_value_parsers_take_digits_only() -> None:
    assert parsing.whole_number("0") == 0
    assert parsing.positive_count("3") == 3
    assert parsing.port_number("29500") == 29500
    for bad, parse in (("-1", parsing.whole_number), ("1.5", parsing.whole_number),
                       ("0", parsing.positive_count), ("0", parsing.port_number),
                       ("65536", parsing.port_number), ("http", parsing.port_number)):
        with pytest.raises(ValueError):
            parse(bad)


def test_join_host_port() -> None:
    assert parsing.join_host_port("gpu-01", 29500) == "gpu-01:29500"
    assert parsing.join_host_port("gpu-01", None) == "gpu-01"
    assert parsing.join_host_port("fd00::4", 29500) == "[fd00::4]:29500"
