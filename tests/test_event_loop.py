"""The closed-loop engine: timers without traffic, deliveries in time order,
local output with an owner, host NICs, host CPU charges and counters,
reassembly expiry on the clock (issue 21's blockers, one test each)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routelab import Device, Fib, KnobError, PacketTrace, Route, Router
from routelab.core.skbuff import KIND, ip_to_int
from routelab.hosts import Host
from routelab.hosts.nic import HostNic
from routelab.ipv4.ip_fragment import IpDefrag, IpFragment
from routelab.sim.clock import Clock
from routelab.sim.schedule import Schedule

IN_HOST, OUT_HOST = ip_to_int("10.0.0.5"), ip_to_int("130.0.0.1")


def fib():
    return Fib(routes=[Route("10.0.0.0/8", oif=0), Route("0.0.0.0/0", oif=1)],
               local_addrs=["10.255.255.254", "192.0.2.1"])


def router(hosts=None, local_hosts=None, kernel="2.4.24", speed=None):
    devs = [Device("eth0", "e1000", 0), Device("eth1", "e1000", 0, speed_bps=speed)]
    return Router(kernel, "opteron-2400x2", devs, fib(), hosts=hosts, local_hosts=local_hosts,
                  arp_static=[(0, IN_HOST), (1, OUT_HOST)])


def udp(n, rate=1000.0, length=200):
    return PacketTrace.build(np.arange(n) / rate, saddr=IN_HOST, daddr=OUT_HOST, proto=17,
                             length=length, tag=np.arange(n), kind=KIND["background"])


def fields(tag=0, length=100, kind="background", iif=1):
    return dict(iif=iif, saddr=OUT_HOST, daddr=IN_HOST, tos=0, proto=17, length=length,
                ttl=64, df=False, cloned=False, headroom=16, hdr_err=0, kind=KIND[kind],
                tag=tag)


class Ticker(Host):
    """Sends a datagram on its own timer every ``period`` seconds."""

    def __init__(self, period, count):
        super().__init__()
        self.period, self.count = period, count

    def start(self, run, dev):
        super().start(run, dev)
        self.sent = 0
        self.timer = run.clock.timer("ticker", self.fire)
        self.timer.mod(self.period)

    def fire(self, now):
        self.run.inject(fields(self.sent), now)
        self.sent += 1
        if self.sent < self.count:
            self.timer.mod(now + self.period)
        return 0.0

    def counters(self):
        return {"sent": self.sent}


@pytest.mark.parametrize("offered", [0, 1, 100])
def test_a_timer_driven_host_sends_whatever_the_offered_traffic(offered):
    t = Ticker(period=0.01, count=5)
    res = router(hosts={1: t}).run(udp(offered), 0.1)
    assert t.sent == 5 and t.timer.fired == 5
    born = res.packets["kind"] == KIND["background"]
    assert born.sum() == offered + 5
    assert res.counters["dev"]["tx_packets"] == [5, offered]
    assert res.counters["hosts"] == {"eth1": {"sent": 5}}
    assert res.conservation()
    # the summary counts the offered trace and, apart, what was born in the run
    s = res.summary()
    assert s["offered_packets"] == offered and s["born_packets"] == 5
    assert (s["born_forwarded_packets"] + s["born_local_packets"]
            + s["born_dropped_packets"]) == 5
    assert s["born_forwarded_packets"] == 5


def test_timers_stop_at_the_end_of_the_run():
    t = Ticker(period=0.03, count=100)
    router(hosts={1: t}).run(udp(0), 0.1)
    assert t.sent == 3          # at 0.03, 0.06, 0.09; 0.12 is after the end


class Recorder(Host):
    """A stateful host: notes the time of every delivery and of its own timer."""

    kinds = ("background",)

    def start(self, run, dev):
        super().start(run, dev)
        self.seen = []
        self.timer = run.clock.timer("recorder", self.tick)
        self.timer.mod(0.0005)

    def tick(self, now):
        self.seen.append(("timer", now))
        self.timer.mod(now + 0.0005)
        return 0.0

    def deliver(self, j, t):
        self.seen.append(("deliver", t))
        assert self.run.field(j, "kind") == KIND["background"]


def test_a_stateful_host_sees_monotonic_time_on_a_slow_uplink():
    host = Recorder()
    res = router(hosts={1: host}, speed=1e6).run(udp(200, rate=400.0, length=1000), 0.5)
    times = [t for _, t in host.seen]
    assert all(b >= a for a, b in zip(times, times[1:], strict=False))
    dl = [t for k, t in host.seen if k == "deliver"]
    sent = res.packets["t_depart"][res.packets["outcome"] == 0]
    # every delivery is at the frame's departure, before the end of the run or not
    assert sorted(dl) == sorted(sent[sent <= 0.5].tolist()) + sorted(sent[sent > 0.5].tolist())
    assert len(dl) == int((res.packets["outcome"] == 0).sum())


def test_deliveries_cross_windows_with_their_headers():
    from routelab.traffic import TraceWindows
    host = Recorder()

    def make(t0, t1):
        n = int(round((t1 - t0) * 400))
        return PacketTrace.build(t0 + np.arange(n) / 400.0, saddr=IN_HOST, daddr=OUT_HOST,
                                 proto=17, length=1000, kind=KIND["background"],
                                 tag=np.arange(n))

    res = router(hosts={1: host}, speed=1e6).run(TraceWindows(make, 0.3, 0.1, 400), 0.3)
    dl = [t for k, t in host.seen if k == "deliver"]
    assert len(dl) == int((res.packets["outcome"] == 0).sum())
    assert all(b >= a for a, b in zip(dl, dl[1:], strict=False))


class Socket(Host):
    """A socket on the router's machine: sends through ip_output as owner."""

    def start(self, run, dev):
        super().start(run, dev)
        self.done = []
        self.deps = []
        self.timer = run.clock.timer("app", self.send)
        self.timer.mod(0.001)

    def send(self, now):
        for k in range(4):
            self.deps.append(self.run.ip_output(
                dict(fields(k, 1000), saddr=ip_to_int("192.0.2.1"), daddr=OUT_HOST, iif=0),
                now, owner=self, tag=k))
        self.charge("udp_sendmsg", 2e-6, now)
        return 0.0

    def tx_complete(self, tag, t):
        self.done.append((tag, t))


