"""Traffic generators: numpy arrays of packets from an explicit Generator.

Every generator takes a ``numpy.random.Generator`` so that the same seed
gives the same packets.  Nothing here is kernel behaviour; the docstrings
say what each traffic source stands for.
"""

from __future__ import annotations

import math

import numpy as np

from .core.skbuff import KIND, PacketTrace
from .errors import KnobError, RoutelabError

__all__ = ["SIZE_MIXES", "poisson_times", "background", "pings", "scanners", "addr_block",
           "Pktgen", "TraceWindows", "FLOW_ORDERS", "PcapError", "PcapCapture", "read_pcap",
           "from_pcap"]

# Packet-size mixes: (IP lengths, probabilities).
SIZE_MIXES = {
    # story 1: "about 10 Mbit/s, mostly large packets" -- downloads and their ACKs
    "large": ((1500, 576, 52), (0.70, 0.05, 0.25)),
    # the classic 7:4:1 "simple IMIX" (40, 576, 1500 bytes)
    "imix": ((40, 576, 1500), (7 / 12, 4 / 12, 1 / 12)),
    # minimum-size frames (pktgen's 60-byte packets carry 46 bytes of IP)
    "small": ((46,), (1.0,)),
}

MAX_PACKETS = 40_000_000  # refuse runs that would not fit a student's 2 GB server


def addr_block(base: str | int, count: int) -> np.ndarray:
    """``count`` consecutive addresses starting at ``base`` (uint32)."""
    from .core.skbuff import ip_to_int

    b = ip_to_int(base) if isinstance(base, str) else int(base)
    return (np.uint64(b) + np.arange(count, dtype=np.uint64)).astype(np.uint32)


def poisson_times(rng: np.random.Generator, rate: float, duration: float,
                  start: float = 0.0) -> np.ndarray:
    """Arrival times of a Poisson process of ``rate`` per second on [start, duration)."""
    if rate <= 0 or duration <= start:
        return np.zeros(0)
    expected = rate * (duration - start)
    if expected > MAX_PACKETS:
        raise KnobError("offered packets", int(expected),
                        f"at most {MAX_PACKETS:,} packets per run (lower the rate or duration)")
    n = rng.poisson(expected)
    return np.sort(rng.uniform(start, duration, n))


def background(rng: np.random.Generator, *, pps: float, duration: float, inside: np.ndarray,
               outside: np.ndarray, mix: str = "large", down_fraction: float = 0.6,
               lan_dev: int = 0, wan_dev: int = 1, flows: int = 2000) -> PacketTrace:
    """Ordinary traffic between inside hosts and outside hosts.

    ``flows`` long-lived host pairs carry the packets (Zipf-like popularity,
    so a few pairs are busy and many are occasional); a fraction
    ``down_fraction`` travels outside -> inside.
    """
    if mix not in SIZE_MIXES:
        raise KnobError("size_mix", mix, "one of " + ", ".join(SIZE_MIXES))
    t = poisson_times(rng, pps, duration)
    n = t.size
    npairs = max(1, int(flows))
    pair_in = rng.integers(0, inside.size, npairs)
    pair_out = rng.integers(0, outside.size, npairs)
    w = 1.0 / np.arange(1, npairs + 1) ** 0.8
    pair = rng.choice(npairs, size=n, p=w / w.sum())
    sizes, probs = SIZE_MIXES[mix]
    length = rng.choice(np.asarray(sizes), size=n, p=np.asarray(probs))
    down = rng.random(n) < down_fraction
    src = np.where(down, outside[pair_out[pair]], inside[pair_in[pair]])
    dst = np.where(down, inside[pair_in[pair]], outside[pair_out[pair]])
    iif = np.where(down, wan_dev, lan_dev)
    proto = np.where(length >= 500, 6, 17)
    return PacketTrace.build(t, iif=iif, saddr=src, daddr=dst, length=length, proto=proto,
                             kind=KIND["background"], ttl=60)


def pings(*, interval: float, duration: float, src: int, dst: int, dev: int,
          size: int = 84, start: float = 0.05, ttl: int = 64) -> PacketTrace:
    """ICMP echo requests every ``interval`` seconds (``tag`` = sequence number)."""
    t = np.arange(start, duration, interval)
    return PacketTrace.build(t, iif=dev, saddr=src, daddr=dst, length=size, proto=1,
                             kind=KIND["ping_request"], tag=np.arange(t.size), ttl=ttl)


