"""packet_journey: the itemised bill must add up to what the Router charges."""

from __future__ import annotations

import math

import numpy as np
import pytest

from routelab import KnobError
from routelab.journey import GROUPS, Journey, journey_router, journey_trace, packet_journey

CASES = [
    dict(),
    dict(cache_hit=False),
    dict(cloned=True),
    dict(length=4000),
    dict(length=4000, mtu=576, cloned=True, cache_hit=False),
    dict(ttl=1),
    dict(ttl=1, cache_hit=False),
    dict(df=True, length=4000),
    dict(length=64),
    dict(kernel="2.0"),
    dict(kernel="2.0", length=9000, mtu=1500),
    dict(kernel="2.4.18", cache_hit=False),
    dict(kernel="2.4.24-nocache"),
    dict(kernel="2.6.1", nic="e1000", cpu="p4-xeon-2400x2"),
    dict(kernel="2.6.0-rcu-bh", nic="tg3", cpu="opteron-2400x2", cache_hit=False),
    dict(kernel="2.6.1", nic="e100", cpu="duron-900", length=3000, mtu=1000),
]


def _router_busy(kw: dict) -> tuple[float, float, object]:
    """CPU seconds and arrival-to-departure latency the Router charges for this packet.

    Two identical packets half a second apart: the first finds an empty cache
    (a miss), the second a warm one (a hit).  The journey's packet is
    whichever of the two matches ``cache_hit``.
    """
    p = {"kernel": "2.4.24", "cpu": "k6-200", "nic": "e100", "length": 1500, "ttl": 64,
         "df": False, "mtu": 1500, "cloned": False, "cache_hit": True, **kw}
    r = journey_router(p["kernel"], p["cpu"], p["nic"], p["mtu"])
    tr = journey_trace(p["length"], p["ttl"], p["df"], p["cloned"], n=2, spacing=0.5)
    res = r.run(tr, 1.5)
    starts, durs = res.cpu["intervals"][0]
    k = 1 if p["cache_hit"] else 0
    # the softirq run that processed packet k (timers, e.g. dst_run_gc, run separately)
    mine = np.flatnonzero(starts == res.packets["t_start"][k])
    assert mine.size == 1, "each packet must be processed in its own softirq run"
    busy = durs[mine[0]]
    latency = res.packets["t_depart"][k] - res.packets["t"][k]
    return float(busy), float(latency), res


@pytest.mark.parametrize("kw", CASES, ids=[",".join(f"{k}={v}" for k, v in c.items()) or "default"
                                           for c in CASES])
def test_rows_add_up_to_router_charge(kw):
    j = packet_journey(**kw)
    busy, latency, res = _router_busy(kw)
    assert j.cpu_seconds == pytest.approx(busy, rel=1e-9, abs=1e-15)
    if j.outcome == "forwarded":
        assert j.latency_seconds == pytest.approx(latency, rel=1e-9)
    else:
        assert math.isnan(latency)
    # the same outcome as the Router
    k = 1 if j.params["cache_hit"] else 0
    from routelab.result import OUTCOME_NAMES
    assert OUTCOME_NAMES[int(res.packets["outcome"][k])] == j.outcome


def test_cycles_and_microseconds_agree():
    j = packet_journey(cpu="duron-900")
    for row in j:
        if row.kind == "cpu":
            assert row.cycles == pytest.approx(row.microseconds * 1e-6 * 900e6)
        else:
            assert row.cycles == 0
        assert row.group in GROUPS
        assert row.microseconds >= 0


def test_every_stage_is_named_after_a_kernel_function():
    j = packet_journey(cache_hit=False, cloned=True, length=4000)
    functions = " ".join(r.function for r in j)
    for name in ("netif_rx", "net_rx_action", "netif_receive_skb", "ip_rcv", "ip_route_input",
                 "ip_route_input_slow", "fib_lookup", "dst_alloc", "rt_intern_hash",
                 "ip_forward", "skb_cow", "ip_decrease_ttl", "ip_forward_finish", "ip_output",
                 "ip_fragment", "dev_queue_xmit", "hard_start_xmit", "kfree_skb"):
        assert name in functions, name


