"""Kernel 2.0's route cache and ARP table (routelab.ipv4.route20, 2.0.40)."""

import pytest

from routelab.errors import KnobError
from routelab.ipv4.route20 import (
    ARP_MAXSIZE,
    RT_CACHE_SIZE_MAX,
    Cache20,
    _wire,
    ip_rt_hash_code,
)
from routelab.kernels import KERNELS, KernelProfile

COST = {k: 1.0 for k in ("chain_step", "fib_lookup", "dst_alloc", "rt_intern_hash",
                         "gc_bucket", "gc_entry", "dst_destroy", "neigh_chain_step",
                         "neigh_alloc")}


def test_hash_folds_the_destination_only():
    # include/net/route.h: tmp = a + (a >> 16); (tmp + (tmp >> 8)) & 0xff
    a = 0x0A0B0C0D
    tmp = a + (a >> 16)
    assert ip_rt_hash_code(a) == (tmp + (tmp >> 8)) & 0xFF
    assert 0 <= ip_rt_hash_code(0xFFFFFFFF) < 256
    # (i386 holds the address in network order: the first octet is the low byte)
    assert _wire(0x0A000001) == 0x0100000A


def test_hit_after_miss_and_chain_steps():
    c = Cache20(COST)
    w_miss = c.lookup(0x0A000001, 0x0A000001, 0.0)
    w_hit = c.lookup(0x0A000001, 0x0A000001, 0.1)
    assert c.counters["misses"] == 1 and c.counters["hits"] == 1
    assert w_hit == 1.0 and w_miss > w_hit        # one chain step against the slow path


def test_never_more_than_256_entries_never_refused():
    c = Cache20(COST)
    for i in range(3000):
        c.lookup(0x0B000000 + i, 0x0B000000 + i, i * 1e-3)
        assert c.size <= RT_CACHE_SIZE_MAX
    k = c.counters
    assert k["misses"] == 3000 and k["hits"] == 0    # every destination new, all cached
    assert k["size_max"] == RT_CACHE_SIZE_MAX and k["gc_runs"] > 0
    # GC freed entries only seconds old: expire halves until it frees some
    assert k["gc_passes"] > k["gc_runs"] and k["gc_freed"] >= 3000 - RT_CACHE_SIZE_MAX - 1
    assert c.census()["chained"] == c.size


def test_arp_table_limit_is_soft():
    c = Cache20(COST)
    # ARP_MAXSIZE next hops, each still used by a cached route: force_expire
    # finds nothing it may free, and the table grows anyway
    for i in range(ARP_MAXSIZE - 10):
        c._arp_bind(1000 + i, 0.0)
    for i in range(20):
        c._arp_bind(5000 + i, 1.0)
    assert len(c.arp) == ARP_MAXSIZE + 10
    assert c.counters["arp_force_expire"] == 10 and c.counters["arp_freed"] == 0
    # now unused ones: the least recently used goes first
    for hop in c.arp:
        c.arp[hop][1] = 0
    c.arp[1000][0] = -5.0
    c._arp_bind(9999, 2.0)
    assert 1000 not in c.arp and c.counters["arp_freed"] == 1
    # and idle > 60 s entries are freed until the table is below the limit
    c2 = Cache20(COST)
    for i in range(ARP_MAXSIZE):
        c2._arp_bind(i, 0.0)
        c2.arp[i][1] = 0
    c2._arp_bind(777, 61.0)
    assert len(c2.arp) == ARP_MAXSIZE and c2.counters["arp_freed"] == 1


def test_2_0_profile_is_not_the_no_cache_kernel():
    k = KERNELS["2.0"]
    assert k.cache20 and not k.route_cache and not k.neighbours
    assert not any(p.cache20 for n, p in KERNELS.items() if n != "2.0")
    with pytest.raises(KnobError, match="cache20"):
        KernelProfile("x", True, "normal", "jhash", "2.6", "age", "none", 100, False,
                      0.5, 0.0, False, "test", cache20=True)


def test_worm_on_2_0_uses_its_cache():
    from routelab.scenarios import worm

    res = worm.run(kernel="2.0", seed=1, duration=2.0, worm_hosts=3)
    c = res.counters["rt20"]
    assert c["size_max"] <= RT_CACHE_SIZE_MAX and c["misses"] > 0 and c["hits"] > 0
    # every offered packet forwarded looked its route up there (born ones: the FIB)
    assert c["hits"] + c["misses"] == res.summary()["forwarded_packets"]
    assert any(k.startswith("ip_rt_route") for k in res.profile)
