"""Scenario ``worm``: worm scans thrash a hall-of-residence router (story 1).

Wolfgang Walter's router (linux-net, early 2004): a K6-200 with two Intel
e100 NICs routes a student residence to the internet with 5-20 routes and
about 10 Mbit/s of mostly large packets.  A few student PCs carry
Blaster-family worms; each probe goes to an address never seen before.  A
student PC pings an outside host through the router every 100 ms.

What the model is made of, and where each part comes from:

* The router is the 2.4.24 path as read from the source (``routelab.kernels``):
  the route cache and its GC, the neighbour table and ARP, 2.4's do_softirq,
  the non-NAPI e100 (a hard interrupt and ``netif_rx`` per frame).
* The worms follow their documented algorithms (``routelab.worms``): Welchia
  sweeps class Bs with ~140 ICMP echoes/s per host, half of its sweeps in the
  host's own /16; Blaster connects to 20 sequential addresses every 1.8 s,
  40 % of its starts just below the host's own /24.
* The residence is an explicit address plan (``routelab.residence``, every
  number an ASSUMED default with its range): student /24s directly connected
  to the router, most of their addresses live; the rest of the 10.10/16 on
  the same link and unused.  A probe to a dead on-link address makes the
  router ARP for it three times over 3 s, holding up to three packets (and
  their routes) in the neighbour's queue, then answer ICMP host unreachable.
* Hosts react (``routelab.hosts``): live hosts answer probes (SYN-ACK, RST,
  echo reply) and those answers cross the router; the pinged host answers.
* Optionally, infected hosts outside sweep the residence's block
  (``outside_welchia``): the report says many hosts of the surrounding
  network were infected.

* Each infected PC also broadcasts an ARP request for every new target in
  its own subnet (``host_arp_tries``): the router's ``arp_process`` pays an
  uncached route lookup for each.

The calibration (docs/calibration-story1.md) fits only descriptions of the
network, the box and the traffic (RAM, the address plan, the neighbour
table's thresholds an admin of a ~1,500-host hall would have set, whether the
board's L2 caches the slab, outside scanners, the far end's delay) within
documented ranges; kernel and cost constants are not tuned.  Its study
functions are in :mod:`routelab.scenarios.story1_study`.
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import PacketTrace, ip_to_int
from ..hardware import BOARD_CACHE
from ..hosts import HostGroup
from ..hosts.echo import EchoHost, Pinger
from ..hosts.lan import ProbeResponder
from ..ipv4.arp import ARP_REPLY_S
from ..ipv4.fib import Fib, Route, Rule
from ..kernels import kernel_profile
from ..residence import PLAN_KNOBS, AddressPlan
from ..result import Result
from ..router import Device, Router
from ..sysctl import Knob
from ..traffic import background, pings
from ..worms import blaster, outside_scanners, welchia
from .common import cache_knobs, cpu_knob, kernel_knob, run_knobs, run_scenario, sysctl_of

NAME = "worm"
TITLE = "Worm scans thrash the route cache (story 1)"

WORM_KINDS = ("welchia", "blaster", "mixed")
WELCHIA_SWEEPS = ("local", "remote", "random")
# the plan's knobs a scenario user is likely to move (the rest keep their defaults)
_PLAN = ("student_subnets", "live_fraction", "unused_space", "outside_reply_fraction")

KNOBS: dict[str, Knob] = {k.name: k for k in [
    cpu_knob("k6-200"),
    kernel_knob("2.4.24"),
    Knob("worm_hosts", 3, int, 0, 30, "hosts", "Infected student PCs.", step=1),
    Knob("worm_kind", "mixed", str, choices=WORM_KINDS,
         help="Which worm the infected PCs run: Welchia (ICMP echo sweeps), Blaster (TCP/135 "
              "connects), or 'mixed' (alternately, Welchia first)."),
    Knob("welchia_pps", 140.0, float, 1.0, 1000.0, "pps",
         "ICMP echoes per second per Welchia host (sourced: ~140, NANOG 2003).", step=10),
    Knob("welchia_sweep", "local", str, choices=WELCHIA_SWEEPS,
         help="Which class B each Welchia host sweeps during the run.  Welchia sweeps one "
              "class B at a time, about half of them its own ([LL]); at 140/s a sweep of a "
              "/16 takes ~8 min, so a run of seconds sees one.  'local': the residence's "
              "own 10.10/16 (the phase whose probes land in the router's on-link space); "
              "'remote': a random other class B; 'random': local with probability 1/2 per "
              "host and sweep."),
    Knob("blaster_round_s", 1.8, float, 0.1, 10.0, "s",
         "Pause between Blaster's rounds of 20 connects (1.8 s in the original; 4 s in a "
         "modified copy): ~11 new addresses/s per host.", step=0.1),
    Knob("host_arp_tries", 1, int, 0, 3, "requests",
         "ARP requests an infected PC broadcasts for each new target in its own subnet "
         "(a probe the router does not route: the PC resolves it itself); the router "
         "receives each (arp_process: an uncached ip_route_input slow path).  0 leaves "
         "them out; 1 (default) is one per target; retries for a target that never "
         "answers 1 s apart (Windows' own count ASSUMED, not sourced).", step=1),
    Knob("outside_welchia", 0, int, 0, 50, "hosts",
         "Infected hosts outside sweeping the residence's block (the report: many hosts of "
         "the surrounding network were infected).", step=1),
    Knob("background_mbps", 10.0, float, 0.0, 95.0, "Mbit/s",
         "Ordinary traffic through the router (mostly large packets).", step=1),
    Knob("active_hosts", 300, int, 1, 1000, "hosts",
         "Student PCs carrying the ordinary traffic (ASSUMED 300 of the ~1,500 live ones; "
         "they are in the router's ARP table from the start).", step=10),
    Knob("flows", 3000, int, 1, 1_000_000, "pairs", "Host pairs carrying background traffic."),
    Knob("ram_mb", 128, int, 64, 256, "MB",
         "Router RAM; sizes the route-cache hash (ip_rt_init): 64-127 MB -> 512 buckets, "
         "128 -> 1024, 256 -> 2048.  The K6 box's RAM is not reported (64-256 MB "
         "plausible for a 1997 Socket-7 board)."),
    Knob("uplink_mbps", 100.0, float, 0.5, 100.0, "Mbit/s",
         "Speed of the outside link (eth1).  Below the offered load, packets queue "
         "for transmission and each holds its dst.", step=0.5),
    *cache_knobs("gc_thresh", "max_size", "gc_min_interval", "gc_elasticity", "gc_timeout",
                 "txqueuelen", "neigh_gc_thresh1", "neigh_gc_thresh2", "neigh_gc_thresh3",
                 "neigh_unres_qlen"),
    Knob("board_cache", "dram", str, choices=BOARD_CACHE,
         help="Whether the K6 board's 512 KB L2 caches the slab memory the neighbour and "
              "route-cache walks read ('l2', ~75 ns a line, ASSUMED) or not ('dram', 180 ns): "
              "Intel 430FX/VX/TX boards cache only the first 64 MB and memory is handed out "
              "from the top, so at 128 MB on such a board the slab is uncached; VIA VP3/MVP3 "
              "with 512 KB cache 128 MB (Shuttle's table; routelab.hardware.BOARDS)."),
    *[PLAN_KNOBS[k] for k in _PLAN],
    Knob("far_end_ms", 0.9, float, 0.0, 1000.0, "ms",
         "Turnaround of the pinged outside host and the wires beyond (ASSUMED; fitted to "
         "the ~1 ms ping without worms)."),
    *run_knobs(20.0, 600.0),
]}

OUTSIDE_GW, OUTSIDE_GW2, INSIDE_GW = "192.0.2.254", "192.0.2.253", "10.10.255.1"
PINGED = "198.51.100.7"


def plan_of(values: dict) -> AddressPlan:
    """The residence's address plan for resolved knob values."""
    return AddressPlan(**{k: values[k] for k in _PLAN})


