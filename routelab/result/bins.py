"""Time bins: CPU busy time and hard-IRQ time per bin, and the binning itself."""

from __future__ import annotations

import numpy as np

from ..core.dropreason import OUTCOMES

__all__ = ["bin_index", "busy_in_bins", "hardirq_in_bins"]


def bin_index(edges: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The bin of each time: the last ``i`` with ``edges[i] <= t``, clipped to
    ``[0, nb - 1]`` -- ``searchsorted(edges, t, side="right") - 1``, exactly.

    ``edges`` are uniform (``arange(nb + 1) * bin_s``), so a division finds
    the bin to within one; one comparison each way against the edges makes it
    exact.  This replaces a binary search per time (8 steps for 250 bins).
    Other edges, and times that are NaN, infinite or negative, get the binary
    search itself.
    """
    nb = edges.size - 1
    t = np.asarray(t, dtype=np.float64)
    step = edges[1] - edges[0] if nb >= 1 else 0.0
    uniform = step > 0 and edges[0] == 0.0 and np.array_equal(edges, np.arange(nb + 1) * step)
    if not (uniform and t.size and np.isfinite(t).all() and t.min() >= 0.0):
        return np.clip(np.searchsorted(edges, t, side="right") - 1, 0, max(nb - 1, 0))
    ext = np.append(edges, np.inf)          # (edges[nb + 1]: never <= t)
    b = np.minimum((t / step).astype(np.int64), nb)
    b -= ext[b] > t                         # one too far (edges[0] = 0 <= t)
    b += ext[b + 1] <= t                    # one short
    return np.minimum(b, nb - 1)


def hardirq_in_bins(config, p: dict, packets: dict, n0: int, edges) -> np.ndarray:
    """Hard-IRQ seconds per CPU and bin, split out of the CPU's busy time.

    On drivers without NAPI (2.4's e100) every received frame costs a hard
    interrupt (``irq_rx`` + ``netif_rx``; a frame the backlog refuses also its
    ``kfree_skb``) and every transmitted frame a TX-done interrupt
    (``tx_irq``).  The kernel accounts that time to hard-IRQ context, not to
    softirq or ``ksoftirqd``, so ``top`` of the period showed it apart.

    Simplified: the router's CPU is one FIFO server, so this time is placed
    at the packet's service start (where the loop charged it), not at the
    arrival instant; packets born during the run (beyond the offered trace)
    are not counted.  NAPI receive is treated as interrupt-free.
    """
    c = config.costs.fn
    ncpu = config.ncpus
    out = np.zeros((ncpu, edges.size - 1))
    napi = np.asarray(p.get("napi", np.ones(n0, dtype=bool)), dtype=bool)[:n0]
    if napi.all():
        return out
    o = packets["outcome"][:n0]
    t = packets["t_start"][:n0]
    dev_cpu = np.array([d.cpu for d in config.devices], dtype=np.int64)
    dev = packets["dev"][:n0].astype(np.int64)
    out_napi = np.array([not d.tx_irq for d in config.devices])
    missed = o == OUTCOMES["drop_rx_missed"]
    w = np.where(napi | missed, 0.0, c["irq_rx"] + c["netif_rx"])
    w = w + np.where(~napi & (o == OUTCOMES["drop_backlog"]), c["kfree_skb"], 0.0)
    oif = np.asarray(p["oif"])[:n0].astype(np.int64)
    sent = (o == OUTCOMES["forwarded"]) & (oif >= 0)
    nfrag = np.asarray(p.get("nfrag", np.ones(n0)))[:n0]
    tx = sent & ~out_napi[np.maximum(oif, 0)]
    w = w + np.where(tx, nfrag * c["tx_irq"], 0.0)
    cpu_of = dev_cpu[dev]
    nb = edges.size - 1
    b = bin_index(edges, t)
    # (bincount adds the weights in order, as np.add.at would; the packets with
    # no hard-IRQ time add +0.0, which leaves every sum as it is)
    out += np.bincount(cpu_of * nb + b, weights=w, minlength=ncpu * nb).reshape(ncpu, nb)
    return out


def busy_in_bins(starts, durs, edges) -> np.ndarray:
    """Busy seconds inside each bin of ``edges`` for sorted, disjoint intervals."""
    s = np.asarray(starts, dtype=np.float64)
    d = np.asarray(durs, dtype=np.float64)
    edges = np.asarray(edges, dtype=np.float64)
    if s.size == 0:
        return np.zeros(edges.size - 1)
    order = np.argsort(s, kind="stable")
    s, d = s[order], d[order]
    cum = np.concatenate([[0.0], np.cumsum(d)])
    idx = np.searchsorted(s, edges, side="right")          # intervals starting before x
    last = np.maximum(idx - 1, 0)
    partial = np.where(idx > 0, np.minimum(edges - s[last], d[last]), 0.0)
    before = np.where(idx > 0, cum[idx - 1], 0.0)
    b = before + np.maximum(partial, 0.0)
    return np.diff(b)
