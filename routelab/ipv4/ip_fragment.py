"""IPv4 fragmentation and reassembly (``net/ipv4/ip_fragment.c``, 2.4.22 / 2.6.11).

Two levels of model live here:

* :func:`fragment_plan` answers "how many fragments, and how big?" for whole
  numpy arrays of packets at once.  The engine's ``ip_output`` stage uses it;
  nothing in it depends on state, so it is vectorised.
* :func:`ip_fragment` and :class:`IpDefrag` work on real bytes.  ``IpDefrag``
  is the receiver's reassembler (the kernel's ``ipq`` queues) with its memory
  accounting, LRU evictor and reassembly timer; it is stateful and runs per
  fragment inside the engine loop.

Lengths follow one convention throughout: ``length``/``payload`` is the IP
payload (everything after the IP header, e.g. UDP header + data); the wire
size of a fragment is ``ihl + payload``.  Link-layer framing is not counted.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from routelab.errors import KnobError, RoutelabError

# --- Constants ---------------------------------------------------------------
#: Smallest MTU every IPv4 link must carry (RFC 791: 60-byte header + 8 bytes).
IPV4_MIN_MTU = 68
#: Largest IPv4 datagram: the 16-bit total-length field (RFC 791).
IP_MAX_PACKET = 65535
#: Minimum and maximum IP header length in bytes (4-bit IHL field, RFC 791).
IP_MIN_IHL, IP_MAX_IHL = 20, 60

#: Reassembly memory limits and timer; kernel.md §5 (``sysctl_ipfrag_*`` in
#: ip_fragment.c, identical in 2.4.22 and 2.6.11).
IPFRAG_HIGH_THRESH = 256 * 1024
IPFRAG_LOW_THRESH = 192 * 1024
IPFRAG_TIME = 30.0  # seconds (IP_FRAG_TIME = 30 * HZ)

#: Assumption: sizeof(struct sk_buff) on i386 of the 2.4/2.6 era, believed to
#: be 160-200 bytes (unverified); we take 176.
SKB_STRUCT_BYTES = 176
#: Assumption: bytes an skb costs beyond its packet data: the struct plus ~32
#: bytes of link-layer headroom and alignment slack (senders allocate
#: ``len + hh_len + 15``).  Real NIC drivers receive into full-MTU buffers, so
#: a small received fragment costs more than this; callers may pass their
#: own ``truesize``.
SKB_TRUESIZE_OVERHEAD = SKB_STRUCT_BYTES + 32
#: Assumption: sizeof(struct ipq) on i386, charged to reassembly memory per
#: queue by the kernel (ip_frag_create).  Estimated from the struct layout
#: (list links, addresses, timer, lengths), about 100 bytes; unverified.
IPQ_STRUCT_BYTES = 104


def skb_truesize(data_len: int) -> int:
    """Estimated ``skb->truesize`` for an skb holding ``data_len`` bytes.

    Kernel: include/linux/skbuff.h alloc_skb truesize (2.4.22, 2.6.11).  The
    model ignores cache-line rounding of the data area.
    """
    return data_len + SKB_TRUESIZE_OVERHEAD


class FragmentNeeded(RoutelabError):
    """DF was set and the datagram does not fit the MTU.

    The kernel drops the packet, counts ``FragFails`` and sends ICMP
    destination-unreachable / fragmentation-needed carrying ``mtu``.
    """

    def __init__(self, mtu: int, length: int) -> None:
        self.mtu = mtu
        self.length = length
        super().__init__(f"DF set and {length}-byte datagram exceeds mtu {mtu}: frag needed")


# --- Vectorised plan -----------------------------------------------------------


class FragmentPlan(NamedTuple):
    """Fragment counts and sizes for an array of datagrams (see :func:`fragment_plan`)."""

    length: NDArray[np.int64]  #: IP payload bytes of each datagram
    n_frags: NDArray[np.int64]  #: fragments per datagram (1 = not fragmented)
    chunk: NDArray[np.int64]  #: payload bytes of every non-last fragment (= length if 1)
    last: NDArray[np.int64]  #: payload bytes of the last (or only) fragment
    ihl: NDArray[np.int64]  #: IP header bytes carried by every fragment

    @property
    def fragmented(self) -> NDArray[np.bool_]:
        """True where the datagram must be fragmented (DF set here means frag-needed)."""
        return self.n_frags > 1

    def total_wire_bytes(self) -> NDArray[np.int64]:
        """IP bytes on the wire per datagram, all fragments together."""
        return self.length + self.n_frags * self.ihl

    def fragments(self) -> tuple[NDArray[np.int64], ...]:
        """Flatten to one row per fragment, in ascending offset order.

        Returns
        -------
        owner, offset, payload, wire : ndarray of int64
            Index of the datagram each fragment belongs to, its offset in
            bytes, its payload bytes and its wire bytes (``ihl + payload``).
        """
        n = self.n_frags.ravel()
        owner = np.repeat(np.arange(n.size), n)
        first_row = np.cumsum(n) - n
        k = np.arange(owner.size) - first_row[owner]
        chunk = self.chunk.ravel()[owner]
        offset = k * chunk
        payload = np.where(k == n[owner] - 1, self.last.ravel()[owner], chunk)
        return owner, offset, payload, payload + self.ihl.ravel()[owner]

    def payload_sizes(self, i: int = 0) -> list[int]:
        """Payload bytes of each fragment of datagram ``i``, ascending offsets."""
        n, chunk = int(self.n_frags.flat[i]), int(self.chunk.flat[i])
        return [chunk] * (n - 1) + [int(self.last.flat[i])]


def _check_range(name: str, arr: NDArray[np.int64], lo: int, hi: int) -> None:
    bad = (arr < lo) | (arr > hi)
    if bad.any():
        raise KnobError(name, int(arr[bad].flat[0]), f"an integer in [{lo}, {hi}]")


def fragment_plan(length: ArrayLike, mtu: ArrayLike, ihl: ArrayLike = IP_MIN_IHL) -> FragmentPlan:
    """How IP cuts datagrams of ``length`` payload bytes for a link of ``mtu``.

    Kernel: net/ipv4/ip_output.c ip_fragment, ip_build_xmit_slow (2.4.22) and
    ip_append_data (2.6.11) all cut the same way: a datagram that fits
    (``ihl + length <= mtu``) goes whole; otherwise every fragment but the
    last carries ``(mtu - ihl) // 8 * 8`` payload bytes (offsets count in
    8-byte units) and the last carries the rest.

    Simplified: every fragment carries the same header length; the kernel
    copies only "copied" IP options into later fragments.  That the two UDP
    senders split exactly like ip_fragment is our reading of their
    ``maxfraglen`` arithmetic, not separately verified.

    Parameters
    ----------
    length : int or array of int
        IP payload bytes (everything after the IP header), ``>= 0``.
    mtu : int or array of int
        Link MTU in bytes, ``68..65535``; broadcasts against ``length``.
    ihl : int or array of int
        IP header bytes, ``20..60``.

    Returns
    -------
    FragmentPlan
        ``n_frags``, ``chunk`` and ``last`` arrays; see :meth:`FragmentPlan.fragments`
        for per-fragment wire sizes.
    """
    length_a, mtu_a, ihl_a = np.broadcast_arrays(
        np.asarray(length, dtype=np.int64),
        np.asarray(mtu, dtype=np.int64),
        np.asarray(ihl, dtype=np.int64),
    )
    _check_range("mtu", mtu_a, IPV4_MIN_MTU, IP_MAX_PACKET)
    _check_range("ihl", ihl_a, IP_MIN_IHL, IP_MAX_IHL)
    if (ihl_a % 4).any():
        raise KnobError("ihl", int(ihl_a[ihl_a % 4 != 0].flat[0]), "a multiple of 4 in [20, 60]")
    bad = (length_a < 0) | (length_a + ihl_a > IP_MAX_PACKET)
    if bad.any():
        raise KnobError("length", int(length_a[bad].flat[0]), "an integer in [0, 65535 - ihl]")

    room = mtu_a - ihl_a
    fits = length_a <= room
    chunk = np.where(fits, length_a, room & ~7)
    n_frags = np.where(fits, 1, -(-length_a // np.maximum(chunk, 1)))
    last = np.asarray(length_a - (n_frags - 1) * chunk)
    return FragmentPlan(length_a, n_frags, chunk, last, ihl_a)


# --- Byte-level datagrams and fragments ----------------------------------------


@dataclass(slots=True)
class IpDatagram:
    """An unfragmented IPv4 datagram (header fields the model needs + payload)."""

    id: int
    saddr: int
    daddr: int
    proto: int
    payload: bytes
    df: bool = False
    ttl: int = 64


@dataclass(slots=True)
class IpFragment:
    """One IPv4 fragment on the wire.

    ``offset`` is in bytes (a multiple of 8); ``truesize`` is the skb memory it
    costs the receiver, estimated with :func:`skb_truesize` when left at 0.
    """

    id: int
    saddr: int
    daddr: int
    proto: int
    offset: int
    more_fragments: bool
    payload: bytes
    truesize: int = 0
    ttl: int = 64
    df: bool = False
    ihl: int = IP_MIN_IHL

    def __post_init__(self) -> None:
        if self.truesize <= 0:
            self.truesize = skb_truesize(self.ihl + len(self.payload))

    @property
    def wire_size(self) -> int:
        """IP bytes on the wire (header + payload)."""
        return self.ihl + len(self.payload)


def ip_fragment(
    dgram: IpDatagram | IpFragment, mtu: int, order: str = "ascending", ihl: int = IP_MIN_IHL
) -> list[IpFragment]:
    """Cut ``dgram`` into fragments that fit ``mtu``.

    Kernel: net/ipv4/ip_output.c ip_fragment (2.4.22, 2.6.11; ascending
    offsets) and ip_build_xmit_slow (2.4.x UDP sender; ``order="descending"``
    builds the highest offset first).  Sizes come from :func:`fragment_plan`.

    A datagram that fits is returned as one packet with offset 0 and MF clear.

    ``dgram`` may itself be a fragment (a router forwarding it to a link with a
    smaller MTU): the pieces start at its offset, and if it had MF set every
    piece has MF, the last one included; if it was the last fragment, only
    its last piece has MF clear.  Kernel: net/ipv4/ip_output.c ip_fragment
    (2.6.20, sagsango/linux-2.6.20; 2.4.24 the same): the starting offset is
    read from iph->frag_off, and MF is kept "on each bit" when the fragment
    being cut is not the last.  A fragment that fits is returned unchanged.

    Raises
    ------
    FragmentNeeded
        DF is set and the datagram does not fit (kernel: FragFails, ICMP
        frag-needed).
    KnobError
        ``order`` is not "ascending"/"descending", or ``mtu``/``ihl`` invalid.
    """
    if order not in ("ascending", "descending"):
        raise KnobError("order", order, "'ascending' or 'descending'")
    plan = fragment_plan(len(dgram.payload), mtu, ihl)
    if dgram.df and int(plan.n_frags[()]) > 1:
        raise FragmentNeeded(mtu, ihl + len(dgram.payload))
    refrag = isinstance(dgram, IpFragment)
    if refrag and int(plan.n_frags[()]) == 1:
        return [dgram]
    base = dgram.offset if refrag else 0
    not_last = dgram.more_fragments if refrag else False
    sizes = plan.payload_sizes()
    frags = []
    offset = 0
    for i, size in enumerate(sizes):
        frags.append(
            IpFragment(
                dgram.id, dgram.saddr, dgram.daddr, dgram.proto, base + offset,
                i < len(sizes) - 1 or not_last, dgram.payload[offset : offset + size],
                ttl=dgram.ttl, df=dgram.df, ihl=ihl,
            )
        )  # fmt: skip
        offset += size
    if order == "descending":
        frags.reverse()
    return frags


# --- Reassembly ------------------------------------------------------------------

FragKey = tuple[int, int, int, int]  # (id, proto, saddr, daddr), as ip_find matches


class Expired(NamedTuple):
    """A reassembly queue killed by its timer (see :meth:`IpDefrag.expire`)."""

    key: FragKey
    deadline: float
    icmp_time_exceeded: bool  #: True if the offset-0 fragment had arrived


class _Ipq:
    """One reassembly queue (the kernel's ``struct ipq``).

    ``starts``/``ends``/``datas``/``sizes`` are parallel lists, sorted by
    offset and never overlapping; ``meat`` is the payload bytes they hold and
    ``length`` the datagram length known so far.
    """

    __slots__ = (
        "datas", "deadline", "df", "ends", "first_in", "ihl", "key", "last_in", "length",
        "meat", "mem", "seq", "sizes", "starts", "ttl",
    )  # fmt: skip

    def __init__(self, key: FragKey, seq: int, deadline: float) -> None:
        self.key, self.seq, self.deadline = key, seq, deadline
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.datas: list[bytes] = []
        self.sizes: list[int] = []  # truesize of each queued skb
        self.length = self.meat = 0
        self.first_in = self.last_in = False
        self.mem = IPQ_STRUCT_BYTES
        self.ttl, self.ihl, self.df = 64, IP_MIN_IHL, False


def _int_knob(name: str, value: object, lo: int, hi: int | None = None) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or value < lo or (hi is not None and value > hi):
        valid = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
        raise KnobError(name, value, valid)
    return int(value)


class IpDefrag:
    """The receiver's IPv4 reassembler: ``ipq`` queues, memory limit, timer.

    Kernel: net/ipv4/ip_fragment.c ip_defrag, ip_find, ip_frag_queue,
    ip_frag_reasm, ip_evictor, ip_expire (2.4.22, 2.6.11).

    Time is whatever the caller passes as ``now`` (seconds, non-decreasing);
    no threads.  Each queue's timer is set once, ``ipfrag_time`` after the
    queue is created, and runs lazily at the next :meth:`ip_defrag` or
    :meth:`expire` call with ``now >= deadline``.  Memory is the sum of the
    queued fragments' ``truesize`` plus :data:`IPQ_STRUCT_BYTES` per queue.
    The knobs may be changed at any time (validated); as with the sysctls, a
    new ``ipfrag_time`` applies to queues created afterwards.

    Simplified: the 64-bucket hash, its secret rebuild and the CPU cost of
    walking it are not modelled (a dict keyed by ``(id, proto, saddr,
    daddr)`` stands in), and queue allocation never fails.

    Overlap rule (as the kernel): bytes already queued *before* a new
    fragment's start win, so the new fragment's head is trimmed (dropped if
    nothing is left: a duplicate); queued fragments that start inside the
    new one lose their overlapped head, or are freed if wholly covered.  A
    non-last fragment whose length is not a multiple of 8 is cut down to
    one; inconsistent last fragments are discarded (counted in
    ``discarded``, which is not an SNMP counter).

    Parameters
    ----------
    ipfrag_high_thresh, ipfrag_low_thresh : int
        Bytes; when a fragment arrives with memory above high, queues are
        evicted until memory is at most low.  ``0 <= low <= high``.
    ipfrag_time : float
        Seconds a queue may wait for its missing fragments.
    """

    __slots__ = (
        "_clock_timer", "_high", "_low", "_next_deadline", "_on_expire", "_queues", "_seq",
        "_time", "_timers", "discarded",
        "evicted", "icmp_time_exceeded", "mem", "snmp",
    )  # fmt: skip

    def __init__(
        self,
        ipfrag_high_thresh: int = IPFRAG_HIGH_THRESH,
        ipfrag_low_thresh: int = IPFRAG_LOW_THRESH,
        ipfrag_time: float = IPFRAG_TIME,
    ) -> None:
        self._high = _int_knob("ipfrag_high_thresh", ipfrag_high_thresh, 0)
        self._low = 0
        self.ipfrag_low_thresh = ipfrag_low_thresh
        self.ipfrag_time = ipfrag_time
        #: SNMP Ip counters as in /proc/net/snmp.
        self.snmp = {"ReasmReqds": 0, "ReasmOKs": 0, "ReasmFails": 0, "ReasmTimeout": 0}
        self.mem = 0  #: bytes in use (ip_frag_mem)
        self.icmp_time_exceeded = 0  #: ICMP time-exceeded messages that would be sent
        self.evicted = 0  #: queues killed by ip_evictor (also in ReasmFails)
        self.discarded = 0  #: fragments dropped by ip_frag_queue (no SNMP counter)
        self._queues: OrderedDict[FragKey, _Ipq] = OrderedDict()
        self._timers: list[tuple[float, int, FragKey]] = []
        self._next_deadline = float("inf")
        self._seq = 0
        self._clock_timer = None
        self._on_expire = None

    def arm(self, clock, on_expire=None, cpu: int = 0, name: str = "ip_expire",
            raw: bool = False) -> None:
        """Run the reassembly timers on ``clock`` (a ``routelab.sim.clock.Clock``)
        instead of lazily: a timer is kept armed for the earliest queue's
        deadline, so a queue whose last fragment never comes expires on time
        even if nothing else arrives.  ``on_expire(now, expired)`` (optional)
        is told of each expiry with the list of :class:`Expired` queues and
        returns the CPU seconds its handling took (the timer's cost, charged
        on the run's CPU ``cpu``; ``raw=True`` for a reassembler on another
        machine: nothing is charged).

        Kernel: net/ipv4/ip_fragment.c ip_frag_create (``mod_timer`` of the
        queue's own timer, ``ipfrag_time`` after creation) and ip_expire
        (2.4.22, 2.6.11).  One clock timer stands for the per-queue timers:
        it is always set to the earliest of their deadlines."""
        self._on_expire = on_expire
        self._clock_timer = clock.timer(name, self._fire, cpu, raw=raw)
        self._rearm()

    def _fire(self, now: float) -> float:
        fired = self.expire(now)
        w = 0.0
        if fired and self._on_expire is not None:
            w = float(self._on_expire(now, fired))
        return w

    def _rearm(self) -> None:
        t = self._clock_timer
        if t is not None:
            # (a stale deadline may fire early: expire() then kills nothing)
            if self._next_deadline == float("inf"):
                t.stop()
            elif not (t.pending() and t.at == self._next_deadline):
                t.mod(self._next_deadline)

    @property
    def ipfrag_high_thresh(self) -> int:
        """Memory (bytes) above which an arriving fragment triggers the evictor."""
        return self._high

    @ipfrag_high_thresh.setter
    def ipfrag_high_thresh(self, value: int) -> None:
        self._high = _int_knob("ipfrag_high_thresh", value, self._low)

    @property
    def ipfrag_low_thresh(self) -> int:
        """Memory (bytes) the evictor frees down to."""
        return self._low

    @ipfrag_low_thresh.setter
    def ipfrag_low_thresh(self, value: int) -> None:
        self._low = _int_knob("ipfrag_low_thresh", value, 0, self._high)

    @property
    def ipfrag_time(self) -> float:
        """Reassembly timeout in seconds."""
        return self._time

    @ipfrag_time.setter
    def ipfrag_time(self, value: float) -> None:
        ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
        if not ok or not 0 < value < 1e9:
            raise KnobError("ipfrag_time", value, "a number of seconds > 0")
        self._time = float(value)

    @property
    def queue_count(self) -> int:
        """Reassembly queues alive now (``ip_frag_nqueues``)."""
        return len(self._queues)

    def queue_keys(self) -> list[FragKey]:
        """Keys of the live queues, least recently fed first (eviction order)."""
        return list(self._queues)

    def stats(self) -> dict[str, int]:
        """Flat snapshot: SNMP counters plus ``mem``, ``queues`` and model counters."""
        return {
            **self.snmp,
            "mem": self.mem,
            "queues": len(self._queues),
            "icmp_time_exceeded": self.icmp_time_exceeded,
            "evicted": self.evicted,
            "discarded": self.discarded,
        }

    @property
    def next_deadline(self) -> float:
        """Earliest pending timer (may be a stale one; ``inf`` if none)."""
        return self._next_deadline

    def ip_defrag(self, frag: IpFragment, now: float) -> IpDatagram | None:
        """Queue one fragment; return the datagram when it is complete.

        Kernel: net/ipv4/ip_fragment.c ip_defrag (2.4.22, 2.6.11).  Order as
        the kernel: run due timers (lazily here), count ReasmReqds, run
        :meth:`ip_evictor` if memory is above ``ipfrag_high_thresh``, find
        or create the queue, queue the fragment, reassemble when the first
        and last fragments are in and no bytes are missing.

        A packet that is not a fragment (offset 0, MF clear) is returned as a
        datagram at once without touching counters; the kernel never calls
        ip_defrag for it.
        """
        if now >= self._next_deadline:
            self.expire(now)
        if frag.offset == 0 and not frag.more_fragments:
            return IpDatagram(
                frag.id, frag.saddr, frag.daddr, frag.proto, frag.payload, frag.df, frag.ttl
            )
        self.snmp["ReasmReqds"] += 1
        if self.mem > self._high:
            self.ip_evictor()
        key = (frag.id, frag.proto, frag.saddr, frag.daddr)
        q = self._queues.get(key)
        if q is None:
            q = self._ip_frag_create(key, now)
        if not self._ip_frag_queue(q, frag):
            self.discarded += 1
            return None
        self._queues.move_to_end(key)  # LRU: most recently fed queue last
        if q.first_in and q.last_in and q.meat == q.length:
            return self._ip_frag_reasm(q)
        return None

    def ip_evictor(self) -> None:
        """Kill whole queues, least recently fed first, until memory <= low.

        Kernel: net/ipv4/ip_fragment.c ip_evictor (2.4.22, 2.6.11), LRU list
        by Patrick McHardy.  Each killed queue counts one ReasmFails.
        """
        queues = self._queues
        while self.mem > self.ipfrag_low_thresh and queues:
            _, q = queues.popitem(last=False)
            self.mem -= q.mem
            self.snmp["ReasmFails"] += 1
            self.evicted += 1

    def expire(self, now: float) -> list[Expired]:
        """Run every reassembly timer due at ``now``; return the queues killed.

        Kernel: net/ipv4/ip_fragment.c ip_expire (2.4.22, 2.6.11).  Each
        expiry counts ReasmTimeout and ReasmFails; ICMP time-exceeded
        (fragment reassembly time exceeded) would be sent only if the
        offset-0 fragment had arrived.
        """
        fired: list[Expired] = []
        timers, queues, snmp = self._timers, self._queues, self.snmp
        while timers and timers[0][0] <= now:
            deadline, seq, key = heapq.heappop(timers)
            q = queues.get(key)
            if q is None or q.seq != seq:
                continue  # queue already reassembled or evicted
            del queues[key]
            self.mem -= q.mem
            snmp["ReasmTimeout"] += 1
            snmp["ReasmFails"] += 1
            icmp = q.first_in and bool(q.starts)
            self.icmp_time_exceeded += icmp
            fired.append(Expired(key, deadline, icmp))
        self._next_deadline = timers[0][0] if timers else float("inf")
        self._rearm()
        return fired

    # -- internals named after the kernel's helpers --------------------------------

    def _ip_frag_create(self, key: FragKey, now: float) -> _Ipq:
        self._seq += 1
        q = _Ipq(key, self._seq, now + self.ipfrag_time)
        self._queues[key] = q
        self.mem += q.mem
        heapq.heappush(self._timers, (q.deadline, q.seq, key))
        self._next_deadline = min(self._next_deadline, q.deadline)
        self._rearm()
        return q

    def _ip_frag_queue(self, q: _Ipq, frag: IpFragment) -> bool:
        """Insert ``frag`` into ``q``, trimming overlaps; False if discarded."""
        start, data = frag.offset, frag.payload
        if start < 0 or start & 7:
            raise KnobError("offset", start, "a non-negative multiple of 8")
        end = start + len(data)
        if not frag.more_fragments:
            if end < q.length or (q.last_in and end != q.length):
                return False  # last fragment disagrees with what is queued
            q.last_in, q.length = True, end
        else:
            end &= ~7
            if end > q.length:
                if q.last_in:
                    return False  # data beyond the known end
                q.length = end
        if end <= start:
            return False
        orig_start = start
        starts, ends, datas, sizes = q.starts, q.ends, q.datas, q.sizes
        i = bisect_left(starts, start)  # first queued fragment at or after start
        if i and ends[i - 1] > start:  # older bytes before us win
            start = ends[i - 1]
            if end <= start:
                return False  # duplicate
        while i < len(starts) and starts[i] < end:  # we win over later bytes
            if ends[i] <= end:
                q.meat -= ends[i] - starts[i]
                q.mem -= sizes[i]
                self.mem -= sizes[i]
                del starts[i], ends[i], datas[i], sizes[i]
            else:
                q.meat -= end - starts[i]
                datas[i] = datas[i][end - starts[i] :]
                starts[i] = end
                break
        starts.insert(i, start)
        ends.insert(i, end)
        datas.insert(i, data[start - orig_start : end - orig_start])
        sizes.insert(i, frag.truesize)
        q.meat += end - start
        q.mem += frag.truesize
        self.mem += frag.truesize
        if orig_start == 0:
            q.first_in = True
            q.ttl, q.ihl, q.df = frag.ttl, frag.ihl, frag.df
        return True

    def _ip_frag_reasm(self, q: _Ipq) -> IpDatagram | None:
        del self._queues[q.key]
        self.mem -= q.mem
        if q.ihl + q.length > IP_MAX_PACKET:
            self.snmp["ReasmFails"] += 1  # kernel: "Oversized IP packet"
            return None
        self.snmp["ReasmOKs"] += 1
        id_, proto, saddr, daddr = q.key
        return IpDatagram(id_, saddr, daddr, proto, b"".join(q.datas), q.df, q.ttl)
