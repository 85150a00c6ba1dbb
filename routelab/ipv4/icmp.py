"""ICMP: sending an error or reply, its rate limits, and redirect spacing.

Kernel: net/ipv4/icmp.c icmp_send, icmpv4_xrlim_allow / xrlim_allow;
net/ipv4/route.c ip_error and ip_rt_send_redirect (2.4.22, 2.6.11).

The limiters take a small mutable state (a token bucket or a redirect
counter) and the time, update the state and say whether a message may be
sent; the states live with their owners (per peer in :class:`Icmp`, per
cached route).  :meth:`Icmp.icmp_send` applies the limit, counts the
message in the ICMP MIB and queues it on the output device
(``dev_queue_xmit``); the callers charge its CPU cost.

The per-packet loop calls these for every ICMP error it may send, so this
module is one of the compiled ones (routelab/accel.py); the
``@cython.locals`` lines only give the token arithmetic C doubles, which
compute exactly what Python floats do.
"""

from __future__ import annotations

import cython

from ..costs import composed

__all__ = ["icmp_error_len", "ICMP_RATELIMIT", "XRLIM_BURST_FACTOR", "ERROR_COST", "ERROR_BURST",
           "xrlim_allow", "ip_error_allow", "redirect_allow", "RedirectState"]

ICMP_RATELIMIT = 1.0       # sysctl_icmp_ratelimit = 1*HZ: one error per second per peer
XRLIM_BURST_FACTOR = 6     # xrlim_allow: bursts of up to 6 messages
ERROR_COST, ERROR_BURST = 1.0, 5.0   # ip_rt_error_cost / ip_rt_error_burst (kernel.md s1)


def icmp_error_len(orig_len):
    """IP length of an ICMP error about a datagram of ``orig_len`` bytes (arrays ok).

    Kernel: net/ipv4/icmp.c icmp_send: the error quotes as much of the
    offending datagram as fits in a 576-byte reply (RFC 1812): 20 bytes of
    IP header + 8 of ICMP header + at most 548 bytes quoted.
    """
    import numpy as np

    return 28 + np.minimum(np.asarray(orig_len), 576 - 28)


@cython.locals(tokens=cython.double, last=cython.double, now=cython.double,
               cost=cython.double, burst=cython.double)
def _bucket(tokens: float, last: float, now: float, cost: float, burst: float):
    tokens = min(tokens + (now - last), burst)
    if tokens >= cost:
        return True, tokens - cost
    return False, tokens


def xrlim_allow(state: dict, peer, now: float) -> bool:
    """Time-exceeded / unreachable to ``peer``: one per second, bursts of 6.

    ``state`` maps peer -> (tokens, last); a new peer starts with a full bucket.
    Kernel: net/ipv4/icmp.c xrlim_allow.
    """
    burst = XRLIM_BURST_FACTOR * ICMP_RATELIMIT   # 6.0 (exact in a double)
    tokens, last = state.get(peer, (burst, now))
    ok, tokens = _bucket(tokens, last, now, ICMP_RATELIMIT, burst)
    state[peer] = (tokens, now)
    return ok


def ip_error_allow(state: dict, key, now: float) -> bool:
    """ip_error's own limit on an unreachable route: error_cost per message,
    bursts of error_burst.  Kernel: net/ipv4/route.c ip_error."""
    tokens, last = state.get(key, (ERROR_BURST, now))
    ok, tokens = _bucket(tokens, last, now, ERROR_COST, ERROR_BURST)
    state[key] = (tokens, now)
    return ok


class RedirectState:
    """Redirect counter (``rate_tokens``) and last time (``rate_last``)."""

    __slots__ = ("rate_tokens", "rate_last")

    def __init__(self) -> None:
        self.rate_tokens = 0
        self.rate_last = -1e18


def redirect_allow(state, now: float, sysctl: dict) -> bool:
    """May a redirect go out now?  Updates ``state`` (a RedirectState or a dst entry).

    Kernel: net/ipv4/route.c ip_rt_send_redirect: at most ``redirect_number``
    redirects, spaced by ``redirect_load << n``; after that silence until
    ``redirect_silence`` passes with no offending packet.
    """
    if now - state.rate_last > sysctl["redirect_silence"]:
        state.rate_tokens = 0
    if state.rate_tokens >= sysctl["redirect_number"]:
        state.rate_last = now
        return False
    if state.rate_tokens == 0 or now > state.rate_last + (sysctl["redirect_load"]
                                                          * (1 << state.rate_tokens)):
        state.rate_last = now
        state.rate_tokens += 1
        return True
    return False


# ICMP message types the router originates (include/linux/icmp.h)
ICMP_ECHOREPLY, ICMP_DEST_UNREACH, ICMP_REDIRECT, ICMP_TIME_EXCEEDED = 0, 3, 5, 11
# (the same as C constants when compiled)
_ECHOREPLY, _DEST_UNREACH, _REDIRECT, _TIME_EXCEEDED = 0, 3, 5, 11
_NAN = float("nan")


