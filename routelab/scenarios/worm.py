"""Scenario ``worm``: worm scans thrash a hall-of-residence router's route cache (story 1).

Wolfgang Walter's router (linux-net, early 2004): a K6-200 with two Intel
e100 NICs routes a student residence to the internet with 5-20 routes and
about 10 Mbit/s of mostly large packets.  A few hosts infected by
Blaster-family worms probe pseudo-random addresses (UDP and ICMP echo); every
probe has a new destination, so every probe makes a new route-cache entry.
A student host pings an outside host through the router every 100 ms.

Everything else is the mechanism: the cache fills, ``dst_alloc`` calls
``rt_garbage_collect``, the GC's cost lands in softirq time on a 200 MHz CPU,
and packets (the pings among them) wait in the backlog behind it.

Calibration (docs/calibration-story1.md): only three things were fitted, all
of them descriptions of Walter's network rather than kernel constants --
``far_end_ms`` (0.9 ms, from the no-worm ping of about 1 ms), ``ram_mb``
(256 MB, so the healthy cache holds "several thousand entries") and the
default ``scan_pps`` (6,000 probes/s per host: the lowest round rate at which
three hosts saturate the K6-200 with the assumed costs of
:mod:`routelab.costs`).  The GC, chain-trimming, RCU and backlog code is as
kernel.md describes and was not tuned.  Met: about 1 ms without worms, 1-2 ms
on kernel 2.0 with the worms, a saturated CPU with 2-3 hosts.  Not met: the
model's saturated ping is bounded by the 300-packet backlog (about 20-30 ms
RTT, with loss), not the reported 100-160 ms; and it splits the saturated
CPU into ~75 % softirq and ~25 % hard IRQ where the report says 80-90 %
"nearly all softirq".
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import PacketTrace, ip_to_int
from ..hosts.echo import EchoHost, Pinger
from ..ipv4.fib import Fib, Route, Rule
from ..result import Result
from ..router import Device, Router
from ..sysctl import Knob
from ..traffic import addr_block, background, pings, scanners
from .common import cache_knobs, cpu_knob, kernel_knob, run_knobs, run_scenario, sysctl_of

NAME = "worm"
TITLE = "Worm scans thrash the route cache (story 1)"

# Blaster/Welchia-class scan rate per infected host.  The thread gives no
# number ("they send little traffic each"); we found no measured per-host
# rate we could cite.  FITTED (the one traffic unknown of the calibration):
# the report has the K6-200 saturated by 2-3 scanning hosts; with the
# assumed costs of routelab.costs that takes >= ~5,600 probes/s per host
# for three hosts, so the default is 6,000 -- about 3-4 Mbit/s of small
# probes per host, "little" next to a 100 Mbit/s link but more than the
# "little traffic" of the report suggests.  See docs/calibration-story1.md.
DEFAULT_SCAN_PPS = 6000.0

KNOBS: dict[str, Knob] = {k.name: k for k in [
    cpu_knob("k6-200"),
    kernel_knob("2.4.24"),
    Knob("worm_hosts", 3, int, 0, 50, "hosts", "Infected hosts scanning the internet."),
    Knob("scan_pps", DEFAULT_SCAN_PPS, float, 1.0, 20_000.0, "pps",
         "Probes per second per infected host (fitted default: 6,000).", step=50),
    Knob("background_mbps", 10.0, float, 0.0, 95.0, "Mbit/s",
         "Ordinary traffic through the router (mostly large packets).", step=1),
    Knob("hosts", 1500, int, 1, 60_000, "hosts", "Student hosts inside."),
    Knob("flows", 3000, int, 1, 1_000_000, "pairs", "Host pairs carrying background traffic."),
    Knob("ram_mb", 256, int, 16, 4096, "MB",
         "Router RAM; sizes the route-cache hash (ip_rt_init).  Fitted: 256 MB gives the "
         "'several thousand entries' of the healthy cache."),
    Knob("uplink_mbps", 100.0, float, 0.5, 100.0, "Mbit/s",
         "Speed of the outside link (eth1).  Below the offered load, packets queue "
         "for transmission and each holds its dst.", step=0.5),
    *cache_knobs("gc_thresh", "max_size", "gc_min_interval", "gc_elasticity", "gc_timeout",
                 "txqueuelen"),
    Knob("far_end_ms", 0.9, float, 0.0, 1000.0, "ms",
         "Turnaround of the pinged outside host and the wires beyond (assumed)."),
    *run_knobs(20.0, 600.0),
]}

INSIDE_NET = "10.10.0.0"


def build(values: dict, seed: int) -> tuple[Router, PacketTrace]:
    """Router and offered trace for resolved knob values."""
    rng = np.random.default_rng(seed)
    # eth1 runs at uplink_mbps (100 = the e100's own wire speed)
    devices = [Device("eth0", "e100", 0),
               Device("eth1", "e100", 0, speed_bps=values["uplink_mbps"] * 1e6)]
    # a handful of routes and policy rules, as on a residence router that
    # moved to 2.4/2.6 for policy routing (stories.md s1: 5-20 routes)
    routes = [Route("10.10.0.0/16", oif=0), Route("192.0.2.0/24", oif=1),
              Route("0.0.0.0/0", oif=1, gateway="192.0.2.254"),
              Route("0.0.0.0/0", oif=1, gateway="192.0.2.253", table=100),
              Route("10.10.0.0/16", oif=0, table=100)]
    routes += [Route(f"10.{20 + i}.0.0/16", oif=0, gateway="10.10.255.1") for i in range(8)]
    rules = [Rule(100, 100, src="10.10.128.0/17"), Rule(110, 100, tos=0x10)]
    fib = Fib(routes=routes, rules=rules, local_addrs=["10.10.255.254", "192.0.2.1"])
    router = Router(values["kernel"], values["cpu"], devices, fib, sysctl=sysctl_of(values),
                    seed=seed, hosts={0: Pinger(), 1: EchoHost(values["far_end_ms"] / 1e3)},
                    arp_static=[(1, "192.0.2.254"), (1, "192.0.2.253"), (0, "10.10.255.1")])
    inside = addr_block(INSIDE_NET, values["hosts"]) + np.uint32(1)
    outside = rng.integers(0x01000000, 0xDF000000, 20_000, dtype=np.int64)
    outside = np.where((outside >> 24) == 127, outside ^ 0x80000000, outside).astype(np.uint32)
    mean_len = 0.70 * 1500 + 0.05 * 576 + 0.25 * 52
    pps = values["background_mbps"] * 1e6 / 8 / mean_len
    bg = background(rng, pps=pps, duration=values["duration"], inside=inside, outside=outside,
                    mix="large", flows=values["flows"])
    worms = scanners(rng, hosts=inside[-values["worm_hosts"]:] if values["worm_hosts"] else
                     inside[:0], pps=values["scan_pps"], duration=values["duration"])
    pg = pings(interval=0.1, duration=values["duration"], src=int(inside[0]),
               dst=ip_to_int("198.51.100.7"), dev=0)
    return router, PacketTrace.concat([bg, worms, pg])


def run(seed: int = 1, **knobs) -> Result:
    """Run the scenario; see ``KNOBS`` for the parameters."""
    return run_scenario(NAME, KNOBS, build, knobs, seed, 84)
