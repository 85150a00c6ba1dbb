"""Kernels without a route cache: 3.6's trie walk per packet, and rp_filter."""

import numpy as np
import pytest

from routelab.core.skbuff import ip_to_int
from routelab.ipv4.fib import RTN, Fib, Route
from routelab.ipv4.ip_input import MARTIAN_SRC
from routelab.ipv4.route_nocache import rp_filter_mode, rp_filter_reject
from routelab.kernels import kernel_profile
from routelab.router import Device, Router
from routelab.scenarios import ping, rcu, worm


def test_the_36_profile_has_no_cache_a_trie_and_rules():
    k = kernel_profile("3.6")
    assert not k.route_cache and k.fib == "trie" and k.nexthop_dst
    assert k.policy_rules and k.neighbours and k.napi and k.hz == 250


def test_trie_lookup_agrees_with_the_hash_fib_on_the_worm_residence():
    router, trace = worm.build({k: v.default for k, v in worm.KNOBS.items()}, 3)
    fib = router.fib
    a = fib.fib_lookup(trace.daddr, trace.saddr, trace.tos, trace.iif)
    b = fib.fib_lookup_trie(trace.daddr, trace.saddr, trace.tos, trace.iif)
    for x, y in zip(a[:4], b[:4], strict=True):
        assert np.array_equal(x, y)
    assert fib.has_custom_rules            # the residence has source rules
    assert (b[5] > 0).all() and (b[4] >= 1).all()


def test_without_custom_rules_36_walks_no_rules_but_local_then_main():
    fib = Fib(routes=[Route("10.0.0.0/8", oif=0), Route("0.0.0.0/0", oif=1)],
              local_addrs=["192.0.2.1"])
    d = np.array([ip_to_int("10.1.2.3"), ip_to_int("192.0.2.1"), ip_to_int("8.8.8.8")],
                 dtype=np.uint32)
    rt, oif, _gw, rules, tables, nodes = fib.fib_lookup_trie(d, d, np.zeros(3), np.zeros(3))
    assert list(rt) == [RTN["unicast"], RTN["local"], RTN["unicast"]]
    assert list(rules) == [0, 0, 0]
    assert list(tables) == [2, 1, 2]          # the local table first, then main


def _router(kernel, routes, sysctl=None):
    devs = [Device("eth0", "e1000", 0), Device("eth1", "e1000", 0)]
    return Router(kernel, "opteron-2400x2", devs, Fib(routes=routes, local_addrs=["10.0.0.1"]),
                  sysctl=sysctl or {})


class _Tr:
    """The columns rp_filter_reject reads."""

    def __init__(self, src, iif):
        self.saddr = np.array([ip_to_int(a) for a in src], dtype=np.uint32)
        self.daddr = np.full(len(src), ip_to_int("10.0.0.9"), dtype=np.uint32)
        self.tos = np.zeros(len(src), dtype=np.uint8)
        self.iif = np.array(iif, dtype=np.int16)

    def __len__(self):
        return len(self.saddr)


ROUTES = [Route("10.0.0.0/24", oif=0), Route("172.16.0.0/12", oif=1),
          Route("192.168.0.0/16", oif=1, rtype="unreachable")]


@pytest.mark.parametrize("trie", [False, True])
def test_rp_filter_strict_and_loose(trie):
    fib = _router("3.6", ROUTES).fib
    # from eth0: a source routed back out of eth0, one routed out of eth1,
    # one with no route, one whose route is not unicast
    tr = _Tr(["10.0.0.7", "172.16.1.1", "8.8.8.8", "192.168.1.1"], [0, 0, 0, 0])
    off = rp_filter_reject(fib, tr, 0, trie)[0]
    assert not off.any()
    strict = rp_filter_reject(fib, tr, 1, trie)
    assert list(strict[0]) == [False, True, True, True]
    loose = rp_filter_reject(fib, tr, 2, trie)
    assert list(loose[0]) == [False, False, True, True]
    assert list(loose[1]) == [1, 2, 1, 1]      # the second, device-bound lookup
    if trie:
        assert loose[3][1] == 2 * strict[3][1]


def test_loose_mode_is_strict_on_the_old_kernels():
    assert rp_filter_mode(kernel_profile("2.4.24"), 2) == 1
    assert rp_filter_mode(kernel_profile("3.6"), 2) == 2
    assert rp_filter_mode(kernel_profile("2.6.0"), 0) == 0


def test_rp_filter_in_a_run_drops_martians_and_costs_lookups():
    vals = {k: v.default for k, v in ping.KNOBS.items()} | {"kernel": "3.6", "duration": 1.0}
    out = {}
    for mode in (0, 1, 2):
        router, trace = ping.build(vals, 1)
        router.sysctl["rp_filter"] = mode
        out[mode] = router.run(trace, 1.0).summary()
    assert out[0]["drop_martian"] == 0
    # replies from the far end arrive on eth1 from sources routed back out of
    # eth1 (the default route): strict mode refuses nothing legitimate ...
    assert out[1]["drop_martian"] == 0
    # ... but pays a reverse lookup per packet
    assert out[1]["cpu_busy_pct"] > out[0]["cpu_busy_pct"]
    assert MARTIAN_SRC != 0


def test_rp_filter_strict_refuses_spoofed_sources_in_a_run():
    vals = {k: v.default for k, v in ping.KNOBS.items()} | {"kernel": "3.6", "duration": 1.0}
    router, trace = ping.build(vals, 1)
    # a tenth of the packets claim a source inside 10.1/16 but arrive on eth1
    spoof = np.flatnonzero(trace.iif == 1)[::10]
    trace.saddr[spoof] = ip_to_int("10.1.0.77")
    router.sysctl["rp_filter"] = 1
    s = router.run(trace, 1.0).summary()
    assert s["drop_martian"] == len(spoof)


def test_a_bigger_fib_costs_more_per_packet_on_36_only():
    small = [Route("10.1.0.0/16", oif=0), Route("0.0.0.0/0", oif=1, gateway="192.0.2.254")]
    rng = np.random.default_rng(1)
    big = small + [Route(f"{a}.{b}.{c}.0/24", oif=1, gateway="192.0.2.254")
                   for a, b, c in rng.integers(11, 200, size=(3000, 3))]
    tr_d = np.array([ip_to_int("130.0.0.1")] * 5, dtype=np.uint32)
    costs = {}
    for name, routes in (("small", small), ("big", big)):
        r = _router("3.6", routes)
        _rt, _o, _g, nr, tables, nodes = r.fib.fib_lookup_trie(tr_d, tr_d, np.zeros(5),
                                                               np.zeros(5))
        costs[name] = nodes.mean()
    assert costs["big"] > costs["small"]


@pytest.mark.parametrize("scenario,kw", [(ping, {}), (worm, {"duration": 5.0}),
                                         (rcu, {"duration": 0.5})])
def test_36_runs_in_every_router_scenario(scenario, kw):
    res = scenario.run(kernel="3.6", **kw)
    s = res.summary()
    assert res.conservation()
    assert s["route_cache_entries_max"] == 0
    assert s["forwarded_packets"] > 0
