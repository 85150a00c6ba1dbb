"""Worm probe generators (routelab.worms) and the residence address plan."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab import KnobError
from routelab.core.skbuff import KIND, PacketTrace, int_to_ip, ip_to_int
from routelab.ipv4.fib import RTN, Fib
from routelab.residence import REPLY, is_unicast
from routelab.worms import (
    AddressPlan,
    blaster,
    blaster_start,
    blaster_targets,
    outside_scanners,
    replies,
    welchia,
    welchia_targets,
)

HOST = ip_to_int("10.10.3.77")


def _increment(a, b, c, d):
    """Scalar reference of the worm's address step (our reading of [BLA])."""
    while True:
        if d <= 254:
            return a, b, c, d + 1
        d = 0
        c += 1
        if c <= 254:
            return a, b, c, d
        c = 0
        b += 1
        if b <= 254:
            return a, b, c, d
        b = 0
        a += 1
        if a <= 254:
            continue          # the step runs again: A.0.0.0 is skipped
        return 0, b, c, d


def _reference(start, count):
    a, b, c, d = (start >> 24) & 255, (start >> 16) & 255, (start >> 8) & 255, start & 255
    out = []
    for _ in range(count):
        a, b, c, d = _increment(a, b, c, d)
        out.append((a << 24) | (b << 16) | (c << 8) | d)
    return out


# --------------------------------------------------------------------------- Blaster order
@pytest.mark.parametrize("start", ["10.1.254.0", "10.254.254.0", "254.254.254.200",
                                   "10.10.255.0", "10.255.250.0", "10.255.255.7",
                                   "9.0.0.0", "0.0.0.0", "10.10.3.255"])
def test_targets_follow_the_increment(start):
    s = ip_to_int(start)
    ref = _reference(s, 70_000)
    assert blaster_targets(s, 70_000).tolist() == ref
    # any window of the sequence, computed directly
    for first in (0, 1, 255, 256, 4000, 65_000):
        assert blaster_targets(s, 500, first).tolist() == _reference(s, first + 500)[first:]


def test_carry_rule_examples():
    as_ip = [int_to_ip(x) for x in blaster_targets(ip_to_int("10.1.254.0"), 3, 253)]
    assert as_ip == ["10.1.254.254", "10.1.254.255", "10.2.0.0"]        # C carries into B
    as_ip = [int_to_ip(x) for x in blaster_targets(ip_to_int("10.254.254.0"), 2, 254)]
    assert as_ip == ["10.254.254.255", "11.0.0.1"]                      # B into A, skips .0
    as_ip = [int_to_ip(x) for x in blaster_targets(ip_to_int("254.254.254.0"), 2, 254)]
    assert as_ip == ["254.254.254.255", "0.0.0.0"]                      # wraps
    first = [int_to_ip(x) for x in blaster_targets(ip_to_int("10.10.5.0"), 2)]
    assert first == ["10.10.5.1", "10.10.5.2"]                          # D starts at 0


def test_blaster_trace_is_sequential_rounds_of_20():
    rng = np.random.default_rng(3)
    tr = blaster(rng, host=HOST, duration=30.0, starts=[ip_to_int("10.20.0.0")])
    assert (tr.kind == KIND["worm"]).all() and (tr.proto == 6).all()
    assert (tr.length == 48).all() and (tr.ttl == 128).all() and tr.df.all()
    d = tr.daddr.astype(np.int64)
    assert (np.diff(d) == 1).all()                                      # no gaps, no repeats
    assert int_to_ip(tr.daddr[0]) == "10.20.0.1"
    gaps = np.diff(tr.t)
    big = gaps > 0.5
    # a round every ~1.8 s, its 20 connects within a few ms
    assert np.all(np.flatnonzero(big) % 20 == 19)
    assert gaps[~big].max() < 1e-3
    assert np.all((gaps[big] > 1.8) & (gaps[big] < 1.8 + 0.02))


def test_start_split_local_versus_random():
    hosts = np.full(40_000, HOST, dtype=np.uint32)
    start, local = blaster_start(np.random.default_rng(11), hosts)
    n = hosts.size
    assert abs(local.mean() - 0.4) < 3 * np.sqrt(0.24 / n)
    own_b = (start[local] >> 16) == (HOST >> 16)
    assert own_b.all()
    # host C = 3 <= 20: a local start keeps C
    assert ((start[local] >> 8) & 255 == 3).all()
    rnd = start[~local]
    a, b, c = rnd >> 24, (rnd >> 16) & 255, (rnd >> 8) & 255
    assert a.min() == 1 and a.max() == 254 and b.max() == 253 and c.max() == 253
    assert (rnd & 255 == 0).all() and (start[local] & 255 == 0).all()


