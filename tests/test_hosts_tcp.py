"""routelab.hosts.tcp on hand-fed packets: 2.6.20's ACK rule, checksum errors, the
sender's windows, RTO and fast retransmit (a stand-in run: a clock and a record of
what the hosts send)."""
from __future__ import annotations

import pytest

from routelab.core.skbuff import CHECKSUM_NONE, CHECKSUM_PARTIAL
from routelab.costs import cost_table
from routelab.hardware import cpu_profile
from routelab.hosts.nic import HostNic
from routelab.hosts.tcp import TCP_ATO_MIN, TcpReceiver, TcpSender, sock_caps
from routelab.sim.clock import Clock


class FakeRun:
    """What the TCP hosts use of a run: packets by index, a clock, inject,
    ip_output, charge."""

    def __init__(self):
        self.clock = Clock()
        self.duration = 10.0
        self.pk = {}
        self.injected = []
        self.output = []
        self.charged = 0.0

        class R:
            costs = cost_table(cpu_profile("xeon-2007"))
        self.r = R()

    def packet(self, **f):
        j = len(self.pk)
        self.pk[j] = f
        return j

    def field(self, j, name):
        return self.pk[j][name]

    def inject(self, fields, t):
        self.injected.append((t, dict(fields)))
        return -1

    def ip_output(self, fields, t, owner=None, tag=0, oif=None, frames=None):
        self.output.append((t, dict(fields), frames))
        return t + 12.3e-6

    def charge(self, fn, seconds, t, cpu=0):
        self.charged += seconds

    def fire_until(self, t):
        self.clock.run_due(t)


def receiver(window=65535, **kw):
    run = FakeRun()
    r = TcpReceiver(HostNic(1e9, 1000), 2, 1, window=window, **kw)
    r.start(run, 0)
    return run, r


def feed(run, r, seq, t, summed=CHECKSUM_NONE):
    r.deliver(run.packet(tag=seq, ip_summed=summed), t)


def acks(run):
    return [f["tag"] for _, f in run.injected]


def test_quickack_then_every_second_segment():
    run, r = receiver(window=65535)          # quick = min(65535 // 2896, 16) = 16
    assert r.quick == 16
    for i in range(16):
        feed(run, r, i, i * 1e-5)
    assert acks(run) == list(range(1, 17))   # quick-ACK mode: every segment
    for i in range(16, 22):
        feed(run, r, i, i * 1e-5)
    assert acks(run)[16:] == [18, 20, 22]   # more than one full frame unacked


def test_lone_segment_waits_for_the_delack_timer():
    run, r = receiver(window=4 * 1448)        # quick = max(2, 2) = 2
    for i in range(2):
        feed(run, r, i, 0.0)
    n = len(acks(run))
    feed(run, r, 2, 1e-3)
    assert len(acks(run)) == n and r.delack.pending()
    assert r.delack.at == pytest.approx(1e-3 + TCP_ATO_MIN)
    run.fire_until(1.0)
    assert acks(run)[-1] == 3 and r.delayed_acks == 1


def test_out_of_order_acked_at_once_and_hole_filled():
    run, r = receiver(window=4 * 1448)
    feed(run, r, 0, 0.0)
    feed(run, r, 1, 0.0)
    k = len(acks(run))
    feed(run, r, 3, 1e-4)                    # segment 2 missing: dup ACK for 2
    assert acks(run)[k:] == [2]
    feed(run, r, 2, 2e-4)                    # the hole: 4 in order, ACK now (ofo was set)
    assert r.rcv_nxt == 4


def test_unfilled_checksum_is_an_error_and_not_acked():
    run, r = receiver(forward_csum="none", forwarded=True)
    feed(run, r, 0, 0.0, CHECKSUM_PARTIAL)
    assert r.bad_csum == 1 and r.rcv_nxt == 0 and acks(run) == []
    run2, r2 = receiver(forward_csum="partial", forwarded=True)
    feed(run2, r2, 0, 0.0, CHECKSUM_PARTIAL)
    assert r2.bad_csum == 0 and r2.rcv_nxt == 1


def test_b_cpu_time_paces_the_acks():
    run, r = receiver(service_s=16e-6)
    for i in range(4):
        feed(run, r, i, 0.0)                 # all four arrive at once
    # processed one after another: the ACKs leave B 16 us apart (plus wire)
    times = [t for t, _ in run.injected]
    assert times[1] - times[0] == pytest.approx(16e-6)


def sender(path="container", window=65535, tso=1, feats=0):
    run = FakeRun()
    s = TcpSender(path, sock_caps(feats), 1, 2, window=window, tso_segs=tso)
    s.start(run, 1 if path == "container" else -1)
    run.fire_until(0.0)
    return run, s


def ack(run, s, n, t):
    s.deliver(run.packet(tag=n), t)


def test_initial_window_and_slow_start():
    run, s = sender()
    assert len(run.injected) == 3            # tcp_init_cwnd: 3 for a 1448-byte MSS
    assert all(f["cloned"] for _, f in run.injected)   # every segment a clone
    ack(run, s, 2, 1e-3)                     # 2 segments acked: cwnd 3 -> 5
    assert s.cwnd == 5 and s.snd_nxt == 2 + 5


def test_receive_window_limits():
    run, s = sender(window=4 * 1448)
    for i in range(1, 40):
        ack(run, s, i, i * 1e-4)
    assert s.snd_nxt - s.snd_una <= 4


def test_fast_retransmit_and_rto():
    run, s = sender()
    ack(run, s, 2, 1e-3)
    before, k0 = s.retrans, len(run.injected)
    for k in range(3):
        ack(run, s, 2, 1.1e-3 + k * 1e-5)    # three duplicate ACKs
    assert s.retrans == before + 1 and s.recover >= 0
    assert run.injected[k0][1]["tag"] == 2   # the hole is resent first
    # nothing more: the retransmit timer fires, cwnd back to 1
    run.fire_until(10.0)
    assert s.timeouts >= 1 and s.cwnd == 1.0


def test_sender_csum_and_copy_choice():
    run, s = sender(feats=0)
    assert s.c_copy == pytest.approx(1448 * (run.r.costs.copy_s_per_byte
                                             + run.r.costs.csum_s_per_byte))
    run2, s2 = sender(feats=8)               # HW_CSUM: CHECKSUM_PARTIAL, plain copy
    assert s2.c_copy == pytest.approx(1448 * run2.r.costs.copy_s_per_byte)
    assert run2.injected[0][1]["ip_summed"] == CHECKSUM_PARTIAL