class Icmp:
    """The router's ICMP output during a run: counters, rate limits, queueing.

    Kernel: net/ipv4/icmp.c icmp_send, icmp_reply, icmpv4_xrlim_allow
    (2.4.24, 2.6.0).

    Parameters
    ----------
    devices : list
        The run's ``NetDevice`` objects (a message is queued on one of them).
    cost : dict
        Seconds per kernel function (``icmp_send`` and the output path).

    Attributes
    ----------
    counters : dict
        The icmp MIB's ``Out*``/``In*`` counters this model keeps.
    limited : int
        Messages the rate limits suppressed (``RateLimited``).
    xrlim : dict
        ``xrlim_allow``'s token bucket per peer.
    errlim : dict
        ``ip_error``'s bucket per cached unreachable entry (per flow without
        a cache).
    redir : dict
        Redirect state per source address when there is no route cache.

    out_hit, out_slow : list
        Output route lookups per device the message leaves by: every
        message the router originates first looks up its output route,
        before any rate limit (icmp_send: ``ip_route_output`` to the
        offending packet's source, then ``icmpv4_xrlim_allow``; icmp_reply
        the same for echo replies; 2.4.24 net/ipv4/icmp.c,
        MaximeChretien/linux-history).  The first lookup of a key (the
        destination, and error or reply: their source address and TOS
        differ) is a miss (``out_slow_tot``), the later ones hits
        (``out_hit``); merged into ``rt_cache_stat`` on the device's CPU.
        Simplified: the output routes are counted, not put in the modelled
        cache (its GC never evicts them, so a key hits for the whole run;
        their cost is inside ``icmp_send``'s).

    Simplification: ``xrlim_allow`` is keyed by the offending packet's
    source address (the kernel keys it by the output route to it, which is
    one per source for the router's own output).
    """

    def __init__(self, devices: list, cost: dict) -> None:
        self.devices = devices
        self.counters = dict.fromkeys(("OutMsgs", "OutTimeExcds", "OutDestUnreachs",
                                       "OutRedirects", "OutEchoReps", "InEchos"), 0)
        self.limited = 0
        self.host_unreach = 0          # host unreachable errors for failed resolutions
        self.xrlim: dict = {}
        self.errlim: dict = {}
        self.redir: dict = {}
        self.send_cost = composed(cost, "icmp_send")
        self.out_keys: set = set()
        self.out_hit = [0] * len(devices)
        self.out_slow = [0] * len(devices)

    @cython.locals(typ=cython.long, dev=cython.long)
    def output_route(self, typ: int, dev: int, saddr) -> int:
        """icmp_send / icmp_reply's output route lookup (see ``out_hit``)."""
        key = (saddr, typ == _ECHOREPLY)
        if key in self.out_keys:
            self.out_hit[dev] += 1
        else:
            self.out_keys.add(key)
            self.out_slow[dev] += 1
        return 0

    @cython.locals(now=cython.double, ok=cython.bint)
    def xrlim_allow(self, saddr, now: float) -> bool:
        """May an error go to ``saddr`` now?  (see :func:`xrlim_allow`)"""
        ok = xrlim_allow(self.xrlim, saddr, now)
        self.limited += not ok
        return ok

    @cython.locals(now=cython.double, ok=cython.bint)
    def ip_error_allow(self, key, now: float) -> bool:
        """``ip_error``'s own limit for ``key`` (see :func:`ip_error_allow`)."""
        ok = ip_error_allow(self.errlim, key, now)
        self.limited += not ok
        return ok

    @cython.locals(typ=cython.long, dev=cython.long, now=cython.double,
                   wire=cython.double, limited=cython.bint, dep=cython.double)
    def icmp_send(self, typ: int, dev: int, now: float, wire: float, saddr: int,
                  limited: bool = True) -> float:
        """Originate an ICMP message of type ``typ`` about a packet from
        ``saddr`` and queue it on ``dev`` at ``now`` (``wire`` seconds on the
        link); return its departure time, NaN if the rate limit (errors with
        ``limited`` set) or a full qdisc stopped it.  Echo replies and
        redirects are never limited here (redirects have their own spacing,
        :func:`redirect_allow`; frag-needed is exempt: ``limited=False``)."""
        c = self.counters
        self.output_route(typ, dev, saddr)
        if typ == _TIME_EXCEEDED or typ == _DEST_UNREACH:
            if limited and not self.xrlim_allow(saddr, now):
                return _NAN
            if typ == _TIME_EXCEEDED:
                c["OutTimeExcds"] += 1
            else:
                c["OutDestUnreachs"] += 1
        elif typ == _ECHOREPLY:
            c["InEchos"] += 1
            c["OutEchoReps"] += 1
        elif typ == _REDIRECT:
            c["OutRedirects"] += 1
        c["OutMsgs"] += 1
        dep = self.devices[dev].dev_queue_xmit(now, wire, None, None, 0)
        if dep == dep:
            self.devices[dev].tx_packets += 1
        return dep
