"""The array stages: everything about a packet that does not depend on state.

Kernel: net/ipv4/ip_input.c ip_rcv (header checks), route.c (martian
classes; the hash bucket), fib_*.c fib_lookup (the FIB is static during a
run), ip_forward.c (TTL, ``skb_cow``, DF), ip_output.c (fragmentation), and
the costs of each of them (2.4.22, 2.4.24, 2.6.0).

Before the per-packet stages run, :func:`prepare` computes these verdicts and
costs for a whole window of packets at once with numpy, and
:func:`classify` collapses them into one class and one state-independent
cost per packet (the composition of :data:`routelab.costs.COMPOSITION`).
The run (:mod:`routelab.router`) then applies them packet by packet, adding
what depends on state: queues, the route cache, timers.

The trace's fragment fields (``frag_id``, ``frag_off``, ``mf``) change none
of these verdicts: a forwarded fragment is routed, TTL-tested, copied and
(if too big for the next link) cut again like a whole datagram of its
length (ip_forward.py, ip_output.py).
"""

from __future__ import annotations

import numpy as np

from . import costs as _costs
from .core.skbuff import COLUMNS, KIND, SOCKET_KINDS, PacketTrace
from .hardware import NETIF_F
from .ipv4 import ip_forward as _ipf
from .ipv4 import ip_input as _ipin
from .ipv4 import ip_output as _ipout
from .ipv4 import route_nocache as _nocache
from .ipv4.fib import RTN
from .ipv4.icmp import icmp_error_len

__all__ = ["prepare", "classify", "column_data", "C_FWD", "C_HDR", "C_MARTIAN", "C_TTL",
           "C_FRAGNEED", "C_LOCAL", "C_NOROUTE", "C_REDIR", "C_ARP", "LL_RESERVED"]

# packet classes after the array stages (C_ARP: an ARP frame, for arp_rcv)
C_FWD, C_HDR, C_MARTIAN, C_TTL, C_FRAGNEED, C_LOCAL, C_NOROUTE, C_REDIR, C_ARP = range(9)
_VENET = NETIF_F["VENET"]
_SOCKET_KINDS = np.array(SOCKET_KINDS, dtype=np.int64)
LL_RESERVED = 16  # LL_RESERVED_SPACE for Ethernet: hard_header_len 14 rounded to 16
# the run's per-packet input columns (the outputs start from these)
_PACKET_INPUTS = tuple(c for c in COLUMNS if c.typed is not None and c.src[0] != "run")


def local_socket(kind) -> np.ndarray:
    """Packets of a socket's traffic (``SOCKET_KINDS``): delivered locally, they
    cost ``ip_local_deliver`` only (COMPOSITION ``local_sock``), the protocol's
    work being charged by the socket's host; other local packets are the
    router's own ICMP (COMPOSITION ``local``)."""
    return np.isin(np.asarray(kind), _SOCKET_KINDS)


def _validate_source_cost(r, tr: PacketTrace, rtype, oif, c: dict) -> np.ndarray:
    """Seconds of the FIB lookups ``fib_validate_source`` makes on a cache
    miss (0 for packets it does not see).

    Kernel: net/ipv4/fib_frontend.c fib_validate_source, called by
    ip_route_input_slow for a forwarded or local packet (net/ipv4/route.c,
    2.4.24, MaximeChretien/linux-history): a reverse ``fib_lookup`` with the
    source as destination and the route's output device as ``iif`` (so the
    policy rules are walked again, matched against that device); if the
    answer's device is not the input device and rp_filter is off (the
    default), a second reverse lookup keyed on the input device as ``oif``.
    Only kernels with the 2.2+ route cache call it (2.0's ip_rt_slow_route
    has no source check).  Simplified: the second lookup walks as many
    rules as the first (the model's rules do not match on ``oif``).
    """
    n = len(tr)
    if not r.kernel.route_cache or n == 0:
        return np.zeros(n)
    seen = (rtype == RTN["unicast"]) | (rtype == RTN["local"])
    riif = np.where(oif >= 0, oif, tr.iif.astype(np.int64))
    _, roif, _, rrules = r.fib.fib_lookup(tr.saddr, tr.daddr, tr.tos, riif)
    if not r.kernel.policy_rules:
        rrules = np.zeros_like(rrules)
    one = c["fib_lookup"] + rrules * c["fib_rule"]
    again = roif.astype(np.int64) != tr.iif.astype(np.int64)
    return np.where(seen, one * np.where(again, 2.0, 1.0), 0.0)


