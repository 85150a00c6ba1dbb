"""Tests for routelab.ipv4.route: hashing, rt_garbage_collect, rt_intern_hash, timers.

Most tests build a RouteCache by hand, put DstEntry objects straight into its
hash chains (``put``) and call one kernel function, so the expected numbers can
be worked out on paper from net/ipv4/route.c (kernel.md s1).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.core.dropreason import OUTCOMES
from routelab.core.dst import DESTROYED, GARBAGE, HASHED, RCU_PENDING, DstEntry, dst_release
from routelab.costs import cost_table
from routelab.errors import KnobError
from routelab.hardware import CPUS
from routelab.ipv4.fib import RTN
from routelab.ipv4.route import (
    S_GC_DST_OVERFLOW,
    S_GC_GOAL_MISS,
    S_GC_IGNORED,
    S_GC_TOTAL,
    S_IN_BRD,
    S_IN_MARTIAN_DST,
    S_IN_MARTIAN_SRC,
    S_IN_NO_ROUTE,
    S_IN_SLOW_TOT,
    STAT_FIELDS,
    RouteCache,
    rt_hash_fold,
    rt_hash_jhash,
    rt_hash_size,
)
from routelab.kernels import KERNELS
from routelab.sim.ledger import NO_DROP

COST = cost_table(CPUS["opteron-2400x2"]).fn
NOW = 1000.0          # "now" in the hand-built states; lastuse=0 means 1000 s idle
_uid = itertools.count(1)


def make_cache(kernel="2.6.0", buckets=64, gc_thresh=20, max_size=100_000, gc_min_interval=0.5,
               gc_timeout=300.0, gc_interval=60.0, gc_elasticity=8, ncpus=1, maxbatch=10,
               seed=0) -> RouteCache:
    sysctl = dict(gc_thresh=gc_thresh, max_size=max_size, gc_min_interval=gc_min_interval,
                  gc_timeout=gc_timeout, gc_interval=gc_interval, gc_elasticity=gc_elasticity,
                  secret_interval=0.0)
    return RouteCache(KERNELS[kernel], buckets, sysctl, ncpus, COST, maxbatch,
                      np.random.default_rng(seed))


def put(cache, bucket, *, lastuse=0.0, refcnt=0, key=None, ik=0, valuable=False, expires=0.0,
        use=0, rtype=RTN["unicast"], fast_clean=False) -> DstEntry:
    """Append a hashed entry at the tail of ``bucket``'s chain, as if allocated."""
    e = DstEntry(next(_uid), lastuse)
    e.key = e.uid if key is None else key
    e.ik, e.refcnt, e.valuable, e.expires, e.use = ik, refcnt, valuable, expires, use
    e.rtype, e.fast_clean = rtype, fast_clean
    e.state, e.bucket = HASHED, bucket
    cache.table[bucket].append(e)
    cache.hashed += 1
    cache.dst.entries += 1
    return e


def new_entry(cache, key, ik=0, now=NOW) -> DstEntry:
    """A freshly allocated entry holding the packet's reference (as the slow path makes)."""
    e = cache.dst.dst_alloc(now, 0)
    e.key, e.ik, e.lastuse, e.use, e.refcnt = key, ik, now, 1, 1
    return e


def stat(cache, field):
    return sum(row[field] for row in cache.stat)


def census_ok(cache):
    c = cache.census()
    return c["entries"] == c["hashed"] + c["rcu"] + c["garbage"] and c["hashed"] == cache.hashed


# --- hash sizing and hash functions --------------------------------------------------------


@pytest.mark.parametrize("ram_mb, rhash, buckets", [
    (256, None, 2048),      # kernel.md s1 example: 16 KB table, 8-byte buckets
    (64, None, 512),        # one 4 KB page
    (4, None, 512),         # never below one page
    (100, None, 512),       # num_physpages >> 14 rounds down: one page asked for
    (127, None, 512),       # a "128 MB" box that counts a few pages short
    (128, None, 1024),      # two pages
    (192, None, 2048),      # three pages asked for, rounded up to four
    (1024, None, 8192),
    (256, 3000, 2048),      # rhash_entries= rounds down to a power of two
    (256, 4096, 4096),
    (256, 1, 1),
])
def test_rt_hash_size(ram_mb, rhash, buckets):
    assert rt_hash_size(ram_mb, rhash) == buckets


