"""Scenario ``container``: netperf TCP_STREAM from a container through the host's forward path.

Story 4 (stories.md s4; sources.md "Story 4"; docs/story4-container.md).
Host A is the engine's machine: ``eth0`` (tg3 or e1000) towards host B,
``veth0`` the host's end of the container's pair device (etun).  netperf's
sender runs either in A's own stack (``path=host``) or in a network
namespace behind the pair device (``path=container``): then every data
segment is a TCP *clone* that enters A by ``netif_rx``, is routed
(route-cache hit) and forwarded (``skb_cow`` copies it because it is
cloned, ``ip_decrease_ttl``) to the NIC; B's delayed ACKs come back the same
way.  Throughput is what TCP's window and ACK clock make of the link; CPU
load is A's busy time over all its CPUs (netperf's local CPU
utilisation), stacked per kernel function in ``counters["cpu_by_function"]``.

Knobs beyond the issue's: ``peer_window`` and ``peer_coalesce_us`` describe
host B (its receive window and its NIC's interrupt coalescing), the set-up
facts the thread does not give; they were fitted with the CPU's machine
description on the two reported cases (docs/calibration-story4.md) and are
then frozen as defaults.
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import CHECKSUM_NONE, CHECKSUM_PARTIAL, KIND, PacketTrace, ip_to_int
from ..errors import KnobError
from ..hardware import NETIF_F, features_mask, netdev_features, nic_profile
from ..hosts.nic import HostNic
from ..hosts.tcp import ACK_LEN, IP_HDR, TCP_HDR, TSO_MAX_SEGS, TcpReceiver, TcpSender, sock_caps
from ..ipv4.fib import Fib, Route
from ..ipv4.ip_forward import ip_forward_csum
from ..ipv4.ip_output import dev_queue_xmit_csum
from ..kernels import kernel_profile
from ..result import Result
from ..router import Device, Router
from ..sysctl import Knob
from .common import run_scenario

__all__ = ["NAME", "TITLE", "KNOBS", "VARIANTS", "build", "run", "check", "annotate", "endpoints",
           "PAIR_FEATURES", "ttl_loop", "output_headroom"]

NAME = "container"
TITLE = "netperf TCP from a container: skb_cow and checksums on the forward path"

#: the features a student may give the pair device (issue 23)
PAIR_FEATURES = ("SG", "IP_CSUM", "HW_CSUM", "NO_CSUM", "HIGHDMA", "LLTX", "TSO")
MSS = 1448          # 1500 - 20 IP - 20 TCP - 12 timestamps

KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob("path", "container", str, choices=("host", "container"),
         help="Where netperf sends from: the host's own stack, or a container behind the "
              "pair device (forwarded by the host)."),
    Knob("cow", "normal", str, choices=("normal", "skip"),
         help="skip = OpenVZ's hack: no skb_cow and no TTL decrement for packets from the "
              "pair device (NETIF_F_VENET)."),
    Knob("pair_features", "none", str,
         help="NETIF_F_* features of the pair device, comma list of "
              + ", ".join(PAIR_FEATURES) + ", or none (etun's own: unknown, ASSUMED none)."),
    Knob("nic", "tg3", str, choices=("tg3", "e1000"), help="Host A's gigabit NIC."),
    Knob("nic_tso", False, bool,
         help="TSO on the NIC (tg3: on only for hardware-TSO chips; the host path then "
              "sends 64 KB skbs)."),
    Knob("send_size", 16384, int, 1, 1 << 20, "bytes",
         "netperf -m: bytes per send() (default: the 16 KiB socket send buffer)."),
    Knob("cpu", "xeon-2007", str, choices=("xeon-2007", "xeon-2800", "p4-xeon-2400x2",
                                           "opteron-2400x2"),
         help="Host A's CPU profile (routelab.hardware)."),
    Knob("cpus", 2, int, 1, 2, "CPUs", "CPUs host A has (netperf's CPU % spans all)."),
    Knob("kernel", "2.6.20", str, choices=("2.6.20", "2.6.20-fwdcsum"),
         help="2.6.20 (ip_forward resets ip_summed) or a later forward path that keeps "
              "CHECKSUM_PARTIAL."),
    Knob("peer_window", 65535, int, 4096, 1 << 22, "bytes",
         "Receive window host B advertises (set-up; fitted)."),
    Knob("peer_coalesce_us", 0.0, float, 0.0, 1000.0, "us",
         "Host B's receive interrupt coalescing (set-up)."),
    Knob("peer_rx_us", 16.1, float, 0.0, 1000.0, "us",
         "Host B's CPU time per received segment (set-up; fitted)."),
    Knob("duration", 0.5, float, 0.05, 60.0, "s", "Simulated seconds."),
]}

#: named variants of story 4 (the reported cases, the hack, the checksum
#: features with and without a forward path that keeps CHECKSUM_PARTIAL): knobs
#: for :func:`run`, for a stacked profile per variant
VARIANTS: dict[str, dict] = {
    "host": dict(path="host"),
    "container": dict(path="container"),
    "cow=skip": dict(path="container", cow="skip"),
    "skip+features (2.6.20)": dict(path="container", cow="skip",
                                   pair_features="LLTX,HW_CSUM,SG,HIGHDMA"),
    "skip+features (keeps PARTIAL)": dict(path="container", cow="skip",
                                          pair_features="LLTX,HW_CSUM,SG,HIGHDMA",
                                          kernel="2.6.20-fwdcsum"),
    "features (keeps PARTIAL)": dict(path="container", pair_features="LLTX,HW_CSUM,SG,HIGHDMA",
                                     kernel="2.6.20-fwdcsum"),
}

A_ETH, B_ADDR = "10.0.0.1", "10.0.0.2"
A_VETH, CT_ADDR = "10.1.0.1", "10.1.0.2"


def pair_features(spec: str) -> int:
    """The pair device's feature mask from the knob (KnobError naming it)."""
    try:
        names = netdev_features(spec)
    except KnobError:
        raise KnobError("pair_features", spec, "names from " + ", ".join(PAIR_FEATURES)
                        + " joined by commas, or 'none'") from None
    bad = sorted(n for n in names if n not in PAIR_FEATURES)
    if bad:
        raise KnobError("pair_features", spec, "names from " + ", ".join(PAIR_FEATURES)
                        + " joined by commas, or 'none'")
    return features_mask(names)


