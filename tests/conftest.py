"""Shared test doubles: a fake clock (the routelab.sim.clock API) and a fake engine sink.

Used by tests/core/test_neighbour.py and tests/ipv4/test_arp.py through the
``fake_clock`` and ``fake_sink`` fixtures.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest


class FakeTimer:
    """``Timer`` of the clock API: ``mod(at)``, ``stop()``, ``at`` (inf when idle)."""

    __slots__ = ("name", "fire", "cpu", "at", "seq")

    def __init__(self, name, fire, cpu, seq):
        self.name, self.fire, self.cpu, self.seq = name, fire, cpu, seq
        self.at = math.inf

    def mod(self, at):
        self.at = float(at)

    def stop(self):
        self.at = math.inf


class FakeClock:
    """Runs due timers in (deadline, creation order); a fired timer reads ``at == inf``.

    ``call_at(t, fn)`` adds a one-shot test event (an ARP reply arriving) that
    takes part in the same ordering.  ``log`` records (name, time, seconds).
    """

    def __init__(self):
        self.timers = []
        self.now = 0.0
        self.log = []

    def timer(self, name, fire, cpu=0):
        t = FakeTimer(name, fire, cpu, len(self.timers))
        self.timers.append(t)
        return t

    def call_at(self, at, fn):
        def fire(now):
            fn(now)
            return 0.0

        t = self.timer("event", fire)
        t.mod(at)
        return t

    def next_due(self):
        armed = [t for t in self.timers if t.at != math.inf]
        return min(armed, key=lambda t: (t.at, t.seq)) if armed else None

    def run_until(self, t_end):
        while True:
            tm = self.next_due()
            if tm is None or tm.at > t_end:
                break
            self.now = tm.at
            tm.at = math.inf
            secs = tm.fire(self.now)
            assert secs >= 0.0
            self.log.append((tm.name, self.now, secs))
        self.now = max(self.now, t_end)

    def fired(self, name):
        return [t for n, t, _ in self.log if n == name]


class FakeDst:
    """An engine dst: a reference count and an expiry."""

    def __init__(self, name="dst"):
        self.name = name
        self.refcnt = 0
        self.expires = 0.0
        self.neighbour = None

    def __repr__(self):
        return f"FakeDst({self.name}, ref {self.refcnt})"


class FakeSink:
    """The engine side: records every callback and ends each packet exactly once.

    Packets are int tokens; ``send`` hands one to the table the way the
    engine's ip_finish_output2 would (taking the skb's dst reference first).
    ``ended[j]`` is the single outcome of token ``j``; a second one fails.
    """

    COST = {"neigh_output": 1e-6, "neigh_queue_drop": 2e-6, "arp_error_report": 5e-6,
            "arp_send": 3e-6}

    def __init__(self, clock):
        self.clock = clock
        self.arp = None          # set to answer ARP replies through arp_rcv
        self.ended = {}
        self.sent = []           # (time, dev, target, broadcast)
        self.replies = []        # (dev, addr, t_reply)
        self.events = []         # (kind, j, time)
        self.lladdr = {}         # addr -> link address the host answers with

    def _end(self, kind, j, dst, now):
        assert j not in self.ended, f"packet {j} ended twice: {self.ended[j]} then {kind}"
        self.ended[j] = kind
        self.events.append((kind, j, now))
        if dst is not None:
            dst.refcnt -= 1      # kfree_skb / TX completion -> dst_release
            assert dst.refcnt >= 0

    def neigh_output(self, j, dst, now):
        self._end("output", j, dst, now)
        return self.COST["neigh_output"]

    def neigh_queue_drop(self, j, dst, now):
        self._end("drop", j, dst, now)
        return self.COST["neigh_queue_drop"]

    def arp_error_report(self, j, dst, now):
        # ipv4_link_failure: icmp_send, then dst_set_expires(dst, 0)
        if dst.expires == 0.0 or dst.expires > now:
            dst.expires = now
        self._end("error", j, dst, now)
        return self.COST["arp_error_report"]

    def arp_send(self, dev, target, broadcast, now):
        self.sent.append((now, dev, target, broadcast))
        return self.COST["arp_send"]

    def arp_reply_due(self, dev, addr, t_reply):
        self.replies.append((dev, addr, t_reply))
        if self.arp is not None:
            ll = self.lladdr.get(addr, ("mac", addr))
            self.clock.call_at(t_reply, lambda now: self.arp.arp_rcv(dev, addr, ll, now))

    # the engine's transmit path for a packet whose dst points at neighbour n
    def send(self, tbl, n, j, dst, now):
        from routelab.core.neighbour import NEIGH_DROP, NEIGH_XMIT
        dst.refcnt += 1          # skb->dst
        rc = tbl.neigh_resolve_output(n, j, dst, now)
        assert tbl.ledger.t >= 0.0           # its seconds (the ledger convention)
        if rc == NEIGH_XMIT:
            self._end("xmit", j, dst, now)
        elif rc == NEIGH_DROP:
            self._end("dropped", j, dst, now)
        return rc


@pytest.fixture
def fake_clock():
    return FakeClock()


@pytest.fixture
def fake_sink(fake_clock):
    return FakeSink(fake_clock)


@pytest.fixture
def fake_dst():
    return FakeDst


@pytest.fixture
def neigh_fakes():
    """The fake classes themselves, for tests that build several (hypothesis examples)."""
    return SimpleNamespace(Clock=FakeClock, Sink=FakeSink, Dst=FakeDst)
