"""IPv4 fragmentation and reassembly (``net/ipv4/ip_fragment.c``; receivers
2.4.19, 2.4.22, Solaris and 6.x).

Two levels of model live here:

* :func:`fragment_plan` answers "how many fragments, and how big?" for whole
  numpy arrays of packets at once.  The engine's ``ip_output`` stage uses it;
  nothing in it depends on state, so it is vectorised.
* :func:`ip_fragment` and :class:`IpDefrag` work per datagram / fragment, on
  real bytes or (fast) on sizes only.  ``IpDefrag`` is a receiver's
  reassembler (the kernel's ``ipq`` queues) with its memory accounting, its
  limit rule (2.4.19's bucket sweep, 2.4.22's LRU, Solaris's prune, 6.x's
  refusal; :data:`RECEIVERS`) and its reassembly timers; it is stateful and
  runs per fragment inside a host (docs/story3-reassembly.md).

Lengths follow one convention throughout: ``length``/``payload`` is the IP
payload (everything after the IP header, e.g. UDP header + data); the wire
size of a fragment is ``ihl + payload``.  Link-layer framing is not counted.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
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

#: Reassembly memory limits and timer of 2.4 (``sysctl_ipfrag_*`` in
#: net/ipv4/ip_fragment.c, the same in 2.4.19, 2.4.20, 2.4.22); the other
#: receivers' are in :data:`RECEIVERS`.
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
#: sizeof(struct ipq) in 2.4.22 on i386 SMP, charged to reassembly memory per
#: queue (frag_alloc_queue): counted from the struct in nslu2/linux-2.4.x @
#: 171ea0e net/ipv4/ip_fragment.c -- next, saddr, daddr, id, protocol,
#: last_in, lru_list, fragments, len, meat, lock, refcnt, a 20-byte
#: timer_list, pprev, iif, stamp: 80 bytes (72 in 2.4.19, without lru_list).
#: The default receiver's (``linux-2.4.22``); see :data:`RECEIVERS`.
IPQ_STRUCT_BYTES = 80


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
    #: IP payload bytes; -1 (default) means ``len(payload)``.  A datagram
    #: reassembled from size-only fragments has ``payload == b""`` and its
    #: length here.
    size: int = -1
    #: the sender's own number for the datagram (the scenario's ``tag``), -1
    #: if none; kept by :func:`ip_fragment` and by reassembly
    tag: int = -1
    #: True if reassembly glued fragments of *different* sender datagrams
    #: (tags differ: an IP ID reused while an older queue lived).  The
    #: kernel cannot tell; the UDP checksum would then fail.
    mixed: bool = False

    def __post_init__(self) -> None:
        if self.size < 0:
            self.size = len(self.payload)


@dataclass(slots=True)
class IpFragment:
    """One IPv4 fragment on the wire.

    ``offset`` is in bytes (a multiple of 8); ``truesize`` is the skb memory it
    costs the receiver, estimated with :func:`skb_truesize` when left at 0
    (a receiver may charge its own, see ``IpDefrag(truesize=...)``).

    Size-only mode (fast, for long runs): ``payload=b""`` and ``size`` the
    payload length; the reassembler then tracks lengths and offsets only.
    With bytes (``size`` left at -1) it also rebuilds the payload.
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
    #: payload bytes; -1 (default) means ``len(payload)`` (see the class doc)
    size: int = -1
    #: the sender's datagram number (``IpDatagram.tag``), -1 if none
    tag: int = -1

    def __post_init__(self) -> None:
        if self.size < 0:
            self.size = len(self.payload)
        elif self.payload and len(self.payload) != self.size:
            raise KnobError("size", self.size, f"len(payload) = {len(self.payload)} or -1")
        if self.truesize <= 0:
            self.truesize = skb_truesize(self.ihl + self.size)

    @property
    def wire_size(self) -> int:
        """IP bytes on the wire (header + payload)."""
        return self.ihl + self.size


