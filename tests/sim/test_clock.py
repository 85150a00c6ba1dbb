"""Tests for routelab.sim.clock: registration, ordering, re-arming, lower bound."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.sim.clock import Clock


def recorder(log, name, seconds=0.0, then=None):
    def fire(now):
        log.append((name, now))
        if then is not None:
            then(now)
        return seconds
    return fire


def test_timers_fire_in_deadline_order_ties_by_registration():
    c = Clock()
    log = []
    a = c.timer("a", recorder(log, "a"))
    b = c.timer("b", recorder(log, "b"))
    z = c.timer("z", recorder(log, "z"))
    b.mod(1.0)
    a.mod(1.0)
    z.mod(0.5)
    assert c.nt == 0.5
    assert c.run_due(0.9) == 1 and log == [("z", 0.5)]
    assert c.nt == 1.0
    c.run_due(2.0)
    assert log[1:] == [("a", 1.0), ("b", 1.0)]        # same instant: registration order
    assert c.nt == math.inf and not a.pending()


def test_rearm_moves_the_deadline_and_stale_entries_are_skipped():
    c = Clock()
    log = []
    t = c.timer("t", recorder(log, "t"))
    t.mod(5.0)
    t.mod(2.0)
    t.mod(3.0)
    assert c.nt == 2.0                       # a lower bound, not yet exact
    assert c.next_due() == 3.0               # exact
    c.run_due(10.0)
    assert log == [("t", 3.0)] and t.fired == 1


def test_stop_disarms_and_nothing_fires():
    c = Clock()
    log = []
    t = c.timer("t", recorder(log, "t"))
    t.mod(1.0)
    t.stop()
    assert c.run_due(5.0) == 0 and log == [] and c.nt == math.inf


def test_a_handler_that_rearms_inside_the_window_fires_again():
    c = Clock()
    log = []
    box = {}
    box["t"] = c.timer("t", recorder(log, "t", then=lambda now: box["t"].mod(now + 0.3)))
    box["t"].mod(0.1)
    c.run_due(1.0)
    assert [round(x, 9) for _, x in log] == [0.1, 0.4, 0.7, 1.0]
    assert box["t"].at == pytest.approx(1.3)


def test_runner_gets_non_raw_timers_and_raw_ones_fire_directly():
    c = Clock()
    log = []
    seen = []

    class Runner:
        def run_timer(self, timer, now):
            seen.append((timer.name, now))
            timer.fire(now)

    c.runner = Runner()
    k = c.timer("kernel", recorder(log, "kernel"), cpu=1)
    r = c.timer("tick", recorder(log, "tick"), raw=True)
    k.mod(1.0)
    r.mod(2.0)
    c.run_due(3.0)
    assert seen == [("kernel", 1.0)] and log == [("kernel", 1.0), ("tick", 2.0)]
    assert k.cpu == 1


def test_bad_arguments_are_named():
    c = Clock()
    with pytest.raises(TypeError, match="'x'.*callable"):
        c.timer("x", 3)
    t = c.timer("y", lambda now: 0.0)
    with pytest.raises(ValueError, match="'y'.*NaN"):
        t.mod(float("nan"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(0, 10, allow_nan=False)),
                min_size=1, max_size=40),
       st.floats(0, 12, allow_nan=False))
def test_fires_exactly_the_live_deadlines_up_to_t_in_order(arms, t):
    c = Clock()
    log = []
    timers = [c.timer(f"t{i}", recorder(log, i)) for i in range(6)]
    for i, at in arms:
        timers[i].mod(at)
        assert c.nt <= min(x.at for x in timers)      # never above the earliest deadline
    want = sorted((x.at, x.seq) for x in timers if x.at <= t)
    c.run_due(t)
    assert [(now, name) for name, now in log] == want
    assert c.nt == min([x.at for x in timers] + [math.inf])
