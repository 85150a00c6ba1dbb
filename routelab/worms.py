"""Worm probe traffic that follows the worms' documented scan algorithms (story 1).

Not kernel behaviour: these generators stand for the infected student PCs
(and infected hosts outside) of Walter's residence network.  Everything
returns a :class:`~routelab.core.skbuff.PacketTrace` with ``kind =
KIND["worm"]``, built with numpy from an explicit ``numpy.random.Generator``
(same seed, same arrays).  ``docs/worms.md`` has the algorithms, sources and
the parameter table.

* :func:`blaster` -- W32.Blaster (msblast): the start address chosen as the
  worm does, then strictly sequential addresses, 20 non-blocking TCP/135
  connects per round, one round per ``round_s`` (1.8 s).  Sources:
  sources.md [BLA] (Graham's annotated reconstruction,
  blasterWorm/annotatedBlaster.c, and the modified bitBlaster/bitBlaster.c in
  saadmahboob/Win32.BitBlaster) and [SYM].
* :func:`welchia` -- W32.Welchia/Nachi: 92-byte ICMP echo requests at ~140/s
  per host [NANOG][ISC], sweeping class-B networks [LL].  The address
  algorithm is UNVERIFIED.
* :func:`outside_scanners` -- infected hosts outside whose sweep currently
  passes through the residence's block, arriving on the outside interface.
* :func:`replies` -- the answers (SYN-ACK, RST, echo reply, port
  unreachable) the probes get from the :class:`~routelab.residence.AddressPlan`.

Tags: a probe's ``tag`` is its transmission number (0 = first SYN or echo,
1, 2 = SYN retransmissions); a reply's ``tag`` is the index of the probe it
answers in the trace given to :func:`replies`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .core.skbuff import KIND, PacketTrace
from .errors import KnobError
from .ipv4.fib import parse_prefix
from .residence import (
    PLAN_KNOBS,
    REPLY,
    REPLY_LENGTH,
    AddressPlan,
    in_prefix,
    is_unicast,
    prefix_mask,
)
from .sysctl import Knob

__all__ = ["AddressPlan", "PLAN_KNOBS", "REPLY", "BLASTER_KNOBS", "WELCHIA_KNOBS",
           "OUTSIDE_KNOBS", "blaster", "blaster_start", "blaster_targets", "welchia",
           "welchia_targets", "outside_scanners", "replies"]

# --------------------------------------------------------------------------- knobs
BLASTER_KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob("rate_per_round", 20, int, 1, 200, "connects",
         help="Non-blocking connects per scan round ([BLA]: 20 sockets per call of the "
              "spreader).", step=1),
    Knob("round_s", 1.8, float, 0.05, 60.0, "s",
         help="Sleep between starting a round's connects and testing them ([BLA]: 1.8 s in "
              "Graham's reconstruction, 4 s in the modified bitBlaster.c).", step=0.1),
    Knob("local_fraction", 0.4, float, 0.0, 1.0, "",
         help="Share of worm starts that scan from the host's own A.B ([BLA][SYM]: random "
              "start when rand()%20 < 12, so 8/20 local).", step=0.05),
    Knob("same_tick_seed", True, bool,
         help="Both srand(GetTickCount()) calls fall in one clock tick, so the C offset equals "
              "the local/random draw ([BLA] reading: local starts 12-19 /24s below the "
              "host's).  False: an independent offset of 0-19."),
    Knob("connect_gap_s", 2e-4, float, 0.0, 0.05, "s",
         help="Time between a round's connects (ASSUMED 0.2 ms: socket call, sprintf, "
              "inet_addr and a queued SYN on a ~1-2 GHz 2003 PC; 20 SYNs within ~4 ms).",
         step=1e-4),
    Knob("sleep_jitter_s", 0.015625, float, 0.0, 0.1, "s",
         help="Sleep() overshoot, uniform up to this (ASSUMED one Windows timer tick, "
              "15.625 ms).", step=0.001),
    Knob("syn_retransmit", True, bool,
         help="Let Windows retransmit an unanswered SYN (at syn_rto_s, then doubling) while "
              "the socket is still open; closesocket() ends the attempt."),
    Knob("syn_rto_s", 3.0, float, 0.1, 30.0, "s",
         help="First SYN retransmission timeout (ASSUMED 3 s, Windows 2000/XP TCP; doubled "
              "per retry).", step=0.5),
    Knob("syn_retries", 2, int, 0, 10, "SYNs",
         help="Maximum SYN retransmissions (ASSUMED 2: Windows TcpMaxConnectRetransmissions "
              "default).", step=1),
    Knob("exploit_stall_s", 0.45, float, 0.0, 60.0, "s",
         help="Scan pause per connect that succeeded (SYN-ACK): the exploit is sent inline "
              "([BLA]: Sleep(400) then a blocking connect to 4444; ASSUMED the target does "
              "not open 4444, so ~0.45 s).  Needs an AddressPlan.", step=0.05),
    Knob("syn_length", 48, int, 40, 60, "B",
         help="IP length of a SYN (48: Windows XP options mss,nop,nop,sok per p0f 3.09b; 40 "
              "without options, 52 with window scaling).", step=4),
    Knob("scanned_before_s", 0.0, float, 0.0, 1e7, "s",
         help="How long each worm had been scanning before the run starts (its sequence "
              "is advanced by that many rounds).", step=60),
]}

WELCHIA_KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob("pps", 140.0, float, 0.1, 10_000.0, "pps",
         help="Echo requests per second per host ([NANOG]: > 500 000 per hour ~ 140/s).",
         step=10),
    Knob("local_fraction", 0.5, float, 0.0, 1.0, "",
         help="Share of class-B sweeps near the host's own /16 (UNVERIFIED; ASSUMED 0.5).",
         step=0.05),
    Knob("near_spread", 0, int, 0, 255, "/16s",
         help="A 'near' sweep takes the host's B plus or minus up to this (UNVERIFIED; "
              "ASSUMED 0 = its own /16).", step=1),
    Knob("jitter", 0.25, float, 0.0, 0.99, "gaps",
         help="Timing jitter of the echo train, as a fraction of the mean gap (ASSUMED).",
         step=0.05),
    Knob("random_phase", True, bool,
         help="Start the first sweep at a random point (a worm already running) rather "
              "than at .0.1."),
    Knob("echo_length", 92, int, 28, 1500, "B",
         help="IP length of an echo request ([ISC]: 92 bytes, 64 bytes of 0xAA data).",
         step=4),
    Knob("follow_up", True, bool,
         help="Send a TCP SYN to 135 to each address that answered the echo ([ISC][LL]: "
              "ping before exploiting).  Needs an AddressPlan."),
    Knob("followup_delay_s", 1e-3, float, 0.0, 10.0, "s",
         help="From the echo reply to the follow-up SYN (ASSUMED 1 ms).", step=1e-3),
]}

OUTSIDE_KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob("outside_blaster", 0, int, 0, 10_000, "hosts",
         help="Outside Blaster hosts whose sequential scan is inside the residence's block "
              "during the run (stories.md s1: the science network around it was infected).",
         step=1),
    Knob("outside_welchia", 0, int, 0, 10_000, "hosts",
         help="Outside Welchia hosts sweeping the residence's class B during the run.", step=1),
    Knob("scanner_net", "172.16.0.0/12", str, unit="prefix",
         help="Where the outside scanners' addresses come from (ASSUMED stand-in for the "
              "surrounding science network; any prefix behind the outside interface)."),
]}


def _knobs(specs: Mapping[str, Knob], **values):
    """Validate keyword values against their knobs; returns them in order."""
    return tuple(specs[name].validate(v) for name, v in values.items())


def _hosts(host, name: str = "host") -> np.ndarray:
    h = np.atleast_1d(np.asarray(host, dtype=np.int64))
    if h.ndim != 1 or ((h < 0) | (h > 0xFFFFFFFF)).any():
        raise KnobError(name, host, "an IPv4 address (int) or a 1-d array of them")
    h = h.astype(np.uint32)
    if not is_unicast(h).all():
        raise KnobError(name, host, "unicast host addresses (not 0/8, 127/8 or 224/3)")
    return h


def _times(duration: float, start: float) -> tuple[float, float]:
    if not (math.isfinite(duration) and math.isfinite(start)) or start < 0:
        raise KnobError("start", start, "a finite time >= 0 s")
    return float(duration), float(start)


# --------------------------------------------------------------------------- Blaster
# The increment of [BLA] (blaster_increment_ip_address, in our words): the
# last octet D runs up to 255; past it D restarts at 0 and C steps on.  C and
# B only run to 254: stepping past 254 restarts them at 0 and carries on.
# When the carry reaches A, the increment runs once more, so A.0.0.0 is
# skipped; past A = 254 everything restarts at 0.0.0.0.  So C = 255 and B = 255
# never occur (except in a start taken from the host's own address), and D
# visits .0 and .255 of every /24.  The states (A 0-254, B 0-254, C 0-254, D
# 0-255) are numbered as a mixed-radix counter; a probe is the next number
# that is not one of the skipped A.0.0.0.
_R = 255 * 255 * 256        # states per value of A
_N = 255 * _R               # the whole cycle (A = 0 ... 254)


def _octets(addr: int) -> tuple[int, int, int, int]:
    return (addr >> 24) & 255, (addr >> 16) & 255, (addr >> 8) & 255, addr & 255


def _state_index(a: int, b: int, c: int, d: int) -> int:
    return ((a * 255 + b) * 255 + c) * 256 + d


def _addr_of_state(x: np.ndarray) -> np.ndarray:
    x = x % _N
    d = x % 256
    y = x // 256
    c = y % 255
    y //= 255
    return (((y // 255) << 24) | ((y % 255) << 16) | (c << 8) | d).astype(np.uint32)


def _skipped_upto(x: np.ndarray) -> np.ndarray:
    """How many skipped states (A.0.0.0, A >= 1, unwrapped) lie in [1, x]."""
    return x // _R - x // _N


def _carry_to_a(a: int) -> int:
    """State index of the address the increment returns after a carry out of B."""
    return _state_index(a + 1, 0, 0, 1) if a + 1 <= 254 else 0


def _start_segment(start: int) -> tuple[np.ndarray, int]:
    """Probes before the counter is in its regular range, and the index after them.

    A start copied from the host's own address may have C or B = 255, which
    the increment never produces: it finishes that row (C = 255) or that
    block of rows (B = 255) and then carries.
    """
    a, b, c, d = _octets(start)
    if a > 254:
        raise KnobError("start", start, "a Blaster start state with A <= 254")
    if c == 255:
        row = np.arange(d + 1, 256, dtype=np.int64)
        seg = ((a << 24) | (b << 16) | (255 << 8) | row).astype(np.uint32)
        nxt = _state_index(a, b + 1, 0, 0) if b + 1 <= 254 else _carry_to_a(a)
        return seg, nxt - 1
    if b == 255:
        flat = np.arange(c * 256 + d + 1, 255 * 256, dtype=np.int64)
        seg = ((a << 24) | (255 << 16) | flat).astype(np.uint32)
        return seg, _carry_to_a(a) - 1
    return np.zeros(0, dtype=np.uint32), _state_index(a, b, c, d)


def blaster_targets(start: int, count: int, first: int = 0) -> np.ndarray:
    """Probe addresses ``first ... first+count-1`` of a Blaster scan from state ``start``.

    ``start`` is the worm's counter before its first increment (A.B.C.0
    after start-up), so probe 0 is A.B.C.1.  Vectorised and exact for any
    ``first`` (a worm that has been scanning for hours); wraps after the
    full cycle of ~4.2e9 states.
    """
    if count < 0 or first < 0:
        raise KnobError("count", count, "a number of probes >= 0")
    seg, i0 = _start_segment(int(start))
    out = [seg[first:first + count]]
    k = np.arange(max(0, first - seg.size), first + count - seg.size, dtype=np.int64)
    if k.size:
        # the k-th regular probe is the (k+1)-th state after i0 that is not
        # skipped: iterate x = i0 + 1 + k + (skips in (i0, x]) to its fixed point
        base = i0 + 1 + k
        s0 = _skipped_upto(np.int64(i0))
        x = base
        while True:
            nx = base + _skipped_upto(x) - s0
            if np.array_equal(nx, x):
                break
            x = nx
        out.append(_addr_of_state(x))
    return np.concatenate(out).astype(np.uint32)


def blaster_start(rng: np.random.Generator, host, *, local_fraction: float = 0.4,
                  same_tick_seed: bool = True, local_base=None) -> tuple[np.ndarray, np.ndarray]:
    """The counter each Blaster instance starts from, as [BLA] chooses it.

    In our words: the worm reads its own address A.B.C.D; if C > 20 it
    lowers C by rand() % 20 (it only scans upward, so it starts a little
    below itself).  Then it draws rand() % 20 again and, below 12 (60 %),
    discards the local start for a random one: A in 1-254, B and C in
    0-253.  D starts at 0.  Both draws follow ``srand(GetTickCount())`` a
    few instructions apart, so (``same_tick_seed``) they are the same
    number: a local start is then 12-19 /24s below the host, never 0-11.

    Parameters
    ----------
    host : int or array
        The infected hosts.
    local_fraction : float
        Share of local starts (8/20 in [BLA]; the modulo bias of a 15-bit
        rand() changes it by < 0.001 and is ignored).
    same_tick_seed : bool
        Offset equal to the local/random draw (True) or independent (False).
    local_base : int or array, optional
        The address the worm reads as its own (default ``host``; differs
        for a host behind NAT).

    Returns
    -------
    start : uint32 array   A.B.C.0 counters, one per host
    local : bool array     which hosts took the local branch
    """
    (local_fraction, same_tick_seed) = _knobs(BLASTER_KNOBS, local_fraction=local_fraction,
                                              same_tick_seed=same_tick_seed)
    h = _hosts(host)
    own = h if local_base is None else _hosts(local_base, "local_base")
    if own.shape != h.shape:
        raise KnobError("local_base", local_base, "one address per host")
    n = h.size
    u = rng.random(n)
    # [BLA]: random start when rand() % 20 < 12; generalised to any share
    local = u >= 1.0 - local_fraction
    r = np.minimum((u * 20).astype(np.int64), 19)
    offset = r if same_tick_seed else rng.integers(0, 20, n)
    a = rng.integers(0, 254, n) + 1
    b = rng.integers(0, 254, n)
    c = rng.integers(0, 254, n)
    own_c = ((own >> np.uint32(8)) & np.uint32(255)).astype(np.int64)
    loc_c = np.where(own_c > 20, own_c - offset, own_c)
    loc = (own.astype(np.int64) & 0xFFFF0000) | (loc_c << 8)
    rnd = (a << 24) | (b << 16) | (c << 8)
    return np.where(local, loc, rnd).astype(np.uint32), local


def blaster(rng: np.random.Generator, *, host, duration: float, start: float = 0.0,
            rate_per_round: int = 20, round_s: float = 1.8, local_fraction: float = 0.4,
            local_base=None, dev: int = 0, plan: AddressPlan | None = None,
            starts=None, same_tick_seed: bool = True, connect_gap_s: float = 2e-4,
            sleep_jitter_s: float = 0.015625, syn_retransmit: bool = True,
            syn_rto_s: float = 3.0, syn_retries: int = 2, exploit_stall_s: float = 0.45,
            syn_length: int = 48, scanned_before_s: float = 0.0,
            only_routed: bool = True) -> PacketTrace:
    """TCP/135 SYNs of Blaster-infected hosts, round by round.

    Each host starts from :func:`blaster_start` (or ``starts``) and probes
    the addresses of :func:`blaster_targets` in order.  A round opens
    ``rate_per_round`` non-blocking sockets, connects them to the next
    addresses ``connect_gap_s`` apart, sleeps ``round_s`` (plus up to
    ``sleep_jitter_s``), then tests each socket in turn: a socket that
    connected is exploited at once (``exploit_stall_s`` of blocking work),
    every socket is closed, and the next round begins.  Rounds of different
    hosts are unsynchronised (a random phase of up to one round).  Default
    rate: 20 / (1.8 s + 4 ms + ~8 ms) ~ 11 new destinations/s per host.

    SYN retransmission: the socket of an unanswered SYN stays open until its
    test after the sleep, and ``closesocket`` then abandons the attempt.  So
    Windows' retransmissions (``syn_rto_s`` = 3 s, then 6 s later,
    ``syn_retries`` = 2) go out only if they fall before that close: none
    with the original 1.8 s sleep, one with the 4 s variant.  Without a
    ``plan`` every SYN counts as unanswered.

    Addresses that are not unicast (0/8, 127/8, 224/3: random starts above
    223 are [BLA]'s "bad ranges") are used up by a socket but send no
    packet (ASSUMED: Winsock refuses a TCP connect there).

    Parameters
    ----------
    host : int or array       infected hosts (source addresses)
    duration, start : float   probes are sent in [start, duration) [s]
    dev : int                 router interface the probes arrive on
    plan : AddressPlan, optional
        Decides which targets answer (SYN-ACK -> exploit stall, answered ->
        no retransmission) and, with ``only_routed``, drops probes that do
        not reach the router (targets in the host's own subnet).
    starts : array, optional  start counters overriding :func:`blaster_start`
    The other parameters are the knobs of :data:`BLASTER_KNOBS`.

    Returns
    -------
    PacketTrace
        proto 6, length ``syn_length``, TTL 128, DF set (Windows XP), tag =
        transmission number (0 first SYN, 1.. retransmissions).
    """
    duration, start = _times(duration, start)
    kn = _knobs(BLASTER_KNOBS, rate_per_round=rate_per_round, round_s=round_s,
                connect_gap_s=connect_gap_s, sleep_jitter_s=sleep_jitter_s,
                syn_retransmit=syn_retransmit, syn_rto_s=syn_rto_s, syn_retries=syn_retries,
                exploit_stall_s=exploit_stall_s, syn_length=syn_length,
                scanned_before_s=scanned_before_s)
    hosts = _hosts(host)
    if starts is None:
        starts, _ = blaster_start(rng, hosts, local_fraction=local_fraction,
                                  same_tick_seed=same_tick_seed, local_base=local_base)
    starts = np.atleast_1d(np.asarray(starts, dtype=np.uint32))
    if starts.shape != hosts.shape:
        raise KnobError("starts", starts, "one start counter per host")
    parts = [_blaster_host(rng, int(h), int(s), duration, start, dev, plan, only_routed, *kn)
             for h, s in zip(hosts, starts, strict=True)]
    return PacketTrace.concat(parts)


def _blaster_host(rng, host, state, duration, start, dev, plan, only_routed, rate, round_s,
                  gap, jitter, retransmit, rto, retries, stall_s, length,
                  before_s) -> PacketTrace:
    base_period = round_s + rate * gap + jitter / 2
    first = int(before_s / base_period) * rate
    phase = rng.uniform(0.0, round_s)
    n_rounds = max(0, int(math.ceil((duration - start - phase) / (round_s + rate * gap))) + 1)
    jit = rng.uniform(0.0, jitter, n_rounds) if jitter > 0 else np.zeros(n_rounds)
    if n_rounds == 0:
        return PacketTrace.build(np.zeros(0), saddr=0, daddr=0)
    dst = blaster_targets(state, n_rounds * rate, first).reshape(n_rounds, rate)
    sent = is_unicast(dst)
    if plan is not None:
        resp = np.where(sent, plan.responds(dst, 6), REPLY["none"])
    else:
        resp = np.full(dst.shape, REPLY["none"], dtype=np.int8)
    stall = np.where(resp == REPLY["syn_ack"], stall_s, 0.0)
    # each round: connects, sleep, then the sockets tested in order, an
    # exploit inline for each that connected
    busy = rate * gap + round_s + jit
    t_round = start + phase + np.concatenate([[0.0], np.cumsum(busy + stall.sum(1))[:-1]])
    t_syn = t_round[:, None] + gap * np.arange(rate)
    t_close = (t_round + busy)[:, None] + np.cumsum(stall, axis=1) - stall
    ts, ds, tags = [t_syn[sent]], [dst[sent]], [np.zeros(int(sent.sum()), dtype=np.int32)]
    if retransmit:
        unanswered = sent & (resp == REPLY["none"])
        for r in range(1, retries + 1):
            t_r = t_syn + rto * (2.0**r - 1.0)
            ok = unanswered & (t_r < t_close)
            if not ok.any():
                break
            ts.append(t_r[ok])
            ds.append(dst[ok])
            tags.append(np.full(int(ok.sum()), r, dtype=np.int32))
    t = np.concatenate(ts)
    d = np.concatenate(ds)
    tag = np.concatenate(tags)
    keep = t < duration
    if plan is not None and only_routed:
        keep &= plan.reaches_router(np.uint32(host), d)
    return PacketTrace.build(t[keep], iif=dev, saddr=host, daddr=d[keep], proto=6,
                             length=length, ttl=128, df=True, kind=KIND["worm"],
                             tag=tag[keep])


# --------------------------------------------------------------------------- Welchia
_SWEEP = 256 * 254          # echo targets in one class B: x.y.c.1 - x.y.c.254


def welchia_targets(net16: int, positions: np.ndarray) -> np.ndarray:
    """Address of each sweep position in the class B ``net16`` (A.B.0.0).

    Position p is A.B.(p // 254).(p % 254 + 1): the /24s in order, hosts
    .1-.254 of each (UNVERIFIED: the real order is not documented).
    """
    p = np.asarray(positions, dtype=np.int64)
    return ((int(net16) & 0xFFFF0000) | ((p // 254) << 8) | (p % 254 + 1)).astype(np.uint32)


def welchia(rng: np.random.Generator, *, host, duration: float, start: float = 0.0,
            pps: float = 140.0, local_fraction: float = 0.5, near_spread: int = 0,
            jitter: float = 0.25, random_phase: bool = True, dev: int = 0,
            plan: AddressPlan | None = None, follow_up: bool = True,
            followup_delay_s: float = 1e-3, echo_length: int = 92,
            first_net=None, only_routed: bool = True) -> PacketTrace:
    """ICMP echo sweeps of Welchia/Nachi-infected hosts.

    Sourced: 92-byte echo requests with 0xAA data [ISC] (the trace has no
    payload), a localized class-B sweep [LL], > 500 000 echoes per hour per
    host, ~140/s [NANOG], and a ping before the TCP exploit attempt.

    **UNVERIFIED address algorithm** (no source found; a plausible stand-in):
    each host sweeps one class B at a time, sequentially through
    :func:`welchia_targets` (/24 by /24, hosts .1-.254).  Each class B is,
    with probability ``local_fraction``, the host's own A.B (B moved by up to
    ``near_spread``), else a random unicast A.B.  With ``random_phase`` the
    first sweep starts at a random position (a worm already running).
    Echoes are evenly spaced at ``pps`` with a uniform jitter of
    ``jitter`` gaps (ASSUMED: timing undocumented).

    With a ``plan`` and ``follow_up``, each target that answers the echo
    gets one TCP SYN to 135 (48 bytes) ``followup_delay_s`` after the reply
    (ASSUMED: one attempt, port 135 only; Welchia also tried 80).

    Parameters
    ----------
    host : int or array        infected hosts
    duration, start : float    echoes are sent in [start, duration) [s]
    dev : int                  router interface the packets arrive on
    plan : AddressPlan, optional
        Answers for the follow-up SYNs; with ``only_routed``, drops packets
        that do not reach the router.
    first_net : int, optional  class B of every host's first sweep
    The other parameters are the knobs of :data:`WELCHIA_KNOBS`.

    Returns
    -------
    PacketTrace
        Echoes: proto 1, ``echo_length`` B, TTL 128, DF clear.  Follow-ups:
        proto 6, 48 B, DF set.  tag 0.
    """
    duration, start = _times(duration, start)
    kn = _knobs(WELCHIA_KNOBS, pps=pps, local_fraction=local_fraction,
                near_spread=near_spread, jitter=jitter, random_phase=random_phase,
                echo_length=echo_length, follow_up=follow_up,
                followup_delay_s=followup_delay_s)
    parts = []
    for h in _hosts(host):
        parts += _welchia_host(rng, int(h), duration, start, dev, plan, first_net,
                               only_routed, *kn)
    return PacketTrace.concat(parts)


def _random_net16(rng, n: int) -> np.ndarray:
    # A in 1-223 without 127 (unicast, not loopback), B in 0-255
    a = rng.integers(1, 223, n)
    a = a + (a >= 127)
    return (a << 24) | (rng.integers(0, 256, n) << 16)


def _welchia_host(rng, host, duration, start, dev, plan, first_net, only_routed, pps,
                  local_fraction, spread, jitter, random_phase, length, follow_up,
                  delay) -> list[PacketTrace]:
    count = max(0, int(math.ceil((duration - start) * pps - 1e-9)))
    k = np.arange(count, dtype=np.int64)
    t = start + (k + 0.5 + jitter * rng.uniform(-0.5, 0.5, count)) / pps
    p0 = int(rng.integers(0, _SWEEP)) if random_phase else 0
    sweep, pos = np.divmod(p0 + k, _SWEEP)
    n_sweeps = int(sweep[-1]) + 1 if count else 0
    near = rng.random(n_sweeps) < local_fraction
    b = ((host >> 16) & 255) + rng.integers(-spread, spread + 1, n_sweeps)
    own = (host & 0xFF000000) | (np.clip(b, 0, 255) << 16)
    nets = np.where(near, own, _random_net16(rng, n_sweeps))
    if first_net is not None and n_sweeps:
        nets[0] = int(first_net) & 0xFFFF0000
    d = welchia_targets(0, pos) | nets[sweep].astype(np.uint32)
    t = t[t < duration]
    d = d[: t.size]
    out = [PacketTrace.build(t, iif=dev, saddr=host, daddr=d, proto=1, length=length,
                             ttl=128, kind=KIND["worm"], tag=0)]
    if plan is not None and follow_up:
        ans = plan.responds(d, 1) == REPLY["echo_reply"]
        ts = t[ans] + plan.rtt(rng, d[ans]) + delay
        ds = d[ans]
        ok = ts < duration
        out.append(PacketTrace.build(ts[ok], iif=dev, saddr=host, daddr=ds[ok], proto=6,
                                     length=48, ttl=128, df=True, kind=KIND["worm"], tag=0))
    if plan is not None and only_routed:
        out = [tr.take(plan.reaches_router(np.uint32(host), tr.daddr)) for tr in out]
    return out


# --------------------------------------------------------------------------- outside
def outside_scanners(rng: np.random.Generator, *, plan: AddressPlan, duration: float,
                     start: float = 0.0, outside_blaster: int = 0, outside_welchia: int = 0,
                     scanner_net: str = "172.16.0.0/12", blaster_kw: dict | None = None,
                     welchia_kw: dict | None = None) -> PacketTrace:
    """Probes of infected hosts outside that land in the residence's block.

    stories.md s1: many hosts of the surrounding science network were
    infected.  A sequential scanner that started below the residence's
    block enters it after a while and then spends ~1.6 h (Blaster, a /16 at
    11/s) or ~8 min (Welchia, at 140/s) inside it.  ``outside_blaster`` and
    ``outside_welchia`` count the scanners *inside the block during the
    run*: each Blaster host's counter starts at a random /24 of
    ``plan.inside_net``, each Welchia host's first sweep is the block's
    class B at a random position.  They run the same algorithms as
    :func:`blaster` and :func:`welchia` (options in ``blaster_kw``,
    ``welchia_kw``); only probes to ``plan.inside_net`` are kept (the rest
    never meet this router), arriving on ``plan.outside_dev``.  Source
    addresses: distinct random addresses of ``scanner_net``.
    """
    nb, nw, scanner_net = _knobs(OUTSIDE_KNOBS, outside_blaster=outside_blaster,
                                 outside_welchia=outside_welchia, scanner_net=scanner_net)
    try:
        snet, splen = parse_prefix(scanner_net)
    except KnobError:
        raise KnobError("scanner_net", scanner_net, "an IPv4 prefix such as "
                        "'172.16.0.0/12'") from None
    if in_prefix(np.uint32(snet), plan.net, plan.plen) or in_prefix(
            np.uint32(plan.net), snet, splen):
        raise KnobError("scanner_net", scanner_net, f"a prefix outside {plan.inside_net}")
    size = 1 << (32 - splen)
    if nb + nw > size - 2:
        raise KnobError("outside_blaster", nb, f"at most {size - 2} scanners in {scanner_net}")
    src = (snet + 1 + rng.choice(size - 2, nb + nw, replace=False)).astype(np.uint32)
    parts = []
    if nb:
        rows = 1 << (24 - plan.plen)
        row = rng.integers(0, rows, nb)
        states = (plan.net + (row << 8)).astype(np.int64)
        # the counter never holds B or C = 255: move such rows down by one
        states = np.where((states >> 8) & 255 == 255, states - 256, states)
        states = np.where((states >> 16) & 255 == 255, states - 65536, states)
        tr = blaster(rng, host=src[:nb], duration=duration, start=start,
                     starts=states.astype(np.uint32), dev=plan.outside_dev, plan=plan,
                     only_routed=False, **(blaster_kw or {}))
        parts.append(tr)
    if nw:
        net16 = plan.net & prefix_mask(16)
        tr = welchia(rng, host=src[nb:], duration=duration, start=start, first_net=net16,
                     dev=plan.outside_dev, plan=plan, only_routed=False, **(welchia_kw or {}))
        parts.append(tr)
    parts = [tr.take(plan.inside(tr.daddr)) for tr in parts]
    return PacketTrace.concat(parts)


# --------------------------------------------------------------------------- replies
def replies(trace: PacketTrace, plan: AddressPlan, *, rng: np.random.Generator,
            kinds: tuple[int, ...] = (KIND["worm"],)) -> PacketTrace:
    """The packets that come back for the probes of ``trace``.

    For each probe of a kind in ``kinds`` (TCP packets are taken as SYNs to
    135, UDP as datagrams to a closed port), :meth:`AddressPlan.responds`
    decides the answer: SYN-ACK (48 B, DF) or RST (40 B, DF) for TCP, an
    echo reply of the request's length for ICMP, ICMP port-unreachable
    (56 B) for UDP, nothing from dead or firewalled addresses.  The reply
    leaves the responder to the prober, arriving on ``plan.inside_dev`` when
    the responder is inside and ``plan.outside_dev`` otherwise, at the
    probe's arrival time plus :meth:`AddressPlan.rtt` (ASSUMED delays).
    Probes to the router's own addresses get no reply here: the router
    answers those itself.

    A precomputed trace: it ignores the router's own delays and drops on the
    way out (ARP resolution waiting, backlog, a probe the router dropped
    still gets its reply here).  It stands in until the engine lets hosts
    react inside the run.  ``tag`` = index of the probe in ``trace``; TTL
    128 from inside (Windows), 112 from outside (ASSUMED 16 hops).
    """
    idx = np.flatnonzero(np.isin(trace.kind, np.asarray(kinds, dtype=np.uint8))
                         & ~plan.router_local(trace.daddr))
    d = trace.daddr[idx]
    code = plan.responds(d, trace.proto[idx])
    ans = code != REPLY["none"]
    idx, d, code = idx[ans], d[ans], code[ans]
    length = np.select([code == REPLY["syn_ack"], code == REPLY["rst"],
                        code == REPLY["port_unreach"]],
                       [REPLY_LENGTH["syn_ack"], REPLY_LENGTH["rst"],
                        REPLY_LENGTH["port_unreach"]], trace.length[idx])
    proto = np.where((code == REPLY["syn_ack"]) | (code == REPLY["rst"]), 6, 1)
    ins = plan.inside(d)
    return PacketTrace.build(trace.t[idx] + plan.rtt(rng, d), saddr=d, daddr=trace.saddr[idx],
                             iif=np.where(ins, plan.inside_dev, plan.outside_dev),
                             proto=proto, length=length, ttl=np.where(ins, 128, 112),
                             df=proto == 6, kind=KIND["worm"], tag=idx)
