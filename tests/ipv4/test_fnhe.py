"""3.6 nexthop exceptions: the hash, first-use allocation, reclaim at depth 5, rt_genid."""

from routelab.ipv4.fnhe import (
    FNHE_HASH_SIZE,
    FNHE_RECLAIM_DEPTH,
    NexthopExceptions,
    RtGenid,
    fnhe_hashfun,
)


def test_hash_folds_the_network_order_word():
    # 10.0.0.1 in network order read little-endian is 0x0100000A
    w = 0x0100000A
    assert fnhe_hashfun(0x0A000001) == (w ^ (w >> 11) ^ (w >> 22)) & 2047
    assert all(0 <= fnhe_hashfun(a) < FNHE_HASH_SIZE for a in range(0, 1 << 32, 99991))


def _same_bucket(n, start=0xC6120000):
    out, b = [], None
    a = start
    while len(out) < n:
        if b is None:
            b = fnhe_hashfun(a)
        if fnhe_hashfun(a) == b:
            out.append(a)
        a += 1
    return out


def test_table_allocated_on_first_use_only():
    nh = NexthopExceptions()
    assert nh.buckets is None and nh.table_bytes == 0 and nh.find(1) is None
    nh.update_or_create(0x0A000001, now=1.0, pmtu=1400)
    assert nh.buckets is not None and nh.table_bytes == 8 * 2048
    assert nh.find(0x0A000001).pmtu == 1400


def test_update_keeps_one_entry_per_destination():
    nh = NexthopExceptions()
    nh.update_or_create(5, now=1.0, pmtu=1400)
    e = nh.update_or_create(5, now=2.0, gw=7)
    assert nh.entries == 1 and e.pmtu == 1400 and e.gw == 7 and e.stamp == 2.0


def test_a_chain_never_grows_past_depth_plus_one_and_reclaims_the_oldest():
    nh = NexthopExceptions()
    addrs = _same_bucket(FNHE_RECLAIM_DEPTH + 4)
    for i, a in enumerate(addrs[: FNHE_RECLAIM_DEPTH + 1]):
        nh.update_or_create(a, now=float(i), pmtu=1400)
    assert nh.max_chain() == FNHE_RECLAIM_DEPTH + 1 and nh.reclaimed == 0
    oldest = addrs[0]
    nh.find(oldest).rth = object()      # it had a cached route
    nh.update_or_create(addrs[FNHE_RECLAIM_DEPTH + 1], now=10.0, pmtu=1300)
    assert nh.max_chain() == FNHE_RECLAIM_DEPTH + 1
    assert nh.reclaimed == 1 and nh.routes_freed == 1
    assert nh.find(oldest) is None
    assert nh.find(addrs[FNHE_RECLAIM_DEPTH + 1]).pmtu == 1300
    assert nh.entries == FNHE_RECLAIM_DEPTH + 1


def test_state_is_bounded_however_many_destinations():
    nh = NexthopExceptions()
    for i in range(60_000):
        nh.update_or_create(0x0B000000 + i * 7919, now=float(i), pmtu=1400)
    assert nh.entries <= FNHE_HASH_SIZE * (FNHE_RECLAIM_DEPTH + 1)
    assert nh.max_chain() <= FNHE_RECLAIM_DEPTH + 1
    assert nh.reclaimed == 60_000 - nh.entries


def test_rt_genid_invalidates_lazily():
    g = RtGenid()
    made = g.genid
    assert not g.expired(made)
    g.flush()
    assert g.expired(made) and g.flushes == 1
    assert not g.expired(g.genid)