def build(values: dict, seed: int) -> tuple[Router, PacketTrace]:
    """Router and offered trace for resolved knob values."""
    rng = np.random.default_rng(seed)
    plan = plan_of(values)
    duration = values["duration"]
    # eth1 runs at uplink_mbps (100 = the e100's own wire speed)
    devices = [Device("eth0", "e100", 0),
               Device("eth1", "e100", 0, speed_bps=values["uplink_mbps"] * 1e6)]
    # a handful of routes and policy rules, as on a residence router that moved
    # to 2.4/2.6 for policy routing (stories.md s1: 5-20 routes)
    routes = plan.fib_routes() + [
        Route("192.0.2.0/24", oif=1),
        Route("0.0.0.0/0", oif=1, gateway=OUTSIDE_GW),
        Route("0.0.0.0/0", oif=1, gateway=OUTSIDE_GW2, table=100),
        Route(plan.inside_net, oif=0, table=100)]
    routes += [Route(f"10.{20 + i}.0.0/16", oif=0, gateway=INSIDE_GW) for i in range(8)]
    rules = [Rule(100, 100, src="10.10.128.0/17"), Rule(110, 100, tos=0x10)]
    fib = Fib(routes=routes, rules=rules, local_addrs=plan.local_addrs() + ["192.0.2.1"])

    live = plan.live_hosts()
    infected = plan.infected(rng, values["worm_hosts"])
    others = live[~np.isin(live, infected)]
    active = np.sort(rng.choice(others, size=min(values["active_hosts"], others.size),
                                replace=False)).astype(np.uint32)

    known: dict[int, bool] = {}     # plan.exists, worked out per trace address at once

    def arp_exists(dev: int, addr: int):
        if dev == 1:
            return ARP_REPLY_S       # the outside segment: the upstream routers
        live = known.get(addr)
        if live is None:
            live = known[addr] = bool(plan.exists(np.array([addr], dtype=np.uint32))[0])
        return ARP_REPLY_S if live else None

    far = values["far_end_ms"] / 1e3
    hosts = {0: HostGroup(Pinger(), ProbeResponder(plan, seed)),
             1: HostGroup(EchoHost(far), ProbeResponder(plan, seed))}
    static = [(1, OUTSIDE_GW), (1, OUTSIDE_GW2), (0, INSIDE_GW)] + [(0, int(a)) for a in active]
    router = Router(values["kernel"], values["cpu"], devices, fib, sysctl=sysctl_of(values),
                    seed=seed, hosts=hosts, arp_exists=arp_exists, arp_static=static,
                    cost_overrides={"board_cache": values["board_cache"]})

    outside = rng.integers(0x01000000, 0xDF000000, 20_000, dtype=np.int64)
    outside = np.where((outside >> 24) == 127, outside ^ 0x80000000, outside).astype(np.uint32)
    outside = outside[~plan.inside(outside)]
    mean_len = 0.70 * 1500 + 0.05 * 576 + 0.25 * 52
    pps = values["background_mbps"] * 1e6 / 8 / mean_len
    parts = [background(rng, pps=pps, duration=duration, inside=active, outside=outside,
                        mix="large", flows=values["flows"])]
    kind = values["worm_kind"]
    # (a kernel without the 2.2+ neighbour layer -- 2.0 -- has no model of an
    # ARP frame's receive: the hosts' requests are left out there)
    with_arp = kernel_profile(values["kernel"]).neighbours
    for i, h in enumerate(infected):
        if values["host_arp_tries"] and with_arp:
            # the same draws as the call below, with the probes it keeps to itself
            twin = np.random.Generator(type(rng.bit_generator)())
            twin.bit_generator.state = rng.bit_generator.state
            parts.append(_host_arp(twin, int(h), i, kind, values, plan, duration))
        parts.append(_worm_probes(rng, int(h), i, kind, values, plan, duration))
    if values["outside_welchia"]:
        parts.append(outside_scanners(rng, plan=plan, duration=duration,
                                      outside_welchia=values["outside_welchia"],
                                      welchia_kw=dict(pps=values["welchia_pps"])))
    parts.append(pings(interval=0.1, duration=duration, src=int(active[0]),
                       dst=ip_to_int(PINGED), dev=0))
    trace = PacketTrace.concat(parts)
    addrs = np.unique(np.concatenate([trace.daddr, trace.saddr]))
    addrs = addrs[plan.inside(addrs)]
    known.update(zip(addrs.tolist(), plan.exists(addrs).tolist(), strict=True))
    return router, trace


