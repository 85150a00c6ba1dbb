"""Scenario ``rcu``: a route-cache DoS and RCU grace periods under a softirq flood (story 2).

Robert Olsson's lab router ("route cache DoS testing and softirqs",
linux-kernel, 2004, replying to Dipankar Sarma): a 2-way 2.4 GHz P4 Xeon with
256 MB, two gigabit input ports (eth0, eth2) each offered ``pps_per_port`` of
60-byte packets from a pktgen-like source cycling through ``flows``
concurrent flows of ``flow_len`` packets with random destinations, forwarded
out of eth1 and eth3.  Each input port's softirq work runs on its own CPU
(NAPI).  A user process on each CPU loops calling ``gettimeofday``; the
longest time it was kept off the CPU is ``user_max_delay_s``.

Route-cache entries are freed through RCU: unhashed entries still count
against ``max_size`` until a grace period ends, and under a softirq flood
grace periods stretch -- the ``kernel`` knob selects which events are
quiescent states (vanilla 2.6.0, the earlier rcu-softirq patch, call_rcu_bh).

Status: the scenario runs, but it is **not yet calibrated** against the
report (stories.md s2); its numbers are the uncalibrated model's.  Full-length
runs (tens of millions of offered packets) are still too slow for the
notebook; keep ``duration`` to a few seconds.
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import KIND, PacketTrace
from ..ipv4.fib import Fib, Route, Rule
from ..result import Result
from ..router import Device, Router
from ..sysctl import Knob
from ..traffic import poisson_times
from .common import cache_knobs, cpu_knob, kernel_knob, run_knobs, run_scenario, sysctl_of

NAME = "rcu"
TITLE = "Route-cache DoS and RCU grace periods under a softirq flood (story 2)"

KNOBS: dict[str, Knob] = {k.name: k for k in [
    kernel_knob("2.6.0"),
    cpu_knob("p4-xeon-2400x2"),
    Knob("pps_per_port", 283_000.0, float, 1.0, 1_500_000.0, "pps",
         "Offered rate on each of the two input ports (60-byte packets).", step=1000),
    Knob("flows", 32768, int, 1, 1_000_000, "flows", "Concurrent pktgen flows."),
    Knob("flow_len", 10, int, 1, 1_000_000, "packets",
         "Packets per flow before it moves to a new random destination."),
    Knob("cpus", 2, int, 1, 2, "CPUs", "CPUs used (one input port each when 2)."),
    Knob("rx_ring", 256, int, 16, 4096, "descriptors", "RX descriptors per input NIC."),
    Knob("user_task", True, bool, help="A gettimeofday loop runs on every CPU."),
    *cache_knobs("ram_mb", "gc_min_interval", "gc_thresh", "max_size", "netdev_max_backlog",
                 "rcu_maxbatch"),
    *run_knobs(1.0, 60.0),
]}

SRC_A, SRC_B = 0x0A000001, 0x0B000001   # pktgen boxes behind eth0 and eth2


def pktgen_flows(rng: np.random.Generator, *, pps: float, duration: float, flows: int,
                 flow_len: int, saddr: int, dev: int) -> PacketTrace:
    """pktgen with ``flows`` concurrent flows of ``flow_len`` packets each.

    Each packet belongs to a random flow; every ``flow_len`` packets a flow
    moves to a new random destination (so the stream of new destinations is
    about ``pps / flow_len`` per second).  Arrivals are evenly spaced
    (pktgen with ipg 0 paces at line rate), jittered slightly.
    """
    t = poisson_times(rng, pps, duration)   # count only; spacing replaced below
    n = t.size
    t = (np.arange(n) + rng.random(n) * 0.5) / pps
    t = t[t < duration]
    n = t.size
    flow = rng.integers(0, flows, n)
    order = np.argsort(flow, kind="stable")
    counts = np.bincount(flow, minlength=flows)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - np.repeat(starts, counts)
    epoch = rank // flow_len
    # a pseudo-random public destination per (flow, epoch)
    x = (flow.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
         + epoch.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
         + np.uint64(rng.integers(0, 2**62)))
    x ^= x >> np.uint64(29)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(32)
    d = (np.uint64(0x01000000) + x % np.uint64(0xDE000000)).astype(np.uint32)
    d = np.where((d >> 24) == 127, d ^ np.uint32(0x80000000), d).astype(np.uint32)
    return PacketTrace.build(t, iif=dev, saddr=saddr, daddr=d, length=46, proto=17,
                             kind=KIND["flood"], ttl=64)


def build(values: dict, seed: int) -> tuple[Router, PacketTrace]:
    """Router and offered trace for resolved knob values."""
    rng = np.random.default_rng(seed)
    two = values["cpus"] == 2
    ring = values["rx_ring"]
    devices = [Device("eth0", "e1000", 0, rx_ring=ring), Device("eth1", "e1000", 0),
               Device("eth2", "e1000", 1 if two else 0, rx_ring=ring),
               Device("eth3", "e1000", 1 if two else 0)]
    fib = Fib(routes=[Route("0.0.0.0/0", oif=1, table=100), Route("0.0.0.0/0", oif=3, table=101),
                      Route("10.0.0.0/8", oif=0), Route("11.0.0.0/8", oif=2)],
              rules=[Rule(100, 100, iif=0), Rule(101, 101, iif=2)],
              local_addrs=["10.255.255.254", "11.255.255.254"])
    router = Router(values["kernel"], values["cpu"], devices, fib, sysctl=sysctl_of(values),
                    ncpus=values["cpus"], user_task=values["user_task"], seed=seed)
    kw = dict(pps=values["pps_per_port"], duration=values["duration"], flows=values["flows"],
              flow_len=values["flow_len"])
    a = pktgen_flows(rng, saddr=SRC_A, dev=0, **kw)
    b = pktgen_flows(rng, saddr=SRC_B, dev=2, **kw)
    return router, PacketTrace.concat([a, b])


def run(seed: int = 1, **knobs) -> Result:
    """Run the scenario; see ``KNOBS`` for the parameters."""
    return run_scenario(NAME, KNOBS, build, knobs, seed, 46)