def _jhash_ref(a, b, c, initval):
    """Bob Jenkins' jhash_3words (include/linux/jhash.h), plain Python."""
    m = 0xFFFFFFFF
    a, b, c = (a + 0x9E3779B9) & m, (b + 0x9E3779B9) & m, (c + initval) & m
    for sa, sb, sc in ((13, 8, 13), (12, 16, 5), (3, 10, 15)):
        a = (a - b - c) & m
        a ^= c >> sa
        b = (b - c - a) & m
        b ^= (a << sb) & m
        c = (c - a - b) & m
        c ^= b >> sc
    return c


def _fold_ref(daddr, saddr, tos):
    h = ((daddr & 0xF0F0F0F0) >> 4) | ((daddr & 0x0F0F0F0F) << 4)
    h = (h ^ saddr ^ tos) & 0xFFFFFFFF
    h ^= h >> 16
    return h ^ (h >> 8)


u32 = st.integers(0, 2**32 - 1)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(u32, u32, st.integers(0, 63), st.integers(0, 255), u32, st.integers(0, 16))
def test_jhash_matches_reference(daddr, saddr, iif, tos, rnd, log):
    mask = (1 << log) - 1
    got = int(rt_hash_jhash(daddr, saddr, iif, tos, rnd, mask))
    want = _jhash_ref(daddr, saddr ^ (iif << 5), tos, rnd) & mask
    assert got == want
    assert 0 <= got <= mask


@settings(max_examples=150, deadline=None, derandomize=True)
@given(u32, u32, st.integers(0, 63), st.integers(0, 255), st.integers(0, 16))
def test_fold_matches_reference_and_ignores_key(daddr, saddr, iif, tos, log):
    mask = (1 << log) - 1
    want = _fold_ref(daddr, saddr ^ (iif << 5), tos) & mask
    for rnd in (0, 12345, 2**32 - 1):       # 2.4.18's hash is unkeyed
        assert int(rt_hash_fold(daddr, saddr, iif, tos, rnd, mask)) == want


def test_jhash_vectorised_deterministic_and_keyed():
    rng = np.random.default_rng(1)
    d = rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)
    s = rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)
    h1 = rt_hash_jhash(d, s, 0, 0, 0xDEADBEEF, 2047)
    h2 = rt_hash_jhash(d, s, 0, 0, 0xDEADBEEF, 2047)
    h3 = rt_hash_jhash(d, s, 0, 0, 0xDEADBEF0, 2047)
    assert np.array_equal(h1, h2)
    assert h1.min() >= 0 and h1.max() <= 2047
    assert np.mean(h1 == h3) < 0.01            # a new key scatters the flows anew
    # spread: 4000 flows over 2048 buckets -- no bucket absurdly long
    assert np.bincount(h1, minlength=2048).max() <= 12
    # the input interface takes part in the hash
    assert np.mean(rt_hash_jhash(d, s, 1, 0, 0xDEADBEEF, 2047) == h1) < 0.01


def test_cache_uses_profile_hash_and_mask():
    fold = make_cache("2.4.18", buckets=256)
    jh = make_cache("2.4.24", buckets=256)
    d, s = np.arange(100, dtype=np.uint32), np.full(100, 7, dtype=np.uint32)
    assert np.array_equal(fold.rt_hash(d, s, 0, 0), rt_hash_fold(d, s, 0, 0, 0, 255))
    assert np.array_equal(jh.rt_hash(d, s, 0, 0), rt_hash_jhash(d, s, 0, 0, jh.hash_rnd, 255))
    assert jh.mask == 255 and jh.log == 8


# --- rt_score and rt_may_expire ---------------------------------------------------------------


def test_rt_score_bits():
    c26, c24 = make_cache("2.6.0"), make_cache("2.4.22")
    old = DstEntry(1, 0.0)
    young = DstEntry(2, 0.0)
    young.lastuse = NOW - 1.0
    assert c26.rt_score(old, NOW) < c26.rt_score(young, NOW)      # 2.6: older goes first
    assert c26.rt_score(old, NOW) & (1 << 30)                     # ordinary input route
    val = DstEntry(3, 0.0)
    val.valuable = True
    assert c26.rt_score(val, NOW) >> 31 == 1
    local = DstEntry(4, 0.0)
    local.rtype = RTN["local"]
    assert not c26.rt_score(local, NOW) & (1 << 30)
    bcast = DstEntry(5, 0.0)
    bcast.fast_clean = True
    assert not c26.rt_score(bcast, NOW) & (1 << 30)
    bcast.output_route = True
    assert c26.rt_score(bcast, NOW) & (1 << 30)
    # 2.4.22: low bits are the use count, age does not matter
    old.use, young.use = 7, 3
    assert c24.rt_score(young, NOW) < c24.rt_score(old, NOW)
    # 2.4.24 (since 2.4.23) scores by age, as 2.6 does [24] route.c rt_score
    c2424 = make_cache("2.4.24")
    assert c2424.rt_score(old, NOW) < c2424.rt_score(young, NOW)