def scanners(rng: np.random.Generator, *, hosts: np.ndarray, pps: float, duration: float,
             dev: int = 0, icmp_fraction: float = 0.5) -> PacketTrace:
    """Worm-infected hosts probing pseudo-random addresses.

    Each host sends ``pps`` probes per second to uniformly random public
    addresses (UDP 135/137-style datagrams or 92-byte ICMP echoes), so
    nearly every probe has a destination never seen before.
    """
    parts = []
    for h in hosts:
        t = poisson_times(rng, pps, duration)
        n = t.size
        # random unicast addresses in 1.0.0.0 - 223.255.255.255, not 127/8
        d = rng.integers(0x01000000, 0xE0000000, n, dtype=np.int64).astype(np.uint32)
        d = np.where((d >> 24) == 127, d ^ np.uint32(0x80000000), d).astype(np.uint32)
        icmp = rng.random(n) < icmp_fraction
        parts.append(PacketTrace.build(t, iif=dev, saddr=h, daddr=d,
                                       length=np.where(icmp, 92, 78),
                                       proto=np.where(icmp, 1, 17), kind=KIND["worm"], ttl=128))
    return PacketTrace.concat(parts)


# --------------------------------------------------------------------------- pktgen
FLOW_ORDERS = ("sequential", "random")


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser: a well-mixed 64-bit hash of uint64 ``x`` (vectorised)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


class Pktgen:
    """A pktgen-like flood of minimum-size UDP packets with ``flows`` concurrent flows.

    Stands for the Linux ``pktgen`` module as Robert Olsson drove it for the
    route-cache DoS tests (kernel.md s4: "60-byte packets, clone_skb 1, ipg 0,
    random dst, 32768 flows, flowlen 10"; stories.md s2: "32768 concurrent
    flows of 10 packets each").  Each flow sends ``flow_len`` packets to one
    random destination, then moves on to a new random destination.

    ``order`` says in which order the flows take turns:

    * ``"sequential"`` (default): pktgen's flow picker stays on the current
      flow until it has sent ``flow_len`` packets, then goes to the next flow
      (flow 0, 1, ..., flows-1, 0, ...), so a flow's packets are consecutive
      on the wire.  This is our reading of "concurrent flows of ``flow_len``
      packets" in the brief: flows are *concurrent* in that each keeps its
      destination for a whole cycle through all flows, and each *turn* of a
      flow is ``flow_len`` back-to-back packets.  Unverified against the
      2004 pktgen source (the brief gives no code); it is the reading under
      which in_hit + in_slow_tot = RX-OK and in_hit/(in_hit+in_slow) ~ 85 %
      in the report are possible (one miss per ``flow_len`` packets at best).
    * ``"random"``: every packet picks a random flow, and a flow keeps its
      destination for ``flow_len + 1`` packets -- the rule of the earliest
      pktgen source with flows, v2.58 in 2.6.11 (net/core/pktgen.c
      mod_cur_headers, v2.6.11.1, MaximeChretien/linux-history): the flow is
      drawn at random per packet, its count is reset to 0 once it is above
      ``flowlen``, a count of 0 draws a new destination, and the count goes
      up after each packet.  Packets of a flow are spread over the whole
      flow cycle, so ~2 x 32768 live destinations share the cache.

    What the sources say about the 2004 set-up: the pktgen in the 2.6.0 and
    2.6.9 trees (versions 1.3 and 1.32, net/core/pktgen.c) has no flows at
    all -- each packet gets a random destination in ``dst_min..dst_max``
    (``F_IPDST_RND``) or the next one in turn -- so Olsson's "32768 flows,
    flowlen 10" came from his own newer pktgen, not in any tree of 2004.
    The first one in a tree (2.6.11) takes a random flow per packet, against
    the ``"sequential"`` reading; with it the model's in_hit share falls to
    about 16 % (the report: ~85 %).  ``"sequential"`` stays the calibration
    default as a fitted traffic reading, contradicted by the earliest
    available source (docs/calibration-story2.md).

    Arrivals are evenly spaced at ``pps`` (pktgen with ipg 0 sends at the
    rate the box can, which we take as constant), with a small jitter.
    Packets are generated window by window (:meth:`window`), identically
    whatever the windows, so a long run never holds its whole trace.

    Parameters
    ----------
    pps : float        packets per second
    flows : int        concurrent flows
    flow_len : int     packets per flow before it moves to a new destination
    saddr : int        source address (one pktgen box)
    dev : int          input device index at the router
    seed : int         seed of the destinations and jitter
    order : str        ``"sequential"`` or ``"random"``
    """

    #: IP total length of every packet: pktgen's 60-byte frames carry 46 bytes of IP
    IP_BYTES = 46

    def __init__(self, *, pps: float, flows: int, flow_len: int, saddr: int, dev: int,
                 seed: int, order: str = "sequential") -> None:
        if order not in FLOW_ORDERS:
            raise KnobError("flow_order", order, "one of " + ", ".join(FLOW_ORDERS))
        self.pps = float(pps)
        self.flows = int(flows)
        self.flow_len = int(flow_len)
        self.saddr = int(saddr)
        self.dev = int(dev)
        self.order = order
        self.key = np.uint64(int(np.random.default_rng(seed).integers(0, 2**62)))
        # ``random`` order: packets each flow has sent so far (carried across windows)
        self._sent = np.zeros(self.flows, dtype=np.int64) if order == "random" else None
        self._next_k = 0

    def count(self, t0: float, t1: float) -> tuple[int, int]:
        """Index range [k0, k1) of the packets sent in [t0, t1)."""
        return int(math.ceil(t0 * self.pps - 1e-9)), int(math.ceil(t1 * self.pps - 1e-9))

    def window(self, t0: float, t1: float) -> PacketTrace:
        """The packets sent in [t0, t1) (windows must be asked for in time order)."""
        k0, k1 = self.count(t0, t1)
        k = np.arange(k0, k1, dtype=np.int64)
        ku = k.astype(np.uint64)
        # evenly spaced, jittered by up to a quarter of the gap (keeps the order)
        jit = (_mix64(ku ^ self.key) >> np.uint64(11)).astype(np.float64) / 2.0**53
        t = (k + 0.25 * jit) / self.pps
        if self.order == "sequential":
            turn = k // self.flow_len
            flow = turn % self.flows
            epoch = turn // self.flows
        else:
            if k0 != self._next_k:
                raise ValueError("Pktgen.window: random order needs consecutive windows")
            flow = (_mix64(ku + self.key * np.uint64(3)) % np.uint64(self.flows)).astype(np.int64)
            order = np.argsort(flow, kind="stable")
            counts = np.bincount(flow, minlength=self.flows)
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            rank = np.empty(k.size, dtype=np.int64)
            rank[order] = np.arange(k.size) - np.repeat(starts, counts)
            # (pktgen v2.58: a destination lasts flowlen + 1 packets)
            epoch = (self._sent[flow] + rank) // (self.flow_len + 1)
            self._sent += counts
        self._next_k = k1
        x = _mix64(flow.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
                   + epoch.astype(np.uint64) * np.uint64(0xD1B54A32D192ED03) + self.key)
        # a public unicast destination in 1.0.0.0 - 222.255.255.255, not 127/8
        d = (np.uint64(0x01000000) + x % np.uint64(0xDE000000)).astype(np.uint32)
        d = np.where((d >> 24) == 127, d ^ np.uint32(0x80000000), d).astype(np.uint32)
        return PacketTrace.build(t, iif=self.dev, saddr=self.saddr, daddr=d, length=self.IP_BYTES,
                                 proto=17, kind=KIND["flood"], ttl=64)