def check(v: dict) -> int:
    """The knobs' combinations (KnobError naming the knob); returns the pair
    device's feature mask."""
    feats = pair_features(v["pair_features"])
    if v["path"] == "host":
        if v["cow"] != "normal":
            raise KnobError("cow", v["cow"], "'normal' with path=host (nothing is forwarded)")
        if feats:
            raise KnobError("pair_features", v["pair_features"],
                            "'none' with path=host (no pair device on the path)")
    if feats & NETIF_F["TSO"]:
        raise KnobError("pair_features", v["pair_features"],
                        "without TSO: GSO skbs through the forward path are not modelled")
    return feats


def _nic_features(values: dict) -> str:
    names = set(nic_profile(values["nic"]).features)
    if not values["nic_tso"]:
        names.discard("TSO")
    return ",".join(sorted(names)) or "none"


def build(values: dict, seed: int):
    """Router (host A) with its hosts (``hosts[0]`` B's receiver; the sender at
    ``hosts[1]`` or ``local_hosts[6]``) and the empty offered trace."""
    mask = check(values)
    pair_names = [n for n, b in NETIF_F.items() if mask & b]
    if values["cow"] == "skip":
        pair_names.append("VENET")
    nicf = _nic_features(values)
    devices = [Device("eth0", values["nic"], 0, features=nicf),
               Device("veth0", "etun", 0, features=",".join(pair_names) or "none")]
    fib = Fib(routes=[Route("10.0.0.0/24", oif=0), Route("10.1.0.0/24", oif=1)],
              local_addrs=[A_ETH, A_VETH])
    kern = kernel_profile(values["kernel"])
    container = values["path"] == "container"
    route_feats = mask if container else devices[0].profile.features_mask
    caps = sock_caps(route_feats)
    tso = 1
    if not container and caps["tso"]:
        tso = TSO_MAX_SEGS
    src = ip_to_int(CT_ADDR if container else A_ETH)
    sender = TcpSender(values["path"], caps, src, ip_to_int(B_ADDR), oif=0, pair=1,
                       window=values["peer_window"], mss=MSS, send_size=values["send_size"],
                       cpu=0, skip_cow=values["cow"] == "skip", tso_segs=tso)
    nic_b = HostNic(1e9, txqueuelen=1000)
    receiver = TcpReceiver(nic_b, ip_to_int(B_ADDR), src, window=values["peer_window"],
                           mss=MSS, coalesce_s=values["peer_coalesce_us"] * 1e-6,
                           service_s=values["peer_rx_us"] * 1e-6,
                           forward_csum=kern.forward_csum, forwarded=container)
    hosts = {0: receiver}
    local = {}
    if container:
        hosts[1] = sender
    else:
        local[6] = sender
    router = Router(values["kernel"], values["cpu"], devices, fib, ncpus=values["cpus"],
                    seed=seed, hosts=hosts, local_hosts=local,
                    sysctl={"netdev_max_backlog": 1000, "txqueuelen": 1000},
                    arp_static=[(0, B_ADDR), (1, CT_ADDR)])
    trace = PacketTrace.build(np.zeros(0), saddr=0, daddr=0)
    return router, trace