@pytest.mark.parametrize("kw, age_s, tmo1_s, tmo2_s, expected", [
    (dict(refcnt=1), 999.0, 1.0, 1.0, False),                    # referenced: never
    (dict(refcnt=1, expires=1.0), 999.0, 1.0, 1.0, False),       # ... even if expired
    (dict(expires=NOW - 1), 0.0, 100.0, 100.0, True),            # own expiry passed
    (dict(expires=NOW + 1), 0.0, 100.0, 100.0, False),           # not yet, and young
    (dict(), 5.0, 10.0, 10.0, False),                            # young enough for tmo1
    (dict(), 10.0, 10.0, 10.0, False),                           # age == tmo1 still kept
    (dict(), 10.001, 10.0, 10.0, True),
    (dict(fast_clean=True), 5.0, 10.0, 10.0, True),              # bcast in a chain: go
    (dict(valuable=True), 50.0, 10.0, 100.0, False),             # valuable: tmo2 applies
    (dict(valuable=True), 150.0, 10.0, 100.0, True),
    (dict(valuable=True, fast_clean=True), 50.0, 10.0, 100.0, False),
])
def test_rt_may_expire(kw, age_s, tmo1_s, tmo2_s, expected):
    c = make_cache("2.6.0")       # HZ=1000
    e = DstEntry(1, 0.0)
    for k, v in kw.items():
        setattr(e, k, v)
    e.lastuse = NOW - age_s
    assert c.rt_may_expire(e, int(tmo1_s * 1000), int(tmo2_s * 1000), c.jiffies(NOW)) is expected


def test_fast_clean_needs_a_following_entry():
    # rt_fast_clean: broadcast/multicast input entries that *collide* with others
    c = make_cache("2.6.0")
    e = DstEntry(1, 0.0)
    e.fast_clean = True
    e.lastuse = NOW - 5.0
    now_j = c.jiffies(NOW)
    assert c.rt_may_expire(e, 10_000, 10_000, now_j, has_next=True) is True
    assert c.rt_may_expire(e, 10_000, 10_000, now_j, has_next=False) is False


@pytest.mark.parametrize("kernel", ["2.4.24", "2.6.0"])
def test_gc_and_check_expire_spare_a_lone_young_broadcast_entry(kernel):
    for run in ("gc", "check_expire"):
        c = make_cache(kernel, buckets=16, gc_thresh=1, gc_interval=300.0)
        lone = put(c, 1, lastuse=NOW - 5, fast_clean=True, rtype=RTN["broadcast"])
        head = put(c, 2, lastuse=NOW - 5, fast_clean=True, rtype=RTN["broadcast"])
        tail = put(c, 2, lastuse=NOW - 5)
        c.equilibrium = 1
        c.rt_garbage_collect(NOW, 0) if run == "gc" else c.rt_check_expire(NOW)
        assert lone.state == HASHED and tail.state == HASHED, run
        assert head.state != HASHED, run          # collides with tail: cleaned fast


# --- rt_garbage_collect ----------------------------------------------------------------------


def test_gc_min_interval_skip():
    c = make_cache("2.6.0", gc_thresh=20, max_size=1000)
    es = [put(c, b) for b in range(50)]
    c.last_gc = NOW - 0.1                          # < gc_min_interval (0.5 s) ago
    t = c.rt_garbage_collect(NOW, 0)
    ok = c.ledger.ok
    assert ok and t == pytest.approx(COST["rt_garbage_collect"])
    assert stat(c, S_GC_TOTAL) == 1 and stat(c, S_GC_IGNORED) == 1
    assert c.last_gc == NOW - 0.1 and c.equilibrium == 0 and c.gc_log == []
    assert all(e.state == HASHED for e in es)
    # at max_size the interval no longer protects: the GC runs
    c.max_size = 50
    c.rt_garbage_collect(NOW, 0)
    assert stat(c, S_GC_TOTAL) == 2 and stat(c, S_GC_IGNORED) == 1 and c.gc_log