class Sink(Host):
    kinds = ("background",)

    def start(self, run, dev):
        super().start(run, dev)
        self.got = []

    def deliver(self, j, t):
        self.got.append((self.run.field(j, "tag"), t))


def test_a_local_socket_is_woken_by_its_tx_completions():
    sock, sink = Socket(), Sink()
    res = router(local_hosts={17: sock}, hosts={1: sink}).run(udp(0), 0.05)
    assert all(math.isfinite(d) for d in sock.deps)
    assert sock.done == [(k, sock.deps[k]) for k in range(4)]
    assert sink.got == [(k, sock.deps[k]) for k in range(4)]
    assert res.counters["dev"]["tx_packets"][1] == 4
    assert res.counters["ip"]["OutRequests"] == 4
    assert res.profile["udp_sendmsg"] == pytest.approx(2e-6)
    assert res.profile["ip_output (local)"] > 0


def test_local_output_refuses_bad_arguments():
    sock = Socket()
    r = router(local_hosts={17: sock})
    from routelab.router import Run
    run = Run(r, udp(0), 0.01)
    with pytest.raises(KnobError, match="ip_output t"):
        run.ip_output(fields(), -1.0)
    with pytest.raises(KnobError, match="ip_output oif"):
        run.ip_output(fields(), 0.0, oif=7)
    with pytest.raises(KnobError, match="charge x cpu"):
        run.charge("x", 1e-6, 0.0, cpu=99)


class NicSender(Host):
    """A host beyond eth1 sending back-to-back frames through its own NIC."""

    def __init__(self, n):
        super().__init__()
        self.n = n
        self.nic = HostNic(1e6, txqueuelen=3)

    def start(self, run, dev):
        super().start(run, dev)
        self.nic.start(run, self)
        self.done = []
        self.timer = run.clock.timer("burst", self.burst)
        self.timer.mod(0.001)

    def burst(self, now):
        self.deps = [self.nic.xmit(fields(k, 1000), now, tag=k) for k in range(self.n)]
        return 0.0

    def tx_complete(self, tag, t):
        self.done.append((tag, t))

    def counters(self):
        return self.nic.counters()


