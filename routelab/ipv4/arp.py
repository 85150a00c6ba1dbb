"""ARP: the IPv4 neighbour table, its solicitations and error reports.

Kernel: net/ipv4/arp.c (2.4.24; 2.6.0 the same logic), on the generic table
of :mod:`routelab.core.neighbour`.

* :func:`arp_hash` folds the address into one of 32 buckets.
* :meth:`Arp.arp_constructor` makes multicast, broadcast, NOARP/loopback and
  point-to-point neighbours NOARP (no resolution); everything else starts
  in NONE and resolves on its first packet.
* :meth:`Arp.arp_solicit` sends a *unicast* request to the cached address
  while ``probes < ucast_probes`` (re-validating a STALE entry), hands the
  next ``app_probes`` to a user-space daemon (no frame), and *broadcasts*
  after that -- so a new entry, which starts at ``probes = ucast_probes``,
  broadcasts at once.
* :meth:`Arp.arp_error_report` is ``dst_link_failure`` -> ``ipv4_link_failure``
  for one queued packet of a FAILED entry: ICMP host unreachable, then
  ``dst_set_expires(dst, 0)``.  The sink does both
  (:meth:`RunSink.arp_error_report` in a run).
* :meth:`Arp.arp_bind_neighbour` finds or creates the neighbour a new route
  needs, keyed on ``rt_gateway``.

The sink (one engine object shared with the generic table)
--------------------------------------------------------------
In a run the sink is a :class:`RunSink`; tests use small fakes.
``sink.arp_send(dev, target, broadcast, now) -> seconds``
    One ARP request leaves ``dev`` for ``target`` (broadcast or unicast).
``sink.arp_error_report(j, dst, now) -> seconds``
    Queued packet ``j`` of a FAILED entry: ICMP host unreachable for it
    (icmp_send: output route, rate limit), ``dst_set_expires(dst, 0)``, then
    kfree_skb (dst_release).  The packet ends there.
``sink.arp_reply_due(dev, addr, t_reply) -> None``
    A host will answer: an ARP reply from ``addr`` arrives on ``dev`` at
    ``t_reply``.  The engine injects it as a received frame (so it passes
    the NIC, netif_rx and the softirq like any frame, and can be dropped
    under overload) and, when the softirq gets to it, calls
    :meth:`Arp.arp_rcv`.  This is why replies go through the sink instead
    of a clock timer of this module.
plus ``neigh_output`` and ``neigh_queue_drop`` (:mod:`routelab.core.neighbour`).

``exists(dev, addr) -> float | None`` tells whether a host on ``dev`` owns
``addr`` and answers ARP, and with what delay.  It is asked once per request
sent; ``t_reply = now + delay`` ignores the request's own queueing on the
way out.  An engine that models ARP frames lost on the way out should pass
``exists=None`` and schedule replies from ``sink.arp_send`` itself.

Simplifications: no proxy ARP, no arp_filter, no netfilter hooks, no ARPD;
``inet_addr_type`` uses the address sets given to :class:`Arp` instead of a
local FIB table; link-layer addresses are opaque tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .. import costs as _costs
from ..core.dev import dev_xmit_forwarded
from ..core.dropreason import OUTCOMES
from ..core.dst import dst_release, dst_set_expires
from ..core.neighbour import (
    EINVAL,
    NEIGH_DROP,
    NEIGH_XMIT,
    NUD_CONNECTED,
    NUD_NOARP,
    NUD_REACHABLE,
    NUD_STALE,
    Neighbour,
    NeighParms,
    NeighSink,
    NeighTable,
    neigh_config,
)
from ..core.skbuff import KIND
from ..sim.ledger import Ledger
from .icmp import ICMP_DEST_UNREACH

__all__ = ["ArpDev", "Arp", "ArpSink", "RunSink", "arp_hash", "inet_addr_type",
           "every_host_answers", "ARP_COUNTERS", "ARP_REPLY_S", "ARP_FRAME_BYTES",
           "ARPOP_REQUEST"]

# An ARP request for a host that exists is answered this long after it left.
# ASSUMED: a PC's ARP reply on a 100 Mbit/s LAN (frame times ~7 us each way,
# the host's interrupt and arp_rcv): 0.2 ms.
ARP_REPLY_S = 0.2e-3
ARP_FRAME_BYTES = 28 + 18     # ARP payload + Ethernet header and FCS (padded to 64)
ARPOP_REQUEST = 1             # include/linux/if_arp.h: ar_op of a request (a trace's ARP tag)

#: ARP's functions that charge their own cost, each to a ledger slot of its name.
ARP_CHARGED = ("arp_constructor", "arp_solicit", "arp_rcv", "arp_bind_neighbour")

# Counters of the ARP layer itself (the table keeps its own).
ARP_COUNTERS = ("arp_req_bcast", "arp_req_ucast", "arp_app_probes", "arp_rcv_reply",
                "arp_rcv_request", "arp_error_reports")


@dataclass(frozen=True, slots=True)
class ArpDev:
    """What ARP needs to know about a device (net_device flags and ops).

    ``hard_header=False`` is a device without a link-layer header
    (``dev->hard_header == NULL``: arp_direct_ops, NOARP).
    """

    ifindex: int
    name: str = ""
    noarp: bool = False          # IFF_NOARP
    loopback: bool = False       # IFF_LOOPBACK
    pointopoint: bool = False    # IFF_POINTOPOINT
    hard_header: bool = True


class ArpSink(NeighSink, Protocol):
    """The engine callbacks ARP uses (see module doc)."""

    def arp_send(self, dev: int, target: int, broadcast: bool, now: float) -> float: ...

    def arp_error_report(self, j: Any, dst: Any, now: float) -> float: ...

    def arp_reply_due(self, dev: int, addr: int, t_reply: float) -> None: ...


def every_host_answers(dev: int, addr: int) -> float:
    """The default ``exists``: every address answers after ``ARP_REPLY_S``."""
    return ARP_REPLY_S


def arp_hash(key: int, dev: int) -> int:
    """Bucket of IPv4 address ``key`` (host-order int) on device ``dev``.

    Kernel: net/ipv4/arp.c arp_hash (2.4.24): x = address; x ^= x >> 16;
    x ^= x >> 8; x ^= x >> 3; then ``(x ^ ifindex) & NEIGH_HASHMASK``.  The
    kernel folds the address as i386 loads it (network bytes read
    little-endian); the five bits kept depend only on the XOR of the
    address's four bytes, which byte order does not change, so folding the
    host-order int gives the same bucket.  With 32 buckets, a /24 spreads
    8 addresses per bucket.

    >>> arp_hash(0x0A000005, 2)   # 10.0.0.5 on ifindex 2
    12
    """
    x = key & 0xFFFFFFFF
    x ^= x >> 16
    x ^= x >> 8
    x ^= x >> 3
    return (x ^ dev) & 0x1F


def inet_addr_type(addr: int, local: Iterable[int] = (), broadcast: Iterable[int] = ()) -> str:
    """Address class as arp_constructor sees it: "broadcast", "multicast", "local", "unicast".

    Kernel: net/ipv4/fib_frontend.c inet_addr_type (2.4.24): 0.x.x.x and
    240/4 count as broadcast, 224/4 multicast, then the local table decides
    (the router's own addresses are local, its subnets' broadcast
    addresses broadcast, all else unicast).
    """
    top = (addr >> 24) & 0xFF
    if top == 0 or top >= 240:
        return "broadcast"
    if 224 <= top < 240:
        return "multicast"
    if addr in broadcast:
        return "broadcast"
    if addr in local:
        return "local"
    return "unicast"


class Arp:
    """The ARP layer and its neighbour table ``tbl`` (arp_tbl).

    Parameters
    ----------
    clock : object
        Timer registry (see :mod:`routelab.core.neighbour`).
    sink : ArpSink
        Engine callbacks (module doc).
    cost : dict
        Seconds per kernel function (``cost_table(cpu).fn``).
    exists : callable, optional
        ``exists(dev, addr) -> reply delay in s, or None``; ``None``: this
        module never schedules replies.
    devs : mapping, optional
        ``ifindex -> ArpDev``.  Without it every device is an ordinary
        Ethernet; with it an unknown device has no in_device (``-EINVAL``).
    local_addrs, broadcast_addrs : iterable of int
        The router's own addresses and its subnets' broadcast addresses
        (the local table ``inet_addr_type`` reads).
    sysctl : mapping, optional
        ``neigh_*`` knob values (a router's whole sysctl dict will do).
    parms : NeighParms, optional
        Overrides the parms built from ``sysctl``.
    hz, rng, now, cpu, ledger
        As for :class:`~routelab.core.neighbour.NeighTable` (ARP's own
        functions charge their slots on the same ledger, and leave the
        seconds of a call that returns something else in ``ledger.t``).
    """

    def __init__(self, clock: Any, sink: ArpSink, cost: Mapping[str, float], *,
                 exists: Callable[[int, int], float | None] | None = None,
                 devs: Mapping[int, ArpDev] | None = None, local_addrs: Iterable[int] = (),
                 broadcast_addrs: Iterable[int] = (), sysctl: Mapping[str, Any] | None = None,
                 parms: NeighParms | None = None, hz: int = 100,
                 rng: np.random.Generator | None = None, now: float = 0.0, cpu: int = 0,
                 ledger: Ledger | None = None) -> None:
        self.sink = sink
        self.exists = exists
        self.devs = dict(devs) if devs is not None else None
        self.local_addrs = frozenset(local_addrs)
        self.broadcast_addrs = frozenset(broadcast_addrs)
        for f in ARP_COUNTERS:
            setattr(self, f, 0)
        self._c_ctor = cost["arp_constructor"]
        self._c_solicit = cost["arp_solicit"]
        self._c_rcv = cost["arp_rcv"]
        self._c_bind = cost["arp_bind_neighbour"]
        self.ledger = ledger = ledger if ledger is not None else Ledger()
        self._k_ctor, self._k_solicit, self._k_rcv, self._k_bind = (
            ledger.slot(fn) for fn in ARP_CHARGED)
        p, gc = neigh_config(sysctl)
        self.tbl = NeighTable(clock, sink, cost, hash=arp_hash,
                              constructor=self.arp_constructor, solicit=self.arp_solicit,
                              error_report=self.arp_error_report,
                              parms=parms if parms is not None else p, hz=hz, rng=rng,
                              now=now, cpu=cpu, ledger=ledger, **gc)

    def _dev(self, dev: int) -> ArpDev | None:
        if self.devs is None:
            return ArpDev(dev)
        return self.devs.get(dev)

    # -- neigh_ops ----------------------------------------------------------------------------
    def arp_constructor(self, n: Neighbour, now: float) -> int:
        """Protocol setup of a new entry; returns an errno (0: accepted),
        seconds in ``ledger.t``.

        Kernel: net/ipv4/arp.c arp_constructor (2.4.24).  No in_device ->
        ``-EINVAL``.  A device without link header: NOARP (direct output).
        Otherwise NOARP for a multicast address (mapped link address), on a
        NOARP or loopback device (the device's own address), and for a
        broadcast address or on a point-to-point device (the link
        broadcast); all else stays NONE.
        """
        t = self._c_ctor
        self.ledger.charge(self._k_ctor, t)
        self.ledger.t = t
        d = self._dev(n.dev)
        if d is None:
            return -EINVAL
        n.type = inet_addr_type(n.key, self.local_addrs, self.broadcast_addrs)
        if not d.hard_header:
            n.nud_state = NUD_NOARP
        elif n.type == "multicast":
            n.nud_state = NUD_NOARP
            n.ha = ("multicast", n.key)
        elif d.noarp or d.loopback:
            n.nud_state = NUD_NOARP
            n.ha = ("dev", d.ifindex)
        elif n.type == "broadcast" or d.pointopoint:
            n.nud_state = NUD_NOARP
            n.ha = "broadcast"
        return 0

    def arp_solicit(self, n: Neighbour, now: float) -> float:
        """Send one ARP request for ``n``; returns seconds.

        Kernel: net/ipv4/arp.c arp_solicit (2.4.24), called before
        ``probes`` is incremented: ``probes < ucast_probes`` -> unicast to the
        cached address; then ``app_probes`` requests for arpd (no frame);
        then broadcasts.  arp_send sends nothing on an IFF_NOARP device.
        """
        p = self.tbl.parms
        left = n.probes - p.ucast_probes
        t = self._c_solicit
        self.ledger.charge(self._k_solicit, t)
        if left < 0:
            broadcast = False
            self.arp_req_ucast += 1
        elif left - p.app_probes < 0:
            self.arp_app_probes += 1          # neigh_app_ns (CONFIG_ARPD): no frame
            return t
        else:
            broadcast = True
            self.arp_req_bcast += 1
        d = self._dev(n.dev)
        if d is not None and d.noarp:
            return t
        t += self.sink.arp_send(n.dev, n.key, broadcast, now)
        if self.exists is not None:
            delay = self.exists(n.dev, n.key)
            if delay is not None:
                self.sink.arp_reply_due(n.dev, n.key, now + delay)
        return t

    def arp_error_report(self, n: Neighbour, j: Any, dst: Any, now: float) -> float:
        """A queued packet of a FAILED entry: ICMP host unreachable, route expiry.

        Kernel: net/ipv4/arp.c arp_error_report -> include/net/dst.h
        dst_link_failure -> net/ipv4/route.c ipv4_link_failure (2.4.24):
        icmp_send(DEST_UNREACH, HOST_UNREACH) first, then
        ``dst_set_expires(dst, 0)``, then kfree_skb.  All three are the
        sink's (``sink.arp_error_report``).
        """
        self.arp_error_reports += 1
        return self.sink.arp_error_report(j, dst, now)

    # -- route binding ------------------------------------------------------------------------
    def arp_bind_neighbour(self, dev: int, rt_gateway: int, now: float) -> Neighbour | int:
        """The neighbour a new route entry points at, held for it.

        Kernel: net/ipv4/arp.c arp_bind_neighbour (2.4.24), called by
        rt_intern_hash for unicast input routes and all output routes whose
        ``dst->neighbour`` is still NULL (the caller checks that).  The key
        is ``rt_gateway`` -- the destination itself for an on-link
        destination, the gateway otherwise (route.c rt_set_nexthop) -- or 0
        on loopback and point-to-point devices.  Lookup, else create.

        Returns ``n`` held (store it as the dst's neighbour; release it in
        dst_destroy), or a negative errno, seconds in ``ledger.t``:
        ``-ENOBUFS`` when the table is full and the forced GC freed nothing,
        ``-EINVAL`` for a device without in_device.

        What the caller must do with ``-ENOBUFS`` (route.c rt_intern_hash,
        2.4.24; the bucket lock is still held during this call, the chain
        trim has already happened):

        * process context (``attempts = 1``): save ``gc_elasticity`` and
          ``gc_min_interval``, set them to 1 and 0, run rt_garbage_collect
          once, restore, and restart rt_intern_hash from its chain walk (so
          this is called again); a second ``-ENOBUFS`` is final.
        * softirq (``attempts = 0``: forwarding, and ICMP sent from a timer
          or the receive path): no shrink, no retry.

        Final: "Neighbour table overflow." (net_ratelimit: 1 per 5 s, burst
        10), rt_drop the new entry, return ``-ENOBUFS``; ip_route_input
        fails and ip_rcv_finish drops the packet.  Any other error: rt_drop
        and return it.
        """
        lg = self.ledger
        t = self._c_bind
        lg.charge(self._k_bind, t)
        d = self._dev(dev)
        if d is None:
            lg.t = t
            return -EINVAL
        nexthop = 0 if d.loopback or d.pointopoint else rt_gateway
        n = self.tbl.neigh_lookup_errno(nexthop, dev, now)
        lg.t = t + lg.t
        return n

    # -- receive ------------------------------------------------------------------------------
    def arp_rcv(self, dev: int, sip: int, lladdr: Any, now: float, *, op: str = "reply",
                tip_local: bool = False, pkt_host: bool = True) -> float:
        """A received ARP packet from ``sip`` (link address ``lladdr``); seconds.

        Kernel: net/ipv4/arp.c arp_rcv / arp_process (2.4.24).  ``sip == 0``
        (duplicate-address probe) changes nothing.  A request for one of the
        router's addresses (``tip_local``) creates or refreshes the sender's
        entry as STALE (neigh_event_ns); the engine sends the reply, and
        has done the ``ip_route_input(tip, sip)`` that decided the target
        was local.  Every other packet updates an *existing* entry only:
        REACHABLE for a reply addressed to us (``pkt_host``), STALE for a
        broadcast reply or a request, with ``override`` once ``locktime``
        has passed since the entry's last update (the first of several
        differing replies wins).
        """
        lg = self.ledger
        t = self._c_rcv
        lg.charge(self._k_rcv, t)
        if op == "reply":
            self.arp_rcv_reply += 1
        elif op == "request":
            self.arp_rcv_request += 1
        else:
            raise ValueError(f"op must be 'reply' or 'request', not {op!r}")
        if sip == 0:
            return t
        tbl = self.tbl
        if op == "request" and tip_local:
            n = tbl.neigh_event_ns(lladdr, sip, dev, now)
            t += lg.t
            if n is not None:
                t += tbl.neigh_release(n, now)
            return t
        n = tbl.neigh_lookup(sip, dev, now)
        t += lg.t
        if n is not None:
            override = now - n.updated >= tbl.parms.locktime
            state = NUD_REACHABLE if op == "reply" and pkt_host else NUD_STALE
            tbl.neigh_update(n, lladdr, state, override, True, now)
            t += lg.t
            t += tbl.neigh_release(n, now)
        return t

    def prime(self, dev: int, addr: int, now: float) -> None:
        """An entry already resolved (REACHABLE, confirmed ``now``), as a router
        that has been up a while has for its gateways: created as a lookup
        would (``neigh_create``), then updated as an ARP reply would."""
        tbl = self.tbl
        n = tbl.neigh_lookup_errno(addr, dev, now)
        if isinstance(n, int):
            raise RuntimeError(f"cannot prime neighbour {addr:#x} on device {dev}: error {n}")
        tbl.neigh_update(n, ("lladdr", addr), NUD_REACHABLE, True, True, now)
        tbl.neigh_release(n, now)

    # -- views --------------------------------------------------------------------------------
    def counters(self) -> dict[str, int]:
        """Table counters (arp_cache stat layout) followed by the ARP layer's."""
        out = self.tbl.counters()
        out.update({f: getattr(self, f) for f in ARP_COUNTERS})
        return out

    def ip_neigh(self) -> str:
        """``ip -s neigh``-like listing with device names from ``devs``."""
        names = {i: d.name for i, d in self.devs.items() if d.name} if self.devs else None
        return self.tbl.ip_neigh(names)


class RunSink:
    """The neighbour layer's sink in a run: what becomes of the packets the
    table holds, and the ARP frames on the wires.  It builds the run's
    :class:`Arp` (``self.arp``) on itself.

    It owns what it needs of the run: the devices (:class:`~routelab.core.dev.NetDevice`),
    the CPUs (for ARP receive work), the ICMP output, the ledger, a way to
    inject born packets (``inject(fields, t) -> j``, the run's) and the
    packet columns of the current window (:meth:`window`).  A held packet's
    token is ``(window number, j)``: one queued in an earlier window ends
    there as ``held_neigh`` and here only gives back its route reference.

    Parameters
    ----------
    clock, cost
        The run's clock and ``CostTable.fn``.
    devices, cpus, icmp, ledger
        The run's stage objects.
    inject : callable
        ``inject(fields, t) -> j``: a packet born in the run (an ARP reply).
    router_addr : int
        The router's address (the replies' destination).
    speeds : iterable of float
        Each device's link speed, bit/s (0: no wire), for the ARP frames'
        wire time.
    **arp
        Keyword arguments of :class:`Arp` (``exists``, ``local_addrs``,
        ``sysctl``, ``hz``, ``rng``); the ledger is this one.
    """

    def __init__(self, clock: Any, cost: Mapping[str, float], devices: list, cpus: list,
                 icmp: Any, ledger: Ledger, inject: Callable[[dict, float], int],
                 router_addr: int, speeds: Iterable[float], **arp: Any) -> None:
        self.devices = devices
        self.cpus = cpus
        self.icmp = icmp
        self.ledger = ledger
        self.inject = inject
        self.router_addr = router_addr
        self.pk = None
        self.wno = 0
        self.schedule = None           # the run's Schedule (deliveries to hosts), set by the run
        self._slot = ledger.slot("neighbour output (ARP frames, ICMP, kfree_skb)")
        self._arp_wire = [float(_costs.wire_bytes(ARP_FRAME_BYTES)) * 8.0 / speed
                          if speed > 0 else 0.0 for speed in speeds]
        self._c_kfree = cost["kfree_skb"]
        self._c_icmp = _costs.composed(cost, "icmp_send")
        self._c_arp_xmit = _costs.composed(cost, "arp_xmit")
        self._c_rcv = cost["arp_rcv"]
        self._c_arp_route = _costs.composed(cost, "arp_route_input")
        self._slot_arp_route = ledger.slot("ip_route_input (ARP requests, uncached)")
        self.arp = Arp(clock, self, cost, ledger=ledger, **arp)

    def window(self, pk: Any, wno: int) -> None:
        """The current window's packet columns and number (``None``: the run ended)."""
        self.pk = pk
        self.wno = wno

    def _mine(self, token: tuple[int, int]) -> int:
        """The packet index of a queued packet's token, or -1 if it was queued
        in an earlier window (its outcome there stays ``held_neigh``)."""
        wno, j = token
        return j if wno == self.wno else -1

    # -- the output path ----------------------------------------------------------
    def ip_finish_output2(self, j: int, e: Any, now: float) -> int:
        """Packet ``j`` whose route ``e``'s neighbour is not CONNECTED: the
        table's verdict (``NEIGH_XMIT``, ``NEIGH_QUEUED``, ``NEIGH_DROP``),
        seconds in ``ledger.t``.

        Kernel: net/ipv4/ip_output.c ip_finish_output2 -> neigh->output =
        net/core/neighbour.c neigh_resolve_output.  On ``NEIGH_XMIT`` the
        caller transmits (:func:`~routelab.core.dev.dev_xmit_forwarded`); a
        queued packet keeps its route reference and ends later in
        :meth:`neigh_output`, :meth:`neigh_queue_drop` or
        :meth:`arp_error_report`.
        """
        return self.arp.tbl.neigh_resolve_output(e.neigh, (self.wno, j), e, now)

    def ip_finish_output2_noref(self, j: int, dev: int, nexthop: int, now: float) -> int:
        """Packet ``j`` of a kernel whose routes hold no neighbour (no route
        cache: 3.6 and later): look the next hop up in the neighbour table,
        creating it if missing, and output through it; the table's verdict as
        :meth:`ip_finish_output2`, seconds in ``ledger.t``.

        Kernel: net/ipv4/ip_output.c ip_finish_output2 (3.6:
        ``__ipv4_neigh_lookup_noref``, else ``__neigh_create``, then
        ``dst_neigh_output``).  The lookup takes no reference ("noref", under
        rcu_read_lock_bh), so none is kept here: the one a create or lookup
        takes is dropped at once.  Simplified: priced as
        ``arp_bind_neighbour``'s lookup (the same hash and chain walk).

        The common case -- the next hop is in the table and CONNECTED -- is
        done inline: the same counters, ledger charges (in the same order),
        reference hold and release (which move an unreferenced entry to the
        end of the table's unpinned list) and seconds as the general path
        below, without its calls (this runs once per forwarded packet).
        """
        arp = self.arp
        devs = arp.devs
        d = devs.get(dev) if devs is not None else None
        if d is not None or devs is None:
            tbl = arp.tbl
            key = 0 if d is not None and (d.loopback or d.pointopoint) else nexthop
            n = tbl._index.get((dev, key))
            if n is not None and n._nud & NUD_CONNECTED:
                t = arp._c_bind
                arp.ledger.charge(arp._k_bind, t)
                tbl.lookups += 1
                tbl.hits += 1
                if n.refcnt == 1:           # neigh_hold unpins it, neigh_release re-pins
                    un = tbl._unpinned
                    un.pop(n, None)
                    un[n] = None
                w = tbl._c_lookup + (tbl.buckets[n.hash].index(n) + 1) * tbl._c_step
                tbl.ledger.charge(tbl._k_lookup, w)
                self.ledger.t = t + w
                return NEIGH_XMIT
        lg = self.ledger
        n = self.arp.arp_bind_neighbour(dev, nexthop, now)
        s = lg.t
        if isinstance(n, int):              # -ENOBUFS: the table is full
            lg.t = s
            return NEIGH_DROP
        rc = self.arp.tbl.neigh_resolve_output(n, (self.wno, j), None, now)
        s += lg.t
        s += self.arp.tbl.neigh_release(n, now)
        lg.t = s
        return rc

    # -- the table's callbacks ----------------------------------------------------
    def neigh_output(self, token: tuple[int, int], dst: Any, now: float) -> float:
        """The neighbour resolved: its queued packet leaves now.  (Its output
        path was charged with its service: 0 s here.)"""
        j = self._mine(token)
        if j < 0:
            dst_release(dst)
            return 0.0
        pk = self.pk
        dev_xmit_forwarded(self.devices[pk.value(j, "oif")], self.ledger, self.schedule, pk, j,
                           now, dst)
        return 0.0

    def neigh_queue_drop(self, token: tuple[int, int], dst: Any, now: float) -> float:
        """Pushed out of a full unresolved queue, or purged: kfree_skb."""
        j = self._mine(token)
        if j >= 0:
            self.ledger.drop(j, OUTCOMES["drop_arp_queue"])
        dst_release(dst)
        self.ledger.charge(self._slot, self._c_kfree)
        return self._c_kfree

    def arp_error_report(self, token: tuple[int, int], dst: Any, now: float) -> float:
        """The address never resolved (arp_error_report -> dst_link_failure ->
        ipv4_link_failure): ICMP host unreachable to the packet's source
        (through icmp_send's limiter), the route marked to expire now, the
        packet freed."""
        j = self._mine(token)
        t = self._c_kfree
        log = self.arp.tbl.log
        if j >= 0:
            pk = self.pk
            dep = self.icmp.icmp_send(ICMP_DEST_UNREACH, pk.value(j, "dev"), now,
                                      pk.value(j, "iwire"), pk.value(j, "saddr"), True)
            self.icmp.host_unreach += 1
            if log is not None:
                log.append((now, "host unreachable" if dep == dep else "icmp rate-limited",
                            dst.key >> 32 if dst is not None else "", "",
                            pk.value(j, "saddr")))
            t += self._c_icmp
            self.ledger.drop(j, OUTCOMES["drop_neigh_failed"])
        if dst is not None:             # (a kernel without a route cache holds none)
            dst_set_expires(dst, now, 0.0)
            if log is not None:
                log.append((now, "route expires", dst.key >> 32, "", dst.expires))
            dst_release(dst)
        self.ledger.charge(self._slot, t)
        return t

    def arp_send(self, dev: int, target: int, broadcast: bool, now: float) -> float:
        """An ARP request frame leaves by ``dev`` (dev_queue_xmit, the driver)."""
        nd = self.devices[dev]
        dep = nd.dev_queue_xmit(now, self._arp_wire[dev], None, None, 0)
        if dep == dep:
            nd.tx_packets += 1
        self.ledger.charge(self._slot, self._c_arp_xmit)
        return self._c_arp_xmit

    def arp_reply_due(self, dev: int, addr: int, t_reply: float) -> None:
        """A host answers the request: its ARP reply arrives at ``t_reply``, as
        a frame born in the run (it passes the NIC and the softirq like any)."""
        self.inject(dict(iif=dev, saddr=addr, daddr=self.router_addr, tos=0, proto=0,
                         length=28, ttl=64, df=False, cloned=False, headroom=16, hdr_err=0,
                         kind=KIND["arp"], tag=-1), t_reply)

    # -- receive and the end ------------------------------------------------------
    def arp_rcv(self, j: int, d: int, now: float) -> None:
        """ARP frame ``j`` reaches arp_rcv at the end of its service on device
        ``d``: the neighbour is updated (its queue flushed); that work, beyond
        the ``arp_rcv`` its service already paid, is charged on ``d``'s CPU
        after it.

        A frame with ``tag == ARPOP_REQUEST`` is a host's request for ``daddr``
        (2.4.24 net/ipv4/arp.c arp_process): a request for one of the
        router's addresses refreshes the sender's entry and is answered (an
        ARP reply frame out of ``d``); any other first pays
        ``ip_route_input(skb, tip, sip, 0, dev)`` -- the slow path every time
        (COMPOSITION ``arp_route_input``: a target on the device it was asked
        on gets ``e_inval`` and no cache entry) -- and then updates the
        sender's entry only if it exists (``__neigh_lookup(..., 0)``).
        Simplified: the route cache's chain walk of the miss is not charged
        (RunSink does not see the cache), and every target is taken to be on
        the asking device (the hosts ask only in their own subnet), so no
        proxy-ARP route is ever created.
        """
        pk = self.pk
        self.ledger.drop(j, OUTCOMES["arp"])
        sip = pk.value(j, "saddr")
        if pk.value(j, "tag") == ARPOP_REQUEST:
            tip = pk.value(j, "key") >> 32     # the flow key: daddr << 32 | saddr
            local = tip in self.arp.local_addrs
            s = self.arp.arp_rcv(d, sip, ("lladdr", sip), now, op="request",
                                 tip_local=local) - self._c_rcv
            if local:
                s += self.arp_send(d, sip, False, now)
            else:
                s += self._c_arp_route
                self.ledger.charge(self._slot_arp_route, self._c_arp_route)
        else:
            s = self.arp.arp_rcv(d, sip, ("lladdr", sip), now) - self._c_rcv
        if s > 0:
            self.cpus[self.devices[d].cpu].charge(now, s)

    def finish(self) -> None:
        """End of the run: packets still waiting for a resolution stay
        ``held_neigh`` and give back their route reference (so that every
        reference taken during the run is dropped)."""
        for n in self.arp.tbl:
            for _token, dst in n.arp_queue:
                dst_release(dst)
            n.arp_queue.clear()
        self.window(None, self.wno)