def test_gc_goal_normal_branch_and_rover():
    # 64 buckets x elasticity 8 = 512 > 50 entries: the normal branch.
    # equilibrium = gc_thresh = 20; goal = 30 > 0 -> equilibrium += min(15, 64) = 35,
    # goal = 50 - 35 = 15.  One old entry per bucket 0..49; the scan starts after
    # the rover (0), so buckets 1..15 are freed.
    c = make_cache("2.4.24", buckets=64, gc_thresh=20)
    es = [put(c, b) for b in range(50)]
    secs = c.gc(NOW, 0)           # (ipv4_dst_ops.gc: rt_garbage_collect, charged to its slot)
    ok = c.ledger.ok
    assert ok
    assert c.ledger.charged("rt_garbage_collect") == secs > 0    # no neighbour: all its own
    assert c.equilibrium == 35 and c.rover == 15 and c.last_gc == NOW
    assert [e.state for e in es[1:16]] == [DESTROYED] * 15          # 2.4: destroyed now
    assert es[0].state == HASHED and all(e.state == HASHED for e in es[16:])
    assert c.dst.entries == 35 and c.hashed == 35 and census_ok(c)
    assert c.gc_log[-1] == (NOW, 0, "done", 15, 15, 15, secs)     # the pass's own seconds
    # next call: entries (35) == equilibrium -> goal 0 -> nothing to do
    c.rt_garbage_collect(NOW + 1, 0)
    ok = c.ledger.ok
    assert ok and c.equilibrium == 35 and c.dst.entries == 35 and c.rover == 15
    # with equilibrium forgotten the scan resumes after the rover: buckets 16..23
    # (equilibrium 20 -> goal 15 -> equilibrium 27 -> goal 8)
    c.equilibrium = 0
    c.rt_garbage_collect(NOW + 2, 0)
    assert c.equilibrium == 27 and c.rover == 23
    assert [e.state for e in es[16:24]] == [DESTROYED] * 8 and es[24].state == HASHED


def test_gc_rover_wraps_round_robin():
    c = make_cache("2.4.24", buckets=64, gc_thresh=1)
    es = [put(c, b) for b in (62, 63, 0, 1, 2)]
    c.rover = 61
    c.equilibrium = 2      # goal = 5 - 2 = 3 -> equilibrium += 1 -> goal 2
    c.rt_garbage_collect(NOW, 0)
    assert [e.state for e in es] == [DESTROYED, DESTROYED, HASHED, HASHED, HASHED]
    assert c.rover == 63
    c.equilibrium = 2
    c.rt_garbage_collect(NOW + 1, 0)
    assert es[2].state == DESTROYED and c.rover in (0, 1)


@pytest.mark.parametrize("per_bucket, goal, equilibrium, freed_buckets", [
    (3, 16, 32, 6),     # 48 entries, 48-16=32 -> goal max(16, 16); 6 chains of 3 >= 16
    (4, 24, 40, 6),     # 64 entries, 48 -> goal max(24, 16) = 24; 6 chains of 4
])
def test_gc_danger_branch(per_bucket, goal, equilibrium, freed_buckets):
    # elasticity 1 x 16 buckets = 16 < entries: "dangerous area"
    c = make_cache("2.4.24", buckets=16, gc_thresh=8, gc_elasticity=1)
    for b in range(16):
        for _ in range(per_bucket):
            put(c, b)
    n = 16 * per_bucket
    c.rt_garbage_collect(NOW, 0)
    ok = c.ledger.ok
    assert ok
    assert c.equilibrium == equilibrium == n - goal
    freed = freed_buckets * per_bucket             # whole chains go; stop after the goal
    assert c.dst.entries == n - freed and c.rover == freed_buckets
    assert [len(ch) for ch in c.table[1:freed_buckets + 1]] == [0] * freed_buckets
    assert c.gc_log[-1][2:6] == ("done", freed_buckets, freed, freed)


def test_gc_goal_nonpositive_path():
    # entries 30 < gc_thresh 40: equilibrium = 40, goal = -10 -> equilibrium += goal
    c = make_cache("2.6.0", buckets=64, gc_thresh=40)
    es = [put(c, b) for b in range(30)]
    c.expire = 7
    c.rt_garbage_collect(NOW, 0)
    ok = c.ledger.ok
    assert ok and c.equilibrium == 30 and c.rover == 0 and c.gc_log == []
    assert all(e.state == HASHED for e in es)
    assert c.expire == 300 * 1000          # work_done with entries < gc_thresh: reset
    assert c.last_gc == NOW


