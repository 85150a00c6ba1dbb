"""Tests for routelab.sim.queues: the loop's ring buffers and busy-interval log."""

from __future__ import annotations

from collections import deque

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.sim.queues import IntervalLog, TimeQueue


def test_time_queue_is_fifo_across_growth_and_wraparound():
    q = TimeQueue(2)                      # rounds up to the minimum capacity
    for i in range(10):
        q.push(float(i))
    assert q.retire(5.5) == 4 and q.first() == 6.0   # head moved: the next pushes wrap
    for i in range(10, 60):               # grows twice with the head mid-buffer
        q.push(float(i))
    assert len(q) == 54 and list(q.values()) == [float(i) for i in range(6, 60)]
    assert q.retire(59.0) == 0 and len(q) == 0


def test_time_queue_retire_keeps_later_times_even_if_smaller_ones_follow():
    q = TimeQueue()
    for x in (1.0, 5.0, 2.0):             # FIFO, not a priority queue
        q.push(x)
    assert q.retire(3.0) == 2 and q.first() == 5.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.floats(0, 100, allow_nan=False)), max_size=300))
def test_time_queue_matches_a_deque(ops):
    q, ref = TimeQueue(), deque()
    for push, x in ops:
        if push:
            q.push(x)
            ref.append(x)
        else:
            while ref and ref[0] <= x:
                ref.popleft()
            assert q.retire(x) == len(ref)
        assert list(q.values()) == list(ref)
        if ref:
            assert q.first() == ref[0]


def test_interval_log_merges_back_to_back_intervals_and_grows():
    lg = IntervalLog(cap=1)
    lg.add(0.0, 1.0, 1.0)
    lg.add(1.0, 0.5, 1.5)                 # starts where the last ended: merged
    lg.add(2.0, 0.25, 2.25)
    for k in range(100):                  # forces several doublings
        lg.add(10.0 + k, 0.5, 10.5 + k)
    s, d = lg.arrays()
    assert len(lg) == 102
    assert s[:3].tolist() == [0.0, 2.0, 10.0] and d[:3].tolist() == [1.5, 0.25, 0.5]
    assert d.dtype == np.float64 and s[-1] == 109.0


def test_interval_log_merge_uses_the_callers_end_time():
    lg = IntervalLog()
    lg.add(0.1, 0.2, 0.30000000000000004)      # the caller's own 0.1 + 0.2
    lg.add(0.30000000000000004, 0.1, 0.4)
    assert len(lg) == 1
    lg.add(0.4000000001, 0.1, 0.5)
    assert len(lg) == 2
