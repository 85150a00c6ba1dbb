"""Tests for routelab.ipv4.icmp: the ICMP error length and the three rate limits.

Expected values are worked out by hand from the rules in kernel.md s1/s4:
xrlim_allow (one error a second per peer, bursts of 6), ip_error (error_cost
1 s, error_burst 5 s) and ip_rt_send_redirect (at most redirect_number
redirects spaced by redirect_load << n, then silence until redirect_silence
passes with no offending packet).
"""
from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from routelab.ipv4.icmp import (
    ERROR_BURST,
    ICMP_RATELIMIT,
    XRLIM_BURST_FACTOR,
    RedirectState,
    icmp_error_len,
    ip_error_allow,
    redirect_allow,
    xrlim_allow,
)
from routelab.sysctl import SYSCTLS

SYS = {name: k.default for name, k in SYSCTLS.items()}


def test_icmp_error_quotes_at_most_576_bytes():
    assert icmp_error_len(20) == 48                  # 20 + 8 + the whole 20-byte datagram
    assert icmp_error_len(548) == 576
    assert icmp_error_len(1500) == 576                # RFC 1812: the reply fits in 576
    out = icmp_error_len(np.array([28, 100, 5000]))
    assert out.tolist() == [56, 128, 576]


def test_xrlim_new_peer_gets_a_burst_of_six_then_one_a_second():
    state: dict = {}
    burst = int(XRLIM_BURST_FACTOR * ICMP_RATELIMIT)
    assert burst == 6
    # all at the same instant: the full bucket allows exactly six
    got = [xrlim_allow(state, 1, 10.0) for _ in range(8)]
    assert got == [True] * 6 + [False] * 2
    # half a second later the bucket holds 0.5 tokens: still refused
    assert not xrlim_allow(state, 1, 10.5)
    # one more second (1.5 accumulated since 10.0): one allowed, then refused
    assert xrlim_allow(state, 1, 11.5)
    assert not xrlim_allow(state, 1, 11.5)


def test_xrlim_peers_are_independent_and_refill_caps_at_the_burst():
    state: dict = {}
    for _ in range(6):
        assert xrlim_allow(state, "a", 0.0)
    assert not xrlim_allow(state, "a", 0.0)
    assert xrlim_allow(state, "b", 0.0)               # another peer has its own bucket
    # a long quiet spell refills "a" only up to the burst, not beyond
    got = [xrlim_allow(state, "a", 1000.0) for _ in range(7)]
    assert got == [True] * 6 + [False]


def test_ip_error_burst_of_five_then_one_a_second():
    state: dict = {}
    assert ERROR_BURST == 5.0
    got = [ip_error_allow(state, ("dst", 7), 3.0) for _ in range(6)]
    assert got == [True] * 5 + [False]
    assert not ip_error_allow(state, ("dst", 7), 3.9)
    assert ip_error_allow(state, ("dst", 7), 4.0)     # 1.0 s since the last: one token
    assert ip_error_allow(state, ("dst", 8), 4.0)     # another key, a full bucket


@given(st.lists(st.floats(min_value=0.0, max_value=100.0, allow_nan=False), min_size=1,
                max_size=60))
def test_xrlim_never_exceeds_burst_plus_elapsed_seconds(times):
    """Token bucket bound: in any run, messages allowed <= burst + elapsed / rate."""
    times = sorted(times)
    state: dict = {}
    allowed = sum(xrlim_allow(state, 0, t) for t in times)
    assert allowed <= XRLIM_BURST_FACTOR + (times[-1] - times[0]) / ICMP_RATELIMIT + 1e-9
    assert allowed >= 1                               # the first is always allowed


def test_redirects_are_spaced_by_doubling_load_then_silenced():
    s = RedirectState()
    load, number = SYS["redirect_load"], SYS["redirect_number"]
    assert (load, number) == (0.02, 9)
    t = 100.0
    sent = [t]
    assert redirect_allow(s, t, SYS)                  # the first goes out at once
    # each next one needs load << tokens since the last: 0.04, 0.08, ... seconds
    for n in range(1, number):
        gap = load * (1 << n)
        assert not redirect_allow(s, t + gap * 0.99, SYS)   # a refused packet is not counted
        t += gap * 1.01
        assert redirect_allow(s, t, SYS)
        sent.append(t)
    assert s.rate_tokens == number
    # after redirect_number redirects: silence, and every offending packet restarts it
    for k in range(1, 5):
        assert not redirect_allow(s, t + k * 10.0, SYS)
    t_last = t + 40.0
    assert not redirect_allow(s, t_last + SYS["redirect_silence"] * 0.99, SYS)
    # redirect_silence with no offending packet: the count resets, redirects resume
    quiet = t_last + SYS["redirect_silence"] * 0.99 + SYS["redirect_silence"] * 1.01
    assert redirect_allow(s, quiet, SYS)
    assert s.rate_tokens == 1
    assert len(sent) == number
