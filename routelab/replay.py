"""Replay your own traffic: a pcap's IPv4 packets through story 1's residence router.

``run("capture.pcap", kernel="2.4.24", cpu="k6-200", speedup=1)`` reads the
capture with :func:`routelab.traffic.read_pcap` (dpkt) and offers every IPv4
packet to the router of the ``worm`` scenario (:mod:`routelab.scenarios.worm`:
two e100 NICs, the residence's address plan, a handful of routes and policy
rules) with no worms and no generated background traffic; the student PC's
ping every 100 ms is kept, so the summary tells what the capture does to a
ping through the router as well as to the route cache and the CPU.

Which side a packet comes from
------------------------------
A capture has its own addresses, not the residence's.  Addresses in the
capture's *inside* networks (``inside``; default the RFC 1918 private ranges,
where a home or campus capture keeps its own hosts) are mapped one-to-one onto
the residence's live student hosts, in order of first appearance, so the
destinations the route cache sees keep their number and their order; outside
addresses are kept as they are.  A packet from inside to outside arrives on
eth0 (the residence side), one from outside to inside on eth1.  Packets with
both ends inside (they would not cross the router) or both outside (a transit
capture: give its own prefix with ``inside=``) are counted and left out.  If
the capture has more inside hosts than the residence has live ones, hosts
share a residence address (the count is in the summary).

Time: the capture's timestamps, from its first IPv4 packet, divided by
``speedup``; the run lasts until the last packet plus 0.5 s.

Nothing here is kernel behaviour; the router is the scenario's, unchanged.
"""

from __future__ import annotations

import numpy as np

from .core.skbuff import PacketTrace
from .errors import KnobError
from .result import Result
from .sysctl import Knob

__all__ = ["run", "KNOBS", "SPEEDUP_RANGE", "PRIVATE_NETS", "map_sides"]

NAME = "replay"
SPEEDUP_RANGE = (0.001, 10_000.0)
PRIVATE_NETS = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
TAIL_S = 0.5          # the run goes on this long after the last packet (queues drain)
MAX_DURATION_S = 3600.0
# worm's traffic knobs, off: the capture is the traffic
_QUIET = {"worm_hosts": 0, "outside_welchia": 0, "background_mbps": 0.0}


def _knobs() -> dict[str, Knob]:
    from .scenarios import worm

    out = {k: v for k, v in worm.KNOBS.items() if k not in _QUIET and k != "duration"
           and k not in ("flows", "active_hosts", "worm_kind", "welchia_pps", "welchia_sweep",
                         "blaster_round_s")}
    out["speedup"] = Knob("speedup", 1.0, float, *SPEEDUP_RANGE, "x",
                          "Play the capture this many times faster.")
    return out


KNOBS = _knobs()


def _prefixes(inside) -> list[tuple[int, int]]:
    from .ipv4.fib import parse_prefix

    nets = []
    for text in inside:
        try:
            net, plen = parse_prefix(str(text).strip())
        except Exception:
            raise KnobError("inside", text, "prefixes NET/LEN, e.g. 192.168.1.0/24") from None
        nets.append((int(net), int(plen)))
    if not nets:
        raise KnobError("inside", list(inside), "at least one prefix NET/LEN")
    return nets


def _in_nets(addr: np.ndarray, nets) -> np.ndarray:
    a = addr.astype(np.uint64)
    hit = np.zeros(addr.shape, dtype=bool)
    for net, plen in nets:
        mask = ((1 << 32) - 1) ^ ((1 << (32 - plen)) - 1) if plen else 0
        hit |= (a & np.uint64(mask)) == np.uint64(net & mask)
    return hit


