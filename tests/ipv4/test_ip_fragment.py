"""Tests for routelab.ipv4.ip_fragment: fragment sizing, ip_fragment, ip_defrag."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.errors import KnobError
from routelab.ipv4.ip_fragment import (
    IPQ_STRUCT_BYTES,
    FragmentNeeded,
    IpDatagram,
    IpDefrag,
    IpFragment,
    fragment_plan,
    ip_fragment,
    skb_truesize,
)

mtus = st.integers(68, 9000)


def _dgram(payload: bytes, id_: int = 7, df: bool = False) -> IpDatagram:
    return IpDatagram(id_, 0x0A000001, 0x0A000002, 17, payload, df=df, ttl=33)


def _frag(offset: int, data: bytes, mf: bool, id_: int = 1) -> IpFragment:
    return IpFragment(id_, 1, 2, 17, offset, mf, data)


def _held_mem(r: IpDefrag) -> int:
    return sum(IPQ_STRUCT_BYTES + sum(q.sizes) for q in r._queues.values())


# --- fragment_plan ----------------------------------------------------------------


def test_plan_known_values():
    p = fragment_plan([0, 1480, 1481, 32768 + 8], 1500)
    assert p.n_frags.tolist() == [1, 1, 2, 23]  # NFS 32 KiB write: 22 full + 1
    assert p.last.tolist() == [0, 1480, 1, 32776 - 22 * 1480]
    assert p.fragmented.tolist() == [False, False, True, True]
    assert p.total_wire_bytes().tolist() == [20, 1500, 1521, 32776 + 23 * 20]


def test_plan_scalar_and_mixed_mtu():
    p = fragment_plan(1000, [576, 1500, 68])
    assert p.n_frags.tolist() == [2, 1, 21]
    assert p.chunk.tolist()[0] == 552 and p.chunk.tolist()[2] == 48


@given(st.lists(st.tuples(st.integers(0, 20000), mtus), min_size=1, max_size=30))
def test_plan_flattened_rows_match_byte_level(rows):
    lengths, mtu = map(np.array, zip(*rows, strict=True))
    owner, offset, payload, wire = fragment_plan(lengths, mtu).fragments()
    for i, (length, m) in enumerate(rows):
        frags = ip_fragment(_dgram(bytes(length)), int(m))
        sel = owner == i
        assert offset[sel].tolist() == [f.offset for f in frags]
        assert payload[sel].tolist() == [len(f.payload) for f in frags]
        assert wire[sel].tolist() == [f.wire_size for f in frags]
        assert all(w <= m for w in wire[sel])
        assert all(p % 8 == 0 for p in payload[sel][:-1])
        assert payload[sel].sum() == length


def test_plan_fast_on_a_million_packets():
    rng = np.random.default_rng(1)
    p = fragment_plan(rng.integers(0, 9000, 1_000_000), 1500)
    assert p.n_frags.shape == (1_000_000,)
    assert p.fragments()[0].size == p.n_frags.sum()


@pytest.mark.parametrize(
    ("kwargs", "knob"),
    [
        ({"length": 100, "mtu": 67}, "mtu"),
        ({"length": 100, "mtu": 1500, "ihl": 22}, "ihl"),
        ({"length": 100, "mtu": 1500, "ihl": 64}, "ihl"),
        ({"length": -1, "mtu": 1500}, "length"),
        ({"length": 65516, "mtu": 1500}, "length"),
    ],
)
def test_plan_rejects_bad_arguments(kwargs, knob):
    with pytest.raises(KnobError, match=knob) as err:
        fragment_plan(**kwargs)
    assert err.value.knob == knob


# --- ip_fragment -----------------------------------------------------------------


def test_descending_order_is_ip_build_xmit_slow():
    frags = ip_fragment(_dgram(bytes(4000)), 1500, order="descending")
    assert [f.offset for f in frags] == [2960, 1480, 0]
    assert [f.more_fragments for f in frags] == [False, True, True]
    assert frags[0].truesize == skb_truesize(20 + 1040)
    with pytest.raises(KnobError, match="order"):
        ip_fragment(_dgram(b"x"), 1500, order="random")


def test_df_too_big_is_frag_needed():
    with pytest.raises(FragmentNeeded) as err:
        ip_fragment(_dgram(bytes(1481), df=True), 1500)
    assert err.value.mtu == 1500
    (only,) = ip_fragment(_dgram(bytes(1480), df=True), 1500)
    assert only.df and not only.more_fragments and only.offset == 0


# --- ip_defrag round trip ------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(payload=st.binary(max_size=12000), mtu=mtus, data=st.data())
def test_round_trip_any_order_with_duplicates(payload, mtu, data):
    original = _dgram(payload)
    frags = ip_fragment(original, mtu)
    order = data.draw(st.permutations(range(len(frags))))
    dups = data.draw(st.lists(st.integers(0, len(frags) - 1), max_size=10))
    arrivals = list(order)
    for d in dups:
        arrivals.insert(data.draw(st.integers(0, len(arrivals))), d)
    r = IpDefrag()
    out = [r.ip_defrag(frags[i], now=0.001 * t) for t, i in enumerate(arrivals)]
    got = [d for d in out if d is not None]
    assert got and all(d == original for d in got)
    if len(frags) > 1:
        assert r.snmp["ReasmReqds"] == len(arrivals)
        if set(dups) != set(range(len(frags))):
            assert len(got) == 1 and r.snmp["ReasmOKs"] == 1
    assert r.mem == _held_mem(r)
    r.expire(now=1000.0)  # leftover duplicate queues time out
    assert r.mem == 0 and r.queue_count == 0


def test_overlap_rule_older_bytes_before_win_new_bytes_after_win():
    r = IpDefrag()
    assert r.ip_defrag(_frag(8, b"x" * 8, True), 0) is None
    mem_with_x = r.mem
    assert r.ip_defrag(_frag(0, b"y" * 24, True), 0) is None  # covers x wholly: x freed
    assert r.mem == mem_with_x - skb_truesize(28) + skb_truesize(44)
    assert r.ip_defrag(_frag(16, b"a" * 16, True), 0) is None  # head trimmed by y
    d = r.ip_defrag(_frag(24, b"z" * 8, False), 0)  # takes over a's tail
    assert d is not None and d.payload == b"y" * 24 + b"z" * 8
    assert r.mem == 0 and r.discarded == 0


def test_covered_and_bad_fragments_are_discarded():
    r = IpDefrag()
    r.ip_defrag(_frag(0, b"a" * 16, True), 0)
    r.ip_defrag(_frag(8, b"b" * 8, True), 0)  # wholly inside older bytes before it
    assert r.discarded == 1
    r.ip_defrag(_frag(0, b"f" * 8, True), 0)  # same offset: new bytes win the overlap
    assert r.discarded == 1
    r.ip_defrag(_frag(24, b"c" * 8, False), 0)  # sets the end at 32
    r.ip_defrag(_frag(24, b"c" * 16, False), 0)  # disagrees about the end
    r.ip_defrag(_frag(32, b"d" * 8, True), 0)  # beyond the end
    assert r.discarded == 3
    d = r.ip_defrag(_frag(16, b"e" * 13, True), 0)  # cut to 8 bytes
    assert d is not None and d.payload == b"f" * 8 + b"a" * 8 + b"e" * 8 + b"c" * 8


def test_non_fragment_passes_straight_through():
    r = IpDefrag()
    d = r.ip_defrag(_frag(0, b"whole", False), 0)
    assert d is not None and d.payload == b"whole"
    assert r.snmp["ReasmReqds"] == 0 and r.mem == 0


def test_oversized_reassembly_fails():
    r = IpDefrag()
    r.ip_defrag(_frag(0, bytes(1480), True), 0)
    assert r.ip_defrag(_frag(65528, bytes(100), False), 0) is None
    r2 = IpDefrag()
    for f in ip_fragment(_dgram(bytes(65515)), 1500):
        r2.ip_defrag(f, 0)
    assert r2.snmp["ReasmOKs"] == 1  # the largest legal datagram is fine


# --- evictor ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(2000, 6000), min_size=1, max_size=60),
    feed=st.lists(st.integers(0, 59), max_size=200),
)
def test_evictor_bounds_memory_and_kills_oldest_first(sizes, feed):
    high, low = 20000, 12000
    r = IpDefrag(ipfrag_high_thresh=high, ipfrag_low_thresh=low)
    # Every datagram loses its last fragment, so no queue ever completes.
    streams = [ip_fragment(_dgram(bytes(n), id_=i), 576)[:-1] for i, n in enumerate(sizes)]
    cursor = [0] * len(streams)
    for t, pick in enumerate(feed):
        i = pick % len(streams)
        frag = streams[i][cursor[i] % len(streams[i])]
        cursor[i] += 1
        before_keys, before_mem = r.queue_keys(), r.mem
        evicted_before = r.evicted
        r.ip_defrag(frag, now=0.01 * t)
        n_evicted = r.evicted - evicted_before
        assert r.mem <= high + frag.truesize + IPQ_STRUCT_BYTES
        assert r.mem == _held_mem(r)
        if n_evicted:
            assert before_mem > high
            # least recently fed first; the arriving fragment's own queue may be
            # among the evicted ones and be re-created at once (as in the kernel,
            # ip_evictor runs before ip_find)
            arriving = (frag.id, frag.proto, frag.saddr, frag.daddr)
            gone = [k for k in before_keys if k not in r.queue_keys()]
            expected = [k for k in before_keys[:n_evicted] if k != arriving]
            assert gone == expected
            assert r.mem <= low + frag.truesize + IPQ_STRUCT_BYTES
        else:
            assert before_mem <= high or not before_keys
    assert r.snmp["ReasmFails"] == r.evicted


def test_lru_order_follows_last_fragment_not_creation():
    r = IpDefrag()
    a = ip_fragment(_dgram(bytes(3000), id_=1), 1500)
    b = ip_fragment(_dgram(bytes(3000), id_=2), 1500)
    r.ip_defrag(a[0], 0)
    r.ip_defrag(b[0], 1)
    r.ip_defrag(a[1], 2)
    assert [k[0] for k in r.queue_keys()] == [2, 1]


# --- timer -------------------------------------------------------------------------


def test_timeout_counts_and_icmp_only_with_first_fragment():
    r = IpDefrag()
    with_head = ip_fragment(_dgram(bytes(4000), id_=1), 1500)
    headless = ip_fragment(_dgram(bytes(4000), id_=2), 1500)
    r.ip_defrag(with_head[0], 0.0)  # offset 0
    r.ip_defrag(headless[2], 5.0)  # tail only
    r.ip_defrag(with_head[2], 20.0)  # later fragments do not restart the timer
    assert r.expire(29.99) == []
    (first,) = r.expire(30.0)
    assert first.key[0] == 1 and first.icmp_time_exceeded and first.deadline == 30.0
    assert r.queue_count == 1
    # The second queue expires lazily when the next fragment comes in.
    r.ip_defrag(_frag(0, bytes(8), True, id_=99), 40.0)
    assert r.snmp["ReasmTimeout"] == 2 and r.snmp["ReasmFails"] == 2
    assert r.icmp_time_exceeded == 1
    assert r.queue_count == 1 and r.mem == _held_mem(r)


def test_expired_queue_restarts_with_new_fragments():
    r = IpDefrag(ipfrag_time=1.0)
    frags = ip_fragment(_dgram(bytes(3000)), 1500)
    r.ip_defrag(frags[0], 0.0)
    assert r.ip_defrag(frags[1], 2.0) is None  # first queue died at t=1
    assert r.snmp["ReasmTimeout"] == 1
    assert r.ip_defrag(frags[0], 2.5) is None
    assert r.ip_defrag(frags[2], 2.6) == _dgram(bytes(3000))


# --- knobs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "knob"),
    [
        ({"ipfrag_high_thresh": -1}, "ipfrag_high_thresh"),
        ({"ipfrag_high_thresh": 1.5}, "ipfrag_high_thresh"),
        ({"ipfrag_low_thresh": 300000}, "ipfrag_low_thresh"),
        ({"ipfrag_time": 0}, "ipfrag_time"),
        ({"ipfrag_time": "30"}, "ipfrag_time"),
    ],
)
def test_bad_knobs_raise_knob_error(kwargs, knob):
    with pytest.raises(KnobError, match=knob) as err:
        IpDefrag(**kwargs)
    assert err.value.knob == knob


def test_knob_defaults_and_setters():
    r = IpDefrag()
    assert (r.ipfrag_high_thresh, r.ipfrag_low_thresh, r.ipfrag_time) == (262144, 196608, 30.0)
    r.ipfrag_low_thresh = 1000
    r.ipfrag_high_thresh = 2000
    with pytest.raises(KnobError, match="ipfrag_high_thresh"):
        r.ipfrag_high_thresh = 500  # below low
    with pytest.raises(KnobError, match="ipfrag_low_thresh"):
        r.ipfrag_low_thresh = 5000  # above high


def test_evictor_keeps_the_newest_queues():
    r = IpDefrag(ipfrag_high_thresh=20000, ipfrag_low_thresh=10000)
    for i in range(60):
        r.ip_defrag(ip_fragment(_dgram(bytes(3000), id_=i), 1500)[0], 0.001 * i)
    assert r.evicted > 0 and r.snmp["ReasmFails"] == r.evicted
    ids = [k[0] for k in r.queue_keys()]
    assert ids == list(range(60 - len(ids), 60))


@settings(max_examples=40, deadline=None)
@given(size=st.integers(0, 9000), mtu1=st.integers(600, 4000), mtu2=st.integers(68, 1500))
def test_refragmenting_fragments_keeps_offsets_and_mf_and_reassembles(size, mtu1, mtu2):
    # a router cutting the fragments again for a smaller MTU (ip_fragment on a
    # fragment: offsets continue from the fragment's, MF kept unless it was last)
    payload = bytes(range(256)) * (size // 256 + 1)
    dgram = IpDatagram(7, 1, 2, 17, payload[:size])
    first = ip_fragment(dgram, mtu1)
    second = [g for f in first for g in ip_fragment(f, mtu2)]
    for f in first:
        pieces = ip_fragment(f, mtu2)
        assert pieces[0].offset == f.offset
        assert all(p.more_fragments for p in pieces[:-1])
        assert pieces[-1].more_fragments == f.more_fragments
        assert b"".join(p.payload for p in pieces) == f.payload
        assert all(p.offset % 8 == 0 and p.wire_size <= max(mtu2, f.wire_size) for p in pieces)
    assert sum(not g.more_fragments for g in second) == 1
    r = IpDefrag()
    done = [d for d in (r.ip_defrag(g, 0.0) for g in reversed(second)) if d is not None]
    assert len(done) == 1 and done[0].payload == dgram.payload
