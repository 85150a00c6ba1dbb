"""Tests for routelab.ipv4.udp: the fragmenting UDP sender of story 3."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.errors import KnobError
from routelab.ipv4.ip_fragment import fragment_plan, skb_truesize
from routelab.ipv4.udp import SK_WMEM_MAX, SendStatus, UdpSocket, so_sndbuf

POLICIES = ("2.4.19", "2.4.20", "2.6.11")
NFS_WRITE = 32768  # one 32 KiB NFS WRITE = one UDP datagram (story 3)


def _offsets(length: int, mtu: int = 1500) -> list[int]:
    plan = fragment_plan(length + 8, mtu)
    return plan.fragments()[1].tolist()


def test_so_sndbuf_doubles_caps_and_floors():
    assert so_sndbuf(1000) == 2048
    assert so_sndbuf(30000) == 60000
    assert so_sndbuf(10**6) == 2 * SK_WMEM_MAX
    assert so_sndbuf(10**6, wmem_max=131071) == 262142
    with pytest.raises(KnobError, match="request"):
        so_sndbuf(-5)


@pytest.mark.parametrize("policy", POLICIES)
def test_whole_datagram_order_flags_and_accounting(policy):
    sock = UdpSocket(sndbuf=10**6, alloc_policy=policy)
    res = sock.sendmsg(NFS_WRITE, now=1.5)
    assert res.status is SendStatus.OK and not res.partial
    assert res.n_frags == len(res.skbs) == 23
    offsets = [s.offset for s in res.skbs]
    expected = _offsets(NFS_WRITE)
    assert offsets == (expected if policy == "2.6.11" else expected[::-1])
    assert [s.first for s in res.skbs] == [o == 0 for o in offsets]
    assert [s.last for s in res.skbs] == [o == max(offsets) for o in offsets]
    assert all(s.size <= 1500 and s.truesize == skb_truesize(s.size) for s in res.skbs)
    assert [s.forced for s in res.skbs] == [False] + [policy != "2.4.19"] * 22
    assert sock.wmem_alloc == sum(s.truesize for s in res.skbs)
    for skb in res.skbs:
        sock.sock_wfree(skb)
    assert sock.wmem_alloc == 0
    with pytest.raises(RuntimeError):
        sock.sock_wfree(res.skbs[0])


def test_2_4_19_sends_headless_datagram_when_sndbuf_fills():
    sock = UdpSocket(sndbuf=SK_WMEM_MAX, alloc_policy="2.4.19")
    assert sock.sendmsg(NFS_WRITE, 0.0).status is SendStatus.OK
    res = sock.sendmsg(NFS_WRITE, 0.0)
    assert res.status is SendStatus.EAGAIN and res.partial
    assert 0 < len(res.skbs) < res.n_frags
    assert not any(s.first for s in res.skbs)  # tail went out, head never will
    assert sock.stats["incomplete"] == 1


def test_2_4_20_is_all_or_nothing_in_the_same_situation():
    sock = UdpSocket(sndbuf=SK_WMEM_MAX, alloc_policy="2.4.20")
    sock.sendmsg(NFS_WRITE, 0.0)
    res = sock.sendmsg(NFS_WRITE, 0.0)
    assert res.status is SendStatus.OK and len(res.skbs) == 23
    assert sock.wmem_alloc > sock.sndbuf  # forced allocations overshoot sndbuf
    res = sock.sendmsg(NFS_WRITE, 0.0)
    assert res.status is SendStatus.EAGAIN and res.skbs == [] and not res.partial


def test_2_6_11_enobufs_frees_the_half_built_datagram():
    sock = UdpSocket(sndbuf=4096, alloc_policy="2.6.11")
    small = sock.sendmsg(2000, 0.0)
    before = sock.wmem_alloc
    assert small.status is SendStatus.OK and before < sock.sndbuf
    res = sock.sendmsg(NFS_WRITE, 0.0)
    assert res.status is SendStatus.ENOBUFS and res.skbs == []
    assert sock.wmem_alloc == before and sock.stats["enobufs"] == 1


# Schedules: ("send", length) or ("free", how many of the oldest skbs to free).
steps = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(0, 40000)),
        st.tuples(st.just("free"), st.integers(1, 40)),
    ),
    max_size=40,
)


def _run(sock: UdpSocket, schedule) -> list:
    """Drive ``sock`` through a schedule; return every SendResult."""
    outstanding, results = [], []
    for t, (op, arg) in enumerate(schedule):
        if op == "send" and not sock.blocked:
            results.append(res := sock.sendmsg(arg, now=float(t)))
            outstanding += res.skbs
        else:
            for skb in outstanding[:arg]:
                sock.sock_wfree(skb)
            del outstanding[:arg]
            if sock.blocked and sock.writeable:
                results.append(res := sock.resume(now=float(t)))
                outstanding += res.skbs
        assert sock.wmem_alloc == sum(s.truesize for s in outstanding) >= 0
    while sock.blocked:  # the driver drains the queue; the sleeper wakes
        for skb in outstanding:
            sock.sock_wfree(skb)
        results.append(res := sock.resume(now=1e6))
        outstanding = list(res.skbs)
    for skb in outstanding:
        sock.sock_wfree(skb)
    assert sock.wmem_alloc == 0
    return results


@settings(max_examples=150, deadline=None)
@given(
    policy=st.sampled_from(("2.4.20", "2.6.11")),
    sndbuf=st.integers(2048, 70000),
    schedule=steps,
)
def test_fixed_kernels_never_send_incomplete_datagrams(policy, sndbuf, schedule):
    sock = UdpSocket(sndbuf=sndbuf, alloc_policy=policy, nonblocking=True)
    for res in _run(sock, schedule):
        assert len(res.skbs) in (0, res.n_frags)
        assert (res.status is SendStatus.OK) == (len(res.skbs) == res.n_frags > 0)
    assert sock.stats["incomplete"] == 0


@settings(max_examples=150, deadline=None)
@given(
    policy=st.sampled_from(POLICIES),
    nonblocking=st.booleans(),
    sndbuf=st.integers(2048, 70000),
    schedule=steps,
)
def test_wmem_returns_to_zero_and_blocking_sends_complete(policy, nonblocking, sndbuf, schedule):
    sock = UdpSocket(sndbuf=sndbuf, alloc_policy=policy, nonblocking=nonblocking)
    results = _run(sock, schedule)  # checks wmem_alloc at every step and at the end
    if not nonblocking:  # a blocking sender only waits, it never gives up mid-datagram
        assert sock.stats["incomplete"] == 0 and sock.stats["eagain"] == 0
        sent: dict[int, list[int]] = {}
        for res in results:
            sent.setdefault(res.datagram_id, []).extend(s.offset for s in res.skbs)
        for res in results:
            if res.status is SendStatus.OK:
                assert len(sent[res.datagram_id]) == res.n_frags


def test_blocking_2_4_19_waits_mid_datagram_then_resumes():
    sock = UdpSocket(sndbuf=SK_WMEM_MAX, alloc_policy="2.4.19", nonblocking=False)
    first = sock.sendmsg(NFS_WRITE, 0.0)
    res = sock.sendmsg(NFS_WRITE, 0.0)
    assert res.status is SendStatus.WAIT and res.partial and sock.blocked
    with pytest.raises(RuntimeError):
        sock.sendmsg(100, 0.0)
    assert not sock.writeable
    woke = [sock.sock_wfree(s) for s in first.skbs]
    assert woke[-1]
    rest = sock.resume(0.1)
    assert rest.status is SendStatus.OK and rest.datagram_id == res.datagram_id
    got = sorted(s.offset for s in res.skbs + rest.skbs)
    assert got == _offsets(NFS_WRITE)


def test_blocking_2_6_11_waits_before_building_anything():
    sock = UdpSocket(sndbuf=SK_WMEM_MAX, alloc_policy="2.6.11", nonblocking=False)
    assert sock.sendmsg(NFS_WRITE, 0.0).status is SendStatus.OK
    assert sock.sendmsg(NFS_WRITE, 0.0).status is SendStatus.OK  # forced up to 2*sndbuf
    res = sock.sendmsg(NFS_WRITE, 0.0)
    assert res.status is SendStatus.WAIT and res.skbs == [] and sock.blocked


def test_emsgsize():
    sock = UdpSocket(sndbuf=10**6)
    assert sock.sendmsg(65508, 0.0).status is SendStatus.EMSGSIZE
    res = sock.sendmsg(65507, 0.0)
    assert res.status is SendStatus.OK and res.n_frags == 45


@pytest.mark.parametrize(
    ("kwargs", "knob"),
    [
        ({"sndbuf": 0}, "sndbuf"),
        ({"sndbuf": 1.5}, "sndbuf"),
        ({"alloc_policy": "2.5.0"}, "alloc_policy"),
        ({"mtu": 67}, "mtu"),
        ({"nonblocking": "yes"}, "nonblocking"),
    ],
)
def test_bad_knobs_raise_knob_error(kwargs, knob):
    with pytest.raises(KnobError, match=knob) as err:
        UdpSocket(**kwargs)
    assert err.value.knob == knob


def test_bad_length_raises_knob_error():
    with pytest.raises(KnobError, match="length"):
        UdpSocket().sendmsg(-1, 0.0)
