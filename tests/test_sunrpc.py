"""sunrpc transport pieces against the 2.4.19 / 2.4.20 sources (routelab/sunrpc.py)."""

import pytest

from routelab.errors import KnobError
from routelab.ipv4.udp import SK_WMEM_MAX, SendStatus, UdpSocket, truesize_2419
from routelab.sunrpc import (
    MAXREQS,
    RPC_CWNDSCALE,
    RPC_MAXCWND,
    Cwnd,
    FixedTimer,
    RttTimer,
    make_timer,
)


def test_slot_tables():
    assert MAXREQS == {"2.4.19": 17, "2.4.20": 16}


def test_cwnd_starts_at_one_request_and_gates_cong():
    c = Cwnd("aimd")
    assert c.cwnd == RPC_CWNDSCALE
    assert c.get() and not c.get()     # one request in flight, then congested
    c.put()
    assert c.get()


def test_aimd_grows_one_over_n_only_when_full_and_halves():
    c = Cwnd("aimd")
    c.get()
    c.on_reply(0.0)                    # full window: 256 + (65536 + 128)//256 = 512
    assert c.cwnd == 512
    c.on_reply(0.0)                    # cong 256 < 512: not full, no growth
    assert c.cwnd == 512
    c.get()
    c.on_reply(0.0)                    # full at 2: + (65536 + 256)//512 = 128
    assert c.cwnd == 640
    c.on_timeout(0.0)
    assert c.cwnd == 320
    for _ in range(5):
        c.on_timeout(0.0)
    assert c.cwnd == RPC_CWNDSCALE     # never below one request


def test_2419_congtime_holds_growth():
    c = Cwnd("2.4.19")
    c.get()
    c.on_reply(10.0)
    assert c.cwnd == 512 and c.congtime == pytest.approx(10.0 + 4.0 * 2)
    c.get()
    c.on_reply(15.0)                   # full but before congtime: held
    assert c.cwnd == 512
    c.on_reply(18.0)
    assert c.cwnd == 640
    c.on_timeout(20.0)                 # halve, hold 8 s per request of window
    assert c.cwnd == 320 and c.congtime == pytest.approx(20.0 + 8.0 * 320 / 256)


def test_cwnd_capped_at_16_requests():
    c = Cwnd("aimd")
    for _ in range(2000):
        c.cong = c.cwnd
        c.on_reply(0.0)
    assert c.cwnd == RPC_MAXCWND


def test_fixed_timer_doubles_then_major():
    t = FixedTimer(0.7, 3)
    st = t.new_request()
    assert t.rto(st) == 0.7
    assert [t.timeout(st) for _ in range(3)] == [True, True, True]
    assert t.rto(st) == pytest.approx(5.6)
    assert t.timeout(st) is False and t.majors == 1   # major: to_initval doubles
    assert t.rto(st) == pytest.approx(1.4)
    for _ in range(40):
        t.timeout(st)
    assert t.rto(st) <= 60.0


def test_rtt_timer_initial_rto_is_timeo_and_follows_samples():
    t = RttTimer(0.7, 3)
    st = t.new_request()
    assert t.rto(st) == pytest.approx(0.7)            # (70-20)<<3 >> 3 + 20 jiffies
    for _ in range(60):
        t.sample(t.new_request(), 0.004)              # < 1 jiffy: counted as 1
    # integer arithmetic as the kernel's: srtt/8 -> 1 jiffy, sdrtt stops at 3
    # (3 >> 2 == 0): RTO 4 jiffies
    assert t.rto(st) == pytest.approx(4 / 100)
    st2 = t.new_request()
    st2["resent"] = True
    before = (t.srtt, t.sdrtt)
    t.sample(st2, 5.0)                                # Karn: resent requests not sampled
    assert (t.srtt, t.sdrtt) == before


def test_rtt_timer_backoff_per_client():
    t = RttTimer(0.7, 3)
    st = t.new_request()
    base = t.rto(st)
    t.timeout(st)
    t.timeout(t.new_request())
    assert t.rto(st) == pytest.approx(4 * base)
    t.reply()
    assert t.rto(st) == pytest.approx(base)
    for _ in range(20):
        t.timeout(t.new_request())
    assert t.rto(st) == pytest.approx(min(256 * base, 256 * base))


def test_bad_variants():
    with pytest.raises(KnobError, match="cwnd"):
        Cwnd("reno")
    with pytest.raises(KnobError, match="rpc_timer"):
        make_timer("adaptive", 0.7, 3)


def test_truesize_2419_full_fragment():
    assert truesize_2419(1500) == 1696               # 1531 -> 1536 + 160 (sources.md)


def test_eagain_mid_datagram_per_kernel_at_64k():
    """A second 32 KiB WRITE while the first is still queued: 2.4.19 sends the
    high-offset tail and fails; 2.4.20 (first fragment checked only) sends all."""
    for policy, n_sent, status in (("2.4.19", 17, SendStatus.EAGAIN),
                                   ("2.4.20", 23, SendStatus.OK)):
        s = UdpSocket(SK_WMEM_MAX, nonblocking=True, alloc_policy=policy,
                      truesize=truesize_2419)
        first = s.sendmsg(32768 + 164, 0.0)
        assert first.status is SendStatus.OK and len(first.skbs) == 23
        assert s.wmem_alloc == 22 * 1696 + truesize_2419(20 + 380)
        second = s.sendmsg(32768 + 164, 0.0)
        assert second.status is status and len(second.skbs) == n_sent
        if policy == "2.4.19":
            offs = [k.offset for k in second.skbs]
            assert offs == sorted(offs, reverse=True) and 0 not in offs   # headless


def test_writeable_at_half_the_buffer():
    s = UdpSocket(SK_WMEM_MAX, alloc_policy="2.4.19", truesize=truesize_2419)
    r = s.sendmsg(32768 + 164, 0.0)
    freed = [s.sock_wfree(k) for k in r.skbs]
    # wakes once at most half (sock_def_write_space: wmem*2 <= sndbuf)
    k = freed.index(True)
    left = sum(x.truesize for x in r.skbs[k + 1:])
    assert 2 * left <= SK_WMEM_MAX < 2 * (left + r.skbs[k].truesize)


def test_old_policy_names_are_aliases():
    assert UdpSocket(alloc_policy="2.4.16").alloc_policy == "2.4.19"
    assert UdpSocket(alloc_policy="2.4.22").alloc_policy == "2.4.20"


def test_only_reply_timeouts_stop_rtt_sampling():
    """rq_nresend counts xprt_timer's timeouts only: a request whose sleep for
    write space timed out (call_timeout's adjustment alone) is still sampled."""
    t = RttTimer(0.7, 3)
    st = t.new_request()
    t.adjust(st)
    assert not st["resent"] and t.ntimeouts == 0
    t.sample(st, 0.05)
    assert t.samples == 1
    t.timeout(st)
    assert st["resent"] and t.ntimeouts == 1
    t.sample(st, 0.05)
    assert t.samples == 1


def test_rtt_classes_are_separate_but_backoff_is_shared():
    t = RttTimer(0.7, 3)
    w, c = t.new_request(4), t.new_request(5)
    for _ in range(40):
        t.sample(t.new_request(4), 0.002)
        t.sample(t.new_request(5), 0.2)
    assert t.rto(w) < 0.1 < t.rto(c)
    t.timeout(w)
    assert t.rto(c) == pytest.approx(2 * t.rto_base(5))
