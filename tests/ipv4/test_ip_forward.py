"""Tests for routelab.ipv4.ip_forward.ip_forward_plan and ip_input's array stages."""

from __future__ import annotations

import numpy as np

from routelab.core.skbuff import PacketTrace, ip_to_int
from routelab.costs import cost_table
from routelab.hardware import CPUS
from routelab.ipv4.ip_forward import FWD_FRAG_NEEDED, FWD_OK, FWD_TTL, ip_forward_plan
from routelab.ipv4.ip_input import MARTIAN_DST, MARTIAN_SRC, ip_rcv, martian_class

CT = cost_table(CPUS["opteron-2400x2"])


def _plan(**cols):
    n = len(cols.get("length", [0]))
    tr = PacketTrace.build(np.arange(n) * 1e-3, saddr=1, daddr=2, **cols)
    return ip_forward_plan(tr, np.zeros(n, dtype=int), np.array([1500]), CT.fn,
                           CT.copy_s_per_byte, 16)


def test_verdicts_ttl_df_and_ok():
    p = _plan(length=[100, 100, 100, 2000, 2000, 2000],
              ttl=[1, 0, 2, 64, 64, 1], df=[False, False, False, True, False, True])
    assert list(p["fwd_verdict"]) == [FWD_TTL, FWD_TTL, FWD_OK, FWD_FRAG_NEEDED, FWD_OK,
                                      FWD_TTL]   # the TTL test comes first


def test_cow_only_for_forwarded_cloned_or_short_headroom():
    p = _plan(length=[1000] * 4, ttl=[64, 64, 64, 1], cloned=[False, True, False, True],
              headroom=[16, 16, 8, 16])
    assert list(p["cow"]) == [False, True, True, False]
    fn = CT.fn
    base = fn["ip_forward"] + fn["ip_decrease_ttl"] + fn["ip_forward_finish"]
    copy = fn["skb_cow"] + 1000 * CT.copy_s_per_byte   # pskb_expand_head copies the data
    assert np.allclose(p["fwd_cost"], [base, base + copy, base + copy, fn["ip_forward"]])


def test_ip_rcv_header_errors():
    tr = PacketTrace.build(np.zeros(4), saddr=1, daddr=2, length=[100, 19, 100, 19],
                           hdr_err=[0, 0, 3, 1])
    assert list(ip_rcv(tr)) == [0, 4, 3, 1]    # too short -> length error unless flagged first


def test_martian_class():
    ips = lambda *a: np.array([ip_to_int(x) for x in a], dtype=np.uint32)  # noqa: E731
    s = ips("10.0.0.1", "127.0.0.1", "0.1.2.3", "224.0.0.5", "255.255.255.255", "10.0.0.1",
            "10.0.0.1", "127.0.0.1")
    d = ips("8.8.8.8", "8.8.8.8", "8.8.8.8", "8.8.8.8", "8.8.8.8", "127.0.0.9", "0.0.0.1",
            "127.0.0.1")
    assert list(martian_class(s, d)) == [0, MARTIAN_SRC, MARTIAN_SRC, MARTIAN_SRC, MARTIAN_SRC,
                                         MARTIAN_DST, MARTIAN_DST, MARTIAN_SRC]
