"""ip_output: fragmentation and handing packets to the device (array stage).

Kernel: net/ipv4/ip_output.c ip_output, ip_finish_output, ip_fragment;
net/core/dev.c dev_queue_xmit (2.4.22, 2.6.11).

A packet longer than the output MTU is cut by ``ip_fragment`` (FragOKs,
FragCreates); each fragment costs an allocation, a payload copy and its own
trip through ``dev_queue_xmit`` and the driver.  Packets with DF set were
already turned back by :func:`ip_forward_plan`.
"""

from __future__ import annotations

import numpy as np

from ..costs import composed, wire_bytes
from .ip_fragment import fragment_plan

__all__ = ["ip_output_plan"]


def ip_output_plan(length, oif, mtu, df, cost: dict, copy_s_per_byte: float,
                   out_napi) -> dict:
    """Fragment counts, wire bytes and output cost of every packet.

    Returns
    -------
    dict with ``nfrag`` (1 = not fragmented), ``wire_bytes`` (all fragments,
    Ethernet framing included) and ``out_cost`` (seconds: ip_output,
    ip_fragment per fragment with its payload copy, dev_queue_xmit, driver
    transmit and TX completion per fragment; plus a TX-done interrupt per
    fragment on non-NAPI drivers).
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
    return {"nfrag": nfrag, "wire_bytes": wire, "out_cost": out}