@pytest.mark.parametrize("same_tick, lo", [(True, 12), (False, 0)])
def test_local_start_offset_below_the_host(same_tick, lo):
    host = ip_to_int("10.10.100.9")
    hosts = np.full(20_000, host, dtype=np.uint32)
    start, local = blaster_start(np.random.default_rng(5), hosts, same_tick_seed=same_tick)
    off = 100 - ((start[local] >> 8) & 255).astype(int)
    assert off.min() == lo and off.max() == 19
    counts = np.bincount(off, minlength=20)[lo:]
    assert counts.min() > 0.8 * counts.mean()                           # roughly uniform


def test_local_base_and_forced_local():
    start, local = blaster_start(np.random.default_rng(1), [HOST] * 100, local_fraction=1.0,
                                 local_base=[ip_to_int("192.168.1.5")] * 100)
    assert local.all() and ((start >> 8) == ip_to_int("192.168.1.0") >> 8).all()


# --------------------------------------------------------------------------- rates
def _dest_rate(tr, duration):
    first = tr.tag == 0
    return np.unique(tr.daddr[first]).size / duration


def test_blaster_rate_close_to_sourced_11_per_s():
    tr = blaster(np.random.default_rng(2), host=HOST, duration=600.0,
                 starts=[ip_to_int("20.0.0.0")])
    rate = _dest_rate(tr, 600.0)
    assert 10.9 < rate < 11.1                                           # 20 / ~1.81 s
    slow = blaster(np.random.default_rng(2), host=HOST, duration=600.0, round_s=4.0,
                   starts=[ip_to_int("20.0.0.0")])
    assert abs(_dest_rate(slow, 600.0) - 20 / 4.012) < 0.05            # the 4 s variant


def test_welchia_rate_close_to_sourced_140_per_s():
    tr = welchia(np.random.default_rng(2), host=[HOST, HOST + 1], duration=60.0)
    assert (tr.proto == 1).all() and (tr.length == 92).all()
    for h in (HOST, HOST + 1):
        rate = np.unique(tr.daddr[tr.saddr == h]).size / 60.0
        assert abs(rate - 140.0) < 1.0


# --------------------------------------------------------------------------- SYN retransmission
def test_no_retransmission_with_the_original_sleep():
    tr = blaster(np.random.default_rng(4), host=HOST, duration=60.0,
                 starts=[ip_to_int("20.0.0.0")])
    assert (tr.tag == 0).all()


def test_one_retransmission_3s_later_with_a_4s_sleep():
    tr = blaster(np.random.default_rng(4), host=HOST, duration=60.0, round_s=4.0,
                 starts=[ip_to_int("20.0.0.0")])
    first, again = tr.take(tr.tag == 0), tr.take(tr.tag == 1)
    assert (tr.tag <= 1).all() and len(again) > 0
    t0 = dict(zip(first.daddr.tolist(), first.t.tolist(), strict=True))
    dt = np.array([t - t0[d] for d, t in zip(again.daddr.tolist(), again.t.tolist(),
                                             strict=True)])
    assert np.allclose(dt, 3.0)
    # every SYN sent early enough to be retransmitted before its socket closes is
    assert len(again) == int((first.t < 60.0 - 3.0).sum())


def test_two_retransmissions_with_a_long_sleep_and_none_when_answered():
    # 10.10.0.231 upward: live hosts, the router (.254) and the dead .255 and 10.10.1.0
    kw = dict(host=HOST, duration=40.0, round_s=10.0, starts=[ip_to_int("10.10.0.230")])
    tr = blaster(np.random.default_rng(4), **kw)
    assert set(np.unique(tr.tag)) == {0, 1, 2}
    plan = AddressPlan(live_fraction=1.0, firewalled_fraction=0.0)
    tr = blaster(np.random.default_rng(4), plan=plan, only_routed=False,
                 exploit_stall_s=0.0, **kw)
    answered = plan.responds(tr.daddr, 6) != REPLY["none"]
    assert (tr.tag[answered] == 0).all() and (tr.tag[~answered] > 0).any()
    off = blaster(np.random.default_rng(4), syn_retransmit=False, **kw)
    assert (off.tag == 0).all()


