"""The run's profile adds up: every second of CPU busy time is in exactly one row.

``Result.profile`` (seconds per kernel function) is built from the per-packet
arrays and the run's ledger (routelab.result.profile); the CPU's busy time is
what the CPUs' interval logs hold.  Before the ledger charged every cost to a
slot the profile missed the softirq entry, the lookups of cache misses, the
ICMP, local and kfree_skb paths and born packets (92.8 % of busy time in a
2 s ping run), and counted neighbour work inside timers and the slow path
twice.
"""

from __future__ import annotations

import pytest

from routelab.result.profile import LEDGER_ROWS, PACKET_ROWS
from routelab.scenarios import ping, rcu, worm

CASES = {
    "ping, TTL 1 (ICMP errors)": (ping.run, dict(duration=2.0, background_pps=5000, ping_ttl=1)),
    "ping, kernel 2.0 (no cache)": (ping.run, dict(duration=1.0, background_pps=5000,
                                                   kernel="2.0")),
    "worm, GC pressure": (worm.run, dict(duration=2.0, worm_hosts=3, max_size=512,
                                         gc_thresh=256)),
    "worm, gc_min_interval 0": (worm.run, dict(duration=2.0, worm_hosts=3, gc_min_interval=0)),
    "worm, nocache kernel, slow uplink (dst_run_gc)": (
        worm.run, dict(duration=2.0, worm_hosts=2, kernel="2.4.24-nocache", uplink_mbps=6)),
    "worm, ARP timeouts (neighbour timers, ICMP)": (
        worm.run, dict(duration=3.0, worm_hosts=3, outside_welchia=12)),
    "rcu on SMP with a user task": (rcu.run, dict(duration=0.5)),
    "rcu, other tasks": (rcu.run, dict(duration=0.5, sleepers=2, other_hogs=1)),
}


def busy_seconds(res) -> float:
    return sum(float(d.sum()) for _s, d in res.cpu["intervals"])


@pytest.mark.parametrize("case", list(CASES))
def test_profile_sums_to_cpu_busy_time(case):
    fn, kw = CASES[case]
    res = fn(seed=1, **kw)
    busy = busy_seconds(res)
    assert busy > 0
    assert sum(res.profile.values()) == pytest.approx(busy, rel=0.01)
    # (in fact to rounding: each second is charged once, where it is spent)
    assert sum(res.profile.values()) == pytest.approx(busy, rel=1e-9)


def test_the_rows_that_were_missing_are_there():
    res = ping.run(seed=1, duration=2.0, background_pps=5000, ping_ttl=1)
    prof = res.profile
    for row in (LEDGER_ROWS["net_rx_action"], PACKET_ROWS["icmp"], PACKET_ROWS["lookup"]):
        assert prof.get(row, 0.0) > 0, row
    gc = worm.run(seed=1, duration=2.0, worm_hosts=3, max_size=512, gc_thresh=256).profile
    assert gc.get(LEDGER_ROWS["rt_garbage_collect"], 0.0) > 0
    nocache = worm.run(seed=1, duration=2.0, worm_hosts=2, kernel="2.4.24-nocache",
                       uplink_mbps=6).profile
    assert nocache.get(LEDGER_ROWS["dst_run_gc"], 0.0) > 0
