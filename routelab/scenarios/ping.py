"""Scenario ``ping``: a small router forwarding background traffic, pinged through.

A router with two interfaces -- ``eth0`` towards ``hosts`` inside hosts,
``eth1`` towards the outside world -- forwards ``background_pps`` packets per
second of ordinary traffic (a size mix, many host pairs).  An inside host
pings an outside host through it every 100 ms; the round-trip time includes
both passes through the router, both wires and a fixed far-end delay.

This is the base scenario of the collection (notebook 00) and the ancestor
of the worm scenario: the ``kernel`` knob chooses between a plain FIB lookup
per packet (``2.0``) and the route cache with its GC.
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import PacketTrace, ip_to_int
from ..hosts.echo import EchoHost, Pinger
from ..ipv4.fib import Fib, Route
from ..result import Result
from ..router import Device, Router
from ..sysctl import Knob
from ..traffic import SIZE_MIXES, addr_block, background, pings
from .common import cache_knobs, cpu_knob, kernel_knob, run_knobs, run_scenario, sysctl_of

NAME = "ping"
TITLE = "Ping through a router carrying background traffic"

KNOBS: dict[str, Knob] = {k.name: k for k in [
    kernel_knob("2.4.24"),
    cpu_knob("k6-200"),
    Knob("nic", "e100", str, choices=("e100", "e1000", "tg3"),
         help="NIC model of both interfaces."),
    Knob("background_pps", 1000.0, float, 0.0, 2_000_000.0, "pps",
         "Ordinary traffic through the router, packets per second.", step=100),
    Knob("size_mix", "large", str, choices=tuple(SIZE_MIXES),
         help="Packet-size mix of the background traffic."),
    Knob("hosts", 200, int, 1, 60_000, "hosts", "Inside hosts."),
    Knob("remote_hosts", 2000, int, 1, 1_000_000, "hosts", "Outside hosts they talk to."),
    Knob("flows", 2000, int, 1, 1_000_000, "pairs", "Host pairs carrying the traffic."),
    Knob("ping_size", 84, int, 28, 65535, "bytes", "IP length of each echo request."),
    Knob("ping_ttl", 64, int, 1, 255, "hops", "TTL of the echo requests as they reach the router."),
    Knob("ping_df", False, bool, help="Set Don't Fragment on the echo requests."),
    Knob("mtu", 1500, int, 68, 9000, "bytes", "MTU of the outside interface."),
    Knob("far_end_ms", 0.3, float, 0.0, 1000.0, "ms",
         "Turnaround of the outside host and the wires beyond the router (assumed)."),
    *cache_knobs("ram_mb", "gc_thresh", "max_size", "gc_min_interval", "gc_elasticity",
                 "gc_timeout", "gc_interval", "secret_interval", "txqueuelen",
                 "netdev_max_backlog"),
    *run_knobs(10.0, 600.0),
]}

INSIDE_NET, OUTSIDE_NET = "10.1.0.0", "130.0.0.0"
ROUTER_IN, ROUTER_OUT, UPSTREAM = "10.1.255.254", "192.0.2.1", "192.0.2.254"


def build(values: dict, seed: int) -> tuple[Router, PacketTrace]:
    """Router and offered trace for resolved knob values."""
    rng = np.random.default_rng(seed)
    devices = [Device("eth0", values["nic"], 0), Device("eth1", values["nic"], 0,
                                                        mtu=values["mtu"])]
    fib = Fib(routes=[Route("10.1.0.0/16", oif=0), Route("192.0.2.0/24", oif=1),
                      Route("0.0.0.0/0", oif=1, gateway=UPSTREAM)],
              local_addrs=[ROUTER_IN, ROUTER_OUT])
    far = values["far_end_ms"] / 1e3
    # the pinging host behind eth0, the pinged one (its far end) behind eth1
    router = Router(values["kernel"], values["cpu"], devices, fib, sysctl=sysctl_of(values),
                    seed=seed, hosts={0: Pinger(), 1: EchoHost(far)},
                    arp_static=[(1, UPSTREAM)])
    inside = addr_block(INSIDE_NET, values["hosts"]) + np.uint32(1)
    outside = addr_block(OUTSIDE_NET, values["remote_hosts"]) + np.uint32(1)
    bg = background(rng, pps=values["background_pps"], duration=values["duration"],
                    inside=inside, outside=outside, mix=values["size_mix"],
                    flows=values["flows"])
    pg = pings(interval=0.1, duration=values["duration"], src=int(inside[0]),
               dst=ip_to_int("130.0.0.1"), dev=0, size=values["ping_size"],
               ttl=values["ping_ttl"])
    pg.df[:] = values["ping_df"]
    return router, PacketTrace.concat([bg, pg])


def run(seed: int = 1, **knobs) -> Result:
    """Run the scenario; see ``KNOBS`` for the parameters."""
    return run_scenario(NAME, KNOBS, build, knobs, seed, "ping_size")
