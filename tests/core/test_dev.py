"""Tests for routelab.core.dev: the devices' TX queue (qdisc + TX ring)."""

from __future__ import annotations

import pytest

from routelab.core.dev import TxQueue
from routelab.core.dst import DstEntry


def test_tx_queue_completion_releases_each_frames_dst_once():
    es = [DstEntry(i, 0.0) for i in range(3)]
    for e, held in zip(es, (7, 7, 6), strict=True):   # the frames below that hold each
        e.refcnt = held
    t = TxQueue(1)
    for k in range(40):                   # grows with entries and Nones mixed
        t.push(0.1 * k, es[k % 3] if k % 2 else None, None, 0)
    assert len(t.dsts()) == 40 and t.dsts()[1] is es[1]
    assert t.retire(0.95) == 30           # frames 0..9 left the wire
    assert [e.refcnt for e in es] == [5, 5, 5]   # frames 1, 3, 5, 7, 9 held es[1,0,2,1,0]
    t.drain()                             # 15 more: 5 frames for each entry
    assert len(t) == 0 and [e.refcnt for e in es] == [0, 0, 0]


def test_tx_queue_completion_of_a_dst_nobody_holds_raises():
    """TX completion is dst_release: a frame holding a dst with no reference
    left is an unbalanced release, which raises (compiled and pure)."""
    e = DstEntry(1, 0.0)
    e.refcnt = 1
    t = TxQueue(1)
    t.push(0.1, e, None, 0)
    t.push(0.2, e, None, 0)               # a second frame, but no second reference
    with pytest.raises(AssertionError, match="dst_release below zero"):
        t.retire(1.0)


def test_tx_queue_tells_each_owner_once_in_order_with_its_tag():
    class Owner:
        def __init__(self):
            self.done = []

        def tx_complete(self, tag, t):
            self.done.append((tag, t))

    o = Owner()
    t = TxQueue(1)
    for k in range(30):                   # grows with owned and unowned frames mixed
        t.push(0.1 * k, None, o if k % 3 == 0 else None, k)
    assert t.owned == 10 and t.next_owned() == 0.0
    t.retire(1.05)
    assert o.done == [(k, 0.1 * k) for k in range(0, 11, 3)]
    assert t.owned == 6 and abs(t.next_owned() - 1.2) < 1e-12
    t.drain()
    assert [k for k, _ in o.done] == list(range(0, 30, 3)) and t.owned == 0
    assert t.next_owned() == float("inf")
