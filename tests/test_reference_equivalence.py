"""The fast loop (Router.run) against the event-driven reference, packet by packet.

benchmarks/reference_eventloop.py re-derives the queueing, timing and event
order of the forwarding path with a priority queue of events; here both
must give every packet the same outcome, the same start of service and the
same departure (within 1e-9 s), and the same counters (rt_cache_stat, dst,
device, SNMP, softnet).  The reference's scope (one softirq CPU, no user
task, no echo-reply injection) is stated in its module docstring.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from routelab import Device, Fib, PacketTrace, Route, Router
from routelab.traffic import addr_block, background, scanners

_REF_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "reference_eventloop.py"


def _load_reference():
    spec = importlib.util.spec_from_file_location("reference_eventloop", _REF_PATH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("reference_eventloop", mod)
    spec.loader.exec_module(mod)
    return mod


ref = _load_reference()

INSIDE, OUTSIDE = "10.1.0.0", "130.0.0.0"


def make_router(kernel: str, cpu: str = "opteron-2400x2", nic: str = "e1000",
                ncpus: int | None = None, sysctl: dict | None = None, speed_bps=None,
                out_mtu: int = 1500, seed: int = 3) -> Router:
    devices = [Device("eth0", nic, 0, speed_bps=speed_bps),
               Device("eth1", nic, 0, speed_bps=speed_bps, mtu=out_mtu)]
    fib = Fib(routes=[Route("10.1.0.0/16", oif=0), Route("192.0.2.0/24", oif=1),
                      Route("0.0.0.0/0", oif=1, gateway="192.0.2.254"),
                      Route("198.18.0.0/15", oif=1, rtype="unreachable"),
                      Route("198.20.0.0/16", oif=1, rtype="prohibit"),
                      Route("198.21.0.0/16", oif=1, rtype="blackhole")],
              local_addrs=["10.1.255.254", "192.0.2.1"])
    return Router(kernel, cpu, devices, fib, sysctl=sysctl, ncpus=ncpus, seed=seed,
                  neighbours=False)


def make_trace(pps: float, duration: float, *, seed: int = 2, flows: int = 300,
               worm_pps: float = 0.0, oddities: bool = True, df_fraction: float = 0.0,
               mix: str = "imix") -> PacketTrace:
    """Background traffic, plus TTL-1, martian, bad-header, local-ping, unreachable,
    prohibited, blackholed and redirected (out by the input device) packets, plus
    optional worm scanners (a new destination per probe)."""
    rng = np.random.default_rng(seed)
    inside = addr_block(INSIDE, 200) + np.uint32(1)
    outside = addr_block(OUTSIDE, 5000) + np.uint32(1)
    tr = background(rng, pps=pps, duration=duration, inside=inside, outside=outside,
                    mix=mix, flows=flows)
    if oddities:
        ref.add_oddities(rng, tr, inside, dict(
            ttl1=(0.0, 0.05), martian=(0.05, 0.06), bad_csum=(0.06, 0.07), local=(0.5, 0.52),
            unreach=(0.6, 0.62), prohibit=(0.62, 0.63), blackhole=(0.63, 0.64),
            df=(0.7, 0.7 + df_fraction), redirect=(0.8, 0.83)))
    parts = [tr]
    if worm_pps:
        hosts = np.array([0x0A010005, 0x0A010006], dtype=np.uint32)
        parts.append(scanners(rng, hosts=hosts, pps=worm_pps, duration=duration))
    return PacketTrace.concat(parts)


def assert_equivalent(router: Router, trace: PacketTrace, duration: float,
                      scheduler: str = "heapq") -> None:
    fast = router.run(trace, duration)
    slow = ref.reference_run(router, trace, duration, scheduler=scheduler)
    n = len(trace)
    assert fast.conservation()
    out = fast.packets["outcome"][:n]
    bad = np.flatnonzero(out != slow.outcome)
    assert bad.size == 0, (f"{bad.size} packets differ in outcome, first {bad[:5].tolist()}: "
                           f"fast {out[bad[:5]].tolist()} "
                           f"reference {slow.outcome[bad[:5]].tolist()}")
    np.testing.assert_allclose(fast.packets["t_start"][:n], slow.t_start, rtol=0, atol=1e-9,
                               err_msg="t_start")
    np.testing.assert_allclose(fast.packets["t_depart"][:n], slow.t_depart, rtol=0, atol=1e-9,
                               equal_nan=True, err_msg="t_depart")
    c = fast.counters
    if "rt_cache_stat" in slow.counters:
        assert c["rt_cache_stat"] == slow.counters["rt_cache_stat"]
        for k, v in slow.counters["dst"].items():
            assert c["dst"][k] == v, f"dst.{k}"
        assert c["rcu"]["invoked"] == slow.counters["rcu"]["invoked"]
    for group in ("dev", "ip", "icmp", "softnet"):
        for k, v in slow.counters[group].items():
            assert c[group][k] == v, f"{group}.{k}: fast {c[group][k]} reference {v}"


# name -> (router kwargs, trace kwargs, duration); each runs in well under a second
CASES = {
    # 2.4 box, e1000 without NAPI: backlog (netif_rx) drops, throttle, IRQ cost
    "2.4.24-overload-backlog": (dict(kernel="2.4.24", cpu="k6-200"),
                                dict(pps=60_000, duration=0.12), 0.12),
    # 2.0: a FIB lookup per packet, no cache, no timers; overloaded
    "2.0-overload": (dict(kernel="2.0", cpu="k6-200"), dict(pps=60_000, duration=0.12), 0.12),
    # hit-dominated, below capacity, every packet class
    "2.4.24-mixed": (dict(kernel="2.4.24"), dict(pps=40_000, duration=0.2), 0.2),
    # fragmentation (MTU 576 out) and DF -> frag needed
    "2.4.24-fragments": (dict(kernel="2.4.24", out_mtu=576),
                         dict(pps=20_000, duration=0.2, df_fraction=0.05), 0.2),
    # churn: worm probes, GC on (almost) every miss, dst cache overflow
    "2.4.24-churn-gc-overflow": (
        dict(kernel="2.4.24", sysctl=dict(gc_thresh=32, max_size=96, rhash_entries=64)),
        dict(pps=3_000, duration=0.08, worm_pps=20_000), 0.08),
    "2.4.18-churn": (dict(kernel="2.4.18"), dict(pps=10_000, duration=0.1, worm_pps=15_000),
                     0.1),
    # rt_check_expire every 50 ms with a short timeout
    "2.4.24-check-expire": (dict(kernel="2.4.24", sysctl=dict(gc_interval=0.05, gc_timeout=0.2)),
                            dict(pps=15_000, duration=0.25, worm_pps=2_000), 0.25),
    # story 1's hack, light load: every packet's dst on the garbage list, dst_run_gc
    "2.4.24-nocache-light": (dict(kernel="2.4.24-nocache"), dict(pps=15_000, duration=0.3),
                             0.3),
    # NAPI ring drops (rx_missed) and RCU (vanilla: starved under overload), one CPU
    "2.6.0-napi-rcu-overload": (
        dict(kernel="2.6.0", cpu="k6-200", ncpus=1,
             sysctl=dict(gc_thresh=512, max_size=2048, rhash_entries=256)),
        dict(pps=15_000, duration=0.15, worm_pps=30_000), 0.15),
    "2.6.0-rcu-bh-churn": (
        dict(kernel="2.6.0-rcu-bh", ncpus=1,
             sysctl=dict(gc_thresh=512, max_size=2048, rhash_entries=256)),
        dict(pps=10_000, duration=0.08, worm_pps=30_000), 0.08),
    # e100 (100 Mbit/s, interrupt per packet) on a Duron
    "2.4.24-e100": (dict(kernel="2.4.24", nic="e100", cpu="duron-900"),
                    dict(pps=30_000, duration=0.2, worm_pps=3_000), 0.2),
}

# Cases that caught differences between router.py and the reference, now fixed
# in router.py: an ICMP message found a stale full qdisc (_emit_icmp did not
# retire frames already off the wire); timer handlers saw TX completions only
# up to their deadline although they run after the softirq work queued before
# them (dst_run_gc kept entries whose last reference had gone); and
# rt_secret_rebuild rehashed from the packet *after* the one whose arrival
# fired it.
CASES.update({
    "2.4.24-slow-link-qdisc": (dict(kernel="2.4.24", speed_bps=10e6),
                               dict(pps=15_000, duration=0.3, mix="imix"), 0.3),
    "2.4.24-nocache-overload": (dict(kernel="2.4.24-nocache", cpu="k6-200"),
                                dict(pps=30_000, duration=0.25), 0.25),
    "2.4.24-secret-rebuild": (dict(kernel="2.4.24", sysctl=dict(secret_interval=0.1)),
                              dict(pps=30_000, duration=0.35), 0.35),
})


@pytest.mark.parametrize("name", sorted(CASES))
def test_fast_loop_matches_reference(name):
    rk, tk, duration = CASES[name]
    assert_equivalent(make_router(**rk), make_trace(**tk), duration)


def test_simpy_scheduler_gives_the_same_run():
    router = make_router("2.4.24", cpu="k6-200")
    trace = make_trace(pps=40_000, duration=0.1, worm_pps=5_000)
    assert_equivalent(router, trace, 0.1, scheduler="simpy")


def test_reference_refuses_what_it_does_not_model():
    r = make_router("2.4.24")
    r.user_task = True
    with pytest.raises(ValueError, match="user_task"):
        ref.reference_run(r, make_trace(pps=1000, duration=0.01), 0.01)
    with pytest.raises(ValueError, match="one CPU"):
        ref.reference_run(make_router("2.6.0", ncpus=2), make_trace(pps=1000, duration=0.01),
                          0.01)
