"""ICMP error rate limits and redirect spacing: the decisions, nothing else.

Kernel: net/ipv4/icmp.c icmpv4_xrlim_allow / xrlim_allow; net/ipv4/route.c
ip_error and ip_rt_send_redirect (2.4.22, 2.6.11).

Each function takes a small mutable state (a token bucket or a redirect
counter) and the time, updates the state and says whether a message may be
sent.  The router keeps the states (per peer, per cached route); the callers
charge the CPU cost and queue the message.

The per-packet loop calls these for every ICMP error it may send, so this
module is one of the compiled ones (routelab/accel.py); the
``@cython.locals`` lines only give the token arithmetic C doubles, which
compute exactly what Python floats do.
"""

from __future__ import annotations

import cython

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
