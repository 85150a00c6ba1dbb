"""ip_output: fragmentation and handing packets to the device (array stage).

Kernel: net/ipv4/ip_output.c ip_output, ip_finish_output, ip_fragment;
net/core/dev.c dev_queue_xmit, skb_checksum_help (2.4.22, 2.6.11, 2.6.20).

A packet longer than the output MTU is cut by ``ip_fragment`` (FragOKs,
FragCreates); each fragment costs an allocation, a payload copy and its own
trip through ``dev_queue_xmit`` and the driver.  Packets with DF set were
already turned back by :func:`ip_forward_plan`.  A packet that is already a
fragment is cut the same way (the pieces keep its offset and, if it had MF,
all of them carry MF: :func:`routelab.ipv4.ip_fragment.ip_fragment`), so
its count, bytes and cost follow from its length alone.

A packet whose checksum is still to be done (CHECKSUM_PARTIAL) leaving by a
device without the checksum feature for it has its checksum completed in
software by ``dev_queue_xmit`` (:func:`dev_queue_xmit_csum`,
:func:`skb_checksum_help`).
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import CHECKSUM_PARTIAL
from ..costs import composed, wire_bytes
from ..hardware import NETIF_F, NETIF_F_GEN_CSUM
from .ip_fragment import fragment_plan

__all__ = ["ip_output_plan", "dev_queue_xmit_csum", "skb_checksum_help"]

_IP_CSUM = NETIF_F["IP_CSUM"]
_IHL = 20          # the model's IP header: no options


def dev_queue_xmit_csum(ip_summed, features, ipv4=True) -> np.ndarray:
    """Which packets ``dev_queue_xmit`` checksums in software (vectorised).

    Kernel: net/core/dev.c dev_queue_xmit (2.6.20, sagsango/linux-2.6.20).
    Before the qdisc, a CHECKSUM_PARTIAL skb goes through skb_checksum_help
    when its device has neither of the generic checksum features
    (NETIF_F_GEN_CSUM = NO_CSUM | HW_CSUM) and either lacks NETIF_F_IP_CSUM
    or the skb is not IPv4 (``skb->protocol != ETH_P_IP``).  (IP_CSUM means
    "TCP/UDP over IPv4 only", include/linux/netdevice.h; dev_queue_xmit tests
    only the protocol, as only TCP and UDP make CHECKSUM_PARTIAL skbs.)
    2.4.24 and 2.6.0 (MaximeChretien/linux-history) test the same, with
    CHECKSUM_HW and the two generic features spelt out.  The skbs of a GSO
    device are checksummed by the GSO code instead; the model has none.

    Parameters
    ----------
    ip_summed : array of uint8   the skb's checksum state at dev_queue_xmit
    features : int or array      the output device's feature mask
                                 (:func:`routelab.hardware.features_mask`)
    ipv4 : bool or array         the skb is IPv4 (always, in this model)
    """
    f = np.asarray(features, dtype=np.int64)
    offload = ((f & NETIF_F_GEN_CSUM) != 0) | (((f & _IP_CSUM) != 0) & np.asarray(ipv4))
    return (np.asarray(ip_summed) == CHECKSUM_PARTIAL) & ~offload


def skb_checksum_help(length, cost: dict, csum_s_per_byte: float, ihl=_IHL) -> np.ndarray:
    """CPU seconds of completing a packet's checksum in software (vectorised).

    Kernel: net/core/dev.c skb_checksum_help (2.6.20, sagsango/linux-2.6.20):
    sums the packet from the transport header to its end (``skb->len`` minus
    the offset of ``skb->h.raw``: ``length - ihl`` bytes of an IP packet of
    total ``length``) with skb_checksum, folds the sum into the checksum
    field and marks the skb CHECKSUM_NONE.  Priced as the fixed part
    (``costs.COMPOSITION["csum_help"]``) plus those bytes at
    ``csum_s_per_byte`` (``1 / CpuProfile.csum_bw``).

    Simplified: a cloned skb is first copied by pskb_expand_head; the model's
    packets reach it uncloned (ip_forward's skb_cow has copied clones).  A
    CHECKSUM_PARTIAL packet that must also be fragmented is charged once,
    over its whole length (2.6.20 builds none: ip_append_data uses
    CHECKSUM_PARTIAL only for a packet that fits the MTU).
    """
    nbytes = np.maximum(np.asarray(length, dtype=np.int64) - ihl, 0)
    return composed(cost, "csum_help") + nbytes * csum_s_per_byte


def ip_output_plan(length, oif, mtu, df, cost: dict, copy_s_per_byte: float,
                   out_napi, ip_summed=None, out_features=None,
                   csum_s_per_byte: float = 0.0) -> dict:
    """Fragment counts, wire bytes and output cost of every packet.

    Parameters
    ----------
    length, oif, df : arrays    IP total length, output device, DF
    mtu : array                 MTU per device
    cost : dict                 seconds per kernel function
    copy_s_per_byte : float
    out_napi : array            the output device's driver polls (no TX IRQ)
    ip_summed : array, optional the checksum state at dev_queue_xmit (after
                                ip_forward: :func:`ip_forward_csum`); None =
                                all CHECKSUM_NONE
    out_features : array, optional
                                feature mask per device (indexed by ``oif``)
    csum_s_per_byte : float     priced software checksumming

    Returns
    -------
    dict with ``nfrag`` (1 = not fragmented), ``wire_bytes`` (all fragments,
    Ethernet framing included), ``out_cost`` (seconds: ip_output,
    ip_fragment per fragment with its payload copy, dev_queue_xmit, driver
    transmit and TX completion per fragment; plus a TX-done interrupt per
    fragment on non-NAPI drivers; plus skb_checksum_help where
    :func:`dev_queue_xmit_csum` says so) and ``csum_help`` (bool: that
    happened).
    """
    length = np.asarray(length, dtype=np.int64)
    oif_c = np.maximum(np.asarray(oif), 0).astype(np.intp)   # (a plain gather index)
    # (clipped per device, then gathered: the same values as clipping per packet)
    m = np.clip(np.asarray(mtu, dtype=np.int64), 68, 65535)[oif_c]
    napi = np.asarray(out_napi, dtype=bool)
    per_frag = composed(cost, "xmit_per_frag") + np.where(napi, 0.0, cost["tx_irq"])
    # Most packets fit their MTU: one frame, no ip_fragment.  Only the others go
    # through fragment_plan (the same arithmetic, on that subset).
    nfrag = np.ones(length.shape, dtype=np.int64)
    wire = wire_bytes(length)
    out = cost["ip_output"] + np.broadcast_to(per_frag, length.shape)
    big = np.flatnonzero(length > m)       # (m <= 65535: too-long packets are here too)
    if big.size:
        lb = length[big]
        payload = np.maximum(lb - 20, 0)
        plan = fragment_plan(payload, m[big])
        nf = np.where(np.asarray(df, dtype=bool)[big], 1, plan.n_frags)
        # every fragment is its own Ethernet frame: its own 20-byte IP header and
        # framing, and at least the minimum frame (a tiny last fragment is padded)
        frames = (nf - 1) * wire_bytes(plan.chunk + 20) + wire_bytes(plan.last + 20)
        wire[big] = np.where(nf > 1, frames, wire[big])
        pf = per_frag[big] if per_frag.ndim else per_frag
        frag_cost = np.where(nf > 1, nf * cost["ip_fragment"] + payload * copy_s_per_byte, 0.0)
        out[big] = cost["ip_output"] + frag_cost + nf * pf
        nfrag[big] = nf
    help_ = np.zeros(length.shape, dtype=bool)
    # (most runs have no CHECKSUM_PARTIAL packet at all: nothing to look at)
    if ip_summed is not None and np.any(np.asarray(ip_summed) == CHECKSUM_PARTIAL):
        feats = 0 if out_features is None else np.asarray(out_features, dtype=np.int64)[oif_c]
        help_ = dev_queue_xmit_csum(ip_summed, feats)
        idx = np.flatnonzero(help_)
        out[idx] += skb_checksum_help(length[idx], cost, csum_s_per_byte)
    return {"nfrag": nfrag, "wire_bytes": wire, "out_cost": out, "csum_help": help_}
