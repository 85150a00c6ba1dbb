"""Linux 2.4 sunrpc over UDP: slot table, congestion window, retransmit timer.

The pieces of the RPC client transport that decide *when* an NFS WRITE may
go, and when a silent one is sent again (story 3; sources.md "Story 3",
sunrpc transport).  They are plain state machines driven by
:class:`routelab.hosts.nfs.NfsClient` (which owns the socket, the engine's
timers and the request objects) and are unit-tested on their own.

Kernel trees read: vanilla 2.4.19 (bticino/linux-2.4.19-rmk7-pxa2-btweb,
generic net/ and fs/nfs/ taken as vanilla, sources.md [V2419]) and vanilla
2.4.20 (sndrzt/linux-2.4.20.lite @ 426c5ed, [V2420]): net/sunrpc/xprt.c
(xprt_adjust_cwnd, __xprt_get_cong, __xprt_put_cong, xprt_adjust_timeout,
xprt_timer, do_xprt_transmit, xprt_write_space), net/sunrpc/clnt.c
(call_status, call_timeout), net/sunrpc/timer.c (2.4.20 RTT estimator),
include/linux/sunrpc/xprt.h (RPC_MAXCONG, RPC_MAXREQS, RPC_CWNDSCALE).

Units: the congestion window in the kernel's fixed point (256 = one
request); times in seconds (the kernel's jiffies at HZ = 100 are kept where
they round: see :class:`RttTimer`).
"""

from __future__ import annotations

from .errors import KnobError

__all__ = ["RPC_CWNDSCALE", "RPC_MAXCONG", "RPC_MAXCWND", "RPC_INITCWND", "MAXREQS",
           "CWND_VARIANTS", "TIMER_VARIANTS", "Cwnd", "FixedTimer", "RttTimer", "HZ",
           "RPC_MAX_UDP_TIMEOUT", "XPRT_MAX_BACKOFF"]

#: include/linux/sunrpc/xprt.h (2.4.19, 2.4.20): one request of window
RPC_CWNDSCALE = 256
#: at most 16 requests in flight
RPC_MAXCONG = 16
RPC_MAXCWND = RPC_MAXCONG * RPC_CWNDSCALE
#: start at one request
RPC_INITCWND = RPC_CWNDSCALE
#: slot table size: RPC_MAXREQS = RPC_MAXCONG + 1 in 2.4.19, RPC_MAXCONG in 2.4.20
MAXREQS = {"2.4.19": RPC_MAXCONG + 1, "2.4.20": RPC_MAXCONG}
#: i386 HZ in 2.4
HZ = 100
#: fs/nfs/inode.c (2.4.19): to_maxval for UDP mounts
RPC_MAX_UDP_TIMEOUT = 60.0
#: 2.4.20 include/linux/sunrpc/xprt.h: the RTO backoff is capped at 2**8
XPRT_MAX_BACKOFF = 8
#: 2.4.20 include/linux/sunrpc/timer.h: RPC_RTO_MAX (60 s), RPC_RTO_MIN (2 jiffies)
RPC_RTO_MAX = 60.0
RPC_RTO_MIN_J = 2

CWND_VARIANTS = ("2.4.19", "aimd")
TIMER_VARIANTS = ("fixed", "rtt")


