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
  ``dst_set_expires(dst, 0)``.  The engine does both in
  ``sink.arp_error_report``.
* :meth:`Arp.arp_bind_neighbour` finds or creates the neighbour a new route
  needs, keyed on ``rt_gateway``.

The sink (one engine object shared with the generic table)
--------------------------------------------------------------
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

from ..core.neighbour import (
    EINVAL,
    NUD_NOARP,
    NUD_REACHABLE,
    NUD_STALE,
    Neighbour,
    NeighParms,
    NeighSink,
    NeighTable,
    neigh_config,
)

__all__ = ["ArpDev", "Arp", "ArpSink", "arp_hash", "inet_addr_type", "ARP_COUNTERS"]

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
    hz, rng, now, cpu, charge
        As for :class:`~routelab.core.neighbour.NeighTable`.
    """

    def __init__(self, clock: Any, sink: ArpSink, cost: Mapping[str, float], *,
                 exists: Callable[[int, int], float | None] | None = None,
                 devs: Mapping[int, ArpDev] | None = None, local_addrs: Iterable[int] = (),
                 broadcast_addrs: Iterable[int] = (), sysctl: Mapping[str, Any] | None = None,
                 parms: NeighParms | None = None, hz: int = 100,
                 rng: np.random.Generator | None = None, now: float = 0.0, cpu: int = 0,
                 charge: Callable[[str, float], None] | None = None) -> None:
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
        p, gc = neigh_config(sysctl)
        self.tbl = NeighTable(clock, sink, cost, hash=arp_hash,
                              constructor=self.arp_constructor, solicit=self.arp_solicit,
                              error_report=self.arp_error_report,
                              parms=parms if parms is not None else p, hz=hz, rng=rng,
                              now=now, cpu=cpu, charge=charge, **gc)
        self.charge = self.tbl.charge

    def _dev(self, dev: int) -> ArpDev | None:
        if self.devs is None:
            return ArpDev(dev)
        return self.devs.get(dev)

    # -- neigh_ops ----------------------------------------------------------------------------
    def arp_constructor(self, n: Neighbour, now: float) -> tuple[int, float]:
        """Protocol setup of a new entry; returns ``(err, seconds)``.

        Kernel: net/ipv4/arp.c arp_constructor (2.4.24).  No in_device ->
        ``-EINVAL``.  A device without link header: NOARP (direct output).
        Otherwise NOARP for a multicast address (mapped link address), on a
        NOARP or loopback device (the device's own address), and for a
        broadcast address or on a point-to-point device (the link
        broadcast); all else stays NONE.
        """
        t = self._c_ctor
        self.charge("arp_constructor", t)
        d = self._dev(n.dev)
        if d is None:
            return -EINVAL, t
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
        return 0, t

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
        self.charge("arp_solicit", t)
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
    def arp_bind_neighbour(self, dev: int, rt_gateway: int,
                           now: float) -> tuple[Neighbour | int, float]:
        """The neighbour a new route entry points at, held for it.

        Kernel: net/ipv4/arp.c arp_bind_neighbour (2.4.24), called by
        rt_intern_hash for unicast input routes and all output routes whose
        ``dst->neighbour`` is still NULL (the caller checks that).  The key
        is ``rt_gateway`` -- the destination itself for an on-link
        destination, the gateway otherwise (route.c rt_set_nexthop) -- or 0
        on loopback and point-to-point devices.  Lookup, else create.

        Returns ``(n, seconds)`` with ``n`` held (store it as the dst's
        neighbour; release it in dst_destroy), or a negative errno:
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
        t = self._c_bind
        self.charge("arp_bind_neighbour", t)
        d = self._dev(dev)
        if d is None:
            return -EINVAL, t
        nexthop = 0 if d.loopback or d.pointopoint else rt_gateway
        n, t2 = self.tbl.neigh_lookup_errno(nexthop, dev, now)
        return n, t + t2

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
        t = self._c_rcv
        self.charge("arp_rcv", t)
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
            n, t2 = tbl.neigh_event_ns(lladdr, sip, dev, now)
            t += t2
            if n is not None:
                t += tbl.neigh_release(n, now)
            return t
        n, t2 = tbl.neigh_lookup(sip, dev, now)
        t += t2
        if n is not None:
            override = now - n.updated >= tbl.parms.locktime
            state = NUD_REACHABLE if op == "reply" and pkt_host else NUD_STALE
            t += tbl.neigh_update(n, lladdr, state, override, True, now)[1]
            t += tbl.neigh_release(n, now)
        return t

    def prime(self, dev: int, addr: int, now: float) -> None:
        """An entry already resolved (REACHABLE, confirmed ``now``), as a router
        that has been up a while has for its gateways: created as a lookup
        would (``neigh_create``), then updated as an ARP reply would."""
        tbl = self.tbl
        n, _ = tbl.neigh_lookup_errno(addr, dev, now)
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
