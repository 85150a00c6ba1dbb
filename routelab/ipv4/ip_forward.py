"""ip_forward: TTL, skb_cow, the TTL decrement (array stage).

Kernel: net/ipv4/ip_forward.c ip_forward, ip_forward_finish;
include/net/ip.h ip_decrease_ttl; include/linux/skbuff.h skb_cow
(2.4.22, 2.6.11).

Order of the checks (2.6.11): the checksum state is reset
(:func:`ip_forward_csum`); TTL <= 1 -> ICMP time exceeded and drop;
``skb_cow`` (copy the packet if it is cloned or short of headroom);
``ip_decrease_ttl`` (incremental checksum update, no recompute); redirect if
the packet leaves by the interface it came in on.  The DF + too-big test is
in ``ip_fragment`` on output (2.6.11; 2.4.22 did it here -- the outcome is
the same: ICMP fragmentation needed, FragFails).

A packet that is already a fragment (``frag_off`` > 0 or ``mf``) is
forwarded like any other: the router does not reassemble what it forwards
(ip_rcv hands it to ip_forward; only ip_local_deliver calls ip_defrag), and
none of these tests reads the fragment fields.

None of this depends on cache or queue state, so it is computed for all
packets at once; the per-packet loop charges the cost.
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import CHECKSUM_NONE, CHECKSUM_PARTIAL, PacketTrace, skb_cow_needed

__all__ = ["ip_forward_plan", "ip_forward_csum", "ip_decrease_ttl", "FWD_OK", "FWD_TTL",
           "FWD_FRAG_NEEDED"]

FWD_OK, FWD_TTL, FWD_FRAG_NEEDED = 0, 1, 2


def ip_decrease_ttl(check, ttl):
    """Decrement TTL and patch the header checksum incrementally.

    Kernel: include/net/ip.h ip_decrease_ttl: the TTL is the high byte of a
    16-bit header word, so lowering it by one raises the (complemented)
    checksum by 0x0100, with end-around carry (RFC 1624).  Works on arrays.

    Returns
    -------
    (new_check, new_ttl)
    """
    check = np.asarray(check, dtype=np.uint32)
    # The kernel's form, ``check += 0x0100; check + (check >= 0xFFFF)``: the carry
    # is added when the sum *reaches* 0xFFFF too, so a sum of 0xFFFF (one's-complement
    # "negative zero") is stored as 0x0000 -- what a full recompute gives.  A plain
    # end-around carry (csum_add) would store 0xFFFF there.
    new = check + np.uint32(0x0100)
    new = (new + (new >= 0xFFFF)) & np.uint32(0xFFFF)
    return new.astype(np.uint16), (np.asarray(ttl, dtype=np.int32) - 1).astype(np.uint8)


def ip_forward_csum(ip_summed, forward_csum: str = "none") -> np.ndarray:
    """``skb->ip_summed`` after ip_forward, for every packet.

    Kernel: net/ipv4/ip_forward.c ip_forward (2.4.24, 2.6.0: MaximeChretien/
    linux-history; 2.6.20: sagsango/linux-2.6.20).  Before the TTL test the
    forward path throws away the checksum state it was given: whatever the
    receiving device verified, and a CHECKSUM_PARTIAL packet's promise that
    someone will still fill in the transport checksum.  So a forwarded packet
    always leaves CHECKSUM_NONE and dev_queue_xmit never completes its
    checksum.  The 2.6.20 trap (sources.md, story 4): a pair device that
    advertised NO_CSUM/HW_CSUM would hand the host CHECKSUM_PARTIAL skbs from a
    container whose TCP checksum was never computed; after ip_forward nobody
    computes it, and the segment leaves with a bad checksum.

    ``forward_csum="partial"`` is the later behaviour (skb_forward_csum keeps
    CHECKSUM_PARTIAL; first version UNVERIFIED), under which dev_queue_xmit
    may have to call skb_checksum_help
    (:func:`routelab.ipv4.ip_output.dev_queue_xmit_csum`).  Simplified: the
    other states become CHECKSUM_NONE, the only difference dev_queue_xmit
    makes.
    """
    s = np.asarray(ip_summed, dtype=np.uint8)
    if forward_csum == "partial":
        return np.where(s == CHECKSUM_PARTIAL, CHECKSUM_PARTIAL, CHECKSUM_NONE).astype(np.uint8)
    return np.full(s.shape, CHECKSUM_NONE, dtype=np.uint8)


def ip_forward_plan(tr: PacketTrace, oif, mtu, cost: dict, copy_s_per_byte: float,
                    ll_reserved: int, venet=None) -> dict:
    """Verdicts and costs of ip_forward for every packet.

    Parameters
    ----------
    tr : PacketTrace
    oif : array          output device per packet (from the FIB)
    mtu : array          MTU per device
    cost : dict          seconds per kernel function
    copy_s_per_byte : float
    ll_reserved : int    headroom skb_cow must guarantee (LL_RESERVED_SPACE)
    venet : bool array, optional
        The packet came in on a device with OpenVZ's ``NETIF_F_VENET``: the
        OpenVZ hack skips ``skb_cow`` *and* ``ip_decrease_ttl`` for it
        (bronson/linux-2.6.18.8-ovz-xen @ 9435a3ea net/ipv4/ip_forward.c,
        2.6.18-ovz: after the TTL test and the source-route check, a jump
        past both; its comment argues that the packet's TTL is still
        decremented once elsewhere on a loop through a real device).  The
        TTL test itself still runs.  ``None``: no such device (vanilla).

    Returns
    -------
    dict with ``fwd_verdict`` (FWD_*), ``cow`` (bool: skb_cow copied),
    ``ttl_dec`` (bool: ip_decrease_ttl ran), ``fwd_cost`` (seconds:
    ip_forward + skb_cow + ip_decrease_ttl + ip_forward_finish).
    """
    verdict = np.zeros(len(tr), dtype=np.int8)
    oif_c = np.maximum(np.asarray(oif), 0).astype(np.intp)   # (a plain gather index)
    too_big = (tr.length > np.asarray(mtu)[oif_c]) & tr.df
    verdict[too_big] = FWD_FRAG_NEEDED
    verdict[tr.ttl <= 1] = FWD_TTL
    cow = skb_cow_needed(tr.cloned, tr.headroom, ll_reserved) & (verdict != FWD_TTL)
    # pskb_expand_head copies the linear data (the whole packet here)
    cow_cost = np.where(cow, cost["skb_cow"] + tr.length * copy_s_per_byte, 0.0)
    if venet is None:
        fwd = np.where(verdict == FWD_TTL, cost["ip_forward"],
                       cost["ip_forward"] + cow_cost + cost["ip_decrease_ttl"]
                       + cost["ip_forward_finish"])
        return {"fwd_verdict": verdict, "cow": cow, "fwd_cost": fwd,
                "ttl_dec": verdict != FWD_TTL}
    skip = np.asarray(venet, dtype=bool) & (verdict != FWD_TTL)
    cow &= ~skip
    cow_cost = np.where(cow, cow_cost, 0.0)
    dec = np.where(skip, 0.0, cost["ip_decrease_ttl"])
    fwd = np.where(verdict == FWD_TTL, cost["ip_forward"],
                   cost["ip_forward"] + cow_cost + dec + cost["ip_forward_finish"])
    return {"fwd_verdict": verdict, "cow": cow, "fwd_cost": fwd,
            "ttl_dec": (verdict != FWD_TTL) & ~skip}