def prepare(r, cache, tr: PacketTrace, cache20=None) -> dict:
    """The stateless stages over the arrays of ``tr`` for router ``r`` (whose
    route cache, or ``None``, gives the hash key); returns named columns."""
    c = r.costs.fn
    devs = r.devices
    napi = np.array([d.profile.napi and r.kernel.napi for d in devs])
    pair = np.array([d.pair for d in devs])
    dev_cpu = np.array([d.cpu for d in devs], dtype=np.int64)
    mtu = np.array([d.mtu for d in devs], dtype=np.int64)
    speed = np.array([d.speed for d in devs], dtype=np.float64)
    iif = tr.iif.astype(np.int64)
    p = {"iif": iif, "saddr": tr.saddr, "kind": tr.kind}
    p["cpu"] = dev_cpu[iif]
    p["napi"] = napi[iif]
    # receive cost: NAPI poll share, or hard IRQ + netif_rx backlog (2.4); a
    # pair device has no interrupt (the sender's xmit calls netif_rx)
    rx = np.where(p["napi"], _costs.composed(c, "receive_napi"),
                  _costs.composed(c, "receive_irq"))
    if pair.any():
        rx = np.where(pair[iif], _costs.composed(c, "receive_pair"), rx)
    hdr_drop = _ipin.ip_rcv(tr)
    p["pre_drop"] = hdr_drop
    p["rx_cost"] = rx
    # routing decision (static FIB), martians
    tables = nodes = None
    if r.kernel.fib == "trie":
        # (fib_trie: the same routes, with the tables searched and nodes touched)
        rtype, oif, gw, nrules, tables, nodes = r.fib.fib_lookup_trie(
            tr.daddr, tr.saddr, tr.tos, tr.iif)
    else:
        rtype, oif, gw, nrules = r.fib.fib_lookup(tr.daddr, tr.saddr, tr.tos, tr.iif)
    if not r.kernel.policy_rules:
        nrules = np.zeros_like(nrules)  # (2.0: one table, no rules to walk)
    p["rtype"], p["oif"], p["gw"], p["nrules"] = rtype, oif, gw, nrules
    p["vfib_cost"] = _validate_source_cost(r, tr, rtype, oif, c)
    p["martian"] = _ipin.martian_class(tr.saddr, tr.daddr)
    rp = _nocache.apply_rp_filter(r, tr, p["martian"])
    # forward-path decisions and their cost
    feats = np.array([d.profile.features_mask for d in devs], dtype=np.int64)
    # (OpenVZ's NETIF_F_VENET on an input device: its skip-skb_cow hack)
    venet = (feats & _VENET) != 0
    fw = _ipf.ip_forward_plan(tr, oif, mtu, c, r.costs.copy_s_per_byte, LL_RESERVED,
                              venet[iif] if venet.any() else None)
    p.update(fw)
    oif_c = np.maximum(oif, 0).astype(np.intp)   # (a plain gather index)
    # (a TX-done interrupt per frame unless the driver polls; a pair device has none)
    # the checksum state ip_forward leaves, and what the output device does with it
    summed = _ipf.ip_forward_csum(tr.ip_summed, r.kernel.forward_csum)
    out = _ipout.ip_output_plan(tr.length, oif, mtu, tr.df, c, r.costs.copy_s_per_byte,
                                (napi | pair)[oif_c], summed, feats, r.costs.csum_s_per_byte)
    p.update(out)
    ser = np.where(speed > 0, 8.0 / np.where(speed > 0, speed, 1.0), 0.0)
    p["wire_s"] = out["wire_bytes"] * ser[oif_c]
    # what the router sends back on the input device: an echo reply as long
    # as the request, or an ICMP error quoting the offending packet
    reply_len = np.where(rtype == RTN["local"], tr.length, icmp_error_len(tr.length))
    p["icmp_wire_s"] = _costs.wire_bytes(reply_len) * ser[iif]
    p["local_cost"] = _costs.composed(c, "local")
    # a local packet for a socket (kinds of a socket's traffic, story 4's TCP):
    # ip_local_deliver only; the socket's own receive work is its host's charge
    sock = local_socket(tr.kind)
    if sock.any():
        p["local_cost"] = np.where(sock, _costs.composed(c, "local_sock"), p["local_cost"])
    fifo = np.array([d.profile.rx_fifo_bytes for d in devs])[iif]
    p["fifo_slots"] = fifo // _costs.wire_bytes(tr.length)
    if cache is not None:
        p["h"] = cache.rt_hash(tr.daddr, tr.saddr, tr.iif, tr.tos)
        p["route_hit_cost"] = _costs.composed(c, "route_hit")
    else:
        p["h"] = np.zeros(len(tr), dtype=np.int64)
        p["route_hit_cost"], _node_s = _nocache.route_input_nocache(r, nrules, tables, nodes,
                                                                     rp, c)
        if nodes is not None:
            p["trie_nodes"] = nodes
        if cache20 is not None:
            # 2.0's ip_rt_route: its own cache, run here in arrival order
            # (routelab.ipv4.route20); a forwarded packet pays its lookup there
            fwd = (rtype == RTN["unicast"]) & (p["martian"] == 0) & (hdr_drop == 0)
            hop = np.where(gw != 0, gw, tr.daddr).astype(np.int64)
            rc = cache20.costs(tr.t, tr.daddr, hop, fwd)
            p["route_hit_cost"] = np.where(fwd, rc, p["route_hit_cost"])
    # key = daddr << 32 | saddr, ik = iif << 8 | tos (in place: no temporaries)
    key = tr.daddr.astype(np.uint64)
    key <<= np.uint64(32)
    np.bitwise_or(key, tr.saddr, out=key, casting="safe")
    p["key"] = key
    ik = iif << 8
    np.bitwise_or(ik, tr.tos, out=ik, casting="safe")
    p["ik"] = ik
    return p