def _overflow_state(kernel):
    # 32 entries = max_size, 2 per bucket; only buckets 1 and 2 hold old entries.
    # equilibrium 16 -> goal 16 -> equilibrium += min(8, 16) = 24 -> goal 8: the
    # pass frees the 4 old ones and misses the goal.
    c = make_cache(kernel, buckets=16, gc_thresh=16, max_size=32)
    old = []
    for b in range(16):
        for _ in range(2):
            e = put(c, b, lastuse=0.0 if b in (1, 2) else NOW)
            if b in (1, 2):
                old.append(e)
    return c, old


def test_gc_overflow_after_one_pass_when_frees_wait_for_rcu():
    c, old = _overflow_state("2.6.0")
    expire0 = c.expire
    c.rt_garbage_collect(NOW, 0)
    ok = c.ledger.ok
    assert not ok
    assert all(e.state == RCU_PENDING for e in old)
    assert c.dst.entries == 32 and c.rcu.pending == 4 and c.hashed == 28 and census_ok(c)
    assert stat(c, S_GC_GOAL_MISS) == 1 and stat(c, S_GC_DST_OVERFLOW) == 1
    assert c.expire == expire0 // 2
    assert c.gc_log[-1][2] == "overflow"
    # dst_alloc turns the failure into a refused allocation (packet dropped)
    e = c.dst.dst_alloc(NOW + 1, 0)
    assert e is None and c.dst.alloc_failed == 1 and stat(c, S_GC_DST_OVERFLOW) == 2


def test_gc_same_state_in_2_4_frees_at_once_and_succeeds():
    c, old = _overflow_state("2.4.24")
    c.rt_garbage_collect(NOW, 0)
    ok = c.ledger.ok
    assert ok
    assert all(e.state == DESTROYED for e in old)
    assert c.dst.entries == 28 and stat(c, S_GC_GOAL_MISS) == 1
    assert stat(c, S_GC_DST_OVERFLOW) == 0 and c.gc_log[-1][2] == "miss"


def test_gc_referenced_entries_are_never_freed():
    c = make_cache("2.4.24", buckets=16, gc_thresh=4, max_size=16)
    es = [put(c, b, refcnt=1) for b in range(16)]
    c.rt_garbage_collect(NOW, 0)
    ok = c.ledger.ok
    assert not ok and all(e.state == HASHED for e in es)


def test_gc_expire_halves_to_zero_and_stays():
    c = make_cache("2.4.24", buckets=16, gc_thresh=4, max_size=1000, gc_min_interval=0.0)
    for b in range(16):
        put(c, b, refcnt=1)
    seen = []
    for i in range(20):
        c.rt_garbage_collect(NOW + i, 0)
        seen.append(c.expire)
    assert seen[:3] == [15000, 7500, 3750]           # 300 s at HZ=100, halved per miss
    assert seen[-1] == 0 and stat(c, S_GC_GOAL_MISS) == 20


def test_gc_expire_grows_on_success_and_resets_below_gc_thresh():
    # success with entries still >= gc_thresh: expire += gc_min_interval (50 jiffies)
    c = make_cache("2.4.24", buckets=64, gc_thresh=20)
    for b in range(50):
        put(c, b)
    c.expire = 1000
    c.rt_garbage_collect(NOW, 0)
    assert c.dst.entries == 35 and c.expire == 1050
    # success that ends below gc_thresh: expire = gc_timeout
    c = make_cache("2.4.24", buckets=64, gc_thresh=40)
    for _ in range(20):
        put(c, 1)                   # the first bucket scanned holds 20 old entries
    for b in range(2, 32):
        put(c, b, lastuse=NOW)
    c.expire = 1000
    c.rt_garbage_collect(NOW, 0)  # goal 10 -> equilibrium 45, goal 5: chain of 20 goes
    ok = c.ledger.ok
    assert ok and c.dst.entries == 30 and c.expire == 300 * 100
    # and a success never leaves expire above gc_timeout
    c = make_cache("2.4.24", buckets=64, gc_thresh=20)
    for b in range(50):
        put(c, b)
    c.expire = 30000 - 10
    c.rt_garbage_collect(NOW, 0)
    assert c.expire == 30000