def test_exploit_stall_slows_a_round():
    plan = AddressPlan(live_fraction=1.0, firewalled_fraction=0.0, windows_fraction=1.0)
    kw = dict(host=ip_to_int("10.10.9.5"), duration=20.0, starts=[ip_to_int("10.10.0.0")],
              plan=plan, only_routed=False)
    fast = blaster(np.random.default_rng(8), exploit_stall_s=0.0, **kw)
    slow = blaster(np.random.default_rng(8), exploit_stall_s=0.45, **kw)
    # 10.10.0.1-253 all answer SYN-ACK: 20 x 0.45 s more per round
    assert 20 * 20.0 / (1.81 + 9.0) * 0.8 < len(slow) < 20 * 20.0 / (1.81 + 9.0) * 1.3
    assert len(fast) > 4 * len(slow)


def test_nonunicast_targets_send_nothing():
    tr = blaster(np.random.default_rng(1), host=HOST, duration=60.0,
                 starts=[ip_to_int("223.255.254.200")], round_s=0.1)
    assert len(tr) > 0 and is_unicast(tr.daddr).all()
    assert (tr.daddr >> 24 == 223).all()


# --------------------------------------------------------------------------- Welchia sweep
def test_welchia_sweep_stays_in_its_class_b():
    tr = welchia(np.random.default_rng(6), host=HOST, duration=400.0, local_fraction=1.0,
                 random_phase=False)
    assert ((tr.daddr >> 16) == (HOST >> 16)).all()
    assert (np.diff(tr.daddr.astype(np.int64)) > 0).all()
    hosts = tr.daddr & 255
    assert hosts.min() == 1 and hosts.max() == 254


def test_welchia_each_sweep_is_one_class_b():
    # 1000 pps: a sweep of 65 024 echoes takes 65 s; 5 sweeps in 300 s
    tr = welchia(np.random.default_rng(7), host=HOST, duration=300.0, pps=1000.0,
                 random_phase=False, local_fraction=0.5)
    sweep = np.arange(len(tr)) // (256 * 254)
    for s in np.unique(sweep):
        nets = np.unique(tr.daddr[sweep == s] >> 16)
        assert nets.size == 1
    assert np.unique(tr.daddr >> 16).size >= 2
    first = welchia_targets(tr.daddr[0], np.arange(256 * 254))
    assert (tr.daddr[:256 * 254] == first).all()


def test_welchia_follow_up_syn_to_responders_only():
    plan = AddressPlan()
    tr = welchia(np.random.default_rng(9), host=HOST, duration=30.0, plan=plan,
                 local_fraction=1.0, random_phase=False)
    syn = tr.take(tr.proto == 6)
    echo = tr.take(tr.proto == 1)
    assert len(syn) > 0
    assert (plan.responds(syn.daddr, 1) == REPLY["echo_reply"]).all()
    assert np.isin(syn.daddr, echo.daddr).all()
    # of the host's own /24 only the router's address reaches the router
    own = echo.daddr[(echo.daddr >> 8) == (HOST >> 8)]
    assert [int_to_ip(x) for x in own] == ["10.10.3.254"]


# --------------------------------------------------------------------------- address plan
def test_plan_on_link_and_exists_fractions():
    plan = AddressPlan()
    inside = (np.uint32(plan.net) + np.arange(65536, dtype=np.uint32)).astype(np.uint32)
    onlink = plan.on_link(inside)
    assert onlink.mean() == pytest.approx(plan.onlink_share)
    assert not plan.on_link(np.array([ip_to_int("8.8.8.8")], dtype=np.uint32)).any()
    student = plan.student(inside)
    assert student.sum() == 8 * 256
    hosts = student & ((inside & 255) >= 1) & ((inside & 255) <= 253)
    live = plan.exists(inside)
    share = live[hosts].mean()
    assert abs(share - 0.75) < 3 * np.sqrt(0.75 * 0.25 / hosts.sum())
    assert not live[~student].any()
    assert plan.live_hosts().size == int(live[hosts].sum())
    narrow = AddressPlan(unused_space="unreachable")
    assert narrow.on_link(inside).sum() == 8 * 253
    assert narrow.onlink_share == pytest.approx(8 * 253 / 65536)


