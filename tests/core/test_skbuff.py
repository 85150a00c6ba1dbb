"""Tests for routelab.core.skbuff: PacketTrace and skb_cow_needed."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from routelab.core.skbuff import PacketTrace, int_to_ip, ip_to_int, skb_cow_needed


@pytest.mark.parametrize("cloned, headroom, needed",
                         list(itertools.product([False, True], [0, 15, 16, 17, 31, 32, 33, 64],
                                                [0, 14, 16, 32])))
def test_skb_cow_truth_table(cloned, headroom, needed):
    # skb_cow copies when the skb is cloned or the headroom is below max(16, needed)
    want = cloned or headroom < max(16, needed)
    assert bool(skb_cow_needed(cloned, headroom, needed)) is want


def test_skb_cow_vectorised():
    cloned = np.array([False, False, True, False])
    headroom = np.array([16, 15, 64, 31])
    assert list(skb_cow_needed(cloned, headroom, 32)) == [True, True, True, True]
    assert list(skb_cow_needed(cloned, headroom, 0)) == [False, True, True, False]


def test_ip_conversions():
    assert ip_to_int("10.0.0.1") == 0x0A000001
    assert int_to_ip(0xC0000201) == "192.0.2.1"
    for bad in ("10.0.0", "256.1.1.1", "1.2.3.-1"):
        with pytest.raises(ValueError):
            ip_to_int(bad)


def test_trace_build_sorts_defaults_and_broadcasts():
    tr = PacketTrace.build([0.3, 0.1, 0.2], saddr=1, daddr=[5, 6, 7], ttl=9)
    assert list(tr.t) == [0.1, 0.2, 0.3]
    assert list(tr.daddr) == [6, 7, 5]          # columns move with their packet
    assert list(tr.ttl) == [9, 9, 9] and tr.length[0] == 1500 and tr.tag[0] == -1
    assert tr.saddr.dtype == np.uint32 and tr.t.dtype == np.float64
    with pytest.raises(TypeError):
        PacketTrace.build([0.0], saddr=1)       # daddr missing
    with pytest.raises(TypeError):
        PacketTrace.build([0.0], saddr=1, daddr=2, colour=3)


def test_trace_concat_and_take():
    a = PacketTrace.build([0.0, 0.2], saddr=1, daddr=1)
    b = PacketTrace.build([0.1], saddr=2, daddr=2)
    m = PacketTrace.concat([a, b, PacketTrace.build(np.zeros(0), saddr=0, daddr=0)])
    assert len(m) == 3 and list(m.saddr) == [1, 2, 1]
    assert len(PacketTrace.concat([])) == 0
    assert list(m.take(np.array([2, 0])).t) == [0.2, 0.0]