class Cwnd:
    """The UDP transport's congestion window and ``cong`` (requests in flight).

    ``variant="2.4.19"``: net/sunrpc/xprt.c xprt_adjust_cwnd (2.4.19): on a
    reply, grow only when the window is full (cong >= cwnd) *and* the clock
    is past ``congtime``, by (256*256 + cwnd/2)/cwnd, then hold growth for
    4 s per request of window; a timeout halves the window (at least one
    request) and holds growth 8 s per request of the new window.

    ``variant="aimd"``: xprt_adjust_cwnd (2.4.20): the same +1/n per reply
    while full and halving on a timeout, with no ``congtime`` hold.

    ``cong`` is taken with :meth:`get` (2.4.19 xprt_reserve_status at slot
    reservation; 2.4.20 __xprt_get_cong at transmit) and given back with
    :meth:`put` (the reply or the request's release).
    """

    __slots__ = ("variant", "cwnd", "cong", "congtime", "grows", "halvings")

    def __init__(self, variant: str = "aimd") -> None:
        if variant not in CWND_VARIANTS:
            raise KnobError("cwnd", variant, "one of " + ", ".join(CWND_VARIANTS))
        self.variant = variant
        self.cwnd = RPC_INITCWND
        self.cong = 0
        self.congtime = 0.0
        self.grows = 0
        self.halvings = 0

    def can_get(self) -> bool:
        """A new request may take window (RPCXPRT_CONGESTED is clear)."""
        return self.cong < self.cwnd

    def get(self) -> bool:
        if self.cong >= self.cwnd:
            return False
        self.cong += RPC_CWNDSCALE
        return True

    def put(self) -> None:
        self.cong -= RPC_CWNDSCALE
        if self.cong < 0:
            raise RuntimeError("sunrpc: congestion count below zero")

    def on_reply(self, now: float) -> None:
        """A reply arrived (before :meth:`put` of its request)."""
        cwnd = self.cwnd
        if self.cong < cwnd:
            return
        if self.variant == "2.4.19" and now < self.congtime:
            return
        cwnd += (RPC_CWNDSCALE * RPC_CWNDSCALE + (cwnd >> 1)) // cwnd
        if cwnd > RPC_MAXCWND:
            cwnd = RPC_MAXCWND
        if self.variant == "2.4.19":
            self.congtime = now + 4.0 * cwnd / RPC_CWNDSCALE
        if cwnd != self.cwnd:
            self.grows += 1
        self.cwnd = cwnd

    def on_timeout(self, now: float) -> None:
        """A retransmit timer expired (``-ETIMEDOUT``)."""
        cwnd = self.cwnd >> 1
        if cwnd < RPC_CWNDSCALE:
            cwnd = RPC_CWNDSCALE
        if self.variant == "2.4.19":
            self.congtime = now + 8.0 * cwnd / RPC_CWNDSCALE
        self.cwnd = cwnd
        self.halvings += 1

    @property
    def requests(self) -> float:
        return self.cwnd / RPC_CWNDSCALE


class FixedTimer:
    """2.4.19's retransmit timeout: ``rpc_timeout`` per request.

    fs/nfs/inode.c nfs_read_super (2.4.19): to_initval = timeo/10 s,
    to_retries = retrans, to_maxval = 60 s (UDP), to_exponential.
    net/sunrpc/xprt.c xprt_adjust_timeout: a minor timeout doubles
    to_current (capped at to_maxval); after ``retrans`` minors a major one
    doubles to_initval and restarts from it ("server not responding"; a
    hard mount keeps trying).  The timer is per request: every request
    starts from the mount's values.
    """

    kind = "fixed"

    def __init__(self, timeo_s: float, retrans: int) -> None:
        self.timeo = float(timeo_s)
        self.retrans = int(retrans)
        self.majors = 0

    def new_request(self, cls: int = 4) -> dict:
        """A request's timeout state; ``cls`` is its procedure's timer class
        (fs/nfs/nfs3xdr.c 2.4.20: WRITE 4, COMMIT 5; used by :class:`RttTimer`)."""
        return {"initval": self.timeo, "current": self.timeo, "retries": self.retrans,
                "resent": False, "cls": int(cls)}

    def rto(self, st: dict) -> float:
        """The timer a (re)transmitted request is armed with."""
        return st["current"]

    def timeout(self, st: dict) -> bool:
        """A reply timeout (xprt_timer, then call_timeout): the request counts
        as resent (``rq_nresend``++, which only xprt_timer does: a resend after
        EAGAIN is not one), then :meth:`adjust`."""
        st["resent"] = True
        return self.adjust(st)

    def adjust(self, st: dict) -> bool:
        """xprt_adjust_timeout on ``st`` (call_timeout, net/sunrpc/clnt.c 2.4.19,
        2.4.20): True for a minor timeout, False for a major one (after which
        call_timeout restarts the retry count).  Alone (without
        :meth:`timeout`) for a sleep for write space that timed out."""
        mx = RPC_MAX_UDP_TIMEOUT
        minor = st["retries"] > 0
        if minor:
            st["current"] = min(st["current"] * 2, mx)
            st["retries"] -= 1
        else:
            st["initval"] = min(st["initval"] * 2, mx)
            st["current"] = st["initval"]
            st["retries"] = self.retrans
            self.majors += 1
        return minor

    def sample(self, st: dict, rtt: float) -> None:
        """Replies do not change a fixed timer."""

    def reply(self) -> None:
        pass


