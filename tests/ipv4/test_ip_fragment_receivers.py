"""IpDefrag per receiver: eviction / refusal victims, timers, counters.

Each hand-built case is worked out from the source named in
routelab.ipv4.ip_fragment.RECEIVERS (2.4.19 / 2.4.22 ip_fragment.c, sources.md
for Solaris and 6.x).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.errors import KnobError
from routelab.ipv4.ip_fragment import (
    FATES,
    RECEIVERS,
    RECEIVERS_ORDER,
    IpDatagram,
    IpDefrag,
    IpFragment,
    ip_fragment,
    ipqhashfn_2419,
    wheel_bucket,
)

S, D = 0x0A000001, 0x0A000002


def frag(id_, offset, size, mf, tag=-1, saddr=S):
    """A size-only fragment."""
    return IpFragment(id_, saddr, D, 17, offset, mf, b"", size=size, tag=tag)


def ids_in_bucket(bucket, n, start=1):
    out, i = [], start
    while len(out) < n:
        if ipqhashfn_2419(i, S, D, 17) == bucket:
            out.append(i)
        i += 1
    return out


def held(r: IpDefrag) -> int:
    return sum(r.rules.qsize + sum(q.sizes) for q in r._queues.values())


def conserved(r: IpDefrag) -> bool:
    return r.snmp["ReasmReqds"] == sum(r.fates.values()) + r.queued_fragments()


# --- the 2.4.19 hash ------------------------------------------------------------


def test_ipqhashfn_2419_by_hand():
    # network-order fields read little-endian on i386: saddr^daddr = 0x03000000,
    # id 0x1234 reads 0x3412; h = 0x03003712; h ^ (h >> 8) ^ 17 = 0x03033734
    assert ipqhashfn_2419(0x1234, S, D, 17) == 0x34
    # for one sender the bucket is the XOR of the ID's two bytes' low 6 bits
    # (and a constant): consecutive IDs walk the buckets
    b = [ipqhashfn_2419(i, S, D, 17) for i in range(64)]
    assert sorted(b) == list(range(64))


# --- linux-2.4.19: the bucket sweep -----------------------------------------------


def test_sweep_kills_each_buckets_oldest_even_the_newest_queue():
    # truesize 1712 + ipq 72 = 1784 per one-fragment queue
    x1, x2 = ids_in_bucket(5, 2)
    (y1,) = ids_in_bucket(9, 1)
    high = 3 * 1784 - 1
    r = IpDefrag("linux-2.4.19", high, 0, truesize="receiver")
    for i in (x1, x2, y1):                    # creation order: x1, x2 (bucket 5), y1 (9)
        r.ip_defrag(frag(i, 0, 1480, True), 0.0)
    assert r.mem == 3 * 1784 > high
    r.ipfrag_low_thresh = 2 * 1784 - 1        # one kill would be enough...
    r.ip_defrag(frag(777, 0, 1480, True), 1.0)
    # ...but the sweep runs through every bucket: x1 (bucket 5's oldest) and y1,
    # the newest queue, die; x2 survives
    alive = {k[0] for k in r.queue_keys()}
    assert alive == {x2, 777}
    assert r.snmp["ReasmFails"] == 2 and r.evicted == 2
    assert r.fates["evicted"] == 2 and r.mem == held(r) and conserved(r)


def test_sweep_repeats_while_above_low():
    x1, x2, x3 = ids_in_bucket(5, 3)
    r = IpDefrag("linux-2.4.19", 3 * 1784 - 1, 0, truesize="receiver")
    for i in (x1, x2, x3):
        r.ip_defrag(frag(i, 0, 1480, True), 0.0)
    r.ip_defrag(frag(777, 0, 1480, True), 1.0)
    assert r.evicted == 3 and [k[0] for k in r.queue_keys()] == [777]


def test_lru_kills_least_recently_fed_and_stops_at_low():
    x1, x2 = ids_in_bucket(5, 2)
    (y1,) = ids_in_bucket(9, 1)
    q = 1712 + 80
    r = IpDefrag("linux-2.4.22", 3 * q - 1, 2 * q - 1, truesize="receiver")
    for i in (x1, x2, y1):
        r.ip_defrag(frag(i, 0, 1480, True), 0.0)
    r.ipfrag_high_thresh = 4 * q + 1712 - 1
    r.ip_defrag(frag(x1, 1480, 1480, True), 0.5)   # x1 fed last: now the youngest
    r.ipfrag_high_thresh = 3 * q - 1
    r.ip_defrag(frag(777, 0, 1480, True), 1.0)
    # mem 4q + 1712 > high: x2 then y1 die (least recently fed), x1 survives
    assert [k[0] for k in r.queue_keys()] == [x1, 777]
    assert r.snmp["ReasmFails"] == 2


# --- solaris: prune oldest created --------------------------------------------------


def test_solaris_prunes_oldest_created_until_the_fragment_fits():
    r = IpDefrag("solaris", 10000, truesize="receiver")   # 2048 per frame, no ipq bytes
    assert r.ipfrag_time == 60.0
    for i in (1, 2, 3, 4):
        r.ip_defrag(frag(i, 0, 1480, True), 0.0)
    r.ip_defrag(frag(1, 1480, 1480, True), 1.0)      # 10240 >= 10000: prune to 7952
    # queue 1 was fed last, but it is the oldest *created*: it goes, and the
    # arriving fragment starts queue 1 afresh
    assert [k[0] for k in r.queue_keys()] == [2, 3, 4, 1]
    assert r.mem == 4 * 2048 and r.snmp["ReasmFails"] == 1
    assert r.fates["evicted"] == 1 and conserved(r)


# --- linux-6.x: refuse above the limit ---------------------------------------------


def test_6x_refuses_every_fragment_while_over_the_limit():
    r = IpDefrag("linux-6.x", 6288, truesize="receiver", hz=250)  # 2944 + 200 per queue
    assert r.ipfrag_low_thresh == 6288    # default low (3 MiB, unused) clamped to high
    r.ip_defrag(frag(1, 0, 1480, True), 0.0)
    r.ip_defrag(frag(2, 0, 1480, True), 0.0)
    assert r.mem == 6288                              # == high: not over, accepted
    r.ip_defrag(frag(1, 1480, 1480, True), 0.1)      # 6288 <= 6288: accepted
    assert r.mem == 6288 + 2944
    got = r.ip_defrag(frag(1, 2960, 8, False), 0.2)  # would complete 1: refused
    assert got is None
    assert r.snmp["ReasmFails"] == 1 and r.fates["refused"] == 1 and r.evicted == 0
    assert r.snmp["ReasmReqds"] == 4 and r.mem == 6288 + 2944   # nothing freed
    # the timers free them (30 s, HZ 250: 7500 jiffies at level 3, rounded up to
    # a 512-jiffy slot: jiffy 7680 = 30.72 s), then fragments are taken again
    (t,) = {q.deadline for q in r._queues.values()}
    assert t == pytest.approx(7680 / 250)
    assert len(r.expire(t)) == 2 and r.snmp["ReasmTimeout"] == 2
    assert r.snmp["ReasmFails"] == 3 and r.mem == 0
    r.ip_defrag(frag(1, 0, 1480, True), t)
    assert r.mem == 3144 and conserved(r)


def test_wheel_rounds_up_to_the_level_slot():
    assert wheel_bucket(10, 10) == 11                 # level 0: next jiffy
    assert wheel_bucket(100 + 100, 100) == 208        # level 1: 8-jiffy slots
    assert wheel_bucket(1250, 1250) == 1280           # 5 s at HZ 250: 64-jiffy slots
    assert wheel_bucket(7500, 7500) == 7680           # 30 s at HZ 250: 512-jiffy slots
    assert wheel_bucket(7680, 7500) == 8192           # never early, even when aligned


def test_6x_duplicate_dropped_overlap_kills_queue():
    r = IpDefrag("linux-6.x")
    r.ip_defrag(frag(1, 0, 1480, True), 0)
    r.ip_defrag(frag(1, 1480, 1480, True), 0)     # extends the run [0, 2960)
    r.ip_defrag(frag(1, 1480, 1480, True), 0)     # inside the run: a duplicate
    assert r.snmp["ReasmFails"] == 0 and r.fates["duplicate"] == 1 and r.queue_count == 1
    r.ip_defrag(frag(1, 2000 // 8 * 8, 1480, True), 0)   # overlaps and goes beyond
    assert r.queue_count == 0 and r.snmp["ReasmFails"] == 1
    assert r.snmp["ReasmOverlaps"] == 1 and r.fates["killed"] == 3 and conserved(r)


def test_6x_fragment_spanning_two_runs_is_an_overlap():
    r = IpDefrag("linux-6.x")
    r.ip_defrag(frag(1, 2960, 1480, True), 0)     # descending: separate runs
    r.ip_defrag(frag(1, 0, 1480, True), 0)
    r.ip_defrag(frag(1, 1480, 1480, True), 0)     # fills the gap: a third run
    assert r.snmp["ReasmFails"] == 0 and len(r._queues[(1, 17, S, D)].runs) == 3
    r.ip_defrag(frag(1, 0, 2960, True), 0)        # covers two runs: not a duplicate
    assert r.snmp["ReasmOverlaps"] == 1 and r.queue_count == 0


def test_bad_last_fragment_2_4_drops_it_6x_kills_the_queue():
    for rx, fails, left in (("linux-2.4.22", 0, 1), ("linux-6.x", 1, 0)):
        r = IpDefrag(rx)
        r.ip_defrag(frag(1, 1480, 1480, True), 0)
        r.ip_defrag(frag(1, 8, 8, False), 0)      # ends before data already queued
        assert r.snmp["ReasmFails"] == fails and r.queue_count == left and conserved(r)


def test_6x_max_dist_resets_a_queue_overtaken_by_65_fragments():
    for others, reset in ((63, False), (64, True)):
        r = IpDefrag("linux-6.x")
        r.ip_defrag(frag(1, 0, 1480, True), 0.0)
        for i in range(others):
            r.ip_defrag(frag(1000 + i, 0, 1480, True), 0.0)
        r.ip_defrag(frag(1, 1480, 1480, True), 1.0)
        # rid: queue 1's first fragment was the source's 1st, this one its
        # (others + 2)th; more than 64 between them resets the queue
        q = r._queues[(1, 17, S, D)]
        assert r.fates["too_far"] == int(reset)
        assert q.starts == ([1480] if reset else [0, 1480])
        assert r.snmp["ReasmFails"] == int(reset) and conserved(r)
        assert r.mem == held(r)


def test_max_dist_only_for_6x():
    with pytest.raises(KnobError, match="ipfrag_max_dist"):
        IpDefrag("linux-2.4.19", ipfrag_max_dist=64)
    with pytest.raises(KnobError, match="receiver"):
        IpDefrag("linux-2.2")


# --- counters shared by all ----------------------------------------------------------


@pytest.mark.parametrize("rx", RECEIVERS_ORDER)
def test_counter_semantics_per_datagram_and_fragment(rx):
    r = IpDefrag(rx)
    d = IpDatagram(5, S, D, 17, b"", size=4000, tag=7)
    frags = ip_fragment(d, 1500)
    assert len(frags) == 3 and all(f.size and not f.payload for f in frags)
    out = [r.ip_defrag(f, 0.0) for f in frags]
    assert out[:2] == [None, None] and out[2].size == 4000 and out[2].tag == 7
    assert r.snmp["ReasmReqds"] == 3 and r.snmp["ReasmOKs"] == 1
    # an orphan: its timer counts ReasmTimeout and ReasmFails once
    r.ip_defrag(frags[1], 1.0)
    (t,) = [q.deadline for q in r._queues.values()]
    assert t == pytest.approx(1.0 + RECEIVERS[rx].time, abs=3.0)
    assert r.next_deadline <= t                  # (a lower bound: stale entries allowed)
    r.expire(t)
    assert r.snmp["ReasmTimeout"] == 1 and r.snmp["ReasmFails"] == 1
    assert r.icmp_time_exceeded == 0            # no offset-0 fragment: silent
    assert r.mem == 0 and conserved(r)


def test_reused_id_glues_two_datagrams_and_is_marked_mixed():
    r = IpDefrag("linux-6.x")
    a = ip_fragment(IpDatagram(9, S, D, 17, b"", size=3000, tag=1), 1500)
    b = ip_fragment(IpDatagram(9, S, D, 17, b"", size=3000, tag=2), 1500)
    r.ip_defrag(a[0], 0)                      # a loses its last two fragments
    r.ip_defrag(b[0], 0.1)                    # b's first: a duplicate of a's
    r.ip_defrag(b[1], 0.1)
    got = r.ip_defrag(b[2], 0.1)
    assert got.mixed and got.tag == -2 and r.snmp["ReasmOKs"] == 1


# --- conservation, any receiver ---------------------------------------------------------

events = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 7), st.booleans(),
                            st.floats(0, 5)), max_size=120)


@settings(max_examples=80, deadline=None)
@given(rx=st.sampled_from(RECEIVERS_ORDER), ev=events, high=st.integers(0, 40000),
       low_frac=st.floats(0, 1), tmo=st.floats(0.5, 40), bytes_mode=st.booleans())
def test_every_fragment_is_delivered_dropped_or_queued(rx, ev, high, low_frac, tmo,
                                                        bytes_mode):
    r = IpDefrag(rx, high, int(high * low_frac), tmo, truesize="receiver")
    # six datagrams of 1-8 fragments (cut for a 576 MTU), IDs 0-2 shared: reuse
    dgrams = []
    for i in range(6):
        n = 600 * (i + 1)
        payload = bytes((i * 7 + k) % 256 for k in range(n)) if bytes_mode else b""
        dgrams.append(ip_fragment(IpDatagram(i % 3, S, D, 17, payload, size=n, tag=i), 576))
    now = 0.0
    delivered = 0
    for di, fi, _dup, dt in ev:
        now += dt
        fs = dgrams[di]
        got = r.ip_defrag(fs[fi % len(fs)], now)
        if got is not None:
            delivered += got.size
            if bytes_mode and not got.mixed:
                assert got.payload == b"".join(f.payload for f in fs)
        assert r.mem >= 0 and r.mem == held(r)
        assert conserved(r)
        assert set(r.fates) == set(FATES)
    r.expire(now + 1e6)
    assert r.queue_count == 0 and r.mem == 0 and conserved(r)


@settings(max_examples=40, deadline=None)
@given(rx=st.sampled_from(RECEIVERS_ORDER), ev=events, high=st.integers(0, 40000))
def test_size_only_mode_counts_as_bytes_mode(rx, ev, high):
    out = []
    for bytes_mode in (True, False):
        r = IpDefrag(rx, high, high // 2, 3.0, truesize="receiver")
        dg = [ip_fragment(IpDatagram(i % 3, S, D, 17, bytes(600 * (i + 1)) if bytes_mode
                                     else b"", size=600 * (i + 1), tag=i), 576)
              for i in range(6)]
        now, sizes = 0.0, []
        for di, fi, _dup, dt in ev:
            now += dt
            got = r.ip_defrag(dg[di][fi % len(dg[di])], now)
            sizes.append(None if got is None else (got.size, got.tag))
        out.append((sizes, r.stats()))
    assert out[0] == out[1]


def test_old_positional_form_and_timer_lateness():
    r = IpDefrag(20000, 10000, 5.0)
    assert (r.receiver, r.ipfrag_high_thresh, r.ipfrag_low_thresh, r.ipfrag_time) == (
        "linux-2.4.22", 20000, 10000, 5.0)
    assert IpDefrag("linux-6.x").max_timer_delay() == pytest.approx(512 / 250)
    assert IpDefrag("linux-2.4.19").max_timer_delay() == pytest.approx(0.01)
    assert IpDefrag("solaris").max_timer_delay() == 0.0
