"""Tests for routelab.ipv4.arp: hash, constructor, solicitations, binding, arp_rcv (2.4.24).

End-to-end NUD timelines run the real ARP layer against the fake clock and
sink of tests/conftest.py; hosts that exist answer through
``sink.arp_reply_due`` -> ``Arp.arp_rcv``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routelab.core.neighbour import (
    EINVAL,
    ENOBUFS,
    NEIGH_QUEUED,
    NEIGH_XMIT,
    NUD_DELAY,
    NUD_FAILED,
    NUD_IN_TIMER,
    NUD_INCOMPLETE,
    NUD_NOARP,
    NUD_NONE,
    NUD_PROBE,
    NUD_REACHABLE,
    NUD_STALE,
    NeighParms,
)
from routelab.core.skbuff import ip_to_int
from routelab.costs import cost_table
from routelab.hardware import CPUS
from routelab.ipv4.arp import Arp, ArpDev, arp_hash, inet_addr_type
from routelab.sim.ledger import Ledger

COST = cost_table(CPUS["k6-200"]).fn
ETH0, ETH1, LO, PPP0 = 2, 3, 1, 4
DEVS = {LO: ArpDev(LO, "lo", loopback=True), ETH0: ArpDev(ETH0, "eth0"),
        ETH1: ArpDev(ETH1, "eth1"), PPP0: ArpDev(PPP0, "ppp0", pointopoint=True)}
ip = ip_to_int


def make_arp(clock, sink, *, hosts=None, **kw):
    """ARP on DEVS; ``hosts`` maps addr -> reply delay (those answer, nobody else)."""
    hosts = {} if hosts is None else hosts
    kw.setdefault("rng", np.random.default_rng(3))
    arp = Arp(clock, sink, COST, exists=lambda dev, addr: hosts.get(addr), devs=DEVS,
              local_addrs=[ip("10.0.0.1")], broadcast_addrs=[ip("10.0.0.255")], **kw)
    sink.arp = arp
    return arp


def bind(arp, addr, now=0.0, dev=ETH0):
    n = arp.arp_bind_neighbour(dev, addr, now)
    assert not isinstance(n, int)
    return n


def wire_fold(key, dev):
    """arp_hash as the kernel computes it on i386: the address loaded little-endian."""
    x = int.from_bytes(key.to_bytes(4, "big"), "little")
    x ^= x >> 16
    x ^= x >> 8
    x ^= x >> 3
    return (x ^ dev) & 0x1F


# --- hash and address types ------------------------------------------------------------------


@given(st.integers(0, 2**32 - 1), st.integers(0, 255))
def test_arp_hash_matches_the_i386_fold(key, dev):
    assert arp_hash(key, dev) == wire_fold(key, dev)
    assert 0 <= arp_hash(key, dev) < 32


def test_arp_hash_spreads_a_subnet_evenly_and_mixes_ifindex():
    counts = np.bincount([arp_hash(ip("192.168.7.0") + i, ETH0) for i in range(256)],
                         minlength=32)
    assert counts.tolist() == [8] * 32
    a = ip("10.1.2.3")
    assert arp_hash(a, 2) == arp_hash(a, 0) ^ 2


@pytest.mark.parametrize("addr, kind", [
    ("0.1.2.3", "broadcast"), ("255.255.255.255", "broadcast"), ("240.0.0.1", "broadcast"),
    ("224.0.0.5", "multicast"), ("239.1.1.1", "multicast"), ("10.0.0.255", "broadcast"),
    ("10.0.0.1", "local"), ("10.0.0.7", "unicast"),
])
def test_inet_addr_type(addr, kind):
    assert inet_addr_type(ip(addr), [ip("10.0.0.1")], [ip("10.0.0.255")]) == kind


# --- constructor -------------------------------------------------------------------------------


@pytest.mark.parametrize("dev, addr, state", [
    (ETH0, "10.0.0.7", NUD_NONE),
    (ETH0, "224.0.0.9", NUD_NOARP),       # multicast: mapped address
    (ETH0, "10.0.0.255", NUD_NOARP),      # subnet broadcast
    (ETH0, "255.255.255.255", NUD_NOARP),
    (LO, "127.0.0.1", NUD_NOARP),         # loopback device
])
def test_arp_constructor_states(fake_clock, fake_sink, dev, addr, state):
    arp = make_arp(fake_clock, fake_sink)
    n = arp.tbl.neigh_create(ip(addr), dev, 0.0)
    assert n.nud_state == state
    assert (n.ha is not None) == (state == NUD_NOARP)


def test_noarp_and_headerless_devices(fake_clock, fake_sink, fake_dst):
    devs = {5: ArpDev(5, "dummy", noarp=True), 6: ArpDev(6, "tun", hard_header=False),
            7: ArpDev(7, "p2p", pointopoint=True)}
    arp = Arp(fake_clock, fake_sink, COST, devs=devs)
    for dev in devs:
        n = arp.tbl.neigh_create(ip("10.9.9.9"), dev, 0.0)
        assert n.nud_state == NUD_NOARP
        assert fake_sink.send(arp.tbl, n, dev, fake_dst(), 0.0) == NEIGH_XMIT
    assert not fake_sink.sent


def test_unknown_device_is_einval(fake_clock, fake_sink):
    arp = make_arp(fake_clock, fake_sink)
    n = arp.tbl.neigh_create(ip("10.0.0.7"), 99, 0.0)
    assert n == -EINVAL and arp.tbl.entries == 0
    assert arp.arp_bind_neighbour(99, ip("10.0.0.7"), 0.0) == -EINVAL


# --- the NUD timeline with real ARP ------------------------------------------------------------


def test_unanswered_resolution_three_broadcasts_then_failed(fake_clock, fake_sink, fake_dst):
    arp = make_arp(fake_clock, fake_sink)
    addr = ip("10.0.0.7")
    n = bind(arp, addr, 0.2)
    d = fake_dst()
    for j in range(4):                                   # the 4th pushes out the oldest
        assert fake_sink.send(arp.tbl, n, j, d, 0.2 + 0.1 * j) == NEIGH_QUEUED
    assert n.nud_state == NUD_INCOMPLETE and n.refcnt == 3
    assert fake_sink.ended == {0: "drop"} and d.refcnt == 3
    fake_clock.run_until(3.19)
    assert fake_sink.sent == [(pytest.approx(t), ETH0, addr, True) for t in (0.2, 1.2, 2.2)]
    assert n.nud_state == NUD_INCOMPLETE
    fake_clock.run_until(3.2)
    assert n.nud_state == NUD_FAILED
    assert fake_sink.ended == {0: "drop", 1: "error", 2: "error", 3: "error"}
    assert [e[2] for e in fake_sink.events if e[0] == "error"] == [pytest.approx(3.2)] * 3
    assert d.refcnt == 0 and d.expires == pytest.approx(3.2) and n.refcnt == 2
    c = arp.counters()
    assert (c["arp_req_bcast"], c["arp_req_ucast"], c["arp_error_reports"], c["res_failed"]) \
        == (3, 0, 3, 1)
    # the next packet to the FAILED neighbour starts a whole new cycle
    fake_sink.send(arp.tbl, n, 10, d, 20.0)
    fake_clock.run_until(30.0)
    assert [s[0] for s in fake_sink.sent[3:]] == pytest.approx([20.0, 21.0, 22.0])
    assert fake_sink.ended[10] == "error" and arp.tbl.res_failed == 2


def test_answered_resolution_flushes_queue(fake_clock, fake_sink, fake_dst):
    addr = ip("10.0.0.8")
    arp = make_arp(fake_clock, fake_sink, hosts={addr: 0.0004})
    n = bind(arp, addr, 1.0)
    d = fake_dst()
    fake_sink.send(arp.tbl, n, 1, d, 1.0)
    fake_sink.send(arp.tbl, n, 2, d, 1.0002)
    fake_clock.run_until(1.01)
    assert fake_sink.replies == [(ETH0, addr, pytest.approx(1.0004))]
    assert n.nud_state == NUD_REACHABLE and n.ha == ("mac", addr)
    assert n.confirmed == pytest.approx(1.0004) and n.timer_at == math.inf and n.refcnt == 2
    assert [e[:2] for e in fake_sink.events] == [("output", 1), ("output", 2)]
    assert d.refcnt == 0 and len(fake_sink.sent) == 1
    assert fake_sink.send(arp.tbl, n, 3, d, 1.02) == NEIGH_XMIT


def test_stale_entry_revalidated_by_unicast_probes(fake_clock, fake_sink, fake_dst):
    addr = ip("10.0.0.8")
    hosts = {addr: 0.001}
    arp = make_arp(fake_clock, fake_sink, hosts=hosts, parms=NeighParms(base_reachable_time=10))
    n = bind(arp, addr, 0.0)
    fake_sink.send(arp.tbl, n, 1, fake_dst(), 0.0)
    t0 = arp.tbl.gc_timer.at
    fake_clock.run_until(t0)
    assert n.nud_state == NUD_STALE
    fake_sink.send(arp.tbl, n, 2, fake_dst(), t0 + 1.0)          # STALE -> DELAY
    assert n.nud_state == NUD_DELAY
    fake_clock.run_until(t0 + 6.0)                               # PROBE, one unicast
    assert n.nud_state == NUD_PROBE
    assert fake_sink.sent[-1] == (pytest.approx(t0 + 6.0), ETH0, addr, False)
    fake_clock.run_until(t0 + 6.01)                              # the host answers
    assert n.nud_state == NUD_REACHABLE and n.timer_at == math.inf and n.refcnt == 2
    assert arp.arp_req_ucast == 1


def test_host_gone_probe_sequence_3_unicast_3_broadcast(fake_clock, fake_sink, fake_dst):
    addr = ip("10.0.0.8")
    hosts = {addr: 0.001}
    arp = make_arp(fake_clock, fake_sink, hosts=hosts, parms=NeighParms(base_reachable_time=10))
    n = bind(arp, addr, 0.0)
    fake_sink.send(arp.tbl, n, 1, fake_dst(), 0.0)
    t0 = arp.tbl.gc_timer.at
    fake_clock.run_until(t0)
    del hosts[addr]                                              # the host leaves
    fake_sink.send(arp.tbl, n, 2, fake_dst(), t0)
    fake_clock.run_until(t0 + 10.5)
    probes = fake_sink.sent[1:]
    assert [p[3] for p in probes] == [False] * 3 + [True] * 3
    assert [p[0] - t0 for p in probes] == pytest.approx([5, 6, 7, 8, 9, 10])
    assert n.nud_state == NUD_PROBE
    fake_clock.run_until(t0 + 11.0 + 1e-9)
    assert n.nud_state == NUD_FAILED and n.refcnt == 2 and len(fake_sink.sent) == 7


def test_app_probes_send_no_frame(fake_clock, fake_sink, fake_dst):
    arp = make_arp(fake_clock, fake_sink, parms=NeighParms(app_probes=2))
    n = bind(arp, ip("10.0.0.9"))
    fake_sink.send(arp.tbl, n, 1, fake_dst(), 0.0)
    fake_clock.run_until(10.0)
    # probes 3, 4 go to arpd; 5, 6, 7 broadcast; FAILED when probes reach 3 + 2 + 3
    assert arp.arp_app_probes == 2 and arp.arp_req_bcast == 3
    assert [s[0] for s in fake_sink.sent] == pytest.approx([2.0, 3.0, 4.0])
    assert n.nud_state == NUD_FAILED and fake_sink.ended[1] == "error"
    assert fake_clock.fired("neigh_timer_handler")[-1] == pytest.approx(5.0)


def test_knobs_reach_the_table(fake_clock, fake_sink, fake_dst):
    sysctl = {"neigh_unres_qlen": 1, "neigh_retrans_time": 0.5, "neigh_mcast_solicit": 2,
              "neigh_gc_thresh3": 3, "gc_thresh": 7}
    arp = make_arp(fake_clock, fake_sink, sysctl=sysctl)
    assert arp.tbl.gc_thresh3 == 3 and arp.tbl.parms.queue_len == 1
    n = bind(arp, ip("10.0.0.9"))
    for j in range(3):
        fake_sink.send(arp.tbl, n, j, fake_dst(), 0.0)
    assert len(n.arp_queue) == 1
    fake_clock.run_until(5.0)
    assert [s[0] for s in fake_sink.sent] == pytest.approx([0.0, 0.5])
    assert fake_clock.fired("neigh_timer_handler") == pytest.approx([0.5, 1.0])


# --- binding -----------------------------------------------------------------------------------


def test_bind_keys_on_rt_gateway(fake_clock, fake_sink):
    arp = make_arp(fake_clock, fake_sink)
    gw = ip("10.0.0.254")
    routes = [bind(arp, gw, 0.0) for _ in range(3)]       # three routes via one gateway
    assert routes[0] is routes[1] is routes[2] and routes[0].refcnt == 4
    on_link = [bind(arp, ip("10.0.0.10") + i) for i in range(3)]   # rt_gateway = daddr
    assert len({id(n) for n in on_link}) == 3 and arp.tbl.entries == 4
    # loopback and point-to-point devices share key 0
    assert bind(arp, ip("10.9.0.1"), dev=PPP0) is bind(arp, ip("10.9.0.2"), dev=PPP0)
    assert bind(arp, ip("10.9.0.1"), dev=PPP0).key == 0
    n = arp.arp_bind_neighbour(ETH0, gw, 1.0)
    t = arp.ledger.t
    chain = arp.tbl.buckets[n.hash]
    assert t == pytest.approx(COST["arp_bind_neighbour"] + COST["neigh_lookup"]
                              + (chain.index(n) + 1) * COST["neigh_chain_step"])


def test_bind_enobufs_when_the_table_is_full_of_pinned_entries(fake_clock, fake_sink, fake_dst):
    arp = make_arp(fake_clock, fake_sink, sysctl={"neigh_gc_thresh3": 16,
                                                  "neigh_gc_thresh2": 8})
    pinned = [bind(arp, ip("10.0.1.0") + i, 0.0) for i in range(17)]
    for j, n in enumerate(pinned):            # each unresolved, with a queued packet
        fake_sink.send(arp.tbl, n, j, fake_dst(), 0.0)
    n = arp.arp_bind_neighbour(ETH0, ip("10.0.2.1"), 0.5)
    t = arp.ledger.t
    assert n == -ENOBUFS and arp.tbl.table_fulls == 1
    walk = (COST["neigh_forced_gc"] + 32 * COST["neigh_gc_bucket"]
            + 17 * COST["neigh_gc_entry"])
    chain = len(arp.tbl.buckets[arp_hash(ip("10.0.2.1"), ETH0)])
    assert t == pytest.approx(COST["arp_bind_neighbour"] + COST["neigh_lookup"]
                              + chain * COST["neigh_chain_step"] + walk)
    # FAILED at 3 s; the routes go (dst_destroy releases): entries become freeable
    fake_clock.run_until(3.5)
    for n in pinned:
        arp.tbl.neigh_release(n, 4.0)
    n = arp.arp_bind_neighbour(ETH0, ip("10.0.2.1"), 4.0)
    assert not isinstance(n, int) and arp.tbl.entries == 1


# --- arp_rcv -----------------------------------------------------------------------------------


def test_arp_rcv_updates_only_known_entries(fake_clock, fake_sink):
    arp = make_arp(fake_clock, fake_sink)
    arp.arp_rcv(ETH0, ip("10.0.0.50"), "m50", 1.0)               # unsolicited reply
    assert arp.tbl.entries == 0
    arp.arp_rcv(ETH0, 0, "dad", 1.0, op="request", tip_local=True)
    assert arp.tbl.entries == 0
    # a request for our address creates the sender's entry as STALE
    arp.arp_rcv(ETH0, ip("10.0.0.51"), "m51", 1.0, op="request", tip_local=True)
    (n,) = list(arp.tbl)
    assert n.nud_state == NUD_STALE and n.ha == "m51" and n.refcnt == 1
    with pytest.raises(ValueError):
        arp.arp_rcv(ETH0, 1, "x", 1.0, op="rarp")


def test_arp_rcv_states_and_locktime(fake_clock, fake_sink, fake_dst):
    addr = ip("10.0.0.60")
    arp = make_arp(fake_clock, fake_sink)
    n = bind(arp, addr)
    fake_sink.send(arp.tbl, n, 1, fake_dst(), 0.0)
    arp.arp_rcv(ETH0, addr, "bcast-reply", 0.3, pkt_host=False)   # broadcast reply: STALE
    # ... and the queue flush sends through neigh_resolve_output, which moves STALE to DELAY
    assert n.nud_state == NUD_DELAY and fake_sink.ended == {1: "output"}
    # a different address within locktime (1 s) of the last update is ignored
    arp.arp_rcv(ETH0, addr, "other", 0.8)
    assert n.ha == "bcast-reply" and n.nud_state == NUD_DELAY
    arp.arp_rcv(ETH0, addr, "other", 1.4)                         # after locktime: taken
    assert n.ha == "other" and n.nud_state == NUD_REACHABLE
    assert arp.arp_rcv_reply == 3


def test_arp_rcv_cost(fake_clock, fake_sink):
    arp = make_arp(fake_clock, fake_sink)
    t = arp.arp_rcv(ETH0, ip("10.0.0.50"), "m", 1.0)
    assert t == pytest.approx(COST["arp_rcv"] + COST["neigh_lookup"])


def test_views(fake_clock, fake_sink, fake_dst):
    arp = make_arp(fake_clock, fake_sink)
    n = bind(arp, ip("10.0.0.5"))
    fake_sink.send(arp.tbl, n, 1, fake_dst(), 0.0)
    # (refcnt 3: the table's, the binding's, the queued packet's; netlink shows 2)
    assert n.refcnt == 3 and arp.ip_neigh() == "10.0.0.5 dev eth0 ref 2 INCOMPLETE"
    c = arp.counters()
    assert c["entries"] == 1 and c["arp_req_bcast"] == 1


def test_own_costs_go_to_ledger_slots_and_seconds_to_ledger_t(fake_clock, fake_sink, fake_dst):
    lg = Ledger()
    arp = make_arp(fake_clock, fake_sink, ledger=lg)
    assert arp.ledger is arp.tbl.ledger is lg
    mark = lg.total
    n = arp.arp_bind_neighbour(ETH0, ip("10.0.0.5"), 0.0)
    t_bind = lg.t
    assert lg.total - mark == pytest.approx(t_bind)
    prof = {k: v for k, v in lg.profile().items() if v}
    assert set(prof) == {"arp_bind_neighbour", "neigh_lookup", "neigh_alloc", "arp_constructor",
                         "neigh_create"}
    mark = lg.total
    d = fake_dst()
    d.refcnt += 1
    rc = arp.tbl.neigh_resolve_output(n, 1, d, 0.0)
    assert rc == NEIGH_QUEUED
    # seconds in ledger.t = own charges + the sink's arp_send (the sink charges its own)
    assert lg.t == pytest.approx(lg.total - mark + fake_sink.COST["arp_send"])


# --- the invariant ------------------------------------------------------------------------------

OPS = st.lists(st.tuples(
    st.sampled_from(["send", "send", "send", "send", "unbind", "advance", "advance", "reply"]),
    st.integers(0, 4),                       # which address
    st.floats(0.0, 4.0, allow_nan=False),    # time step
), min_size=1, max_size=80)


# (the fixture only hands over classes: nothing carries over between examples)
@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(OPS, st.integers(1, 3), st.integers(1, 4), st.sets(st.integers(0, 4)))
def test_refcounts_and_every_packet_ends_once(neigh_fakes, ops, qlen, thresh3, alive):
    clock = neigh_fakes.Clock()
    sink = neigh_fakes.Sink(clock)
    addrs = [ip("10.0.3.1") + i for i in range(5)]
    hosts = {addrs[i]: 0.01 * (1 + i) for i in alive}
    arp = make_arp(clock, sink, hosts=hosts, sysctl={"neigh_unres_qlen": qlen,
                                                    "neigh_gc_thresh3": thresh3,
                                                    "neigh_gc_thresh2": 0})
    tbl = arp.tbl
    routes = {i: [] for i in range(5)}      # route entries bound to each address
    dsts = []
    now, j = 0.0, 0
    for op, i, dt in ops:
        if op == "advance":
            now += dt
            clock.run_until(now)
        elif op == "unbind" and routes[i]:
            tbl.neigh_release(routes[i].pop(0), now)      # dst_destroy
        elif op == "send":
            if not routes[i] or dt > 3.0:                 # a new route entry for it
                n = arp.arp_bind_neighbour(ETH0, addrs[i], now)
                if isinstance(n, int):                    # ENOBUFS: rt_intern_hash drops it
                    assert n == -ENOBUFS
                    sink.ended[j] = "enobufs"
                    j += 1
                    continue
                routes[i].append(n)
            d = neigh_fakes.Dst()
            dsts.append(d)
            sink.send(tbl, routes[i][-1], j, d, now)
            j += 1
        elif op == "reply":
            arp.arp_rcv(ETH0, addrs[i], ("mac", addrs[i]), now)
        _check(tbl)
    # drain: timers run out, routes go, the periodic GC empties the table
    clock.run_until(now + 20.0)
    assert all(not n.arp_queue for n in tbl)
    assert sorted(sink.ended) == list(range(j))           # each packet exactly once
    assert all(d.refcnt == 0 for d in dsts)
    for rs in routes.values():
        for n in rs:
            tbl.neigh_release(n, now + 20.0)
    clock.run_until(now + 400.0)
    assert tbl.entries == 0 and tbl.allocs == tbl.destroys and not list(tbl)


def _check(tbl):
    hashed = list(tbl)
    assert tbl.entries == len(hashed) <= tbl.gc_thresh3 + 1
    for n in hashed:
        assert n.refcnt >= 1 + (n.timer_at != math.inf)
        assert bool(n.nud_state & NUD_IN_TIMER) == (n.timer_at != math.inf)
        assert len(n.arp_queue) <= tbl.parms.queue_len
    assert set(tbl._unpinned) == {n for n in hashed if n.refcnt == 1}