def classify(r, p: dict) -> None:
    """Collapse the array-stage verdicts into one class and one cost per packet."""
    c = r.costs.fn
    n = p["rtype"].shape[0]
    cls = np.full(n, C_FWD, dtype=np.int8)
    rt = p["rtype"]
    unicast = rt == RTN["unicast"]
    cls[unicast & (p["fwd_verdict"] == _ipf.FWD_TTL)] = C_TTL
    cls[unicast & (p["fwd_verdict"] == _ipf.FWD_FRAG_NEEDED)] = C_FRAGNEED
    cls[rt == RTN["local"]] = C_LOCAL
    cls[~unicast & (rt != RTN["local"])] = C_NOROUTE
    cls[p["martian"] != 0] = C_MARTIAN
    cls[p["pre_drop"] != 0] = C_HDR
    icmp = _costs.composed(c, "icmp_send")
    # the path's cost by class: forwarded (most packets) everywhere, then the
    # others by index -- ICMP errors: ip_forward + icmp_send; local delivery;
    # no route: freed, plus icmp_send for an unreachable route; martian and
    # bad header: freed
    path = p["fwd_cost"] + p["out_cost"]
    odd = np.flatnonzero(cls != C_FWD)
    if odd.size:
        oc = cls[odd]
        v = np.full(odd.size, c["kfree_skb"])
        err = (oc == C_TTL) | (oc == C_FRAGNEED)
        v[err] = p["fwd_cost"][odd[err]] + icmp
        loc = oc == C_LOCAL
        lc = p["local_cost"]
        v[loc] = lc[odd[loc]] if np.ndim(lc) else lc
        v[(oc == C_NOROUTE) & (rt[odd] == RTN["unreachable"])] = c["kfree_skb"] + icmp
        path[odd] = v
    # leaving by the interface it came in on: ip_forward may send a redirect
    cls[(cls == C_FWD) & (p["oif"] == p["iif"])] = C_REDIR
    # ARP frames (packets born in the run: replies to the router's requests)
    # go from netif_receive_skb to arp_rcv: no IP stages at all
    arp = np.flatnonzero(p["kind"] == KIND["arp"])
    if arp.size:
        cls[arp] = C_ARP
        path[arp] = c["arp_rcv"]
    p["cls"] = cls
    p["path_cost"] = path
    # everything a packet costs that does not depend on state: receive, route
    # lookup (not reached by a bad header, nor by ARP) and path
    routed = p["route_hit_cost"] + path
    hdr = np.flatnonzero(cls == C_HDR)
    routed[hdr] = path[hdr]
    if arp.size:
        routed[arp] = path[arp] - c["ip_rcv"]     # (rx_cost counted ip_rcv)
    p["cost"] = p["rx_cost"] + routed


def column_data(tr: PacketTrace, p: dict) -> dict:
    """The input columns of the run's :class:`~routelab.sim.columns.Packets`
    (:data:`~routelab.core.skbuff.PACKET_SPECS`), from a trace and its array
    stages: each column's source is its row of
    :data:`~routelab.core.skbuff.COLUMNS`."""
    return {c.name: getattr(tr, c.src[1]) if c.src[0] == "trace" else p[c.src[1]]
            for c in _PACKET_INPUTS}
