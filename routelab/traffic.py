"""Traffic generators: numpy arrays of packets from an explicit Generator.

Every generator takes a ``numpy.random.Generator`` so that the same seed
gives the same packets.  Nothing here is kernel behaviour; the docstrings
say what each traffic source stands for.
"""

from __future__ import annotations

import numpy as np

from .core.skbuff import KIND, PacketTrace
from .errors import KnobError

__all__ = ["SIZE_MIXES", "poisson_times", "background", "pings", "scanners", "addr_block"]

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