class TraceWindows:
    """An offered trace produced window by window, for runs too long to hold at once.

    ``Router.run`` accepts it in place of a :class:`PacketTrace`: it asks for
    the packets of [0, w), [w, 2w), ... and simulates each window before
    generating the next, so memory stays bounded by one window.

    Parameters
    ----------
    make : callable(t0, t1) -> PacketTrace
        Packets arriving in [t0, t1), sorted by time.
    duration : float
        End of the last window.
    window : float
        Window length, seconds.
    expected : int
        Expected number of packets (checked against the run's packet limit).
    """

    def __init__(self, make, duration: float, window: float, expected: int) -> None:
        if not window > 0:
            raise KnobError("window", window, "a positive number of seconds")
        self.make = make
        self.duration = float(duration)
        self.window = float(window)
        self.expected = int(expected)

    def __len__(self) -> int:
        return self.expected

    def windows(self):
        """Yield ``(t1, PacketTrace)`` for consecutive windows ending at ``t1``."""
        nw = max(1, int(math.ceil(self.duration / self.window - 1e-9)))
        for w in range(nw):
            t0 = w * self.window
            t1 = self.duration if w == nw - 1 else (w + 1) * self.window
            yield t1, self.make(t0, t1)


# --------------------------------------------------------------------------- pcap files
class PcapError(RoutelabError, ValueError):
    """A capture file that cannot be replayed (not a pcap, truncated, no IPv4 in it)."""


