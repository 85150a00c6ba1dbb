"""Tests for routelab.ipv4.fib: longest-prefix match, local table, policy rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.core.skbuff import int_to_ip, ip_to_int
from routelab.errors import KnobError
from routelab.ipv4.fib import RTN, Fib, Route, Rule, parse_prefix


def lookup(fib, daddr, saddr="10.9.9.9", tos=0, iif=0):
    d = np.array([ip_to_int(daddr)], dtype=np.uint32)
    s = np.array([ip_to_int(saddr)], dtype=np.uint32)
    rtype, oif, gw, n = fib.fib_lookup(d, s, np.array([tos]), np.array([iif]))
    return int(rtype[0]), int(oif[0]), int(gw[0]), int(n[0])


BASE = [Route("10.0.0.0/8", oif=1), Route("10.1.0.0/16", oif=2), Route("10.1.2.0/24", oif=3),
        Route("192.0.2.0/24", oif=4)]
DEFAULT = Route("0.0.0.0/0", oif=4, gateway="192.0.2.254")


def test_longest_prefix_wins_regardless_of_order():
    for routes in (BASE, BASE[::-1]):
        fib = Fib(routes=routes + [DEFAULT])
        assert lookup(fib, "10.1.2.3")[:2] == (RTN["unicast"], 3)
        assert lookup(fib, "10.1.3.3")[:2] == (RTN["unicast"], 2)
        assert lookup(fib, "10.200.0.1")[:2] == (RTN["unicast"], 1)
        assert lookup(fib, "192.0.2.77")[:3] == (RTN["unicast"], 4, 0)   # on-link


def test_default_route_and_gateway():
    fib = Fib(routes=BASE + [DEFAULT])
    rtype, oif, gw, _ = lookup(fib, "8.8.8.8")
    assert (rtype, oif, gw) == (RTN["unicast"], 4, ip_to_int("192.0.2.254"))


def test_unreachable_when_nothing_matches():
    fib = Fib(routes=BASE)
    rtype, oif, gw, n = lookup(fib, "8.8.8.8")
    assert rtype == RTN["unreachable"] and oif == -1 and gw == 0
    assert n == 3           # local, main and default rules all examined


def test_local_addresses_are_local():
    fib = Fib(routes=BASE + [DEFAULT], local_addrs=["10.1.2.1", "192.0.2.1"])
    assert lookup(fib, "10.1.2.1")[:2] == (RTN["local"], -1)
    assert lookup(fib, "192.0.2.1")[:2] == (RTN["local"], -1)
    assert lookup(fib, "10.1.2.2")[:2] == (RTN["unicast"], 3)
    assert lookup(fib, "10.1.2.1")[3] == 1     # found by the first rule (local table)
    assert lookup(fib, "10.1.2.2")[3] == 2     # local rule, then main


def test_route_types():
    fib = Fib(routes=[Route("10.0.0.0/8", rtype="blackhole"), Route("11.0.0.0/8",
                                                                    rtype="prohibit")])
    assert lookup(fib, "10.1.1.1")[0] == RTN["blackhole"]
    assert lookup(fib, "11.1.1.1")[0] == RTN["prohibit"]
    with pytest.raises(KnobError):
        Fib(routes=[Route("10.0.0.0/8", rtype="teleport")])


def test_policy_rule_by_source_prefix():
    fib = Fib(routes=BASE + [DEFAULT, Route("0.0.0.0/0", oif=7, table=10)],
              rules=[Rule(100, table=10, src="172.16.0.0/12")])
    assert lookup(fib, "8.8.8.8", saddr="172.20.1.1")[1:] == (7, 0, 2)    # local, rule 100
    assert lookup(fib, "8.8.8.8", saddr="10.9.9.9")[1:] == (4, ip_to_int("192.0.2.254"), 3)
    # the selected table covers everything, even destinations main would route
    assert lookup(fib, "10.1.2.3", saddr="172.20.1.1")[1] == 7


def test_policy_rule_by_tos():
    fib = Fib(routes=BASE + [DEFAULT, Route("0.0.0.0/0", oif=8, table=20)],
              rules=[Rule(50, table=20, tos=0x10)])
    assert lookup(fib, "8.8.8.8", tos=0x10)[1] == 8
    assert lookup(fib, "8.8.8.8", tos=0x08)[1] == 4
    assert lookup(fib, "8.8.8.8", tos=0x10)[3] == 2


def test_rule_whose_table_has_no_match_falls_through():
    # the rule matches, but table 10 only knows 20/8: the walk continues to main
    fib = Fib(routes=BASE + [DEFAULT, Route("20.0.0.0/8", oif=9, table=10)],
              rules=[Rule(10, table=10)])
    assert lookup(fib, "20.1.1.1")[1:] == (9, 0, 2)
    assert lookup(fib, "8.8.8.8")[1] == 4 and lookup(fib, "8.8.8.8")[3] == 3


def test_rules_examined_counts_walk_in_priority_order():
    rules = [Rule(300, table=30, iif=5), Rule(200, table=20, dst="9.0.0.0/8"),
             Rule(100, table=10, src="172.16.0.0/12")]       # given out of order
    fib = Fib(routes=BASE + [DEFAULT, Route("0.0.0.0/0", oif=11, table=30)], rules=rules)
    assert fib.n_rules == 6
    assert lookup(fib, "8.8.8.8")[3] == 5          # 0, 100, 200, 300, 32766
    assert lookup(fib, "8.8.8.8", iif=5)[1:] == (11, 0, 4)
    assert lookup(fib, "9.9.9.9")[3] == 5          # rule 200's table 20 is empty


def test_vectorised_lookup_matches_scalar():
    fib = Fib(routes=BASE + [DEFAULT], local_addrs=["10.1.2.1"],
              rules=[Rule(100, table=10, src="172.16.0.0/12")])
    rng = np.random.default_rng(0)
    d = rng.choice(np.array([ip_to_int(x) for x in ("10.1.2.1", "10.1.2.9", "10.7.7.7",
                                                    "8.8.8.8")], dtype=np.uint32), 64)
    s = rng.choice(np.array([ip_to_int("172.16.0.1"), ip_to_int("10.0.0.1")],
                            dtype=np.uint32), 64)
    rt, oif, gw, n = fib.fib_lookup(d, s, np.zeros(64), np.zeros(64))
    for i in range(64):
        one = fib.fib_lookup(d[i:i + 1], s[i:i + 1], np.zeros(1), np.zeros(1))
        assert (rt[i], oif[i], gw[i], n[i]) == tuple(a[0] for a in one)


def test_parse_prefix():
    assert parse_prefix("10.1.2.3/16") == (ip_to_int("10.1.0.0"), 16)
    assert parse_prefix("10.1.2.3") == (ip_to_int("10.1.2.3"), 32)
    assert parse_prefix("0.0.0.0/0") == (0, 0)
    for bad in ("10.0.0.0/33", "10.0.0/8", "ten/8"):
        with pytest.raises(KnobError):
            parse_prefix(bad)


@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 32)), min_size=1,
                max_size=12, unique_by=lambda r: r[1]),
       st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=40))
@settings(max_examples=60, deadline=None)
def test_lookup_agrees_with_a_naive_longest_prefix_match(routes, addrs):
    """Against a per-packet scan of every route (one route per prefix length,
    so the longest match is unique)."""
    def net_of(a, plen):
        return a & ((0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF) if plen else 0

    table = [(net_of(a, plen), plen, k) for k, (a, plen) in enumerate(routes)]
    fib = Fib(routes=[Route(f"{int_to_ip(net)}/{plen}", oif=k) for net, plen, k in table])
    d = np.array(addrs, dtype=np.uint32)
    rt, oif, _, _ = fib.fib_lookup(d, np.zeros_like(d), np.zeros(len(d)), np.zeros(len(d)))
    for i, a in enumerate(addrs):
        match = [(plen, k) for net, plen, k in table if net_of(a, plen) == net]
        if match:
            assert (rt[i], oif[i]) == (RTN["unicast"], max(match)[1])
        else:
            assert (rt[i], oif[i]) == (RTN["unreachable"], -1)
