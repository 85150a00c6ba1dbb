"""Scenario diversity (the epilogue): cost per packet against destination spread."""

import json

import numpy as np
import pytest

from routelab.errors import KnobError
from routelab.scenarios import diversity, get

KEYS = ("cpu_us_per_packet", "route_lookup_us_per_packet", "forwarded_packets",
        "cache_hit_pct", "dst_allocs", "fnhe_entries", "trie_depth_mean", "trie_nodes")


def _run(**kw):
    kw.setdefault("duration", 0.3)
    kw.setdefault("pps", 20_000.0)
    return diversity.run(**kw)


def test_registered_and_summary_keys():
    assert get("diversity") is diversity
    s = _run(kernel="3.6").summary()
    for k in KEYS:
        assert k in s
    json.dumps({k: s[k] for k in KEYS})
    assert s["cache_hit_pct"] is None and s["dst_allocs"] == 1
    assert s["trie_nodes"] > 0 and s["trie_depth_mean"] > 0


def test_36_cost_does_not_depend_on_the_traffic():
    one = _run(kernel="3.6", destinations=1).summary()
    many = _run(kernel="3.6", destinations=65536).summary()
    # every destination is under the same /16: the same trie walk
    assert one["route_lookup_us_per_packet"] == many["route_lookup_us_per_packet"]
    assert many["forwarded_packets"] == one["forwarded_packets"]


def test_the_route_cache_cost_rises_with_destinations():
    one = _run(kernel="2.4.24", destinations=1).summary()
    many = _run(kernel="2.4.24", destinations=65536).summary()
    assert one["cache_hit_pct"] > 99.0
    assert many["cache_hit_pct"] < 50.0
    assert many["route_lookup_us_per_packet"] > 5 * one["route_lookup_us_per_packet"]
    assert many["dst_allocs"] > 3_000


def test_a_bigger_fib_costs_36_more():
    small = _run(kernel="3.6", routes=10).summary()
    big = _run(kernel="3.6", routes=20_000).summary()
    assert big["trie_nodes"] > small["trie_nodes"]
    assert big["route_lookup_us_per_packet"] >= small["route_lookup_us_per_packet"]


def test_internet_table_is_distinct_public_and_mostly_long():
    table = diversity.internet_table(5000, 1)
    assert len(set(table)) == 5000
    plens = np.array([p for _, p in table])
    assert 0.45 < np.mean(plens == 24) < 0.63
    for net, plen in table:
        assert net >> 24 not in (0, 10, 127) and net < 0xE0000000
        assert net & ((1 << (32 - plen)) - 1) == 0
        assert not (net >> 17 == 0xC612 >> 1)          # not 198.18.0.0/15


def test_destinations_are_distinct_and_in_the_block():
    d = diversity.destinations(4096, 3)
    assert len(np.unique(d)) == 4096
    assert ((d >> 16) == 0xC612).all()


def test_same_seed_same_result():
    a = _run(kernel="2.6.0", destinations=4096, seed=2).summary()
    b = _run(kernel="2.6.0", destinations=4096, seed=2).summary()
    assert a == b


@pytest.mark.parametrize("knob,value", [("destinations", 0), ("destinations", 70000),
                                        ("routes", 5), ("pps", 0.0), ("kernel", "3.7")])
def test_bad_knobs(knob, value):
    with pytest.raises(KnobError, match=knob):
        diversity.run(**{knob: value})


# -- the PMTU storm: nexthop exceptions (3.6) ------------------------------------------------

def test_storm_conserves_and_repeats():
    a = _run(kernel="3.6", pmtu_pps=5000.0, seed=4)
    b = _run(kernel="3.6", pmtu_pps=5000.0, seed=4)
    assert a.conservation()
    assert a.summary() == b.summary()
    assert (a.packets["outcome"] == b.packets["outcome"]).all()
    s = a.summary()
    assert s["local_packets"] == 1500 and s["forwarded_packets"] == 6000


def test_storm_entries_are_the_distinct_destinations_while_no_chain_is_full():
    # 100 destinations over 2,048 buckets: no chain reaches 6
    res = _run(kernel="3.6", pmtu_pps=2000.0, pmtu_destinations=100)
    s = res.summary()
    tags = res.packets["tag"][: res.offered]
    m = tags[tags >= 0]
    want = np.unique(diversity.storm_daddr(m, 100, res.extra["seed"])).size
    assert s["fnhe_entries"] == want and s["fnhe_reclaimed"] == 0
    assert 0 < want <= 100 and s["fnhe_max_chain"] <= 5


def test_storm_is_bounded_by_the_buckets_times_six():
    s = _run(kernel="3.6", pmtu_pps=100_000.0, duration=0.5).summary()
    assert s["fnhe_entries"] == 2048 * 6
    assert s["fnhe_max_chain"] == 6
    assert s["fnhe_reclaimed"] > 0
    # every message either made an entry, reclaimed one or updated its own
    assert s["fnhe_entries"] + s["fnhe_reclaimed"] <= 50_000


def test_storm_reclaim_follows_the_chain_rule():
    res = _run(kernel="3.6", pmtu_pps=50_000.0, duration=0.2)
    nh = diversity.pmtu_exceptions(res)
    from routelab.ipv4.fnhe import fnhe_hashfun
    for b, chain in enumerate(nh.buckets):
        assert len(chain) <= 6
        assert all(fnhe_hashfun(e.daddr) == b for e in chain)
    assert len({e.daddr for c in nh.buckets for e in c}) == nh.entries


def test_storm_without_messages_and_on_cache_kernels():
    s = _run(kernel="3.6").summary()
    assert (s["fnhe_entries"], s["fnhe_reclaimed"], s["fnhe_max_chain"]) == (0, 0, 0)
    s = _run(kernel="2.6.0", pmtu_pps=2000.0).summary()
    assert s["fnhe_entries"] is None and s["local_packets"] == 600


@pytest.mark.parametrize("knob,value", [("pmtu_pps", -1.0), ("pmtu_destinations", 0),
                                        ("pmtu_destinations", 70000)])
def test_bad_storm_knobs(knob, value):
    with pytest.raises(KnobError, match=knob):
        diversity.run(**{knob: value})


def test_rp_filter_reaches_the_router_and_costs_36_a_lookup():
    base = _run(kernel="3.6", destinations=64)
    strict = _run(kernel="3.6", destinations=64, rp_filter=1)
    assert strict.config.sysctl["rp_filter"] == 1
    b, s = base.summary(), strict.summary()
    assert s["route_lookup_us_per_packet"] > b["route_lookup_us_per_packet"]
    assert s["forwarded_packets"] == b["forwarded_packets"]     # the source routes back by eth0