# link types dpkt decodes here (pcap LINKTYPE_* numbers): name, dpkt module.class or None
# for raw IP (the frame is the IP header)
_LINKTYPES = {0: ("null/loopback", "loopback.Loopback"), 1: ("ethernet", "ethernet.Ethernet"),
              12: ("raw IP", None), 14: ("raw IP", None), 101: ("raw IP", None),
              108: ("OpenBSD loopback", "loopback.Loopback"),
              113: ("Linux cooked (SLL)", "sll.SLL"), 276: ("Linux cooked v2 (SLL2)", "sll2.SLL2")}
_ETHERTYPE_NAMES = {0x86DD: "ipv6", 0x0806: "arp"}


class _ReadWatch:
    """File wrapper noting short reads: dpkt's readers stop quietly at a record cut
    short by the end of the file; a short read that is not the file's last, or one
    that got part of what it asked for, means the capture was truncated."""

    def __init__(self, f) -> None:
        self.f, self.reads, self.short = f, 0, None

    def read(self, n: int = -1) -> bytes:
        buf = self.f.read(n)
        self.reads += 1
        if self.short is None and n is not None and n > 0 and len(buf) < n:
            self.short = (self.reads, n, len(buf), self.f.tell())
        return buf

    def __getattr__(self, name):
        return getattr(self.f, name)

    def truncated(self) -> tuple[int, int, int] | None:
        """``(asked, got, offset)`` of a read that shows the file was cut, else None."""
        if self.short is None:
            return None
        nread, asked, got, offset = self.short
        if got == 0 and nread == self.reads:
            return None           # the end of the file, where a record would start
        return asked, got, offset


class PcapCapture:
    """What :func:`read_pcap` found: the IPv4 trace and the frames it skipped.

    Attributes
    ----------
    trace : PacketTrace
        The IPv4 packets, ``t`` in seconds from the first frame of the capture.
    start : float
        Capture time of the first frame (seconds since the epoch).
    frames : int
        Frames in the file.
    skipped : dict
        Frames not replayed, by reason: ``ipv6``, ``arp``, ``other`` (any other
        network protocol), ``bad_ipv4`` (an IPv4 header too short or not parsable).
    linktype : str
        The capture's link type.
    """

    def __init__(self, trace, start: float, frames: int, skipped: dict, linktype: str) -> None:
        self.trace, self.start, self.frames = trace, start, frames
        self.skipped, self.linktype = skipped, linktype

    @property
    def span(self) -> float:
        """Seconds from the first to the last IPv4 packet."""
        return float(self.trace.t[-1] - self.trace.t[0]) if len(self.trace) else 0.0

    def __repr__(self) -> str:
        skipped = ", ".join(f"{v} {k}" for k, v in self.skipped.items() if v) or "none"
        return (f"PcapCapture({len(self.trace)} IPv4 packets of {self.frames} frames, "
                f"{self.linktype}, {self.span:.3f} s; skipped: {skipped})")


def _network_layer(dpkt, frame, decoder):
    """``(ethertype-like name, IPv4 bytes or dpkt IP)`` of one frame."""
    if decoder is None:                                   # raw IP
        version = frame[0] >> 4 if frame else 0
        return ("ipv4", frame) if version == 4 else ("ipv6" if version == 6 else "other", None)
    pkt = decoder(frame)
    data = pkt.data
    if isinstance(data, dpkt.ip.IP):
        return "ipv4", data
    etype = getattr(pkt, "type", getattr(pkt, "ethtype", None))
    if isinstance(pkt, dpkt.loopback.Loopback):
        family = getattr(pkt, "family", None)
        if family == 2:
            return "ipv4", bytes(data)
        return ("ipv6" if family in (10, 24, 28, 30) else "other"), None
    if etype == 0x0800:
        return "ipv4", bytes(data)
    return _ETHERTYPE_NAMES.get(etype, "other"), None