def ip_fragment(
    dgram: IpDatagram | IpFragment, mtu: int, order: str = "ascending", ihl: int = IP_MIN_IHL
) -> list[IpFragment]:
    """Cut ``dgram`` into fragments that fit ``mtu``.

    Kernel: net/ipv4/ip_output.c ip_fragment (2.4.22, 2.6.11; ascending
    offsets) and ip_build_xmit_slow (2.4.x UDP sender; ``order="descending"``
    builds the highest offset first).  Sizes come from :func:`fragment_plan`.

    A datagram that fits is returned as one packet with offset 0 and MF clear.
    A size-only datagram (``payload=b""``, ``size > 0``) gives size-only
    fragments.

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
    light = not dgram.payload and dgram.size > 0  # size-only: pieces carry sizes
    plan = fragment_plan(dgram.size, mtu, ihl)
    if dgram.df and int(plan.n_frags[()]) > 1:
        raise FragmentNeeded(mtu, ihl + dgram.size)
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
                ttl=dgram.ttl, df=dgram.df, ihl=ihl, size=size if light else -1,
                tag=dgram.tag,
            )
        )  # fmt: skip
        offset += size
    if order == "descending":
        frags.reverse()
    return frags


# --- Reassembly ------------------------------------------------------------------
#
# One reassembler, four receivers.  What differs between them is in RECEIVERS
# (limits, timer, queue size, driver truesize) and in three rules the class
# switches on: what happens when memory is over the limit (``evictor``), how a
# bad or overlapping fragment is handled (``overlap``), and whether the 6.x
# ``ipfrag_max_dist`` check runs.


@dataclass(frozen=True, slots=True)
class Receiver:
    """A receiver kind's defaults and rules (a row of :data:`RECEIVERS`).

    Attributes
    ----------
    name : str
    high, low : int
        ``ipfrag_high_thresh`` / ``ipfrag_low_thresh`` defaults (bytes); for
        Solaris ``high`` is ``ip_reass_queue_bytes`` and ``low`` is unused.
    time : float
        Reassembly timeout, seconds from the queue's creation.
    evictor : str
        ``"sweep"`` (2.4.16-2.4.20 ``ip_evictor`` over the 64 hash buckets),
        ``"lru"`` (2.4.22), ``"prune"`` (Solaris ``ill_frag_prune``) or
        ``"refuse"`` (6.x ``inet_frag_find``: no eviction).
    overlap : str
        ``"trim"`` (2.4, Solaris: overlaps are cut, a bad fragment is dropped
        alone) or ``"kill"`` (6.x: a duplicate is dropped, any other overlap
        or bad fragment kills the whole queue, one ReasmFails).
    qsize : int
        Bytes charged per queue (``sizeof(struct ipq)``).
    rx_truesize : int
        Bytes one received frame costs (``skb->truesize`` of what the driver
        hands up), used with ``IpDefrag(truesize="receiver")``.
    max_dist : int
        6.x ``ipfrag_max_dist`` default (0: no such rule).
    hz : int
        Timer ticks per second (0: timers exact, Solaris).
    wheel : bool
        Timers go through the 4.8+ timer wheel, which rounds a timer's
        expiry *up* to its level's granularity (see :func:`wheel_expiry`).
    source : str
        Where the rules come from.
    """

    name: str
    high: int
    low: int
    time: float
    evictor: str
    overlap: str
    qsize: int
    rx_truesize: int
    max_dist: int
    source: str
    hz: int = 0
    wheel: bool = False


#: The receivers the scenarios offer, with their defaults and rules.
#:
#: ``linux-2.4.19`` -- net/ipv4/ip_fragment.c of 2.4.19
#: (bticino/linux-2.4.19-rmk7-pxa2-btweb @ d4022a4, the commit that adds the
#: tree's net/; identical to 2.4.20, sndrzt/linux-2.4.20.lite @ 426c5ed):
#: sysctl_ipfrag_high_thresh 256*1024, low 192*1024, IP_FRAG_TIME 30 s armed
#: once in ip_frag_intern; IPQ_HASHSZ 64 and the unkeyed XOR ``ipqhashfn``
#: (no secret in these versions: the jhash with ``ipfrag_hash_rnd`` and its
#: rebuild every ``ipfrag_secret_interval`` came with the LRU, 2.4.22); the
#: evictor sweeps the buckets (see :meth:`IpDefrag._sweep`).
#: sizeof(struct ipq) = 72 B on i386 SMP (counted from the struct: 15 fields,
#: a 20-B timer_list, a 4-B spinlock).
#:
#: ``linux-2.4.22`` -- the same file in nslu2/linux-2.4.x @ 171ea0e: a global
#: ``ipq_lru_list`` (Patrick McHardy), queues moved to its tail on every
#: fragment queued, ip_evictor kills from its head; struct ipq gains a
#: list_head (80 B).
#:
#: ``solaris`` -- sources.md [SUN96] (ip.c 1.108, 96/10/18; Solaris 2.6 era)
#: and [OSOL]: ``ip_reass_queue_bytes`` 1,000,000 B per interface,
#: IP_FRAG_TIMEOUT 60 s; a fragment that would take the interface past the
#: cap makes ``ill_frag_prune`` free whole queues, oldest created first,
#: until it fits.  UNVERIFIED (not read here): Solaris 8/9's own source, the
#: per-queue overhead (taken as 0), which MIB counters pruning and timeouts
#: bump (taken: one ipReasmFails per queue freed; the timed-out count is a
#: model counter: MIB-II's ipReasmTimeout is the timeout *value*), and the
#: overlap rule (taken as 2.4's trim).
#:
#: ``linux-6.x`` -- sources.md "Today's kernel (6.x) receiver" ([ML25]:
#: torvalds/linux net/ipv4/inet_fragment.c @ ca0359df45a5, ip_fragment.c @
#: eb0dfc0ef195; the tree was too large to fetch here, so the rules follow
#: sources.md's reading): per netns 4 MiB high, 3 MiB low (unused by
#: reassembly), 30 s, ipfrag_max_dist 64; inet_frag_find refuses every
#: fragment while mem > high (one ReasmFails each), there is no evictor.
#:
#: ``rx_truesize`` is ASSUMED (it is the driver's): 2.4 -- a driver that
#: receives every frame into a full buffer, dev_alloc_skb(1536) = 1552 B of
#: data + a 160-B struct sk_buff (sources.md's count for 2.4.19 i386) =
#: 1712 B, whatever the fragment's size (sources.md: ~1.7-2.2 KB); Solaris --
#: a 2 KB receive dblk per frame; 6.x -- the 2944 B per 1500-B frame of the
#: source's own comment.  6.x ``qsize``: the comment's ~200 B.
RECEIVERS: dict[str, Receiver] = {
    "linux-2.4.19": Receiver("linux-2.4.19", 256 * 1024, 192 * 1024, 30.0, "sweep", "trim",
                             72, 1712, 0, "2.4.19/2.4.20 net/ipv4/ip_fragment.c", 100),
    "linux-2.4.22": Receiver("linux-2.4.22", IPFRAG_HIGH_THRESH, IPFRAG_LOW_THRESH, IPFRAG_TIME,
                             "lru", "trim", IPQ_STRUCT_BYTES, 1712, 0,
                             "2.4.22 net/ipv4/ip_fragment.c", 100),
    "solaris": Receiver("solaris", 1_000_000, 0, 60.0, "prune", "trim", 0, 2048, 0,
                        "sources.md [SUN96][OSOL] (Solaris 2.6-era ip.c)"),
    "linux-6.x": Receiver("linux-6.x", 4 * 1024 * 1024, 3 * 1024 * 1024, 30.0, "refuse",
                          "kill", 200, 2944, 64,
                          "sources.md [ML25] (inet_fragment.c, ip_fragment.c, 2025)", 250, True),
}
#: The receiver names, in the order the scenarios list them.
RECEIVERS_ORDER = ("linux-2.4.19", "linux-2.4.22", "solaris", "linux-6.x")

#: 2.4's IPQ_HASHSZ: the reassembly hash's buckets (the sweep evictor walks them).
IPQ_HASHSZ = 64

#: What became of a fragment that ip_defrag took (ReasmReqds): ``delivered``
#: (in a rebuilt datagram), or dropped -- ``refused`` (6.x, over the limit),
#: ``evicted`` (its queue killed by the evictor / pruned), ``expired`` (its
#: queue timed out), ``duplicate`` (nothing new), ``discarded`` (a bad
#: fragment dropped alone: 2.4's ``goto err``), ``killed`` (in a queue a bad
#: or overlapping fragment killed: 6.x ``discard_qp``, the bad one included),
#: ``overlapped`` (queued, then wholly covered by a later fragment: 2.4's
#: trim), ``too_far`` (6.x max_dist reset), ``oversize`` (its datagram would
#: exceed 65,535 B).  Every other fragment is still queued.
FATES = ("delivered", "refused", "evicted", "expired", "duplicate", "discarded", "killed",
         "overlapped", "too_far", "oversize")


#: The timer wheel (kernel/time/timer.c since 4.8): 64 buckets per level,
#: each level 8 times coarser than the one below.
LVL_BITS, LVL_CLK_SHIFT = 6, 3


def wheel_bucket(expires: int, delta: int) -> int:
    """The jiffy at which a timer armed for jiffy ``expires``, ``delta``
    jiffies ahead, really fires: ``((expires >> shift) + 1) << shift`` at the
    level holding ``delta``.

    Kernel: kernel/time/timer.c calc_wheel_index / calc_index (4.8+, Thomas
    Gleixner's non-cascading wheel): level n holds deltas from
    ``63 << 3(n-1)`` jiffies up, with a granularity of ``8**n`` jiffies, and
    the bucket is chosen rounding *up* so that a timer never fires early.
    At HZ 250 a 30-s reassembly timer (7,500 jiffies) sits at level 3 and
    fires up to 2.048 s late, all the queues of one 512-jiffy slot together;
    a 5-s one at level 2 (up to 256 ms late).  Read from memory of the 6.x
    source, not from a fetched tree (torvalds/linux was too large here):
    UNVERIFIED, but the ``frag --real`` comparison tests it
    (docs/story3-reassembly.md).
    """
    lvl = 0
    while delta >= (((1 << LVL_BITS) - 1) << (lvl * LVL_CLK_SHIFT)) and lvl < 8:
        lvl += 1
    shift = lvl * LVL_CLK_SHIFT
    return ((expires >> shift) + 1) << shift


def _bswap32(x: int) -> int:
    return int.from_bytes((x & 0xFFFFFFFF).to_bytes(4, "big"), "little")


def ipqhashfn_2419(id_: int, saddr: int, daddr: int, proto: int) -> int:
    """The reassembly hash bucket of 2.4.16-2.4.20 (0..63).

    Kernel: net/ipv4/ip_fragment.c ipqhashfn (2.4.19, bticino/... @ d4022a4;
    2.4.20 identical): XOR the two addresses, fold in the upper half and the
    ID, fold in the next byte and the protocol, keep the low 6 bits.  No
    secret.  The kernel works on the fields as an i386 loads them from the
    header (network byte order read little-endian): so do we, from host-order
    ``id_``/``saddr``/``daddr``.  For one sender the bucket is therefore a
    function of the IP ID's two bytes: low 6 bits of each, XORed.
    """
    i = ((id_ & 0xFF) << 8) | ((id_ >> 8) & 0xFF)
    h = _bswap32(saddr) ^ _bswap32(daddr)
    h ^= (h >> 16) ^ i
    h ^= (h >> 8) ^ (proto & 0xFF)
    return h & (IPQ_HASHSZ - 1)


FragKey = tuple[int, int, int, int]  # (id, proto, saddr, daddr), as ip_find matches


class Expired(NamedTuple):
    """A reassembly queue killed by its timer (see :meth:`IpDefrag.expire`)."""

    key: FragKey
    deadline: float
    icmp_time_exceeded: bool  #: True if the offset-0 fragment had arrived


class _Ipq:
    """One reassembly queue (the kernel's ``struct ipq``).

    ``starts``/``ends``/``datas``/``sizes``/``tags`` are parallel lists, sorted
    by offset and never overlapping; ``meat`` is the payload bytes they hold
    and ``length`` the datagram length known so far.  ``runs`` (6.x only) are
    the rb-tree's fragment runs as ``[start, end]``; ``rid`` the source's
    fragment count at this queue's last fragment (``ipfrag_max_dist``).
    """

    __slots__ = (
        "bucket", "datas", "deadline", "df", "ends", "first_in", "ihl", "key", "last_in",
        "length", "light", "meat", "mem", "rid", "runs", "seq", "sizes", "starts", "tags", "ttl",
    )  # fmt: skip

    def __init__(self, key: FragKey, seq: int, deadline: float, qsize: int) -> None:
        self.key, self.seq, self.deadline = key, seq, deadline
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.datas: list[bytes] = []
        self.sizes: list[int] = []  # truesize of each queued skb
        self.tags: list[int] = []
        self.runs: list[list[int]] = []
        self.length = self.meat = 0
        self.first_in = self.last_in = self.light = False
        self.mem = qsize
        self.rid = 0
        self.bucket = -1
        self.ttl, self.ihl, self.df = 64, IP_MIN_IHL, False

    def clear(self, qsize: int) -> None:
        """Forget every fragment (6.x ip_frag_reinit); the queue stays."""
        self.starts, self.ends, self.datas, self.sizes, self.tags = [], [], [], [], []
        self.runs = []
        self.length = self.meat = 0
        self.first_in = self.last_in = False
        self.mem = qsize


def _int_knob(name: str, value: object, lo: int, hi: int | None = None) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or value < lo or (hi is not None and value > hi):
        valid = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
        raise KnobError(name, value, valid)
    return int(value)


class IpDefrag:
    """A receiver's IPv4 reassembler: ``ipq`` queues, memory limit, timer.

    Kernel (per ``receiver``, see :data:`RECEIVERS`): net/ipv4/ip_fragment.c
    ip_defrag, ip_find, ip_frag_create, ip_frag_queue, ip_frag_reasm,
    ip_evictor, ip_expire (2.4.19, 2.4.22); inet_fragment.c inet_frag_find
    and ip_fragment.c ip_frag_queue, ip_frag_too_far, ip_frag_reinit (6.x, as
    sources.md reads them); Solaris ip_rput_fragment, ill_frag_prune,
    ill_frag_timeout (sources.md [SUN96][OSOL]).

    Per fragment (``ip_defrag``), in the kernel's order:

    * ReasmReqds += 1 (every receiver; 6.x counts refused fragments too);
    * the memory limit: **2.4.19** ``mem > high`` runs the bucket sweep,
      **2.4.22** ``mem > high`` kills least-recently-fed queues until
      ``mem <= low``, **Solaris** ``count + size >= cap`` prunes the oldest
      created queues until the fragment fits, **6.x** ``mem > high``
      refuses the fragment (ReasmFails += 1) -- each killed queue is one
      ReasmFails;
    * find or create the queue (its timer armed once, ``ipfrag_time`` after
      creation; later fragments never extend it);
    * 6.x only: ``ipfrag_max_dist`` (more than ``max_dist`` fragments from
      the same source since this queue's last one, and the queue holds
      fragments: ReasmFails += 1, its fragments freed, its timer re-armed);
    * queue the fragment (charging its truesize), or drop it: 2.4/Solaris
      trim overlaps and drop a bad fragment alone (no counter); 6.x drops an
      exact duplicate alone and kills the queue for any other overlap or bad
      fragment (ReasmFails, and ReasmOverlaps for an overlap);
    * when the first and last fragments are in and nothing is missing:
      rebuild (ReasmOKs += 1; over 65,535 B: ReasmFails += 1), the queue's
      memory returned at once.

    A timer expiry (:meth:`expire`): ReasmTimeout += 1 and ReasmFails += 1
    per queue (Linux); an ICMP time-exceeded (code 1) would go only if the
    offset-0 fragment had arrived.  Solaris: ReasmFails += 1 per queue and
    the model's ``ReasmTimeout`` (see :data:`RECEIVERS`).

    Time is whatever the caller passes as ``now`` (seconds, non-decreasing);
    due timers run lazily at the next call, or on a clock (:meth:`arm`).

    Memory is ``qsize`` per queue plus the truesize of each queued fragment
    (``truesize=None``: the fragment's own ``IpFragment.truesize``;
    ``"receiver"``: the receiver's :attr:`Receiver.rx_truesize` per frame;
    an int: that per frame; a callable: ``f(wire_size)``).

    Simplified: no CPU cost here (the caller charges it); queue allocation
    never fails; one interface (Solaris's cap is per interface); the 2.4.22
    hash (jhash with a secret, rebuilt every 10 min) is not modelled, since
    its LRU evictor does not depend on buckets; 6.x's key has no defrag
    user / VRF part (one user: local delivery).

    Parameters
    ----------
    receiver : str
        One of :data:`RECEIVERS_ORDER`.
    ipfrag_high_thresh, ipfrag_low_thresh : int, optional
        Bytes (``None``: the receiver's default; a default low is lowered to
        a given high); ``0 <= low <= high``.
    ipfrag_time : float, optional
        Seconds (``None``: the receiver's default).
    truesize : None, "receiver", int or callable
        What each queued fragment costs (see above).
    ipfrag_max_dist : int, optional
        6.x only (``None``: 64; 0 turns the rule off).
    qsize : int, optional
        Bytes per queue instead of the receiver's ``sizeof(struct ipq)``
        (e.g. one measured on a real kernel).
    jiffies0 : int
        The jiffies counter at time 0 (where the timer wheel's slots lie;
        only with a ``wheel`` receiver).
    hz : int, optional
        Timer ticks per second instead of the receiver's (a real kernel's
        CONFIG_HZ: 100, 250, 300 or 1000).
    """

    __slots__ = (
        "_buckets", "_clock_timer", "_high", "_jiffies0", "_low", "_next_deadline", "_on_expire",
        "_peer_rid", "_queues", "_seq", "_time", "_timers", "_truesize", "discarded", "evicted",
        "fates", "icmp_time_exceeded", "max_dist", "mem", "mem_max", "on_kill", "receiver",
        "rules", "snmp",
    )  # fmt: skip

    def __init__(
        self,
        receiver: str = "linux-2.4.22",
        ipfrag_high_thresh: int | None = None,
        ipfrag_low_thresh: int | None = None,
        ipfrag_time: float | None = None,
        truesize=None,
        ipfrag_max_dist: int | None = None,
        qsize: int | None = None,
        jiffies0: int = 0,
        hz: int | None = None,
    ) -> None:
        if isinstance(receiver, (int, np.integer)) and not isinstance(receiver, bool):
            # the old positional form IpDefrag(high, low, time)
            receiver, ipfrag_high_thresh, ipfrag_low_thresh, ipfrag_time = (
                "linux-2.4.22", receiver, ipfrag_high_thresh, ipfrag_low_thresh)
        if receiver not in RECEIVERS:
            raise KnobError("receiver", receiver, "one of " + ", ".join(RECEIVERS_ORDER))
        rules = RECEIVERS[receiver]
        if qsize is not None:
            rules = dataclasses.replace(rules, qsize=_int_knob("qsize", qsize, 0))
        if hz is not None:
            rules = dataclasses.replace(rules, hz=_int_knob("hz", hz, 1, 10000))
        self.receiver = receiver
        self.rules = rules
        self._jiffies0 = _int_knob("jiffies0", jiffies0, 0)
        high = rules.high if ipfrag_high_thresh is None else ipfrag_high_thresh
        self._high = _int_knob("ipfrag_high_thresh", high, 0)
        # (the default low never stands above a high given alone)
        low = min(rules.low, self._high) if ipfrag_low_thresh is None else ipfrag_low_thresh
        self._low = 0
        self.ipfrag_low_thresh = low
        self.ipfrag_time = rules.time if ipfrag_time is None else ipfrag_time
        md = rules.max_dist if ipfrag_max_dist is None else ipfrag_max_dist
        self.max_dist = _int_knob("ipfrag_max_dist", md, 0)
        if self.max_dist and rules.evictor != "refuse":
            raise KnobError("ipfrag_max_dist", md, "0 for this receiver (a 6.x rule)")
        if truesize is None or callable(truesize):
            self._truesize = truesize
        elif truesize == "receiver":
            self._truesize = rules.rx_truesize
        else:
            self._truesize = _int_knob("truesize", truesize, 1)
        #: SNMP Ip counters as in /proc/net/snmp (ReasmOverlaps: IpExt, 6.x).
        self.snmp = {"ReasmReqds": 0, "ReasmOKs": 0, "ReasmFails": 0, "ReasmTimeout": 0,
                     "ReasmOverlaps": 0}
        self.mem = 0  #: bytes in use (ip_frag_mem / fqdir->mem / ill_frag_count)
        self.mem_max = 0  #: the most ``mem`` has been
        self.icmp_time_exceeded = 0  #: ICMP time-exceeded messages that would be sent
        self.evicted = 0  #: queues killed by the evictor / pruned (also in ReasmFails)
        self.discarded = 0  #: fragments dropped by ip_frag_queue without a counter (2.4)
        #: fragments by fate (see :data:`FATES`); the rest are queued
        self.fates = dict.fromkeys(FATES, 0)
        #: optional ``on_kill(tags, fate)``: told of every queue killed (its
        #: fragments' tags and their fate: evicted, expired, ...)
        self.on_kill = None
        self._queues: OrderedDict[FragKey, _Ipq] = OrderedDict()
        self._buckets: list[list[_Ipq]] = [[] for _ in range(IPQ_HASHSZ)]
        self._peer_rid: dict[int, int] = {}
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

        Kernel: ip_frag_intern / inet_frag_create (``mod_timer`` of the
        queue's own timer, ``ipfrag_time`` after creation) and ip_expire.
        One clock timer stands for the per-queue timers: it is always set to
        the earliest of their deadlines."""
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
        """Memory (bytes) above which the receiver's limit rule acts."""
        return self._high

    @ipfrag_high_thresh.setter
    def ipfrag_high_thresh(self, value: int) -> None:
        self._high = _int_knob("ipfrag_high_thresh", value, self._low)

    @property
    def ipfrag_low_thresh(self) -> int:
        """Memory (bytes) the 2.4 evictors free down to (unused by 6.x and Solaris)."""
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

    def queued_fragments(self) -> int:
        """Fragments held in the live queues."""
        return sum(len(q.starts) for q in self._queues.values())

    def queue_keys(self) -> list[FragKey]:
        """Keys of the live queues: least recently fed first for ``linux-2.4.22``
        (its eviction order), else in order of creation."""
        return list(self._queues)

    def bucket_of(self, key: FragKey) -> int:
        """The 2.4.19 hash bucket of a live queue (-1 for other receivers)."""
        return self._queues[key].bucket

    def stats(self) -> dict[str, int]:
        """Flat snapshot: SNMP counters plus ``mem``, ``queues`` and model counters."""
        return {
            **self.snmp,
            "mem": self.mem,
            "mem_max": self.mem_max,
            "queues": len(self._queues),
            "icmp_time_exceeded": self.icmp_time_exceeded,
            "evicted": self.evicted,
            "discarded": self.discarded,
            **{"frag_" + k: v for k, v in self.fates.items()},
        }

    def max_timer_delay(self) -> float:
        """The most a queue's timer can fire after ``now + ipfrag_time``: one
        tick (the 2.4 kernels), the timer wheel's slot at ``ipfrag_time``
        (6.x, :func:`wheel_bucket`), nothing (Solaris)."""
        hz = self.rules.hz
        if not hz:
            return 0.0
        delta = max(int(round(self._time * hz)), 1)
        if not self.rules.wheel:
            return 1.0 / hz
        # (at most one slot of the level: wheel_bucket(0, delta) is that slot)
        return wheel_bucket(0, delta) / hz

    @property
    def next_deadline(self) -> float:
        """Earliest pending timer (may be a stale one; ``inf`` if none)."""
        return self._next_deadline

    # -- the entry point -------------------------------------------------------------

    def ip_defrag(self, frag: IpFragment, now: float) -> IpDatagram | None:
        """Take one fragment at ``now``; return the datagram when it is complete.

        See the class docstring for the order of the steps per receiver.  A
        packet that is not a fragment (offset 0, MF clear) is returned as a
        datagram at once without touching counters; the kernel never calls
        ip_defrag for it.
        """
        if now >= self._next_deadline:
            self.expire(now)
        if frag.offset == 0 and not frag.more_fragments:
            return IpDatagram(frag.id, frag.saddr, frag.daddr, frag.proto, frag.payload,
                              frag.df, frag.ttl, frag.size, frag.tag)
        snmp = self.snmp
        snmp["ReasmReqds"] += 1
        ts = self._truesize
        truesize = frag.truesize if ts is None else (ts if isinstance(ts, int)
                                                     else int(ts(frag.ihl + frag.size)))
        ev = self.rules.evictor
        if ev == "refuse":
            if self._high == 0 or self.mem > self._high:
                snmp["ReasmFails"] += 1
                self.fates["refused"] += 1
                return None
        elif ev == "prune":
            if self.mem + truesize >= self._high:
                self._prune(max(self._high - truesize, 0))
        elif self.mem > self._high:
            if ev == "lru":
                self._lru_evict()
            else:
                self._sweep()
        key = (frag.id & 0xFFFF, frag.proto, frag.saddr, frag.daddr)
        q = self._queues.get(key)
        if q is None:
            q = self._ip_frag_create(key, now)
        if self.max_dist and self._too_far(q, frag.saddr, now):
            return None
        if self.rules.overlap == "kill":
            ok = self._queue_kill_rule(q, frag, truesize)
        else:
            ok = self._queue_trim_rule(q, frag, truesize)
        if not ok:
            return None
        if self.mem > self.mem_max:
            self.mem_max = self.mem
        if ev == "lru":
            self._queues.move_to_end(key)  # 2.4.22: most recently fed queue last
        if q.first_in and q.last_in and q.meat == q.length:
            return self._ip_frag_reasm(q)
        return None

    # -- the memory-limit rules ----------------------------------------------------------

    def _kill(self, q: _Ipq, fate: str) -> None:
        """Unlink ``q`` and free its memory; its fragments get ``fate``."""
        del self._queues[q.key]
        if q.bucket >= 0:
            self._buckets[q.bucket].remove(q)
        self.mem -= q.mem
        self.fates[fate] += len(q.starts)
        if self.on_kill is not None:
            self.on_kill(q.tags, fate)

    def _sweep(self) -> None:
        """2.4.16-2.4.20 ``ip_evictor``: whole sweeps over the 64 buckets.

        Kernel: net/ipv4/ip_fragment.c ip_evictor (2.4.19, bticino/... @
        d4022a4; 2.4.20 the same, with DaveM's "FIXME: Make LRU queue of frag
        heads").  Memory is tested only before each sweep: a sweep kills the
        last (oldest) queue of *every* non-empty bucket, bucket 0 to 63, each
        one ReasmFails, and sweeps repeat while memory is above low and a
        sweep killed something.  Which queues die depends on the buckets
        (:func:`ipqhashfn_2419`), not on their age across buckets.
        """
        buckets = self._buckets
        while self.mem > self._low:
            progress = False
            for b in buckets:
                if b:
                    self._kill(b[0], "evicted")  # b[0]: the chain's last, oldest queue
                    self.snmp["ReasmFails"] += 1
                    self.evicted += 1
                    progress = True
            if not progress:
                return

    def _lru_evict(self) -> None:
        """2.4.22 ``ip_evictor``: kill least-recently-fed queues until mem <= low.

        Kernel: net/ipv4/ip_fragment.c ip_evictor (2.4.22, nslu2/linux-2.4.x @
        171ea0e): the head of ``ipq_lru_list``, one ReasmFails each.
        """
        queues = self._queues
        while self.mem > self._low and queues:
            self._kill(next(iter(queues.values())), "evicted")
            self.snmp["ReasmFails"] += 1
            self.evicted += 1

    def _prune(self, goal: int) -> None:
        """Solaris ``ill_frag_prune``: free whole queues, oldest created first,
        until the interface's count is at most ``goal`` (sources.md [SUN96]:
        the bucket-head queue with the lowest generation number; one ordered
        list stands for the buckets' heads).  One ReasmFails per queue
        (UNVERIFIED)."""
        queues = self._queues
        while self.mem > goal and queues:
            self._kill(next(iter(queues.values())), "evicted")
            self.snmp["ReasmFails"] += 1
            self.evicted += 1

    def _too_far(self, q: _Ipq, saddr: int, now: float) -> bool:
        """6.x ``ip_frag_too_far`` + ``ip_frag_reinit``: True if the fragment
        is dropped (the queue's timer had already fired).

        Kernel (sources.md [ML25] §5): the source's inet_peer counts every
        fragment reaching ip_frag_queue; if more than ``max_dist`` arrived
        since this queue's previous one and the queue holds fragments, one
        ReasmFails, the fragments are freed and the timer re-armed for a full
        ``ipfrag_time``; the new fragment then starts the queue afresh.
        """
        rid = self._peer_rid.get(saddr, 0) + 1
        self._peer_rid[saddr] = rid
        start, q.rid = q.rid, rid
        if not q.starts or rid - start <= self.max_dist:
            return False
        self.snmp["ReasmFails"] += 1
        self.fates["too_far"] += len(q.starts)
        self.mem -= q.mem - self.rules.qsize
        q.clear(self.rules.qsize)
        q.deadline = self._deadline(now)
        heapq.heappush(self._timers, (q.deadline, q.seq, q.key))
        return False

    # -- timers ------------------------------------------------------------------------

    def expire(self, now: float) -> list[Expired]:
        """Run every reassembly timer due at ``now``; return the queues killed.

        Kernel: ip_expire (2.4.19, 2.4.22; 6.x the same counters): each
        expiry counts ReasmTimeout and ReasmFails; ICMP time-exceeded
        (fragment reassembly time exceeded) would be sent only if the
        offset-0 fragment had arrived.
        """
        fired: list[Expired] = []
        timers, queues, snmp = self._timers, self._queues, self.snmp
        while timers and timers[0][0] <= now:
            deadline, seq, key = heapq.heappop(timers)
            q = queues.get(key)
            if q is None or q.seq != seq or q.deadline != deadline:
                continue  # queue already reassembled, evicted, or re-armed
            icmp = q.first_in and bool(q.starts)
            self._kill(q, "expired")
            snmp["ReasmTimeout"] += 1
            snmp["ReasmFails"] += 1
            self.icmp_time_exceeded += icmp
            fired.append(Expired(key, deadline, icmp))
        self._next_deadline = timers[0][0] if timers else float("inf")
        self._rearm()
        return fired

    # -- internals named after the kernel's helpers --------------------------------

    def _deadline(self, now: float) -> float:
        """When a timer armed at ``now`` for ``ipfrag_time`` fires: on the
        next tick at or after ``jiffies + ipfrag_time`` (``mod_timer``; 2.4:
        HZ 100), rounded up to the wheel's slot for 6.x
        (:func:`wheel_bucket`), exactly ``now + ipfrag_time`` for Solaris."""
        hz = self.rules.hz
        if not hz:
            return now + self._time
        j0 = self._jiffies0
        j = j0 + math.floor(now * hz + 1e-9)
        delta = max(int(round(self._time * hz)), 1)
        fire = j + delta
        if self.rules.wheel:
            fire = wheel_bucket(fire, delta)
        return (fire - j0) / hz

    def _ip_frag_create(self, key: FragKey, now: float) -> _Ipq:
        self._seq += 1
        q = _Ipq(key, self._seq, self._deadline(now), self.rules.qsize)
        self._queues[key] = q
        if self.rules.evictor == "sweep":
            # ip_frag_intern puts the new queue at the chain's head: the chain's
            # last element is its oldest (here b[0], new ones appended)
            q.bucket = ipqhashfn_2419(key[0], key[2], key[3], key[1])
            self._buckets[q.bucket].append(q)
        self.mem += q.mem
        if self.mem > self.mem_max:
            self.mem_max = self.mem
        heapq.heappush(self._timers, (q.deadline, q.seq, key))
        if q.deadline < self._next_deadline:
            self._next_deadline = q.deadline
            self._rearm()
        return q

    @staticmethod
    def _ends_of(q: _Ipq, frag: IpFragment):
        """The checks of ip_frag_queue on the fragment's end; ``(start, end)``
        or ``None`` if the fragment is bad (inconsistent last fragment, bytes
        beyond the known end, or nothing left)."""
        start = frag.offset
        if start < 0 or start & 7:
            raise KnobError("offset", start, "a non-negative multiple of 8")
        end = start + frag.size
        if not frag.more_fragments:
            if end < q.length or (q.last_in and end != q.length):
                return None  # last fragment disagrees with what is queued
            q.last_in, q.length = True, end
        else:
            end &= ~7
            if end > q.length:
                if q.last_in:
                    return None  # data beyond the known end
                q.length = end
        if end <= start:
            return None
        return start, end

    def _insert(self, q: _Ipq, i: int, start: int, end: int, data, frag: IpFragment,
                truesize: int) -> None:
        q.starts.insert(i, start)
        q.ends.insert(i, end)
        q.datas.insert(i, data)
        q.sizes.insert(i, truesize)
        q.tags.insert(i, frag.tag)
        q.meat += end - start
        q.mem += truesize
        self.mem += truesize
        if not frag.payload:
            q.light = True
        if start == 0:
            q.first_in = True
            q.ttl, q.ihl, q.df = frag.ttl, frag.ihl, frag.df

    def _queue_trim_rule(self, q: _Ipq, frag: IpFragment, truesize: int) -> bool:
        """2.4 (and Solaris) ip_frag_queue: insert ``frag``, trimming overlaps;
        False if it was dropped (no counter: ``goto err``).

        Overlap rule: bytes already queued *before* the new fragment's start
        win, so its head is trimmed (dropped if nothing is left: a
        duplicate); queued fragments that start inside the new one lose
        their overlapped head, or are freed if wholly covered.  A non-last
        fragment whose length is not a multiple of 8 is cut down to one.
        """
        se = self._ends_of(q, frag)
        if se is None:
            self.discarded += 1
            self.fates["discarded"] += 1
            return False
        start, end = se
        orig_start = start
        starts, ends, datas, sizes, tags = q.starts, q.ends, q.datas, q.sizes, q.tags
        i = bisect_left(starts, start)  # first queued fragment at or after start
        if i and ends[i - 1] > start:  # older bytes before us win
            start = ends[i - 1]
            if end <= start:
                self.discarded += 1
                self.fates["duplicate"] += 1
                return False
        while i < len(starts) and starts[i] < end:  # we win over later bytes
            if ends[i] <= end:
                q.meat -= ends[i] - starts[i]
                q.mem -= sizes[i]
                self.mem -= sizes[i]
                self.fates["overlapped"] += 1
                del starts[i], ends[i], datas[i], sizes[i], tags[i]
            else:
                q.meat -= end - starts[i]
                datas[i] = datas[i][end - starts[i]:]
                starts[i] = end
                break
        data = frag.payload[start - orig_start: end - orig_start]
        self._insert(q, i, start, end, data, frag, truesize)
        return True

    def _queue_kill_rule(self, q: _Ipq, frag: IpFragment, truesize: int) -> bool:
        """6.x ip_frag_queue + inet_frag_queue_insert: False if dropped.

        A bad fragment (as 2.4's checks) or one that overlaps queued bytes
        without lying inside one fragment run kills the queue (discard_qp:
        ReasmFails; an overlap also ReasmOverlaps); one wholly inside a run
        is a duplicate, dropped alone.  Runs: a fragment that starts exactly
        where the last (highest) run ends extends it; any other starts a run.
        """
        se = self._ends_of(q, frag)
        if se is None:
            self._discard_qp(q)
            return False
        start, end = se
        runs = q.runs
        if not runs:
            runs.append([start, end])
        elif end > runs[-1][1]:  # the common case: it goes at the end
            tail = runs[-1][1]
            if start < tail:
                self.snmp["ReasmOverlaps"] += 1
                self._discard_qp(q)
                return False
            if start == tail:
                runs[-1][1] = end
            else:
                runs.append([start, end])
        else:  # the rb-tree search: the one run it could touch
            k = bisect_left(runs, [end, -1])  # first run starting at or after end
            if k and runs[k - 1][1] > start:
                if runs[k - 1][0] <= start and end <= runs[k - 1][1]:
                    self.fates["duplicate"] += 1
                    return False
                self.snmp["ReasmOverlaps"] += 1
                self._discard_qp(q)
                return False
            runs.insert(k, [start, end])
        i = bisect_left(q.starts, start)
        self._insert(q, i, start, end, frag.payload, frag, truesize)
        return True

    def _discard_qp(self, q: _Ipq) -> None:
        self._kill(q, "killed")
        self.fates["killed"] += 1  # the bad fragment itself
        self.snmp["ReasmFails"] += 1

    def _ip_frag_reasm(self, q: _Ipq) -> IpDatagram | None:
        n = len(q.starts)
        del self._queues[q.key]
        if q.bucket >= 0:
            self._buckets[q.bucket].remove(q)
        self.mem -= q.mem
        if q.ihl + q.length > IP_MAX_PACKET:
            self.snmp["ReasmFails"] += 1  # kernel: "Oversized IP packet"
            self.fates["oversize"] += n
            return None
        self.snmp["ReasmOKs"] += 1
        self.fates["delivered"] += n
        id_, proto, saddr, daddr = q.key
        tags = q.tags
        tag = tags[0]
        mixed = any(t != tag for t in tags)
        payload = b"" if q.light else b"".join(q.datas)
        return IpDatagram(id_, saddr, daddr, proto, payload, q.df, q.ttl, q.length,
                          -2 if mixed else tag, mixed)