def _worm_probes(rng: np.random.Generator, h: int, i: int, kind: str, values: dict,
                 plan: AddressPlan, duration: float, only_routed: bool = True) -> PacketTrace:
    """One infected host's probes (Welchia or Blaster by ``kind`` and ``i``)."""
    if kind == "welchia" or (kind == "mixed" and i % 2 == 0):
        sweep = values["welchia_sweep"]
        first = None
        if sweep == "local":
            first = h & 0xFFFF0000
        elif sweep == "remote":
            first = _remote_net16(rng, plan)
        return welchia(rng, host=h, duration=duration, pps=values["welchia_pps"], dev=0,
                       plan=plan, first_net=first, only_routed=only_routed,
                       local_fraction={"local": 1.0, "remote": 0.0}.get(sweep, 0.5))
    return blaster(rng, host=h, duration=duration, dev=0, plan=plan,
                   round_s=values["blaster_round_s"], only_routed=only_routed)


def _host_arp(rng: np.random.Generator, h: int, i: int, kind: str, values: dict,
              plan: AddressPlan, duration: float) -> PacketTrace:
    """The ARP requests host ``h`` broadcasts on the router's segment.

    Its probes to its own subnet do not cross the router (``plan.reaches_router``)
    but each new target is resolved first: one broadcast request, which the
    router receives too (2.4.24 arp_rcv -> arp_process).  A host keeps what it
    resolved for longer than a run, so one request per target; a target that
    does not exist is asked again ``host_arp_tries - 1`` times, 1 s apart
    (ASSUMED).  Frames of kind ``arp`` with ``tag = ARPOP_REQUEST``, from
    ``h`` for the target (``daddr``)."""
    from ..core.skbuff import KIND
    from ..ipv4.arp import ARPOP_REQUEST

    tr = _worm_probes(rng, h, i, kind, values, plan, duration, only_routed=False)
    own = ~plan.reaches_router(np.uint32(h), tr.daddr)
    t, d = tr.t[own], tr.daddr[own]
    order = np.argsort(t, kind="stable")
    t, d = t[order], d[order]
    _, first = np.unique(d, return_index=True)
    t, d = t[first], d[first]
    ts, ds = [t], [d]
    dead = ~plan.exists(d)
    for k in range(1, values["host_arp_tries"]):
        ts.append(t[dead] + k * 1.0)
        ds.append(d[dead])
    t, d = np.concatenate(ts), np.concatenate(ds)
    keep = t < duration
    return PacketTrace.build(t[keep], iif=0, saddr=h, daddr=d[keep], proto=0, length=28,
                             ttl=64, kind=KIND["arp"], tag=ARPOP_REQUEST)


def _remote_net16(rng: np.random.Generator, plan: AddressPlan) -> int:
    """A random unicast class B other than the residence's."""
    while True:
        a = int(rng.integers(1, 223))
        a += a >= 127
        net = (a << 24) | (int(rng.integers(0, 256)) << 16)
        if not bool(plan.inside(np.array([net], dtype=np.uint32))[0]):
            return net


def run(seed: int = 1, **knobs) -> Result:
    """Run the scenario; see ``KNOBS`` for the parameters."""
    return run_scenario(NAME, KNOBS, build, knobs, seed, 84)