def test_gc_chain_tmo_halves_per_kept_entry():
    # both entries 200 s idle; expire 300 s.  The head is judged against tmo = 300 s
    # (kept), the second against tmo/2 = 150 s (freed) -- unless it is valuable,
    # when tmo2 = expire applies.
    for valuable, second_freed in ((False, True), (True, False)):
        c = make_cache("2.4.24", buckets=16, gc_thresh=1)
        head = put(c, 1, lastuse=NOW - 200)
        second = put(c, 1, lastuse=NOW - 200, valuable=valuable)
        c.rt_garbage_collect(NOW, 0)
        assert head.state == HASHED
        assert (second.state == DESTROYED) is second_freed
        # a fresh chain starts again at tmo = expire
        c2 = make_cache("2.4.24", buckets=16, gc_thresh=1)
        lone = put(c2, 1, lastuse=NOW - 200)
        put(c2, 2, lastuse=NOW - 200)
        c2.rt_garbage_collect(NOW, 0)
        assert lone.state == HASHED


# --- rt_intern_hash --------------------------------------------------------------------------


def _chain(c, n, **kw):
    return [put(c, 5, **kw) for _ in range(n)]


@pytest.mark.parametrize("kernel, length, valuable, trimmed", [
    ("2.4.18", 1, False, False), ("2.4.18", 20, False, False),       # no chain limit
    ("2.4.22", 1, False, False),                                      # length 1: keep
    ("2.4.22", 2, False, True),                                       # > 1 and not valuable
    ("2.4.22", 2, True, False),                                       # valuable candidate
    ("2.4.22", 8, True, False), ("2.4.22", 9, True, True),            # > elasticity
    # 2.4.24: only chains of more than gc_elasticity entries, so chains reach 9
    ("2.4.24", 2, False, False), ("2.4.24", 8, False, False), ("2.4.24", 9, False, True),
    ("2.6.0", 2, False, False), ("2.6.0", 8, False, False),
    ("2.6.0", 9, False, True), ("2.6.0", 9, True, True),
])
def test_intern_trims_chains_per_version(kernel, length, valuable, trimmed):
    c = make_cache(kernel, buckets=16)
    old = _chain(c, length, valuable=valuable)
    e = new_entry(c, key=10**6)
    got = c.rt_intern_hash(e, 5, NOW, 0)
    assert got is e and c.table[5][0] is e and e.state == HASHED and e.bucket == 5
    assert len(c.table[5]) == length + 1 - trimmed
    victims = [x for x in old if x.state != HASHED]
    assert len(victims) == trimmed
    if trimmed:
        assert victims[0].state == (RCU_PENDING if kernel.startswith("2.6") else DESTROYED)
    assert census_ok(c)


def test_intern_never_trims_referenced_entries():
    c = make_cache("2.6.0", buckets=16)
    _chain(c, 12, refcnt=1)
    c.rt_intern_hash(new_entry(c, key=10**6), 5, NOW, 0)
    assert len(c.table[5]) == 13


def test_intern_candidate_is_lowest_score_unreferenced():
    # 2.6: the oldest unreferenced entry goes
    c = make_cache("2.6.0", buckets=16)
    ages = [5.0, 900.0, 50.0, 700.0, 10.0, 1.0, 2.0, 3.0, 4.0]
    es = [put(c, 5, lastuse=NOW - a, refcnt=1 if a == 900.0 else 0) for a in ages]
    c.rt_intern_hash(new_entry(c, key=10**6), 5, NOW, 0)
    gone = [e for e in es if e.state != HASHED]
    assert len(gone) == 1 and gone[0].lastuse == NOW - 700.0   # oldest not held
    # 2.4.22: the least used one
    c = make_cache("2.4.22", buckets=16)
    es = [put(c, 5, use=u, lastuse=NOW - 1) for u in (9, 2, 5)]
    c.rt_intern_hash(new_entry(c, key=10**6), 5, NOW, 0)
    assert [e.state for e in es] == [HASHED, DESTROYED, HASHED]


