"""Network devices: receive admission, the per-CPU backlog, transmit.

Kernel: net/core/dev.c (netif_rx, the softnet_data backlog and its
throttle, dev_queue_xmit), include/linux/netdevice.h, the drivers' RX rings
(e1000, e100), net/sched/sch_generic.c (pfifo_fast) (2.4.24, 2.6.0).

Four pieces:

:class:`Device`
    The configuration of one interface (name, NIC profile, CPU, MTU,
    queue lengths), as a scenario writes it.
:class:`NetDevice`
    Its state during a run: the RX ring (NAPI drivers: the NIC fills
    descriptors, and frames that find none wait in the NIC's FIFO or are
    missed), the qdisc and TX ring, the link, and an attached host (the
    machine beyond the wire, which sees what the router transmits).
:class:`SoftnetData`
    A CPU's ``softnet_data``: the ``netif_rx`` backlog that non-NAPI drivers
    (2.4's e100) feed from their interrupt handler, with its throttle.
:class:`TxQueue`
    A device's qdisc and TX ring: the queued frames' departure times, the
    dsts they hold and their owners; TX completion releases the dsts.

Kinds of device, by the NIC profile's ``kind``: ``"ether"`` (a NIC and its
wire), ``"pair"`` (one end of a veth/etun pair: no wire, no ring, no TX
queue -- a frame handed to it leaves at once and its skb is freed on the
spot; the model has no peer device yet, so nothing receives it) and
``"dummy"``.

Simplifications: a packet occupies its RX queue from arrival until its
service starts (the queue holds service starts; starts that have passed are
retired lazily, only when the exact occupancy matters); TX completions are
applied lazily too, except for frames a host owns (they are completed on
time by a timer, so that the owner learns when its memory comes back); a
packet's fragments leave back to back as one unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import cython

from ..errors import KnobError
from ..hardware import NicProfile, nic_profile
from ..sim.columns import Packets
from ..sim.ledger import Ledger
from ..sim.queues import Ring, TimeQueue
from ..sim.schedule import Schedule
from .dropreason import OUTCOMES
from .dst import DstEntry, dst_release

__all__ = ["Device", "NetDevice", "SoftnetData", "TxQueue", "flush_tx", "dev_xmit_forwarded"]

NAN = math.nan
# the two endings of a forwarded packet handed to its output device (C ints compiled)
_O_FORWARDED, _O_QDISC = OUTCOMES["forwarded"], OUTCOMES["drop_qdisc"]


@dataclass
class Device:
    """One network interface of the router (its configuration).

    Parameters
    ----------
    name : str                 e.g. "eth0"
    nic : str                  NIC profile name (routelab.hardware.NICS)
    cpu : int                  CPU that handles its receive softirq work
    mtu : int                  bytes
    txqueuelen : int or None   qdisc length (default: sysctl txqueuelen)
    speed_bps : float or None  overrides the NIC's wire speed
    rx_ring : int or None      overrides the NIC's RX descriptors
    napi_weight : int or None  overrides the NIC's NAPI poll weight
    features : str or None     overrides the NIC's ``NETIF_F_*`` features
                               (``"SG,IP_CSUM"``, ``"none"``: what ethtool -K or
                               a driver variant would set; story 4's pair device)
    """

    name: str
    nic: str = "e100"
    cpu: int = 0
    mtu: int = 1500
    txqueuelen: int | None = None
    speed_bps: float | None = None
    rx_ring: int | None = None
    napi_weight: int | None = None
    features: str | None = None
    profile: NicProfile = field(init=False)

    def __post_init__(self) -> None:
        self.profile = nic_profile(self.nic)
        if self.features is not None:
            self.profile = replace(self.profile, features=self.features)
        if not (68 <= self.mtu <= 65535):
            raise KnobError("mtu", self.mtu, "an integer in [68, 65535] bytes")

    @property
    def speed(self) -> float:
        return self.profile.speed_bps if self.speed_bps is None else self.speed_bps

    @property
    def ring(self) -> int:
        return self.profile.rx_ring if self.rx_ring is None else self.rx_ring

    @property
    def weight(self) -> int:
        """NAPI poll weight (dev->weight): packets per dev->poll call."""
        return self.profile.weight if self.napi_weight is None else self.napi_weight

    @property
    def pair(self) -> bool:
        """One end of a veth/etun pair (no wire, no rings)."""
        return self.profile.kind == "pair"


class SoftnetData:
    """One CPU's ``softnet_data``: the ``netif_rx`` backlog and its counters.

    Kernel: net/core/dev.c softnet_data, netif_rx (2.4.24, 2.6.0).

    Attributes
    ----------
    backlog : TimeQueue      service starts of the packets in the backlog
    backlog_max : int        ``netdev_max_backlog``
    throttle : bool          the queue overflowed and has not drained yet
    dropped, throttled, time_squeeze : int
        ``/proc/net/softnet_stat``'s columns.
    """

    def __init__(self, cpu: int, backlog_max: int) -> None:
        self.cpu = cpu
        self.backlog_max = backlog_max
        self.backlog = TimeQueue(backlog_max + 2)
        self.throttle = False
        self.dropped = 0
        self.throttled = 0
        self.time_squeeze = 0

    @cython.locals(ql=cython.Py_ssize_t, q=TimeQueue)
    def netif_rx(self, t: float) -> bool:
        """May a frame the driver received at ``t`` join the backlog?

        Kernel: net/core/dev.c netif_rx: at most ``netdev_max_backlog`` + 1
        packets wait; an overflow sets the throttle, and while it is set
        every frame is dropped until the queue has drained to empty.
        Refused frames count in ``dropped``.
        """
        q = self.backlog
        if q.n > self.backlog_max or self.throttle:
            # possibly full: retire the packets whose service has begun
            ql = q.retire(t)
            if ql > self.backlog_max or (ql and self.throttle):
                if ql > self.backlog_max and not self.throttle:
                    self.throttle = True
                    self.throttled += 1
                self.dropped += 1
                return False
            if ql == 0:
                self.throttle = False
        return True


class TxQueue(Ring):
    """A device's qdisc plus TX ring: for every frame queued, when it leaves
    the wire, the dst it holds (or ``None``) and its owner (or ``None``,
    with a tag).

    Kernel: the frames of pfifo_fast and the driver's TX ring, and their
    TX completion (the driver's clean-up -> ``kfree_skb`` -> ``dst_release``;
    for a frame a socket owns, ``sock_wfree``: the socket's send buffer gets
    the frame's memory back, here the owner's ``tx_complete(tag, t)``).
    Simplified: a FIFO of departure times (a ``routelab.sim.queues.Ring``)
    with the dst and owner slots beside it.
    """

    def __init__(self, cap: int = 0) -> None:
        Ring.__init__(self, cap)         # (rounded up to the ring's minimum)
        self.dst = [None] * (self.mask + 1)
        self.owner = [None] * (self.mask + 1)
        self.tag = [0] * (self.mask + 1)
        self.owned = 0                 # frames queued with an owner

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def push(self, dep: float, e, owner, tag: int) -> int:
        """Queue a frame leaving the wire at ``dep`` holding ``e``; ``owner``
        (with ``tag``) is told when it completes (see :meth:`retire`)."""
        if self.n > self.mask:
            self._grow()
        i = (self.head + self.n) & self.mask
        self.v[i] = dep
        self.dst[i] = e
        if owner is not None:
            self.owner[i] = owner
            self.tag[i] = tag
            self.owned += 1
        self.n += 1
        return 0

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(h=cython.Py_ssize_t, m=cython.Py_ssize_t, n=cython.Py_ssize_t,
                   x=DstEntry, dep=cython.double)
    def retire(self, now: float) -> int:
        """TX completion of every frame that left the wire by ``now``: release
        its dst, tell its owner (as of the frame's own departure time).
        Return the number of frames still queued."""
        h = self.head
        m = self.mask
        n = self.n
        while n and self.v[h] <= now:
            x = self.dst[h]
            if x is not None:
                self.dst[h] = None
                dst_release(x)
            if self.owned:
                o = self.owner[h]
                if o is not None:
                    self.owner[h] = None
                    self.owned -= 1
                    dep = self.v[h]
                    self.head = (h + 1) & m      # (consistent if the owner looks)
                    self.n = n - 1
                    o.tx_complete(self.tag[h], dep)
            h = (h + 1) & m
            n -= 1
        self.head = h
        self.n = n
        return n

    def next_owned(self) -> float:
        """When the first queued frame with an owner leaves (``inf`` if none)."""
        if self.owned:
            for i in range(self.n):
                k = (self.head + i) & self.mask
                if self.owner[k] is not None:
                    return self.v[k]
        return float("inf")

    def drain(self) -> None:
        """Complete every queued frame (the end of the run)."""
        self.retire(float("inf"))

    def dsts(self) -> list:
        """The dsts of the queued frames, oldest first (a copy)."""
        return [self.dst[(self.head + i) & self.mask] for i in range(self.n)]

    def _grow(self) -> None:
        size = self.mask + 1
        order = [(self.head + i) & self.mask for i in range(self.n)]
        dsts = [self.dst[k] for k in order]
        owners = [self.owner[k] for k in order]
        tags = [self.tag[k] for k in order]
        Ring._grow(self)
        extra = self.mask + 1 - len(order)
        self.dst = dsts + [None] * extra
        self.owner = owners + [None] * extra
        self.tag = tags + [0] * extra
        assert self.mask + 1 == 2 * size


class NetDevice:
    """One interface during a run (see the module docstring).

    Parameters
    ----------
    index : int
    dev : Device
    napi : bool              the driver polls (and the kernel has NAPI)
    softnet : SoftnetData    its CPU's backlog (used when not NAPI)
    txcap : int              TX ring + qdisc length, frames
    ledger : Ledger

    Attributes
    ----------
    rxq : TimeQueue          the RX ring (NAPI) or the CPU's backlog
    full_until, full_slots   a NAPI ring and the FIFO behind it are full until
                             ``full_until`` for frames needing no more than
                             ``full_slots`` FIFO slots (every such frame is
                             missed without further work)
    txq : TxQueue            the qdisc + TX ring: departures, dsts, owners
    link_free : float        when the wire is free
    host : object or None    the host beyond the wire (see routelab.hosts)
    host_mask : int          bit k set: the host sees transmitted packets of kind k
    rnbc, qdisc_drops, tx_packets : int   counters
    """

    def __init__(self, index: int, dev: Device, napi: bool, softnet: SoftnetData,
                 txcap: int, ledger: Ledger) -> None:
        self.index = index
        self.name = dev.name
        self.cpu = dev.cpu
        self.napi = bool(napi)
        self.pair = dev.pair
        self.ring = dev.ring
        # net_rx_action looks at its time limit between dev->poll calls: every
        # ``weight`` packets of a NAPI device (every packet of the backlog, as the
        # 2.4 loop does)
        self.weight = dev.weight if self.napi else 1
        self.softnet = softnet
        self.rxq = TimeQueue(self.ring + 2) if self.napi else softnet.backlog
        self.full_until = -math.inf
        self.full_slots = 0
        self.rnbc = 0
        self.txq = TxQueue(txcap)
        self.txcap = txcap
        self.link_free = 0.0
        self.qdisc_drops = 0
        self.tx_packets = 0
        self.host = None
        self.host_mask = 0
        self.ledger = ledger
        self.txc_timer = None

    # -- receive -------------------------------------------------------------------
    @cython.locals(ql=cython.Py_ssize_t, q=TimeQueue)
    def nic_rx(self, t: float, fifo: int) -> int:
        """Admission of a frame arriving at ``t`` that needs ``fifo`` FIFO slots.

        Kernel: the NAPI drivers' RX rings (e1000: a free descriptor, else
        the frame waits in the on-chip FIFO -- RNBC, reported as rx_dropped --
        else it is missed: MPC, rx_missed/rx_fifo); without NAPI the
        interrupt handler hands every frame to ``netif_rx``
        (:meth:`SoftnetData.netif_rx`).

        Returns 1 (admitted), 0 (missed by the NIC) or -1 (dropped by
        ``netif_rx``: the hard interrupt still ran).
        """
        if not self.napi:
            return 1 if self.softnet.netif_rx(t) else -1
        q = self.rxq
        if q.n >= self.ring:
            ql = q.retire(t)
            if ql >= self.ring:
                if ql >= self.ring + fifo:
                    # no descriptor and the NIC FIFO is full: missed (counted per
                    # device at the end of the window)
                    self.full_until = q.first()
                    self.full_slots = fifo
                    return 0
                # no free descriptor: the frame waits in the NIC FIFO
                self.rnbc += 1
        return 1

    # -- transmit ------------------------------------------------------------------
    @cython.locals(q=TxQueue, lf=cython.double, dep=cython.double)
    def dev_queue_xmit(self, now: float, wire: float, e, owner, tag: int) -> float:
        """Queue a frame (``wire`` seconds on the link) at ``now``; return when
        its last bit leaves, or NaN if the qdisc was full (``qdisc_drops``).

        Kernel: net/core/dev.c dev_queue_xmit, pfifo_fast, the driver's TX
        ring.  The frame holds ``e`` (its dst) until TX completion; ``owner``
        (a host's socket, with ``tag``) is told then.  A pair device has no
        queue: the frame is the peer's at once, its dst dropped and its owner
        told on the spot.
        """
        if self.pair:
            dst_release(e)             # kfree_skb at once (a None dst is no-op)
            if owner is not None:
                owner.tx_complete(tag, now)
            return now
        q = self.txq
        if q.n < self.txcap or q.retire(now) < self.txcap:
            lf = self.link_free
            dep = (lf if lf > now else now) + wire
            self.link_free = dep
            q.push(dep, e, owner, tag)
            if owner is not None:
                self._owned_pushed(dep)
            return dep
        self.qdisc_drops += 1
        return NAN

    def _owned_pushed(self, dep: float) -> None:
        # frames a host owns are completed on time (see the module docstring)
        t = self.txc_timer
        if t is not None and not (t.pending() and t.at <= dep):
            t.mod(dep)

    def tx_complete_timer(self, now: float) -> float:
        """The timer that completes owned frames on time: retire up to ``now``."""
        self.txq.retire(now)
        nxt = self.txq.next_owned()
        if nxt < math.inf:
            self.txc_timer.mod(nxt)
        return 0.0


@cython.locals(j=cython.Py_ssize_t, now=cython.double, dep=cython.double)
def dev_xmit_forwarded(od: NetDevice, lg: Ledger, sch: Schedule, pk: Packets, j: int,
                       now: float, e) -> float:
    """Forwarded packet ``j`` of ``pk``, its next hop resolved, goes to its
    output device ``od`` at ``now``: return its departure time (NaN if the
    qdisc refused it).

    Kernel: net/ipv4/ip_output.c ip_finish_output2 (the hh_output branch) ->
    net/core/dev.c dev_queue_xmit.  Then the packet's ending: ``forwarded``
    (its departure recorded, and a host beyond ``od`` that takes its kind
    gets it then: a delivery on the run's schedule ``sch``), or
    ``drop_qdisc`` (kfree_skb: ``dst_release`` of ``e``).  The one home of
    this tail, for packets forwarded during their own service and for
    packets a neighbour held until it resolved.  Its CPU cost was priced
    with the packet's service (``ip_output_plan``).
    """
    dep = od.dev_queue_xmit(now, pk.wire[j], e, None, 0)
    if dep == dep:
        pk.t_depart[j] = dep
        lg.drop(j, _O_FORWARDED)
        if od.host_mask and (od.host_mask >> pk.kind[j]) & 1:
            sch.deliver_at(dep, od.host, j)
    else:
        lg.drop(j, _O_QDISC)
        dst_release(e)                      # kfree_skb (a None dst: nothing held)
    return dep


@cython.locals(d=NetDevice, q=TxQueue)
def flush_tx(devices: list, now: float) -> int:
    """TX completions up to ``now`` on every device: free the skbs, release
    their dsts.  Reference counts are only *read* by the slow path, the GCs
    and the RCU callbacks, so completions are applied just before those run
    rather than after every packet (same result, less work)."""
    for d in devices:
        q = d.txq
        if q.n and q.first() <= now:
            q.retire(now)
    return 0