def read_pcap(path, *, iif: int = 0, kind: str = "background") -> PcapCapture:
    """Read a pcap or pcapng file's IPv4 packets with dpkt (pinned in requirements.txt).

    Each IPv4 packet becomes one row of a :class:`~routelab.core.skbuff.PacketTrace`:
    its capture time (seconds after the first frame), source and destination,
    total length (the IP header's, so a capture cut at a small snaplen still
    gives the real sizes), TTL, protocol, TOS, DF, and its fragment fields (id,
    offset, MF).  ``iif`` and ``kind`` are set on every packet (the caller
    decides which side of a router each packet arrives on).  Non-IPv4 frames
    (IPv6, ARP, ...) are counted in ``skipped`` and left out.

    Raises
    ------
    PcapError
        Not a pcap/pcapng file, an unsupported link type, a file cut short in
        the middle of a record, or no IPv4 packet at all.
    """
    from .core.skbuff import KIND

    try:
        import dpkt
        import dpkt.loopback
        import dpkt.sll
        import dpkt.sll2
    except ImportError:
        raise PcapError("reading a pcap needs dpkt (pip install -r requirements.txt)") from None
    if kind not in KIND:
        raise KnobError("kind", kind, "one of " + ", ".join(KIND))
    name = str(path)
    cols = {k: [] for k in ("t", "saddr", "daddr", "length", "ttl", "proto", "tos", "df",
                            "frag_id", "frag_off", "mf")}
    skipped = {"ipv6": 0, "arp": 0, "other": 0, "bad_ipv4": 0}
    frames = 0
    try:
        f = open(path, "rb")
    except OSError as exc:
        raise PcapError(f"{name}: cannot open: {exc.strerror or exc}") from None
    with f:
        watch = _ReadWatch(f)
        try:
            reader = dpkt.pcap.UniversalReader(watch)
        except (ValueError, dpkt.NeedData, dpkt.UnpackError) as exc:
            raise PcapError(f"{name}: not a pcap or pcapng capture ({exc})") from None
        watch.reads, watch.short = 0, None     # the file header is read; records follow
        link = reader.datalink()
        if link not in _LINKTYPES:
            raise PcapError(f"{name}: link type {link} is not supported: expected one of "
                            + ", ".join(f"{k} ({v[0]})" for k, v in _LINKTYPES.items()))
        linkname, dec = _LINKTYPES[link]
        if dec is not None:
            mod, cls = dec.split(".")
            dec = getattr(getattr(dpkt, mod), cls)
        try:
            for ts, frame in reader:
                frames += 1
                try:
                    what, ip = _network_layer(dpkt, frame, dec)
                    if what == "ipv4" and not isinstance(ip, dpkt.ip.IP):
                        ip = dpkt.ip.IP(ip)
                except (dpkt.NeedData, dpkt.UnpackError, IndexError, ValueError):
                    what, ip = "bad_ipv4", None
                if what != "ipv4":
                    skipped[what if what in skipped else "other"] += 1
                    continue
                if ip.v != 4 or ip.hl < 5:
                    skipped["bad_ipv4"] += 1
                    continue
                cols["t"].append(float(ts))
                cols["saddr"].append(int.from_bytes(ip.src, "big"))
                cols["daddr"].append(int.from_bytes(ip.dst, "big"))
                cols["length"].append(ip.len)
                cols["ttl"].append(ip.ttl)
                cols["proto"].append(ip.p)
                cols["tos"].append(ip.tos)
                cols["df"].append(bool(ip.df))
                cols["mf"].append(bool(ip.mf))
                cols["frag_off"].append(ip.offset)      # 8-byte units, as iph->frag_off
                cols["frag_id"].append(ip.id)
        except (dpkt.NeedData, dpkt.UnpackError, ValueError) as exc:
            detail = f": {exc}" if str(exc) else ""
            raise PcapError(f"{name}: truncated or damaged: record {frames + 1} cannot be "
                            f"read after {frames} frames ({type(exc).__name__}{detail})") from None
        cut = watch.truncated()
        if cut is not None:
            asked, got, offset = cut
            # dpkt hands the cut record over short; it is not a frame of the capture
            raise PcapError(f"{name}: truncated: the file ends inside a record after "
                            f"{max(frames - 1, 0)} frames (wanted {asked} bytes at offset "
                            f"{offset - got}, found {got})")
    if not cols["t"]:
        what = ", ".join(f"{v} {k}" for k, v in skipped.items() if v) or "no frames"
        raise PcapError(f"{name}: no IPv4 packets to replay ({frames} frames: {what})")
    t = np.asarray(cols.pop("t"), dtype=np.float64)
    start = float(t.min())
    trace = PacketTrace.build(t - start, iif=iif, kind=KIND[kind],
                              **{k: np.asarray(v) for k, v in cols.items()})
    return PcapCapture(trace, start, frames, skipped, linkname)


def from_pcap(path, **kw) -> PacketTrace:
    """The IPv4 packets of a pcap/pcapng file as a :class:`PacketTrace` (see :func:`read_pcap`,
    which also tells how many frames were skipped and why)."""
    return read_pcap(path, **kw).trace
