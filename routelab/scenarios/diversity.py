"""Scenario ``diversity``: what a packet costs as its destinations spread out (the epilogue).

A router forwards small UDP packets at a fixed rate from one source behind
``eth0`` to ``destinations`` distinct addresses, drawn uniformly from the
benchmarking block 198.18.0.0/16 (RFC 2544) behind a gateway on ``eth1``.
Its FIB holds ``routes`` prefixes besides: a synthetic internet table, all
through the same gateway, with a prefix-length mix like the real table's.

With a route cache (2.4.24, 2.6.x) a packet whose destination is cached costs
a hash and a chain walk; every other packet takes the slow path, allocates a
dst and, once the cache is full, runs its garbage collection, so the cost per
packet rises with the number of destinations -- the traffic sets it.  Linux
3.6 removed the cache (kernel profile ``3.6``): every packet walks the FIB's
trie (:mod:`routelab.ipv4.fib_trie`) and takes the dst cached in its nexthop,
so its cost depends on the FIB's size and shape, not on the traffic.

Summary keys (besides the usual ones): ``cpu_us_per_packet`` (CPU time of
the forwarding path -- every profile row -- per forwarded packet),
``route_lookup_us_per_packet`` (the routing rows: lookups, the slow path,
the route cache's GC, timers and RCU callbacks, per forwarded packet),
``cache_hit_pct`` (``in_hit`` over lookups, cache kernels; None on 3.6),
``dst_allocs`` (dst entries allocated: the route cache's, or on 3.6 the one
dst per nexthop ``rt_cache_route`` stores on first use), ``trie_depth_mean``
and ``trie_nodes`` (the main table's trie, /proc/net/fib_triestat's "Aver
depth" and "Internal nodes" + "Leaves"; None for the kernels with fib_hash).

Nexthop exceptions (3.6's per-destination PMTU and redirect state, ``fnhe``)
---------------------------------------------------------------------------
A forwarding path neither makes nor reads them: in 3.6 they are made only by
the error handlers of the router's *own* traffic (net/ipv4/route.c
``__ip_rt_update_pmtu`` and ``__ip_do_redirect``, called from
``ipv4_sk_update_pmtu``, ``ipv4_update_pmtu``, ``ipv4_redirect`` by
net/ipv4/udp.c ``__udp4_lib_err``, tcp_ipv4.c, the tunnels).  The knob
``pmtu_pps`` adds the storm that reaches them: forged ICMP "fragmentation
needed" messages (type 3 code 4) at that rate, from 203.0.113.7 (beyond the
gateway, on ``eth1``) to the router's address 192.0.2.1, each quoting a UDP
datagram the router's own UDP service (ASSUMED: a service bound to
192.0.2.1 with an unconnected socket, so ``__udp4_lib_lookup`` matches every
quoted remote address) sent to an address of 198.18.0.0/16, drawn uniformly
from ``pmtu_destinations`` of them, with an MTU of 1280.  ``icmp_unreach`` ->
``icmp_socket_deliver`` -> ``__udp4_lib_err`` -> ``ipv4_sk_update_pmtu``
-> ``__ip_rt_update_pmtu``: the output route of that destination, then
``update_or_create_fnhe`` on its nexthop (every route of the set-up goes
through the gateway, and routes with the same nexthop share one
``fib_info``, net/ipv4/fib_semantics.c ``fib_find_info``: one exception
table).  The updates run in the order the router served the messages, with
``fnhe_stamp`` in jiffies (HZ of the kernel), through
:class:`~routelab.ipv4.fnhe.NexthopExceptions`: at most 2,048 x 6 entries,
however many destinations are named.  Simplified: a message is priced as any
packet for the router itself (the ``local`` composition of
:mod:`routelab.costs`, which includes the send of an echo reply: more than
``icmp_rcv`` and the error handler cost, an over-estimate), and the socket
lookup, the output route lookup and the chain walk are not charged on top.  The
kernels with a route cache keep PMTU in cached routes (2.x
``ip_rt_frag_needed`` updates only entries already cached for that
destination, and none are): for them the messages cost the same and
``fnhe_entries`` is None.

Summary keys of the storm: ``fnhe_entries`` (exceptions allocated; the
source frees them only with their nexthop), ``fnhe_reclaimed`` (updates that
took over the oldest entry of a full chain), ``fnhe_max_chain``.
"""

from __future__ import annotations

import functools

import numpy as np

