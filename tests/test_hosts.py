"""The engine's seams: hosts that react, packets born in a run, timers from
outside the router, TX completion with an owner, pair devices, windows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routelab import Device, Fib, KnobError, PacketTrace, Route, Router
from routelab.core.skbuff import KIND, ip_to_int
from routelab.hosts import Host
from routelab.hosts.echo import EchoHost, Pinger
from routelab.traffic import TraceWindows

IN_HOST, OUT_HOST = ip_to_int("10.0.0.5"), ip_to_int("130.0.0.1")


def fib():
    return Fib(routes=[Route("10.0.0.0/8", oif=0), Route("0.0.0.0/0", oif=1)],
               local_addrs=["10.255.255.254", "192.0.2.1"])


def router(hosts=None, local_hosts=None, kernel="2.4.24", nic="e1000", out_nic=None):
    devs = [Device("eth0", nic, 0), Device("eth1", out_nic or nic, 0)]
    # (both hosts' addresses already resolved: no ARP exchange in these runs)
    return Router(kernel, "opteron-2400x2", devs, fib(), hosts=hosts, local_hosts=local_hosts,
                  arp_static=[(0, IN_HOST), (1, OUT_HOST)])


class UdpEcho(Host):
    """A toy far-end host: answers every UDP datagram after ``delay`` seconds."""

    kinds = ("background",)

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.got: list = []

    def start(self, run, dev):
        super().start(run, dev)
        self.got = []

    def deliver(self, j, t):
        f = self.run.header(j)
        self.got.append((f["tag"], t))
        f["saddr"], f["daddr"] = f["daddr"], f["saddr"]
        f["iif"] = self.dev
        f["kind"] = KIND["local"]          # (another kind: not answered again)
        self.run.inject(f, t + self.delay)


def udp(n, rate=1000.0):
    return PacketTrace.build(np.arange(n) / rate, saddr=IN_HOST, daddr=OUT_HOST, proto=17,
                             length=200, tag=np.arange(n), kind=KIND["background"])


@pytest.mark.parametrize("kernel", ["2.0", "2.4.24", "2.6.0"])
def test_a_toy_host_answers_every_datagram_and_its_answers_are_forwarded(kernel):
    host = UdpEcho(delay=0.002)
    r = router(hosts={1: host}, kernel=kernel)
    res = r.run(udp(20), 0.05)
    pk = res.packets
    assert res.offered == 20 and len(pk["outcome"]) == 40          # 20 answers born
    assert [tag for tag, _ in host.got] == list(range(20))
    back = slice(20, 40)
    # every answer came in on eth1, was routed back to the inside and forwarded
    assert (pk["dev"][back] == 1).all()
    assert (pk["outcome"][back] == 0).all()
    assert (pk["kind"][back] == KIND["local"]).all()
    assert list(pk["tag"][back]) == list(range(20))
    # it arrived delay after the datagram left, and left the router after that
    assert np.allclose(pk["t"][back], [t + 0.002 for _, t in host.got])
    assert (pk["t_depart"][back] > pk["t"][back]).all()
    assert res.counters["dev"]["tx_packets"] == [20, 20]
    assert res.conservation()


def test_packets_born_in_the_run_keep_the_arrival_order():
    # answers due before later offered packets are served before them
    host = UdpEcho(delay=0.0005)
    res = router(hosts={1: host}).run(udp(10, rate=1000.0), 0.02)
    order = np.argsort(res.packets["t_start"], kind="stable")
    assert np.all(np.diff(res.packets["t"][order]) >= -1e-12)


class Ticker(Host):
    """A host that sends a datagram on its own timer every ``period`` seconds."""

    def __init__(self, period: float, count: int) -> None:
        super().__init__()
        self.period, self.count = period, count

    def start(self, run, dev):
        super().start(run, dev)
        self.sent = 0
        self.timer = run.clock.timer("ticker", self.fire)   # registered from outside router.py
        self.timer.mod(self.period)

    def fire(self, now):
        self.run.inject(dict(iif=self.dev, saddr=OUT_HOST, daddr=IN_HOST, tos=0, proto=17,
                             length=100, ttl=64, df=False, cloned=False, headroom=16, hdr_err=0,
                             kind=KIND["background"], tag=self.sent), now)
        self.sent += 1
        if self.sent < self.count:
            self.timer.mod(now + self.period)
        return 0.0


def test_a_timer_registered_by_a_host_fires_and_its_packets_are_forwarded():
    t = Ticker(period=0.01, count=5)
    # the offered trace keeps the clock moving (timers fire when packets come)
    tr = udp(100, rate=1000.0)
    res = router(hosts={1: t}).run(tr, 0.1)
    pk = res.packets
    born = slice(100, len(pk["outcome"]))
    assert t.sent == 5 and t.timer.fired == 5
    assert np.allclose(pk["t"][born], [0.01 * (k + 1) for k in range(5)])
    assert (pk["outcome"][born] == 0).all() and (pk["dev"][born] == 1).all()
    assert res.counters["dev"]["tx_packets"][0] == 5


def test_echo_host_serves_every_ping():
    pings = PacketTrace.build(np.arange(10) * 0.01, saddr=IN_HOST, daddr=OUT_HOST, proto=1,
                              length=84, kind=KIND["ping_request"], tag=np.arange(10))
    res = router(hosts={0: Pinger(), 1: EchoHost(0.003)}).run(pings, 0.2)
    sent, rtt = res.ping_rtt_ms()
    assert len(sent) == 10 and np.isfinite(rtt).all()
    assert (rtt > 3.0).all() and (rtt < 4.0).all()


class Owner(Host):
    """Sends datagrams that it owns and counts the TX completions (sock_wfree)."""

    kinds = ("background",)

    def start(self, run, dev):
        super().start(run, dev)
        self.done: list = []

    def tx_complete(self, tag, t):
        self.done.append((tag, t))


def test_tx_completion_tells_the_owner_on_time():
    r = router(nic="e100", kernel="2.4.24")
    o = Owner()
    from routelab.router import Run
    run = Run(r, udp(1), 1.0)
    o.start(run, 1)
    dev = run.devices[1]
    deps = [dev.dev_queue_xmit(0.001 * k, 0.0005, None, o, k) for k in range(4)]
    assert all(math.isfinite(d) for d in deps)
    assert dev.txc_timer.at == deps[0]
    run.clock.run_due(1.0)
    assert o.done == [(k, deps[k]) for k in range(4)]


def test_a_pair_device_has_no_wire_and_frees_the_frame_at_once():
    r = Router("2.6.0", "opteron-2400x2", [Device("eth0", "e1000", 0),
                                           Device("veth0", "etun", 0)], fib(),
               arp_static=[(0, IN_HOST), (1, OUT_HOST)])
    from routelab.router import Run
    run = Run(r, udp(1), 1.0)
    o = Owner()
    o.start(run, 1)
    assert run.devices[1].pair
    assert run.devices[1].dev_queue_xmit(0.5, 1.0, None, o, 7) == 0.5
    assert o.done == [(7, 0.5)]
    res = r.run(udp(10), 0.05)
    assert res.outcome_counts()["forwarded"] == 10
    # no serialisation: a frame leaves when its service ends, one wire time
    # earlier than through a gigabit NIC
    eth = router(kernel="2.6.0").run(udp(10), 0.05)
    wire = (200 + 38) * 8 / 1e9
    assert np.allclose(eth.packets["t_depart"] - res.packets["t_depart"], wire, atol=1e-12)


def test_packets_born_near_a_window_end_arrive_in_the_next_window():
    host = UdpEcho(delay=0.004)
    r = router(hosts={1: host})

    def make(t0, t1):
        n = int(round((t1 - t0) * 1000))
        tr = PacketTrace.build(t0 + np.arange(n) / 1000.0, saddr=IN_HOST, daddr=OUT_HOST,
                               proto=17, length=200, kind=KIND["background"],
                               tag=np.arange(n) + int(round(t0 * 1000)))
        return tr

    tw = TraceWindows(make, 0.03, 0.01, 30)
    res = r.run(tw, 0.03)
    pk = res.packets
    born = pk["kind"] == KIND["local"]
    assert born.sum() == 30 and (pk["outcome"][born] == 0).all()
    assert sorted(pk["tag"][born]) == list(range(30))


def test_bad_hosts_are_named():
    with pytest.raises(KnobError, match="hosts"):
        router(hosts={5: EchoHost(0.1)})
    with pytest.raises(KnobError, match="hosts\\[1\\]"):
        router(hosts={1: object()})
    with pytest.raises(KnobError, match="delay_s"):
        EchoHost(-1)
    with pytest.raises(KnobError, match="local_hosts"):
        router(local_hosts={300: Host()})
