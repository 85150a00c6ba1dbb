"""Tests for routelab.sysctl: knob metadata and validation."""

from __future__ import annotations

import numpy as np
import pytest

from routelab.errors import KnobError
from routelab.sysctl import SYSCTLS, Knob, knob_table, validate, validate_all

INT = Knob("backlog", 300, int, 1, 1000, "packets", "test int knob")
FLT = Knob("interval", 0.5, float, 0.0, 60.0, "s", "test float knob")
STR = Knob("kernel", "2.6.0", str, choices=("2.4.24", "2.6.0"))
FREE = Knob("label", "x", str)          # free-form string, no choices
FLAG = Knob("df", False, bool)


# --- int ----------------------------------------------------------------------------


@pytest.mark.parametrize("given, expected", [
    (5, 5), (1, 1), (1000, 1000),             # inclusive range ends
    (7.0, 7),                                 # integral float
    ("42", 42), (" 42 ", 42), ("0x10", 16), ("1e2", 100), ("3.0", 3),   # CLI text
    (np.int64(9), 9), (np.int32(9), 9), (np.uint16(9), 9), (np.float64(8.0), 8),
    (np.float32(8.0), 8), (np.array(12), 12),
])
def test_int_accepts_and_converts(given, expected):
    out = INT.validate(given)
    assert out == expected
    assert type(out) is int


@pytest.mark.parametrize("given", [0, 1001, -5, 2.5, "2.5", "abc", "", True, False,
                                   np.True_, None, [3], float("nan"), np.int64(0)])
def test_int_rejects(given):
    with pytest.raises(KnobError):
        INT.validate(given)


# --- float --------------------------------------------------------------------------


@pytest.mark.parametrize("given, expected", [
    (0, 0.0), (60, 60.0), (0.25, 0.25), ("0.05", 0.05), ("1e1", 10.0),
    (np.float32(0.5), 0.5), (np.float64(2.5), 2.5), (np.int64(3), 3.0),
])
def test_float_accepts_and_converts(given, expected):
    out = FLT.validate(given)
    assert out == pytest.approx(expected)
    assert type(out) is float


@pytest.mark.parametrize("given", [-0.001, 60.5, float("nan"), float("inf"), "inf", "nan",
                                   "fast", True, None, (1,)])
def test_float_rejects(given):
    with pytest.raises(KnobError):
        FLT.validate(given)


# --- str and bool -------------------------------------------------------------------


def test_str_choices():
    assert STR.validate("2.4.24") == "2.4.24"
    for bad in ("2.4", "", 2.6, None):
        with pytest.raises(KnobError) as ei:
            STR.validate(bad)
        assert "'2.4.24'" in str(ei.value) and "'2.6.0'" in str(ei.value)


def test_free_form_str_knob():
    assert FREE.validate("hello") == "hello"
    with pytest.raises(KnobError):
        FREE.validate(3)


@pytest.mark.parametrize("given, expected", [
    (True, True), (False, False), (1, True), (0, False), ("true", True), ("Yes", True),
    ("on", True), ("1", True), ("false", False), ("OFF", False), ("no", False), ("0", False),
    (np.True_, True), (np.False_, False),
])
def test_bool_accepts(given, expected):
    assert FLAG.validate(given) is expected


@pytest.mark.parametrize("given", [2, -1, "maybe", "", 0.5, None])
def test_bool_rejects(given):
    with pytest.raises(KnobError):
        FLAG.validate(given)


# --- error messages -----------------------------------------------------------------


def test_error_names_knob_value_and_range():
    with pytest.raises(KnobError) as ei:
        INT.validate(5000)
    e = ei.value
    assert isinstance(e, ValueError)      # KnobError is a ValueError for generic callers
    assert e.knob == "backlog" and e.value == 5000
    msg = str(e)
    assert "backlog" in msg and "5000" in msg and "[1, 1000]" in msg and "packets" in msg
    assert "\n" not in msg


def test_error_for_cli_text_shows_the_text():
    with pytest.raises(KnobError) as ei:
        FLT.validate("-5")
    assert "interval" in str(ei.value) and "-5" in str(ei.value) and "[0, 60]" in str(ei.value)


def test_valid_text_variants():
    assert INT.valid_text() == "an integer in [1, 1000] packets"
    assert FLT.valid_text() == "a number in [0, 60] s"
    assert Knob("open", 1.0, float, None, None).valid_text() == "a number in [-inf, inf]"
    assert FLAG.valid_text() == "true or false"


def test_derived_default_accepts_none():
    k = SYSCTLS["gc_thresh"]
    assert k.default is None
    assert k.validate(None) is None
    with pytest.raises(KnobError):
        INT.validate(None)      # a knob with a real default does not take None


# --- the sysctl table and validate_all ----------------------------------------------


def test_every_sysctl_default_validates():
    for name, k in SYSCTLS.items():
        assert k.name == name
        if k.default is not None:
            assert k.validate(k.default) == k.default
        assert k.help, name


def test_validate_by_name():
    assert validate("netdev_max_backlog", "300") == 300
    with pytest.raises(KnobError) as ei:
        validate("netdev_max_backlog", 0)
    assert "netdev_max_backlog" in str(ei.value) and "[1, 100000]" in str(ei.value)
    with pytest.raises(KnobError) as ei:
        validate("no_such_sysctl", 1)
    assert "no_such_sysctl" in str(ei.value) and "gc_thresh" in str(ei.value)


def test_validate_all_fills_defaults_and_converts():
    out = validate_all([INT, FLT, FLAG], {"backlog": "20", "df": "yes"})
    assert out == {"backlog": 20, "df": True, "interval": 0.5}


def test_validate_all_rejects_unknown_names():
    with pytest.raises(KnobError) as ei:
        validate_all({"backlog": INT}, {"backlgo": 3}, what="knob of this scenario")
    msg = str(ei.value)
    assert "backlgo" in msg and "knob of this scenario" in msg and "backlog" in msg


def test_validate_all_propagates_range_errors():
    with pytest.raises(KnobError) as ei:
        validate_all({"backlog": INT}, {"backlog": 0})
    assert ei.value.knob == "backlog"


def test_knob_table_lists_every_knob():
    text = knob_table(SYSCTLS.values())
    for name in SYSCTLS:
        assert name in text
    assert "derived" in text


def test_free_form_str_valid_text():
    assert FREE.valid_text() == "a string"