def _profile(res: Result, values: dict, sender: TcpSender) -> dict:
    """Seconds per kernel function; the engine's forward row split into
    skb_cow's copy (pskb_expand_head: its fixed part and the bytes, as
    ``ip_forward_plan`` priced them) and the rest."""
    prof = dict(res.profile)
    key = "ip_forward+skb_cow+ip_decrease_ttl"
    if key in prof:
        cow = 0.0
        if sender.copies:
            c = res.config.costs
            cow = sender.copies * (c.fn["skb_cow"]
                                   + (IP_HDR + TCP_HDR + MSS) * c.copy_s_per_byte)
            cow = min(cow, prof[key])
            prof["skb_cow (pskb_expand_head)"] = cow
        prof["ip_forward+ip_decrease_ttl"] = prof.pop(key) - cow
    return dict(sorted(prof.items(), key=lambda kv: -kv[1]))


def _summary(res: Result, values: dict, sender: TcpSender, recv: TcpReceiver) -> dict:
    dur = res.duration
    segs = max(sender.sent, 1)
    container = values["path"] == "container"
    # software checksums of a data segment's payload: at the send (csum_and_copy)
    # and, for a CHECKSUM_PARTIAL segment leaving by a NIC that cannot, in
    # dev_queue_xmit (the engine's own decision functions)
    sw = 0.0 if sender.caps["csum_partial"] else 1.0
    summed0 = CHECKSUM_PARTIAL if sender.caps["csum_partial"] else CHECKSUM_NONE
    nicmask = res.config.devices[0].profile.features_mask
    after = ip_forward_csum([summed0], kernel_profile(values["kernel"]).forward_csum)[0] \
        if container else summed0
    if bool(dev_queue_xmit_csum([after], nicmask)[0]):
        sw += 1.0
    pk = res.packets
    fwd = pk["outcome"] == res_outcome("forwarded")
    kinds = pk["kind"]
    ttl_dec = int(np.count_nonzero(fwd & (kinds == KIND["tcp_ack"])))
    if values["cow"] != "skip":
        ttl_dec += int(np.count_nonzero(fwd & (kinds == KIND["tcp_data"])))
    busy = res.cpu["softirq"] + res.cpu["irq"]
    good = recv.rcv_end * MSS * 8.0 / dur / 1e6
    return {
        "throughput_mbps": round(good, 2),
        "cpu_load_pct": round(100.0 * float(busy.mean()), 2),
        "copies_per_packet": round(sender.copies / segs, 4),
        "bytes_copied_per_packet": round(sender.bytes_copied / segs, 1),
        "sw_checksums_per_packet": sw,
        "ttl_decrements": ttl_dec,
        "segments": sender.sent,
        "acks": recv.acks_sent,
        "bad_checksums": recv.bad_csum,
        "retransmits": sender.retrans,
        "cycles_per_segment": round(float(busy.sum()) * res.cpu["bin_s"] * res.config.cpu.hz
                                    / max(recv.rcv_end, 1), 1),
    }


def res_outcome(name: str) -> int:
    from ..core.dropreason import OUTCOMES
    return OUTCOMES[name]


def endpoints(router: Router) -> tuple[TcpSender, TcpReceiver]:
    """The sender and B's receiver of a router made by :func:`build`."""
    sender = router.hosts.get(1) or router.local_hosts[6]
    return sender, router.hosts[0]


def annotate(res: Result, router: Router) -> dict:
    """The scenario's figures (the summary keys), and what a notebook draws:
    ``counters["cpu_by_function"]``, ``extra["skb_states"]``, ``extra["tcp"]``."""
    values = res.extra["knobs"]
    sender, recv = endpoints(router)
    res.counters["cpu_by_function"] = _profile(res, values, sender)
    res.extra["skb_states"] = list(sender.clone_states)
    res.extra["tcp"] = {"sender": sender.counters(), "receiver": recv.counters()}
    return _summary(res, values, sender, recv)


def run(seed: int = 1, **knobs) -> Result:
    """Run the scenario; see ``KNOBS`` for the parameters."""
    holder = {}

    def build_kept(values, sd):
        holder["router"], trace = build(values, sd)
        return holder["router"], trace

    return run_scenario(NAME, KNOBS, build_kept, knobs, seed, ACK_LEN,
                        summary=lambda res: annotate(res, holder["router"]))