def test_intern_equal_key_reuses_existing_entry():
    for kernel in ("2.4.24", "2.6.0"):
        c = make_cache(kernel, buckets=16)
        a = put(c, 5, key=1, ik=3, use=4, lastuse=NOW - 9)
        b = put(c, 5, key=2, ik=3)
        entries = c.dst.entries
        e = new_entry(c, key=2, ik=3)
        got = c.rt_intern_hash(e, 5, NOW, 0)
        assert got is b and c.table[5] == [b, a]                 # moved to the head
        assert b.refcnt == 1 and b.lastuse == NOW and b.use == 1
        assert e.refcnt == 0 and e.state in (DESTROYED, RCU_PENDING)
        assert c.hashed == 2 and census_ok(c)
        assert c.dst.entries == entries + (1 if kernel == "2.6.0" else 0)
        # the key is (key, ik): same daddr/saddr on another iif/tos is another flow
        other = new_entry(c, key=2, ik=4)
        got = c.rt_intern_hash(other, 5, NOW, 0)
        assert got is other and c.table[5][0] is other


def test_nocache_profile_never_inserts():
    c = make_cache("2.4.24-nocache", buckets=16)
    e = new_entry(c, key=7)
    got = c.rt_intern_hash(e, 5, NOW, 0)
    assert got is e and c.table[5] == [] and c.hashed == 0
    # the packet still holds it: parked on the dst garbage list, still counted
    assert e.state == GARBAGE and c.dst.garbage == [e] and c.dst.entries == 1
    assert census_ok(c)
    # a second packet of the same flow allocates again
    e2 = new_entry(c, key=7)
    assert c.rt_intern_hash(e2, 5, NOW, 0) is e2 and c.dst.entries == 2
    dst_release(e)
    dst_release(e2)
    c.dst.dst_run_gc(c.dst.gc_timer_at)
    assert c.dst.entries == 0 and e.state == e2.state == DESTROYED


# --- the slow path ----------------------------------------------------------------------------


def test_slow_path_counters_and_results():
    c = make_cache("2.6.0", buckets=16)
    args = dict(oif=1, gw=0, nrules=3)
    e = c.ip_route_input_slow(NOW, 0, 11, 0, 3, RTN["unicast"], martian=0, **args)
    t, why = c.ledger.t, c.ledger.why
    assert why == NO_DROP and e.refcnt == 1 and c.table[3] == [e] and e.oif == 1
    assert t >= COST["ip_route_input_slow"] + COST["fib_lookup"] + 3 * COST["fib_rule"]
    for martian, key in ((1, 12), (2, 13)):
        assert c.ip_route_input_slow(NOW, 0, key, 0, 3, RTN["unicast"], martian=martian,
                                     **args) is None
        assert c.ledger.why == OUTCOMES["drop_martian"]
    e2 = c.ip_route_input_slow(NOW, 0, 14, 0, 4, RTN["unreachable"], martian=0, **args)
    assert c.ledger.why == NO_DROP and c.table[4] == [e2]   # unreachable entries are cached
    c.ip_route_input_slow(NOW, 0, 15, 0, 4, RTN["broadcast"], martian=0, **args)
    assert (stat(c, S_IN_SLOW_TOT), stat(c, S_IN_MARTIAN_SRC), stat(c, S_IN_MARTIAN_DST),
            stat(c, S_IN_NO_ROUTE), stat(c, S_IN_BRD)) == (1, 1, 1, 1, 1)
    assert c.table[4][0].fast_clean                     # broadcast input route
    assert c.dst.entries == 3                           # martians never allocate


def test_slow_path_reports_dst_overflow():
    c, _ = _overflow_state("2.6.0")
    e = c.ip_route_input_slow(NOW, 0, 99, 0, 3, RTN["unicast"], 1, 0, 3, 0)
    assert e is None and c.ledger.why == OUTCOMES["drop_dst_overflow"]
    assert stat(c, S_IN_SLOW_TOT) == 1                  # counted before dst_alloc failed


# --- timers -----------------------------------------------------------------------------------


def test_rt_check_expire_scans_its_share_from_its_rover():
    # 64 buckets x 60 s / 300 s = 12.8 -> 12 buckets per run
    c = make_cache("2.4.24", buckets=64)
    es = [put(c, b) for b in range(64)]
    c.rt_check_expire(NOW)
    assert [e.state for e in es[1:13]] == [DESTROYED] * 12
    assert es[0].state == HASHED and es[13].state == HASHED and c.check_rover == 12
    assert c.check_expire_at == NOW + 60.0
    c.rt_check_expire(NOW + 60)
    assert [e.state for e in es[13:25]] == [DESTROYED] * 12 and c.check_rover == 24
    assert census_ok(c)


