"""Tests for routelab.sim.ledger and routelab.core.dropreason."""

from __future__ import annotations

import pytest

from routelab.core.dropreason import OUTCOME_NAMES, OUTCOMES, REASONS, reason
from routelab.result import OUTCOMES as RESULT_OUTCOMES
from routelab.sim.ledger import NO_DROP, Ledger


def test_slots_accumulate_in_order_and_by_name():
    lg = Ledger()
    a = lg.slot("route_slow")
    b = lg.slot("timers")
    assert (a, b) == (0, 1) and lg.slot("route_slow") == a      # made once
    for x in (0.1, 0.2, 0.3):
        lg.charge(a, x)
    lg.charge(b, 1e-6)
    # the same double additions as a Python float accumulator
    want = 0.0
    for x in (0.1, 0.2, 0.3):
        want += x
    assert lg.charged("route_slow") == want
    assert list(lg.profile()) == ["route_slow", "timers"]
    assert lg.charged("never") == 0.0


def test_a_slot_made_later_keeps_the_earlier_sums():
    lg = Ledger()
    a = lg.slot("x")
    lg.charge(a, 2.5)
    c = lg.slot("y")
    lg.charge(c, 1.0)
    assert lg.profile() == {"x": 2.5, "y": 1.0}


def test_charge_rest_charges_only_what_nested_stages_did_not():
    lg = Ledger()
    outer, inner = lg.slot("timers"), lg.slot("neigh_destroy")
    mark = lg.total
    lg.charge(inner, 0.25)            # a stage the outer one called
    lg.charge_rest(outer, 1.0, mark)  # the outer stage's inclusive 1 s
    assert lg.profile() == {"timers": 0.75, "neigh_destroy": 0.25}
    assert lg.total == 1.0 == sum(lg.profile().values())


def test_drop_writes_the_outcome_column_and_second_results_start_clean():
    lg = Ledger()
    assert lg.why == NO_DROP and lg.ok and lg.t == 0.0
    lg.outcome = bytearray(4)
    lg.drop(2, OUTCOMES["drop_qdisc"])
    assert list(lg.outcome) == [0, 0, OUTCOMES["drop_qdisc"], 0]


def test_drop_reason_table_is_consistent():
    codes = [r.code for r in REASONS]
    assert codes == sorted(set(codes)) and all(0 <= c < 128 for c in codes)
    assert OUTCOMES == RESULT_OUTCOMES                     # one table, re-exported
    assert all(OUTCOME_NAMES[OUTCOMES[n]] == n for n in OUTCOMES)
    assert NO_DROP not in OUTCOME_NAMES
    assert reason("drop_dst_overflow").where == "dst_alloc"
    with pytest.raises(KeyError, match="known"):
        reason("nope")