def ttl_loop(hops_max: int = 1000, ttl: int = 64, cow: str = "normal") -> dict:
    """Eric Biederman's objection as a unit-level experiment: a packet caught in
    a routing loop between two hosts whose only links are pair devices.

    Each pass through a host's forward path runs the engine's stage
    functions on the packet: ``ip_forward_plan`` (TTL test, skb_cow,
    ``ip_decrease_ttl`` -- skipped under the OpenVZ hack for a packet that
    came in on a NETIF_F_VENET device) and, when the TTL was decremented,
    ``ip_decrease_ttl`` on the header.  With ``cow="normal"`` the packet dies
    of TTL after ``ttl - 1`` hops (ICMP time exceeded); with ``"skip"``,
    and both ends virtual, nothing ever lowers its TTL: it circulates until
    ``hops_max``.

    The packet starts as a TCP sender's clone (its data shared with the
    write queue).  A pair device hands the same skb to the other host
    (etun/veth transmit), so once the first ``skb_cow`` has given it a
    private buffer with room in front, later hops find nothing to copy:
    ``copies`` is 1 without the hack, 0 with it.

    Returns ``hops`` (forward passes), ``ended`` ("ttl" or "never"), ``ttl``
    at the end and ``copies`` (skb_cow copies made on the way).
    """
    from ..costs import cost_table
    from ..hardware import cpu_profile
    from ..ipv4.ip_forward import FWD_TTL, ip_decrease_ttl, ip_forward_plan

    if cow not in ("normal", "skip"):
        raise KnobError("cow", cow, "'normal' or 'skip'")
    ct = cost_table(cpu_profile("xeon-2007"))
    check = 0x1234
    hops = copies = 0
    cur = int(ttl)
    cloned = True                  # until a copy gives the packet its own buffer
    while hops < hops_max:
        tr = PacketTrace.build(np.zeros(1), saddr=ip_to_int(CT_ADDR), daddr=ip_to_int("10.9.0.1"),
                               proto=6, length=ACK_LEN, ttl=cur, cloned=cloned, headroom=108,
                               iif=1)
        fw = ip_forward_plan(tr, np.array([0]), np.array([1500]), ct.fn, ct.copy_s_per_byte, 16,
                             np.array([cow == "skip"]))
        if int(fw["fwd_verdict"][0]) == FWD_TTL:
            return {"hops": hops, "ended": "ttl", "ttl": cur, "copies": copies}
        if int(fw["cow"][0]):
            copies += 1
            cloned = False
        if bool(fw["ttl_dec"][0]):
            check, newttl = ip_decrease_ttl([check], [cur])
            check, cur = int(check[0]), int(newttl[0])
        hops += 1
    return {"hops": hops, "ended": "never", "ttl": cur, "copies": copies}


def output_headroom(headroom: int, cow: str = "normal", ll_reserved: int = 16) -> dict:
    """The other half of Eric's objection, on an skb: a packet that came in on a
    device whose receive path left it ``headroom`` bytes in front of the IP
    header (a non-Ethernet device: PPP, a tunnel, a device with a short
    ``hard_header_len``) needs LL_RESERVED_SPACE of the *output* device
    (16 for Ethernet) before the link-layer header is pushed.

    ``skb_cow`` in ip_forward makes that room (a copy, when it must).  The
    OpenVZ hack skips it, but 2.6.20's output path checks again:
    ``ip_finish_output2`` (net/ipv4/ip_output.c, 2.6.20, sagsango/linux-2.6.20) finds the headroom
    short for a device with a hard_header and replaces the skb by
    ``skb_realloc_headroom``'s copy before the header goes on.  So the skip
    does not overrun the buffer; it moves the copy one function later (and,
    for a clone with enough room, drops it).  The headroom check and the
    Ethernet push are the model's; the neighbour output itself is not run.

    Returns ``ok`` (the header went on), ``copied`` (bytes skb_cow copied),
    ``realloc`` (bytes ip_finish_output2's reallocation copied) and ``error``
    (an SkbError's text, or "").
    """
    from ..core import skb as _skb

    if cow not in ("normal", "skip"):
        raise KnobError("cow", cow, "'normal' or 'skip'")
    s = _skb.alloc_skb(headroom + 1500)
    _skb.skb_reserve(s, headroom)
    _skb.skb_put(s, 1500)
    copied = _skb.skb_cow(s, ll_reserved) if cow == "normal" else 0
    realloc = 0
    if _skb.skb_headroom(s) < ll_reserved:         # ip_finish_output2's check
        s2, realloc = _skb.skb_realloc_headroom(s, ll_reserved)
        _skb.kfree_skb(s)
        s = s2
    try:
        _skb.skb_push(s, 14)               # neigh_hh_output / eth_header
    except _skb.SkbError as e:
        return {"ok": False, "copied": copied, "realloc": realloc, "error": str(e)}
    return {"ok": True, "copied": copied, "realloc": realloc, "error": ""}