def map_sides(trace: PacketTrace, nets, hosts: np.ndarray) -> tuple[PacketTrace, dict]:
    """Put each packet on its side of the router and map inside addresses onto ``hosts``.

    Returns the trace that crosses the router and counts of what was left out
    (``inside_only``, ``outside_only``) and of the inside hosts mapped.
    """
    src_in, dst_in = _in_nets(trace.saddr, nets), _in_nets(trace.daddr, nets)
    keep = src_in != dst_in
    counts = {"inside_only": int(np.sum(src_in & dst_in)),
              "outside_only": int(np.sum(~src_in & ~dst_in))}
    tr = trace.take(keep)
    up = src_in[keep]                        # inside -> outside: arrives on eth0
    inside_addr = np.where(up, tr.saddr, tr.daddr)
    # first appearance order, so the mapping follows the capture, not the address values
    uniq, first = np.unique(inside_addr, return_index=True)
    order = uniq[np.argsort(first, kind="stable")]
    rank = np.empty(order.size, dtype=np.int64)
    rank[np.searchsorted(uniq, order)] = np.arange(order.size)
    mapped = hosts[rank[np.searchsorted(uniq, inside_addr)] % hosts.size]
    tr.saddr = np.where(up, mapped, tr.saddr).astype(np.uint32)
    tr.daddr = np.where(up, tr.daddr, mapped).astype(np.uint32)
    tr.iif = np.where(up, 0, 1).astype(tr.iif.dtype)
    counts["inside_hosts"] = int(order.size)
    counts["inside_hosts_shared"] = int(max(0, order.size - hosts.size))
    return tr, counts


def run(pcap, seed: int = 1, inside=None, **knobs) -> Result:
    """Replay ``pcap`` (a path) through the residence router; see the module docstring.

    ``knobs``: ``kernel``, ``cpu``, ``speedup`` and the router's own knobs of the
    worm scenario (RAM, uplink, route-cache sysctls, address plan).  ``inside``:
    the capture's inside prefixes (default :data:`PRIVATE_NETS`).
    """
    from .scenarios import worm
    from .scenarios.common import resolve, run_scenario
    from .sysctl import validate_all
    from .traffic import read_pcap

    values = validate_all(KNOBS, knobs, what="knob of replay")
    nets = _prefixes(PRIVATE_NETS if inside is None else inside)
    cap = read_pcap(pcap)
    speedup = values.pop("speedup")
    played = PacketTrace(**{k: getattr(cap.trace, k) for k in PacketTrace.DTYPES})
    played.t = (played.t - played.t[0]) / speedup
    duration = float(played.t[-1]) + TAIL_S
    if duration > MAX_DURATION_S:
        raise KnobError("speedup", speedup, f"at least {played.t[-1] * speedup / 3000:.3g} "
                        f"for this capture (the replay may last at most {MAX_DURATION_S:g} s)")
    given = {**values, **_QUIET, "duration": duration}
    specs = {**worm.KNOBS, "duration": Knob("duration", duration, float, 0.0, MAX_DURATION_S,
                                            "s", "Replay length.")}
    resolve(specs, given)              # the router's knobs, checked as the scenario does
    info: dict = {}

    def build(vals, seed_):
        router, pings = worm.build(vals, seed_)
        hosts = worm.plan_of(vals).live_hosts()
        crossing, counts = map_sides(played, nets, hosts)
        if not len(crossing):
            raise KnobError("inside", list(inside or PRIVATE_NETS),
                            f"prefixes that put one end of each packet inside: all "
                            f"{len(played)} IPv4 packets of {pcap} have both ends "
                            f"{'inside' if counts['inside_only'] else 'outside'}")
        info.update(frames=cap.frames, ipv4_packets=len(cap.trace), linktype=cap.linktype,
                    span_s=cap.span, skipped=dict(cap.skipped), **counts,
                    replayed_packets=len(crossing),
                    skipped_total=sum(cap.skipped.values()) + counts["inside_only"]
                    + counts["outside_only"])
        return router, PacketTrace.concat([crossing, pings])

    def summary(res):
        return {"replayed_packets": info["replayed_packets"], "pcap_frames": info["frames"],
                "pcap_skipped": info["skipped_total"], "speedup": speedup}

    res = run_scenario(NAME, specs, build, given, seed, 84, summary=summary)
    res.extra["pcap"] = {"path": str(pcap), **info}
    res.extra["knobs"] = {**res.extra["knobs"], "speedup": speedup}
    return res