from ..core.skbuff import KIND, PacketTrace, ip_to_int
from ..ipv4.fib import TABLE_MAIN, Fib, Route
from ..ipv4.fnhe import NexthopExceptions
from ..result import Result
from ..router import Device, Router
from ..sysctl import Knob
from ..traffic import TraceWindows, _mix64
from .common import cache_knobs, cpu_knob, kernel_knob, run_knobs, run_scenario, sysctl_of

NAME = "diversity"
TITLE = "Cost per packet against destination diversity: route cache vs fib_trie (epilogue)"

#: Prefix lengths of the synthetic table and their shares.  ASSUMED: a rounded
#: picture of the IPv4 BGP table around 2012 (about half /24s, then /22 and
#: /23, a few per cent each of /16-/21, little shorter than /16), from memory
#: of the routing-table reports of the time (Huston's "BGP in 2011"; the CIDR
#: Report), UNVERIFIED; what matters for the trie is that most prefixes are
#: long and scattered.
PREFIX_MIX = ((24, 0.54), (23, 0.09), (22, 0.11), (21, 0.06), (20, 0.06), (19, 0.05),
              (18, 0.025), (17, 0.015), (16, 0.03), (15, 0.005), (14, 0.005), (13, 0.004),
              (12, 0.003), (11, 0.002), (10, 0.001))
#: A full internet table in September 2012 had about 430,000 prefixes (from
#: memory, UNVERIFIED): the knob's upper end.
FULL_TABLE = 430_000

SRC = "10.0.0.2"
GATEWAY = "192.0.2.254"
DEST_NET = "198.18.0.0/16"
PACKET_BYTES = 64       # a minimum-size UDP packet (46-byte Ethernet payload + headers)
#: The PMTU storm: who sends it, to which of the router's addresses, the MTU it
#: names (ASSUMED: an IPv6-era minimum; above 3.6's ip_rt_min_pmtu of 552), and
#: its length (20 IP + 8 ICMP + the quoted 20-byte IP header and 8 bytes).
STORM_SRC = "203.0.113.7"
ROUTER_ETH1 = "192.0.2.1"
STORM_MTU = 1280
STORM_BYTES = 56
#: net/ipv4/route.c (3.6): ip_rt_min_pmtu = 512 + 20 + 20, ip_rt_mtu_expires = 10 min.
IP_RT_MIN_PMTU = 552
IP_RT_MTU_EXPIRES = 600.0
WINDOW_S = 0.1

KNOBS: dict[str, Knob] = {k.name: k for k in [
    kernel_knob("2.4.24"),
    cpu_knob("opteron-2400x2"),
    Knob("destinations", 1024, int, 1, 65536, "addresses",
         "Distinct destinations in 198.18.0.0/16; each packet picks one uniformly.",
         step=1),
    Knob("pps", 100_000.0, float, 1.0, 2_000_000.0, "pps", "Packets per second offered.",
         step=10_000),
    Knob("routes", 1000, int, 10, FULL_TABLE, "prefixes",
         "Size of the FIB: a synthetic internet table with a realistic prefix-length mix "
         f"(up to a full table of {FULL_TABLE:,}).", step=1000),
    Knob("nic", "e1000", str, choices=("e1000", "tg3", "e100"),
         help="The router's NICs (both ports)."),
    Knob("pmtu_pps", 0.0, float, 0.0, 200_000.0, "pps",
         "Forged ICMP 'fragmentation needed' messages per second about the router's own "
         "UDP traffic to addresses of 198.18.0.0/16 (3.6: each makes or updates a nexthop "
         "exception).", step=1000),
    Knob("pmtu_destinations", 65536, int, 1, 65536, "addresses",
         "Distinct destinations the forged messages name, in 198.18.0.0/16.", step=1),
    *cache_knobs("rp_filter", "ram_mb", "gc_thresh", "max_size", "gc_min_interval",
                 "netdev_max_backlog"),
    *run_knobs(2.0, 60.0),
]}