def test_plan_outside_reply_fraction_and_answers():
    plan = AddressPlan()
    out = np.random.default_rng(0).integers(0x20000000, 0x60000000, 200_000).astype(np.uint32)
    live = plan.exists(out)
    assert abs(live.mean() - 0.03) < 0.002
    r = plan.responds(out, 6)
    assert set(np.unique(r[~live])) == {REPLY["none"]}
    syn_ack = (r[live] == REPLY["syn_ack"]).mean()
    assert abs(syn_ack - 0.2) < 0.03
    assert (plan.responds(out[live], 1) == REPLY["echo_reply"]).all()


def test_plan_inside_answers():
    plan = AddressPlan()
    hosts = plan.live_hosts()
    tcp = plan.responds(hosts, 6)
    share = np.bincount(tcp, minlength=5) / hosts.size
    assert abs(share[REPLY["none"]] - 0.1) < 0.03                      # firewalled
    assert abs(share[REPLY["syn_ack"]] - 0.9 * 0.9) < 0.04
    icmp = plan.responds(hosts, 1)
    assert ((icmp == REPLY["none"]) == (tcp == REPLY["none"])).all()
    assert (plan.responds(hosts, 6, port=80)[tcp != REPLY["none"]] == REPLY["rst"]).all()
    rl = np.array([ip_to_int(a) for a in plan.local_addrs()], dtype=np.uint32)
    assert plan.exists(rl).all() and (plan.responds(rl, 6) == REPLY["rst"]).all()


def test_plan_reaches_router():
    plan = AddressPlan()
    s = np.uint32(HOST)
    d = np.array([ip_to_int(x) for x in ["10.10.3.9", "10.10.3.254", "10.10.4.9",
                                          "10.10.200.1", "8.8.8.8"]], dtype=np.uint32)
    assert plan.reaches_router(s, d).tolist() == [False, True, True, True, True]
    outside = np.uint32(ip_to_int("172.16.0.5"))
    assert plan.reaches_router(outside, d).tolist() == [True] * 4 + [False]


@pytest.mark.parametrize("unused", ["onlink", "unreachable", "default"])
def test_plan_routes_agree_with_on_link(unused):
    plan = AddressPlan(unused_space=unused)
    fib = Fib(routes=plan.fib_routes() + [], local_addrs=plan.local_addrs())
    inside = (np.uint32(plan.net) + np.arange(65536, dtype=np.uint32)).astype(np.uint32)
    n = inside.size
    rtype, oif, gw, _ = fib.fib_lookup(inside, np.zeros(n, np.uint32), np.zeros(n, np.uint8),
                                       np.ones(n, np.int16))
    direct = (rtype == RTN["unicast"]) & (oif == plan.inside_dev) & (gw == 0)
    assert (direct == plan.on_link(inside)).all()
    assert ((rtype == RTN["local"]) == plan.router_local(inside)).all()
    assert ((rtype == RTN["broadcast"]) == plan.subnet_broadcast(inside)).all()


def test_plan_knobs_are_validated():
    with pytest.raises(KnobError):
        AddressPlan(live_fraction=1.5)
    with pytest.raises(KnobError):
        AddressPlan(unused_space="nowhere")
    with pytest.raises(KnobError):
        AddressPlan(inside_net="10.10.0.0/28")
    with pytest.raises(KnobError):
        AddressPlan(student_subnets=300)
    with pytest.raises(KnobError):
        blaster(np.random.default_rng(0), host=HOST, duration=1.0, round_s=-1.0)
    with pytest.raises(KnobError):
        welchia(np.random.default_rng(0), host=HOST, duration=1.0, pps=0.0)
    with pytest.raises(KnobError):
        blaster(np.random.default_rng(0), host=ip_to_int("127.0.0.1"), duration=1.0)


def test_infected_hosts_are_live_and_distinct():
    plan = AddressPlan()
    hosts = plan.infected(np.random.default_rng(1), 50)
    assert np.unique(hosts).size == 50 and plan.exists(hosts).all()
    with pytest.raises(KnobError):
        plan.infected(np.random.default_rng(1), 10**6)


# --------------------------------------------------------------------------- outside, replies
def test_outside_scanners_land_in_the_block():
    plan = AddressPlan()
    tr = outside_scanners(np.random.default_rng(2), plan=plan, duration=20.0,
                          outside_blaster=10, outside_welchia=3)
    assert len(tr) > 0 and plan.inside(tr.daddr).all()
    assert (tr.iif == plan.outside_dev).all()
    assert ((tr.saddr >> 20) == (ip_to_int("172.16.0.0") >> 20)).all()
    assert np.unique(tr.saddr).size == 13
    echo = tr.take(tr.proto == 1)
    assert abs(len(echo) / 20.0 / 3 - 140.0) < 2.0
    with pytest.raises(KnobError):
        outside_scanners(np.random.default_rng(2), plan=plan, duration=1.0,
                         outside_blaster=1, scanner_net="10.0.0.0/8")