class RttTimer(FixedTimer):
    """2.4.20's RTT estimator for the request's timer class (WRITE: class 4).

    net/sunrpc/timer.c rpc_init_rtt, rpc_update_rtt, rpc_calc_rto (2.4.20):
    srtt starts at (timeo - HZ/5) << 3 jiffies and sdrtt at HZ/5, so the
    first RTO is ``timeo``; a sample m (jiffies, at least 1) updates
    srtt += m - srtt/8 and sdrtt += |m - srtt/8| - sdrtt/4 (floor
    RPC_RTO_MIN); RTO = srtt/8 + sdrtt, capped at 60 s.  Karn
    (xprt_complete_rqst, 2.4.20): only requests with ``rq_nresend == 0``
    are sampled -- ``rq_nresend`` counts reply timeouts only, so a request
    sent again after EAGAIN is sampled, from its last transmission
    (``rq_xtime`` is set at every do_xprt_transmit).  net/sunrpc/xprt.c xprt_timer with
    xprt_expbackoff: a timer that fires before the request has seen
    2**min(ntimeouts, 8) RTOs is re-armed and is not a timeout; ntimeouts
    is per client, +1 per real timeout, cleared by any reply.  Everything
    is in jiffies at HZ = 100 (integer arithmetic as the kernel's).
    Each timer class has its own srtt/sdrtt (include/linux/sunrpc/timer.h:
    arrays of 5), so COMMITs (class 5) learn their own, longer, times;
    ntimeouts is shared.
    """

    kind = "rtt"

    def __init__(self, timeo_s: float, retrans: int) -> None:
        super().__init__(timeo_s, retrans)
        self._init_j = int(round(timeo_s * HZ))
        self.est: dict[int, list[int]] = {}     # class -> [srtt << 3, sdrtt] (jiffies)
        self.ntimeouts = 0
        self.samples = 0

    def _e(self, cls: int) -> list[int]:
        e = self.est.get(cls)
        if e is None:   # rpc_init_rtt: srtt = (timeo - HZ/5) << 3, sdrtt = HZ/5
            e = self.est[cls] = [max(self._init_j - HZ // 5, 0) << 3, HZ // 5]
        return e

    @property
    def srtt(self) -> int:
        """The WRITE class's smoothed RTT (jiffies << 3)."""
        return self._e(4)[0]

    @property
    def sdrtt(self) -> int:
        return self._e(4)[1]

    def rto_base(self, cls: int = 4) -> float:
        srtt, sdrtt = self._e(cls)
        rto = (srtt >> 3) + sdrtt
        return min(rto / HZ, RPC_RTO_MAX, RPC_MAX_UDP_TIMEOUT)

    def rto(self, st: dict) -> float:
        """The RTO times the backoff: xprt_expbackoff re-arms the timer until
        the request has waited 2**min(ntimeouts, 8) RTOs (the same deadline,
        armed at once here)."""
        return max(self.rto_base(st["cls"]), 1.0 / HZ) * \
            (1 << min(self.ntimeouts, XPRT_MAX_BACKOFF))

    def timeout(self, st: dict) -> bool:
        """xprt_timer (2.4.20): rpc_inc_timeo, then call_timeout's adjustment."""
        self.ntimeouts += 1
        st["resent"] = True
        return self.adjust(st)

    def sample(self, st: dict, rtt: float) -> None:
        """rpc_update_rtt for the request's class (not if a reply timed out)."""
        if st["resent"]:
            return
        e = self._e(st["cls"])
        srtt, sdrtt = e
        m = int(rtt * HZ)
        if m <= 0:
            m = 1
        m -= srtt >> 3
        srtt += m
        if m < 0:
            m = -m
        m -= sdrtt >> 2
        sdrtt += m
        if sdrtt < RPC_RTO_MIN_J:
            sdrtt = RPC_RTO_MIN_J
        e[0], e[1] = srtt, sdrtt
        self.samples += 1

    def reply(self) -> None:
        self.ntimeouts = 0


def make_timer(kind: str, timeo_s: float, retrans: int) -> FixedTimer:
    if kind not in TIMER_VARIANTS:
        raise KnobError("rpc_timer", kind, "one of " + ", ".join(TIMER_VARIANTS))
    return (RttTimer if kind == "rtt" else FixedTimer)(timeo_s, retrans)