@functools.lru_cache(maxsize=8)
def internet_table(routes: int, seed: int) -> tuple[tuple[int, int], ...]:
    """``routes`` distinct synthetic prefixes ``(net, plen)`` of public unicast space.

    Lengths follow :data:`PREFIX_MIX`; networks are uniform in 1.0.0.0 to
    223.255.255.255 outside 10/8, 127/8, 192.0.2.0/24 and 198.18.0.0/15 (the
    set-up's own blocks).  Deterministic in ``(routes, seed)``.
    """
    rng = np.random.default_rng([seed, routes, 36])
    plens = np.array([p for p, _ in PREFIX_MIX])
    share = np.array([s for _, s in PREFIX_MIX])
    out: dict[tuple[int, int], None] = {}
    while len(out) < routes:
        k = 2 * (routes - len(out)) + 16
        pl = rng.choice(plens, size=k, p=share / share.sum())
        a = rng.integers(0x01000000, 0xE0000000, size=k, dtype=np.int64)
        mask = (0xFFFFFFFF << (32 - pl)) & 0xFFFFFFFF
        net = a & mask
        top = net >> 24
        bad = ((top == 10) | (top == 127) | ((net >> 17) == (0xC612 >> 1))
               | ((net >> 8) == 0xC00002) | (top == 0))
        for n_, p_ in zip(net[~bad].tolist(), pl[~bad].tolist(), strict=True):
            out.setdefault((n_, p_), None)
            if len(out) == routes:
                break
    return tuple(out)


def _dotted(x: int) -> str:
    return ".".join(str((x >> s) & 255) for s in (24, 16, 8, 0))


@functools.lru_cache(maxsize=8)
def _fib(routes: int, seed: int) -> Fib:
    table = [Route(f"{_dotted(n)}/{p}", oif=1, gateway=GATEWAY)
             for n, p in internet_table(routes, seed)]
    fib = Fib(routes=[Route("10.0.0.0/24", oif=0), Route("192.0.2.0/24", oif=1),
                      Route(DEST_NET, oif=1, gateway=GATEWAY), *table],
              local_addrs=["10.0.0.1", "192.0.2.1"])
    return fib


@functools.lru_cache(maxsize=8)
def _main_trie_stats(routes: int):
    """/proc/net/fib_triestat of the main table (the table is static: walked once)."""
    return _fib(routes, 1).tries()[TABLE_MAIN][0].stats()


def destinations(count: int, seed: int) -> np.ndarray:
    """``count`` distinct addresses of 198.18.0.0/16 (uint32), drawn uniformly."""
    rng = np.random.default_rng([seed, count, 16])
    host = rng.choice(65536, size=count, replace=False).astype(np.uint32)
    return np.uint32(ip_to_int("198.18.0.0")) + host


def build(values: dict, seed: int) -> tuple[Router, TraceWindows]:
    """Router and offered trace (in windows) for resolved knob values."""
    devices = [Device("eth0", values["nic"], 0), Device("eth1", values["nic"], 0)]
    # the table is the set-up's, not the traffic's: one table per size (seed 1),
    # so two seeds differ in their traffic only
    fib = _fib(values["routes"], 1)
    # (rp_filter is not among common.SYSCTL_NAMES, so it is passed here)
    sysctl = dict(sysctl_of(values), rp_filter=values["rp_filter"])
    router = Router(values["kernel"], values["cpu"], devices, fib, sysctl=sysctl,
                    seed=seed, arp_static=[(1, GATEWAY)])
    dst = destinations(values["destinations"], seed)
    pps = values["pps"]
    duration = values["duration"]
    src = ip_to_int(SRC)
    key = np.uint64(seed * 0x9E3779B97F4A7C15 % (1 << 64))
    total = int(np.floor(duration * pps))

    spps = values["pmtu_pps"]
    stotal = int(np.floor(duration * spps))

    def make(t0: float, t1: float) -> PacketTrace:
        k0 = min(total, int(np.ceil(t0 * pps)))
        k1 = min(total, int(np.ceil(t1 * pps)))
        k = np.arange(k0, k1, dtype=np.int64)
        pick = (_mix64(k.astype(np.uint64) ^ key) % np.uint64(dst.size)).astype(np.int64)
        tr = PacketTrace.build(k / pps, iif=0, saddr=src, daddr=dst[pick],
                               length=PACKET_BYTES, proto=17, kind=KIND["flood"], ttl=64)
        if not stotal:
            return tr
        # the storm: message m arrives at m / pmtu_pps; its tag is m (the quoted
        # destination is storm_daddr(m))
        m = np.arange(min(stotal, int(np.ceil(t0 * spps))),
                      min(stotal, int(np.ceil(t1 * spps))), dtype=np.int64)
        st = PacketTrace.build(m / spps, iif=1, saddr=ip_to_int(STORM_SRC),
                               daddr=ip_to_int(ROUTER_ETH1), length=STORM_BYTES, proto=1,
                               kind=KIND["local"], ttl=64, tag=m)
        return PacketTrace.concat([tr, st])

    return router, TraceWindows(make, duration, WINDOW_S, total + stotal)