def test_replies_match_the_plan():
    plan = AddressPlan()
    rng = np.random.default_rng(5)
    probes = PacketTrace.concat([
        outside_scanners(rng, plan=plan, duration=20.0, outside_blaster=20, outside_welchia=5),
        blaster(rng, host=plan.infected(rng, 5), duration=20.0, plan=plan)])
    rep = replies(probes, plan, rng=np.random.default_rng(1))
    assert len(rep) > 0
    probe = probes.take(rep.tag)
    assert (rep.saddr == probe.daddr).all() and (rep.daddr == probe.saddr).all()
    assert (rep.t > probe.t).all()
    code = plan.responds(probe.daddr, probe.proto)
    assert (code != REPLY["none"]).all()
    assert (rep.length[code == REPLY["syn_ack"]] == 48).all()
    assert (rep.length[code == REPLY["rst"]] == 40).all()
    echo = code == REPLY["echo_reply"]
    assert (rep.length[echo] == probe.length[echo]).all() and (rep.proto[echo] == 1).all()
    ins = plan.inside(rep.saddr)
    assert (rep.iif[ins] == plan.inside_dev).all() and (rep.iif[~ins] == plan.outside_dev).all()
    # every answered probe has exactly one reply; dead addresses none
    expect = (plan.responds(probes.daddr, probes.proto) != REPLY["none"]) & ~plan.router_local(
        probes.daddr)
    assert len(rep) == int(expect.sum())


# --------------------------------------------------------------------------- determinism
def test_same_seed_same_arrays():
    plan = AddressPlan()

    def make(seed):
        rng = np.random.default_rng(seed)
        hosts = plan.infected(rng, 3)
        parts = [blaster(rng, host=hosts, duration=30.0, plan=plan),
                 welchia(rng, host=hosts[:1], duration=5.0, plan=plan),
                 outside_scanners(rng, plan=plan, duration=10.0, outside_blaster=4,
                                  outside_welchia=1)]
        tr = PacketTrace.concat(parts)
        return tr, replies(tr, plan, rng=rng)

    (a, ra), (b, rb), (c, _) = make(7), make(7), make(8)
    for x, y in ((a, b), (ra, rb)):
        for name in PacketTrace.DTYPES:
            assert np.array_equal(getattr(x, name), getattr(y, name))
    assert len(a) != len(c) or not np.array_equal(a.daddr, c.daddr)


# --------------------------------------------------------------------------- properties
@settings(max_examples=60, deadline=None)
@given(a=st.integers(1, 254), b=st.integers(0, 255), c=st.integers(0, 255),
       first=st.integers(0, 5_000_000), count=st.integers(1, 3000))
def test_targets_never_repeat_and_run_upward(a, b, c, first, count):
    start = (a << 24) | (b << 16) | (c << 8)
    d = blaster_targets(start, count, first).astype(np.int64)
    assert np.unique(d).size == d.size
    steps = np.diff(d)
    wraps = steps < 0
    assert wraps.sum() <= 1 and (d[1:][wraps] == 0).all()      # only the wrap to 0.0.0.0
    assert blaster_targets(start, 1, first + count - 1)[0] == d[-1]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), octets=st.tuples(st.integers(1, 223),
       st.integers(0, 255), st.integers(0, 255), st.integers(1, 254)),
       round_s=st.sampled_from([0.2, 1.8, 4.0]))
def test_blaster_host_run_is_valid_unicast_without_repeats(seed, octets, round_s):
    host = (octets[0] << 24) | (octets[1] << 16) | (octets[2] << 8) | octets[3]
    if not is_unicast(np.uint32(host)):
        host = ip_to_int("10.10.3.77")
    tr = blaster(np.random.default_rng(seed), host=host, duration=30.0, round_s=round_s)
    first = tr.daddr[tr.tag == 0]
    assert np.unique(first).size == first.size
    assert is_unicast(tr.daddr).all()
    assert (tr.saddr == host).all() and (np.diff(tr.t) >= 0).all()