def test_a_host_nic_serialises_queues_and_completes_on_time():
    h = NicSender(6)
    res = router(hosts={1: h}).run(udp(0), 0.2)
    wire = (1000 + 38) * 8 / 1e6
    ok = [d for d in h.deps if d == d]
    assert len(ok) == 4 and h.nic.dropped == 2          # 1 on the wire + 3 queued
    assert np.allclose(np.diff(ok), wire)
    assert h.done == [(k, ok[k]) for k in range(4)]
    arrived = np.sort(res.packets["t"][res.packets["kind"] == KIND["background"]])
    assert np.allclose(arrived, ok)
    assert res.counters["hosts"]["eth1"]["tx_dropped"] == 2


def test_reassembly_expires_on_the_clock_with_nothing_else_arriving():
    clock = Clock()
    d = IpDefrag(ipfrag_time=30.0)
    seen = []
    d.arm(clock, lambda now, exp: seen.append((now, len(exp))) or 1e-6)
    d.ip_defrag(IpFragment(id=1, saddr=1, daddr=2, proto=17, offset=0, payload=b"x" * 8,
                           more_fragments=True), 1.0)
    assert clock.next_due() == 31.0
    clock.run_due(40.0)
    assert seen == [(31.0, 1)] and d.snmp["ReasmTimeout"] == 1
    assert clock.next_due() == math.inf


def test_schedule_orders_deliveries_and_keeps_nt():
    s = Schedule(0.5)
    s.deliver_at(0.3, "b", 2)
    s.deliver_at(0.1, "a", 1)
    s.deliver_at(0.3, "c", 3)
    assert s.nt == 0.1 and s.dnt == 0.1
    assert [s.delivery_pop()[1:] for _ in range(3)] == [("a", 1), ("b", 2), ("c", 3)]
    assert s.nt == 0.5 and s.dnt == math.inf
    s.born_push(0.2, 9)
    s.born_push(0.1, 8)
    assert s.bnt == 0.1 and s.born_pop() == 8 and s.bnt == 0.2


def nocache_kernel(monkeypatch, base="2.6.0"):
    """A kernel with no route cache but with policy rules, ARP and RCU (the
    shape of a 3.6 profile), registered for the test only."""
    import dataclasses

    from routelab import kernels
    k = dataclasses.replace(kernels.KERNELS[base], name="test-nocache", route_cache=False)
    monkeypatch.setitem(kernels.KERNELS, k.name, k)
    return k.name


def test_a_kernel_without_route_cache_keeps_rules_arp_and_rcu(monkeypatch):
    name = nocache_kernel(monkeypatch)
    devs = [Device("eth0", "e1000", 0), Device("eth1", "e1000", 0)]
    f = Fib(routes=[Route("10.0.0.0/8", oif=0), Route("0.0.0.0/0", oif=1, gateway="192.0.2.254")],
            local_addrs=["10.255.255.254", "192.0.2.1"])
    r = Router(name, "opteron-2400x2", devs, f, arp_static=[(0, IN_HOST)])
    from routelab.router import Run
    run = Run(r, udp(50, rate=10000.0), 0.05)
    res = run.dispatch()
    assert run.cache is None and run.arp is not None and run.cpus[0].rcu is not None
    oc = res.outcome_counts()
    # the gateway was unknown: ARP asked for it, the first packets waited in its
    # queue (3 by default, the rest dropped), and once resolved every packet left
    assert res.counters["neigh"]["entries"] >= 1
    assert oc["forwarded"] + oc.get("drop_arp_queue", 0) + oc.get("held_neigh", 0) == 50
    assert oc["forwarded"] >= 40
    assert res.counters["dev"]["tx_packets"][1] >= oc["forwarded"] + 1      # + the ARP request
    # the policy rules are walked (priced) although there is no cache
    from routelab.prepare import prepare
    p = prepare(r, None, udp(3))
    assert (p["nrules"] > 0).all()
    # per-packet neighbour lookups keep no reference: only the table's own is left
    assert [n.refcnt for n in run.arp.tbl] == [1] * run.arp.tbl.entries
    assert "test-nocache" in res.config.kernel.name
    assert res.conservation()


def test_kernel_profile_fields_are_checked():
    import dataclasses

    from routelab import kernels
    with pytest.raises(KnobError, match="fib"):
        dataclasses.replace(kernels.KERNELS["2.6.0"], fib="radix")
    assert kernels.KERNELS["2.0"].policy_rules is False
    assert all(k.policy_rules for n, k in kernels.KERNELS.items() if n != "2.0")