def storm_daddr(m: np.ndarray, count: int, seed: int) -> np.ndarray:
    """The destination (uint32) the storm's message ``m`` quotes: one of
    ``count`` distinct addresses of 198.18.0.0/16, picked by a hash of ``m``."""
    q = destinations(count, seed + 7919)
    key = np.uint64((seed + 1) * 0xD1B54A32D192ED03 % (1 << 64))
    pick = _mix64(np.asarray(m, dtype=np.uint64) ^ key) % np.uint64(q.size)
    return q[pick.astype(np.int64)]


def pmtu_exceptions(res: Result) -> NexthopExceptions | None:
    """The gateway nexthop's exception table after the storm (3.6), or None
    for a kernel with a route cache.  The storm's messages that reached the
    router's ICMP (outcome ``local``) update it in the order they were served,
    stamped with the jiffy of their service."""
    from ..core.dropreason import OUTCOMES

    kernel = res.config.kernel
    if kernel.route_cache or kernel.fib != "trie":
        return None
    k = res.extra["knobs"]
    n = res.offered
    pk = res.packets
    got = np.flatnonzero((pk["kind"][:n] == KIND["local"]) & (pk["tag"][:n] >= 0)
                         & (pk["outcome"][:n] == OUTCOMES["local"]))
    got = got[np.argsort(pk["t_start"][got], kind="stable")]
    daddr = storm_daddr(pk["tag"][got], k["pmtu_destinations"], res.extra["seed"])
    jiffies = np.floor(pk["t_start"][got] * kernel.hz).astype(np.int64)
    nh = NexthopExceptions()
    mtu = max(STORM_MTU, IP_RT_MIN_PMTU)
    expires = int(IP_RT_MTU_EXPIRES * kernel.hz)
    for a, j in zip(daddr.tolist(), jiffies.tolist(), strict=True):
        nh.update_or_create(a, j, pmtu=mtu, expires=j + expires)
    return nh


#: Profile rows that are the cost of routing (the lookups and the route
#: cache's upkeep), for ``route_lookup_us_per_packet``.
ROUTE_ROWS = ("rt_hash+ip_route_input (every lookup)", "fib_lookup (per packet)",
              "ip_route_input_slow+dst_alloc+rt_intern_hash", "ip_route_input (chain walk)",
              "rt_garbage_collect", "dst_run_gc", "rcu_process_callbacks",
              "timers (rt_check_expire, rt_secret_rebuild)")


def _summary(res: Result) -> dict:
    from ..core.dropreason import OUTCOMES
    from ..ipv4.route import STAT_FIELDS

    fwd = int(np.count_nonzero(res.packets["outcome"][: res.offered] == OUTCOMES["forwarded"]))
    prof = res.profile
    busy = sum(prof.values())
    route = sum(prof.get(r, 0.0) for r in ROUTE_ROWS)
    s = {"cpu_us_per_packet": round(busy / fwd * 1e6, 4) if fwd else None,
         "route_lookup_us_per_packet": round(route / fwd * 1e6, 4) if fwd else None}
    rows = res.counters.get("rt_cache_stat")
    kernel = res.config.kernel
    if rows is not None:
        tot = np.asarray(rows).sum(axis=0)
        hit = tot[STAT_FIELDS.index("in_hit")]
        slow = tot[STAT_FIELDS.index("in_slow_tot")]
        s["cache_hit_pct"] = round(float(100.0 * hit / (hit + slow)), 2) if hit + slow else None
        s["dst_allocs"] = int(res.counters["dst"]["allocated"])
    else:
        s["cache_hit_pct"] = None
        # 3.6 rt_cache_route: one dst per nexthop, stored on its first use
        s["dst_allocs"] = 1 if fwd and kernel.nexthop_dst else 0
    # the seed is set by run_scenario after the run; the summary runs after it
    nh = pmtu_exceptions(res)
    s["fnhe_entries"] = nh.entries if nh is not None else None
    s["fnhe_reclaimed"] = nh.reclaimed if nh is not None else None
    s["fnhe_max_chain"] = nh.max_chain() if nh is not None else None
    if kernel.fib == "trie":
        st = _main_trie_stats(res.extra["knobs"]["routes"])
        s["trie_depth_mean"] = round(st.mean_depth, 3)
        s["trie_nodes"] = st.tnodes + st.leaves
    else:
        s["trie_depth_mean"] = None
        s["trie_nodes"] = None
    return s


def run(seed: int = 1, progress=None, **knobs) -> Result:
    """Run the scenario; see ``KNOBS`` for the parameters."""
    return run_scenario(NAME, KNOBS, build, knobs, seed, PACKET_BYTES, progress=progress,
                        summary=_summary)
