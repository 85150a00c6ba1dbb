"""The UDP sender of story 3: send-buffer accounting while fragmenting.

A UDP datagram larger than the MTU leaves as several IP fragments, and each
fragment is an skb charged to the socket (``wmem_alloc``) until the driver
frees it after transmission.  How the kernel allocated those skbs decided
whether a non-blocking sender could put an *incomplete* datagram on the wire
("Fragment flooding in 2.4.x/2.5.x", linux-kernel, June 2002):

``"2.4.19"`` (alias ``"2.4.16"``: the same code)
    ``ip_build_xmit_slow`` sends the highest offset first and allocates every
    fragment with ``sock_alloc_send_skb``, which fails (EAGAIN) once
    ``wmem_alloc >= sndbuf``: the tail fragments are already gone.
    Kernel: net/ipv4/ip_output.c ip_build_xmit_slow (vanilla 2.4.19,
    bticino/linux-2.4.19-rmk7-pxa2-btweb; sources.md [V2419]).
``"2.4.20"`` (alias ``"2.4.22"``, which kept it)
    DaveM's fix, first in vanilla 2.4.20: on a non-blocking send only the
    first fragment allocated checks ``sndbuf``; the rest use a forced
    ``sock_wmalloc``.  Kernel: net/ipv4/ip_output.c ip_build_xmit_slow
    (2.4.20, sndrzt/linux-2.4.20.lite @ 426c5ed).
``"2.6.11"``
    ``ip_append_data`` builds all fragments (ascending) before any is sent;
    the first checks ``sndbuf``, later ones are forced while
    ``wmem_alloc <= 2 * sndbuf``, else the whole datagram is freed (ENOBUFS).

Sizes: ``length`` is UDP data; the IP payload is ``length + 8`` (UDP header).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from routelab.errors import KnobError
from routelab.ipv4.ip_fragment import (
    IP_MAX_PACKET,
    IP_MIN_IHL,
    IPV4_MIN_MTU,
    SKB_STRUCT_BYTES,
    fragment_plan,
    skb_truesize,
)

#: UDP header bytes (RFC 768).
UDP_HLEN = 8
#: 2.4 default and maximum socket buffer, ``SK_WMEM_MAX`` (kernel.md §5, 2.4.16
#: include/linux/skbuff.h); also the 2.4 ``sysctl_wmem_default``/``wmem_max``.
SK_WMEM_MAX = 65535
#: 2.6.11 ``sysctl_wmem_default`` = 256 * (sizeof(struct sk_buff) + 256)
#: (kernel.md §5; ~109 KB on i386, unverified; here with our assumed struct size).
WMEM_DEFAULT_2611 = 256 * (SKB_STRUCT_BYTES + 256)
#: Smallest sndbuf SO_SNDBUF can set, ``SOCK_MIN_SNDBUF`` in 2.4/2.6.11
#: include/net/sock.h (2048; 2.4.19 checked).
SOCK_MIN_SNDBUF = 2048

ALLOC_POLICIES = ("2.4.19", "2.4.20", "2.6.11")
#: Older names of the two 2.4 policies (same code in those trees; sources.md
#: "Story 3": 2.4.16 and 2.4.19 lack the fix, 2.4.20 and 2.4.22 have it).
POLICY_ALIASES = {"2.4.16": "2.4.19", "2.4.22": "2.4.20"}


class SendStatus(StrEnum):
    """Outcome of :meth:`UdpSocket.sendmsg` (errno names as the kernel returns)."""

    OK = "OK"  #: the whole datagram was queued
    EAGAIN = "EAGAIN"  #: non-blocking and no send-buffer space (see ``partial``)
    ENOBUFS = "ENOBUFS"  #: 2.6.11: later fragment over 2 * sndbuf; nothing sent
    EMSGSIZE = "EMSGSIZE"  #: datagram longer than 65535 bytes of IP
    WAIT = "WAIT"  #: blocking socket would sleep; call resume() after sock_wfree


#: 2.4.19 i386 sizeof(struct sk_buff) with netfilter and CONFIG_NET_SCHED
#: (sources.md "Story 3", counted from include/linux/skbuff.h; an estimate).
SKB_STRUCT_2419 = 160
#: Ethernet hard_header_len 14 rounded up to 16 (ip_build_xmit_slow's hh_len).
HH_LEN_ETH = 16
#: SMP_CACHE_BYTES for a PIII build (L1_CACHE_BYTES 32, CONFIG_M686): ASSUMED.
CACHE_BYTES_2419 = 32


def truesize_2419(size: int) -> int:
    """``skb->truesize`` of one 2.4.19 fragment skb of ``size`` IP bytes.

    Kernel: net/ipv4/ip_output.c ip_build_xmit_slow asks for fraglen +
    hh_len + 15; net/core/skbuff.c alloc_skb (2.4.19) aligns the data to
    SMP_CACHE_BYTES and adds sizeof(struct sk_buff): 1500 -> 1696 B.
    """
    n = int(size) + HH_LEN_ETH + 15
    n = (n + CACHE_BYTES_2419 - 1) & ~(CACHE_BYTES_2419 - 1)
    return n + SKB_STRUCT_2419


def so_sndbuf(request: int, wmem_max: int = SK_WMEM_MAX) -> int:
    """The ``sk->sndbuf`` that ``setsockopt(SO_SNDBUF, request)`` stores.

    Kernel: net/core/sock.c sock_setsockopt SO_SNDBUF (2.4.22, 2.6.11): the
    request is capped at ``wmem_max`` and then doubled (to leave room for
    skb overhead), with ``SOCK_MIN_SNDBUF`` as the floor.
    """
    for name, v in (("request", request), ("wmem_max", wmem_max)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise KnobError(name, v, "an integer >= 0 (bytes)")
    return max(2 * min(int(request), int(wmem_max)), SOCK_MIN_SNDBUF)


@dataclass(slots=True)
class TxSkb:
    """One fragment skb owned by the socket until :meth:`UdpSocket.sock_wfree`.

    ``first`` marks offset 0 (the fragment with the UDP header), ``last`` the
    fragment with MF clear; in 2.4 the ``last`` one is sent first.
    """

    datagram_id: int
    offset: int  #: payload offset in bytes
    size: int  #: IP bytes on the wire (header + payload)
    truesize: int  #: bytes charged to wmem_alloc
    first: bool
    last: bool
    forced: bool  #: allocated by sock_wmalloc(force=1), ignoring sndbuf
    time: float
    freed: bool = False


@dataclass(slots=True)
class SendResult:
    """What one :meth:`UdpSocket.sendmsg` (or ``resume``) call did."""

    status: SendStatus
    skbs: list[TxSkb]  #: skbs queued for transmission by this call, send order
    datagram_id: int
    n_frags: int  #: fragments the whole datagram needs

    @property
    def partial(self) -> bool:
        """Some fragments went out but the datagram is incomplete (EAGAIN or WAIT)."""
        return bool(self.skbs) and self.status in (SendStatus.EAGAIN, SendStatus.WAIT)


def _check_int(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not lo <= value <= hi:
        raise KnobError(name, value, f"an integer in [{lo}, {hi}]")
    return int(value)


class UdpSocket:
    """A UDP socket's send path with ``wmem_alloc`` accounting.

    Kernel: net/ipv4/udp.c udp_sendmsg; net/ipv4/ip_output.c
    ip_build_xmit_slow (2.4.19, 2.4.20) and ip_append_data (2.6.11);
    net/core/sock.c sock_alloc_send_skb, sock_wmalloc, sock_wfree.

    Simplified: one destination and route (fixed ``mtu``), no IP options, no
    corking, no socket errors; allocations never fail for lack of memory; a
    blocking socket does not sleep but returns ``WAIT`` and remembers where
    it stopped (:meth:`resume`).  skb sizes use
    :func:`routelab.ipv4.ip_fragment.skb_truesize` (an assumed overhead).

    Parameters
    ----------
    sndbuf : int
        ``sk->sndbuf`` in bytes (see :func:`so_sndbuf`); default 2.4's 65535.
    nonblocking : bool
        ``O_NONBLOCK``/``MSG_DONTWAIT`` (sunrpc sends this way).
    alloc_policy : {"2.4.19", "2.4.20", "2.6.11"}
        Which kernel's fragment allocation to model (module docstring);
        ``"2.4.16"`` and ``"2.4.22"`` are accepted as aliases.
    truesize : callable, optional
        skb truesize of a fragment of ``size`` IP bytes (default
        :func:`~routelab.ipv4.ip_fragment.skb_truesize`; the NFS client
        passes 2.4.19's, :func:`truesize_2419`).
    mtu : int
        Path MTU in bytes, 68..65535.
    """

    __slots__ = (
        "_next_id", "_pending", "_plans", "_ts", "alloc_policy", "mtu", "nonblocking", "sndbuf",
        "stats", "truesize", "wmem_alloc",
    )  # fmt: skip

    def __init__(
        self,
        sndbuf: int = SK_WMEM_MAX,
        nonblocking: bool = True,
        alloc_policy: str = "2.4.20",
        mtu: int = 1500,
        truesize=None,
    ) -> None:
        self.sndbuf = _check_int("sndbuf", sndbuf, 1, 2**31 - 1)
        if not isinstance(nonblocking, bool):
            raise KnobError("nonblocking", nonblocking, "True or False")
        alloc_policy = POLICY_ALIASES.get(alloc_policy, alloc_policy)
        if alloc_policy not in ALLOC_POLICIES:
            raise KnobError("alloc_policy", alloc_policy, f"one of {ALLOC_POLICIES}")
        #: bytes charged per skb of ``size`` IP bytes (default skb_truesize)
        self.truesize = skb_truesize if truesize is None else truesize
        self.nonblocking = nonblocking
        self.alloc_policy = alloc_policy
        self.mtu = _check_int("mtu", mtu, IPV4_MIN_MTU, IP_MAX_PACKET)
        self.wmem_alloc = 0  #: bytes of skb truesize charged to the socket
        self.stats = {
            "datagrams": 0,  # sendmsg calls that started a datagram
            "complete": 0,  # datagrams whose every fragment was queued
            "incomplete": 0,  # datagrams with some, not all, fragments on the wire
            "eagain": 0,
            "enobufs": 0,
            "emsgsize": 0,
            "waits": 0,
            "frags_sent": 0,
        }
        self._next_id = 0
        self._plans: dict = {}
        self._ts: dict = {}
        self._pending: tuple[int, list[tuple[int, int, bool, bool]], int] | None = None

    @property
    def blocked(self) -> bool:
        """A blocking sendmsg is asleep mid-datagram; only :meth:`resume` may run."""
        return self._pending is not None

    @property
    def writeable(self) -> bool:
        """Whether ``sk->write_space`` would wake a sleeping sender now.

        Kernel: net/core/sock.c sock_def_write_space (2.4.22, 2.6.11): wake
        when at most half of ``sndbuf`` is in use.
        """
        return 2 * self.wmem_alloc <= self.sndbuf

    def sendmsg(self, length: int, now: float) -> SendResult:
        """Send one UDP datagram of ``length`` data bytes at time ``now``.

        Kernel: net/ipv4/udp.c udp_sendmsg (2.4.16, 2.4.22, 2.6.11); the
        fragment allocation follows ``alloc_policy`` (module docstring).

        Returns
        -------
        SendResult
            ``skbs`` are the fragments queued for the driver, in send order;
            the caller must :meth:`sock_wfree` each after transmission.
        """
        if self._pending is not None:
            raise RuntimeError("socket is blocked in sendmsg; call resume() first")
        length = _check_int("length", length, 0, 2**31 - 1)
        dgram_id = self._next_id
        self._next_id = (dgram_id + 1) & 0xFFFF
        if length + UDP_HLEN + IP_MIN_IHL > IP_MAX_PACKET:
            self.stats["emsgsize"] += 1
            return SendResult(SendStatus.EMSGSIZE, [], dgram_id, 0)
        self.stats["datagrams"] += 1
        frags = self._plans.get(length)
        if frags is None:
            plan = fragment_plan(length + UDP_HLEN, self.mtu)
            sizes = plan.payload_sizes()
            frags, offset = [], 0  # (offset, payload, first, last), ascending
            for i, size in enumerate(sizes):
                frags.append((offset, int(size), i == 0, i == len(sizes) - 1))
                offset += int(size)
            if self.alloc_policy != "2.6.11":
                frags.reverse()  # ip_build_xmit_slow: highest offset first
            frags = tuple(frags)
            self._plans[length] = frags  # (the same cut for the same length)
        return self._build(dgram_id, frags, 0, now)

    def resume(self, now: float) -> SendResult:
        """Continue a blocking sendmsg that returned ``WAIT``.

        Kernel: net/core/sock.c sock_wait_for_wmem, the sleep inside
        sock_alloc_send_skb (2.4.22, 2.6.11).  Call it when :attr:`writeable`
        turns true after :meth:`sock_wfree` (the kernel's wake-up); it may
        return ``WAIT`` again.  Signals and send timeouts are not modelled.
        """
        if self._pending is None:
            raise RuntimeError("resume() without a blocked sendmsg")
        dgram_id, frags, start = self._pending
        self._pending = None
        return self._build(dgram_id, frags, start, now)

    def sock_wfree(self, skb: TxSkb) -> bool:
        """Return ``skb``'s memory to the socket (TX completion).

        Kernel: net/core/sock.c sock_wfree (2.4.22, 2.6.11).  Returns
        :attr:`writeable` afterwards (whether a sleeping sender would wake).
        """
        if skb.freed:
            raise RuntimeError(f"skb of datagram {skb.datagram_id} freed twice")
        skb.freed = True
        self.wmem_alloc -= skb.truesize
        return self.writeable

    # -- allocation ------------------------------------------------------------

    def sock_alloc_send_skb(self, truesize: int) -> bool:
        """Charge an skb if ``wmem_alloc < sndbuf``; False means EAGAIN / sleep.

        Kernel: net/core/sock.c sock_alloc_send_skb (2.4.22, 2.6.11).
        """
        if self.wmem_alloc < self.sndbuf:
            self.wmem_alloc += truesize
            return True
        return False

    def sock_wmalloc(self, truesize: int) -> bool:
        """Forced allocation (``force=1``): charge ``truesize`` regardless of sndbuf.

        Kernel: net/core/sock.c sock_wmalloc (2.4.22, 2.6.11).  Never fails here.
        """
        self.wmem_alloc += truesize
        return True

    def _checks_sndbuf(self, k: int) -> bool:
        """Whether the ``k``-th skb allocated goes through sock_alloc_send_skb."""
        if k == 0 or self.alloc_policy == "2.4.19":
            return True
        # DaveM's 2.4.20 fix forces later fragments only on non-blocking sends.
        return self.alloc_policy == "2.4.20" and not self.nonblocking

    def _build(
        self, dgram_id: int, frags: list[tuple[int, int, bool, bool]], start: int, now: float
    ) -> SendResult:
        skbs: list[TxSkb] = []
        for k in range(start, len(frags)):
            offset, payload, first, last = frags[k]
            size = IP_MIN_IHL + payload
            truesize = self._ts.get(size)
            if truesize is None:
                truesize = self._ts[size] = self.truesize(size)
            checked = self._checks_sndbuf(k)
            if checked:
                if not self.sock_alloc_send_skb(truesize):
                    status = SendStatus.EAGAIN if self.nonblocking else SendStatus.WAIT
                    return self._fail(status, dgram_id, frags, k, skbs)
            elif self.alloc_policy == "2.6.11" and self.wmem_alloc > 2 * self.sndbuf:
                return self._fail(SendStatus.ENOBUFS, dgram_id, frags, k, skbs)
            else:
                self.sock_wmalloc(truesize)
            skbs.append(TxSkb(dgram_id, offset, size, truesize, first, last, not checked, now))
        self.stats["complete"] += 1
        self.stats["frags_sent"] += len(skbs)
        return SendResult(SendStatus.OK, skbs, dgram_id, len(frags))

    def _fail(
        self,
        status: SendStatus,
        dgram_id: int,
        frags: list[tuple[int, int, bool, bool]],
        k: int,
        skbs: list[TxSkb],
    ) -> SendResult:
        stats = self.stats
        if status is SendStatus.ENOBUFS:
            # 2.6.11: nothing has left yet; ip_flush_pending_frames frees it all.
            for skb in skbs:
                self.sock_wfree(skb)
            stats["enobufs"] += 1
            return SendResult(status, [], dgram_id, len(frags))
        stats["frags_sent"] += len(skbs)
        if status is SendStatus.WAIT:
            self._pending = (dgram_id, frags, k)
            stats["waits"] += 1
        else:
            stats["eagain"] += 1
            if k > 0:
                stats["incomplete"] += 1  # 2.4.19: the earlier fragments are gone
        return SendResult(status, skbs, dgram_id, len(frags))