def test_napi_receive_only_with_napi_driver_and_26_kernel():
    assert any("NAPI" in r.stage for r in packet_journey(kernel="2.6.1", nic="e1000"))
    assert not any("NAPI" in r.stage for r in packet_journey(kernel="2.4.24", nic="e1000"))
    assert not any("NAPI" in r.stage for r in packet_journey(kernel="2.6.1", nic="e100"))


def test_fragment_rows_when_longer_than_mtu():
    j = packet_journey(length=4000, mtu=1500)
    assert j.outcome == "forwarded" and j.nfrag == 3
    frags = [r for r in j if r.function.endswith("ip_fragment")]
    assert len(frags) == 3
    assert [r.note.split()[0] for r in frags] == ["1480", "1480", "1020"]
    assert sum(1 for r in j if r.kind == "wire") == 3
    assert not any(r.function.endswith("ip_fragment") for r in packet_journey(length=1500))
    assert packet_journey(length=1500).nfrag == 1


def test_df_stops_with_frag_needed():
    j = packet_journey(length=4000, df=True)
    assert j.outcome == "drop_frag_needed" and j.nfrag == 0
    assert any("icmp_send" in r.function for r in j)
    assert not any("ip_fragment" in r.function and r.kind == "cpu" for r in j)
    assert not any("hard_start_xmit" in r.function and "ICMP" not in r.stage for r in j)
    # DF on a packet that fits is harmless
    assert packet_journey(length=1500, df=True).outcome == "forwarded"


def test_ttl_one_stops_with_time_exceeded():
    j = packet_journey(ttl=1, length=4000)
    assert j.outcome == "drop_ttl"
    assert j[-1].stage == "ICMP on the wire"
    assert not any("ip_decrease_ttl" in r.function for r in j)
    assert packet_journey(ttl=2).outcome == "forwarded"


def test_kernel_20_has_its_own_cache_rows():
    # 2.0's ip_rt_route cache (2.0.40), not the 2.2+ dst cache's functions
    for hit in (True, False):
        j = packet_journey(kernel="2.0", cache_hit=hit)
        fns = " ".join(r.function for r in j)
        assert "ip_route_input" not in fns and "rt_intern_hash" not in fns
        assert "dst_alloc" not in fns and "rt_hash_code" not in fns
        assert "ip_rt_route" in fns
        assert sum(r.group == "route" for r in j) == (1 if hit else 3)


def test_miss_costs_more_than_hit_and_cloned_costs_a_copy():
    hit, miss = packet_journey(), packet_journey(cache_hit=False)
    assert miss.cpu_seconds > hit.cpu_seconds
    small, big = packet_journey(cloned=True, length=100), packet_journey(cloned=True, length=1500)
    cow = [r for r in big if "skb_cow" in r.function]
    small_cow = next(r for r in small if "skb_cow" in r.function)
    assert len(cow) == 1 and cow[0].cycles > small_cow.cycles


def test_nocache_kernel_always_takes_the_slow_path():
    j = packet_journey(kernel="2.4.24-nocache", cache_hit=True)
    assert any("ip_route_input_slow" in r.function for r in j)


def test_faster_cpu_is_faster():
    assert packet_journey(cpu="p4-xeon-2400x2").cpu_seconds < packet_journey().cpu_seconds / 5


@pytest.mark.parametrize("bad", [dict(length=10), dict(length=70000), dict(ttl=0), dict(ttl=256),
                                 dict(mtu=60), dict(cpu="k7"), dict(kernel="2.2"),
                                 dict(nic="etun"), dict(df="maybe"), dict(length=1500.5)])
def test_bad_inputs_raise_knob_error(bad):
    name = next(iter(bad))
    with pytest.raises(KnobError) as ei:
        packet_journey(**bad)
    assert ei.value.knob == name


def test_journey_text_views():
    j = packet_journey(length=4000)
    assert isinstance(j, Journey) and isinstance(j, list)
    t = j.table()
    assert "ip_rcv" in t and "CPU total" in t and "wire total" in t
    assert "3 frames" in j.summary()
    assert "<table" in j._repr_html_()
    groups = j.by_group()
    assert set(groups) == set(GROUPS)
    assert sum(groups.values()) == pytest.approx((j.cpu_seconds + j.wire_seconds) * 1e6)
    assert np.isfinite(list(groups.values())).all()
