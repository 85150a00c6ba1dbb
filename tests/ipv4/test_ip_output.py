"""Tests for routelab.ipv4.ip_output.ip_output_plan: fragment counts, wire bytes, cost.

Expected values are worked out by hand: ip_fragment cuts the payload into
``(mtu - 20) // 8 * 8``-byte pieces (the last takes the rest), every fragment
carries its own 20-byte IP header and is its own Ethernet frame (38 bytes of
preamble, header, FCS and gap, and at least the 84-byte minimum frame).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from routelab.costs import ETH_MIN_FRAME, ETH_OVERHEAD, wire_bytes
from routelab.ipv4.ip_fragment import fragment_plan
from routelab.ipv4.ip_output import ip_output_plan

COST = {"ip_output": 1.0, "ip_fragment": 10.0, "dev_queue_xmit": 100.0,
        "hard_start_xmit": 1000.0, "tx_complete": 10000.0, "tx_irq": 100000.0}
PER_FRAG = 100.0 + 1000.0 + 10000.0


def plan(length, mtu=1500, df=False, napi=True, copy=0.5, oif=0):
    length = np.atleast_1d(np.asarray(length, dtype=np.int64))
    n = length.size
    return ip_output_plan(length, np.full(n, oif), np.array([mtu, 576]),
                          np.full(n, df), COST, copy, np.full(n, napi))


def test_a_packet_that_fits_goes_whole():
    out = plan([1500, 60])
    assert out["nfrag"].tolist() == [1, 1]
    assert out["wire_bytes"].tolist() == [1538, 98]
    assert out["out_cost"].tolist() == [1.0 + PER_FRAG] * 2


def test_a_small_packet_pads_to_the_minimum_frame():
    assert plan(28)["wire_bytes"].tolist() == [ETH_MIN_FRAME]


def test_fragmentation_by_hand():
    # 4000-byte datagram (3980 payload) on a 1500 MTU: 1480 + 1480 + 1020
    out = plan(4000)
    assert out["nfrag"].tolist() == [3]
    assert out["wire_bytes"].tolist() == [(1500 + 38) * 2 + (1040 + 38)]
    # ip_output once, then per fragment ip_fragment + the device path, and the payload copy
    assert out["out_cost"].tolist() == [1.0 + 3 * 10.0 + 3980 * 0.5 + 3 * PER_FRAG]


def test_a_tiny_last_fragment_still_takes_a_minimum_frame():
    # 1501 bytes on a 1500 MTU: 1480 + 1 payload bytes; the second fragment is a
    # 21-byte IP packet, which Ethernet pads to the 64-byte minimum frame
    out = plan(1501)
    assert out["nfrag"].tolist() == [2]
    assert out["wire_bytes"].tolist() == [1500 + 38 + ETH_MIN_FRAME]


def test_df_set_means_one_frame_and_no_fragment_cost():
    # (ip_forward already turned such packets back with frag-needed; ip_output
    # must not count fragments for them)
    out = plan(4000, df=True)
    assert out["nfrag"].tolist() == [1]
    assert out["wire_bytes"].tolist() == [4038]
    assert out["out_cost"].tolist() == [1.0 + PER_FRAG]


def test_non_napi_driver_pays_a_tx_interrupt_per_fragment():
    a, b = plan(4000, napi=True), plan(4000, napi=False)
    assert b["out_cost"][0] - a["out_cost"][0] == pytest.approx(3 * 100000.0)


def test_mtu_is_taken_from_the_output_device():
    out = plan(1000, oif=1)          # device 1 has MTU 576: 552 + 428 payload
    assert out["nfrag"].tolist() == [2]
    assert out["wire_bytes"].tolist() == [(572 + 38) + (448 + 38)]


@given(st.lists(st.integers(min_value=20, max_value=65535), min_size=1, max_size=30),
       st.integers(min_value=68, max_value=9000))
def test_wire_bytes_are_the_sum_of_the_fragments_frames(lengths, mtu):
    out = plan(lengths, mtu=mtu)
    lengths = np.asarray(lengths)
    fp = fragment_plan(lengths - 20, mtu)
    owner, _, payload, ip_len = fp.fragments()
    frames = np.bincount(owner, weights=wire_bytes(ip_len), minlength=len(lengths))
    assert out["nfrag"].tolist() == fp.n_frags.tolist()
    assert out["wire_bytes"].tolist() == frames.astype(np.int64).tolist()
    # each frame carries at least the Ethernet overhead on top of its IP bytes
    assert (out["wire_bytes"] >= lengths + ETH_OVERHEAD).all()