def test_rt_check_expire_keeps_young_and_frees_expired_even_if_held():
    c = make_cache("2.6.0", buckets=64, gc_interval=300.0)     # whole table per run
    young = put(c, 1, lastuse=NOW - 100)
    mid = put(c, 2, lastuse=NOW - 200)        # younger than gc_timeout (300 s)
    old = put(c, 3, lastuse=NOW - 400)
    held_old = put(c, 4, lastuse=NOW - 400, refcnt=1)
    expired_held = put(c, 5, lastuse=NOW, refcnt=1, expires=NOW - 1)
    pmtu = put(c, 6, lastuse=NOW - 400, refcnt=0, expires=NOW + 100)   # until it expires
    edge = put(c, 7, lastuse=NOW - 400, expires=NOW)    # time_before_eq(now, expires): kept
    c.rt_check_expire(NOW)
    assert young.state == mid.state == held_old.state == pmtu.state == edge.state == HASHED
    assert old.state == RCU_PENDING and expired_held.state == RCU_PENDING
    assert census_ok(c)


def test_rt_run_flush_empties_table_and_rekeys():
    c = make_cache("2.4.24", buckets=16)
    free = [put(c, b) for b in range(8)]
    held = [put(c, 3, refcnt=1) for _ in range(2)]
    rnd = c.hash_rnd
    c.rt_run_flush(NOW)
    assert all(len(ch) == 0 for ch in c.table) and c.hashed == 0 and c.flushes == 1
    assert c.hash_rnd != rnd
    assert all(e.state == DESTROYED for e in free)
    assert all(e.state == GARBAGE for e in held) and c.dst.entries == 2 and census_ok(c)
    # 2.6: everything waits for a grace period first
    c = make_cache("2.6.0", buckets=16)
    for b in range(8):
        put(c, b)
    c.rt_run_flush(NOW)
    assert c.rcu.pending == 8 and c.dst.entries == 8 and census_ok(c)


def test_stat_rows_and_fields():
    c = make_cache("2.6.0", buckets=16, ncpus=2)
    for b in range(5):
        put(c, b)
    c.stat[1][S_GC_TOTAL] = 7
    rows = c.stat_rows()
    assert len(rows) == 2 and all(len(r) == 17 for r in rows)
    assert rows[0][0] == rows[1][0] == 5 and rows[1][S_GC_TOTAL] == 7
    assert STAT_FIELDS[0] == "entries" and len(STAT_FIELDS) == 17


def test_public_entry_points_refuse_a_cpu_or_bucket_out_of_range():
    # the compiled miss path indexes per-CPU statistics and the table unchecked,
    # so the public methods check their indices and name the bad one
    c = make_cache(buckets=64, ncpus=2)
    U = RTN["unicast"]
    with pytest.raises(KnobError, match=r"cpu=2 is not valid.*\[0, 1\]"):
        c.ip_route_input_slow(NOW, 2, 1, 0, 0, U, 0, 0, 1, 0)
    with pytest.raises(KnobError, match=r"hash bucket=64 is not valid.*\[0, 63\]"):
        c.ip_route_input_slow(NOW, 0, 1, 0, 64, U, 0, 0, 1, 0)
    with pytest.raises(KnobError, match=r"hash bucket=-1"):
        c.rt_intern_hash(DstEntry(1, NOW), -1, NOW, 0)
    with pytest.raises(KnobError, match=r"cpu=-1"):
        c.rt_garbage_collect(NOW, -1)
    e = c.ip_route_input_slow(NOW, 1, 1, 0, 63, U, 0, 0, 1, 0)
    assert c.ledger.why == NO_DROP and e is not None and c.stat[1][2] == 1   # in_slow_tot on CPU 1


# --- the chain walk: compiled and interpreted agree ----------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=12),
       st.integers(0, 6), st.integers(0, 4))
def test_the_compiled_chain_walk_finds_what_the_python_walk_finds(entries, key, ik):
    from routelab.ipv4.route import _chain_find, chain_find

    chain = []
    for k, (kk, ii) in enumerate(entries):
        e = DstEntry(k, NOW)
        e.key, e.ik = kk, ii
        chain.append(e)
    got = chain_find(chain, key, ik)
    assert got == _chain_find(chain, key, ik)
    want = next((i for i, e in enumerate(chain) if e.key == key and e.ik == ik), -1)
    assert got == want          # the first match in chain order, or -1
