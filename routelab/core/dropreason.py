"""Every way a packet's life in the router ends: one table, one name and code each.

Kernel: the ``goto drop`` labels and the counters they bump across
net/core/dev.c (``netif_rx``, softnet ``dropped``), the drivers (RX missed /
FIFO), net/ipv4/ip_input.c (``ip_rcv``: ``InHdrErrors``), route.c
(``ip_route_input_slow``: martians, ``ip_error``; ``dst_alloc``: "dst cache
overflow"), ip_forward.c (TTL, DF), the qdisc (``dev_queue_xmit``) and
neighbour.c (the unresolved queue, a failed resolution, a full table).

A packet ends in exactly one outcome (the invariant ``Result.conservation``
checks); the per-packet ``outcome`` column holds the codes below.  A new kind
of ending starts here, as a row: the result views, the summary and the
conservation test read this table.  The stage that decides it still has to
record it, and a new kernel counter still has to be counted where the run
counts its window (``router.Run._count_window``'s MIB mapping).

Each row names the kernel counter that counts it (``counter``), where the
kernel keeps one, the deciding function (``where``) and a line of text;
they document the table, and nothing in the run reads them yet.  The
model's counters in ``Result.counters`` use the same counter names.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Reason", "REASONS", "OUTCOMES", "OUTCOME_NAMES", "NO_DROP", "reason"]


@dataclass(frozen=True, slots=True)
class Reason:
    """One outcome of a packet.

    Attributes
    ----------
    name : str       the outcome's name (``"drop_dst_overflow"``)
    code : int       its code in the ``outcome`` column (0..127)
    where : str      the kernel function that decides it
    counter : str    the kernel counter that counts it ("" = none)
    text : str       one line for tables and figures
    """

    name: str
    code: int
    where: str
    counter: str
    text: str


REASONS: tuple[Reason, ...] = (
    Reason("forwarded", 0, "dev_queue_xmit", "ForwDatagrams",
           "left on an output link"),
    Reason("local", 1, "ip_local_deliver", "InDelivers",
           "delivered to the router itself"),
    Reason("drop_rx_missed", 2, "driver RX", "rx_missed",
           "NIC: no descriptor and the FIFO full"),
    Reason("drop_backlog", 3, "netif_rx", "softnet dropped",
           "per-CPU backlog full or throttled"),
    Reason("drop_hdr", 4, "ip_rcv", "InHdrErrors", "bad IP header"),
    Reason("drop_martian", 5, "ip_route_input_slow", "InAddrErrors",
           "martian source or destination"),
    Reason("drop_no_route", 6, "ip_error", "OutNoRoutes",
           "unreachable, blackhole or prohibited route"),
    Reason("drop_dst_overflow", 7, "dst_alloc", "InDiscards",
           "dst cache overflow (the GC could not make room)"),
    Reason("drop_ttl", 8, "ip_forward", "OutTimeExcds", "TTL expired"),
    Reason("drop_frag_needed", 9, "ip_forward", "FragFails",
           "DF set and larger than the MTU"),
    Reason("drop_qdisc", 10, "dev_queue_xmit", "OutDiscards", "output queue full"),
    Reason("drop_neigh_overflow", 11, "rt_intern_hash", "",
           "neighbour table full (\"Neighbour table overflow\"): the new route dropped"),
    Reason("drop_arp_queue", 12, "neigh_event_send", "unres_discards",
           "pushed out of a full unresolved queue (the oldest goes)"),
    Reason("drop_neigh_failed", 13, "neigh_timer_handler", "res_failed",
           "address never resolved: ICMP host unreachable, freed"),
    Reason("drop_neigh", 14, "neigh_event_send", "",
           "neighbour FAILED and no probes configured"),
    Reason("held_neigh", 15, "neigh_event_send", "",
           "still waiting in a neighbour's queue when the run (or its window) ended"),
    Reason("arp", 16, "arp_rcv", "", "an ARP packet, handled by the router's ARP"),
)

#: name -> code (the ``outcome`` column's values)
OUTCOMES: dict[str, int] = {r.name: r.code for r in REASONS}
#: code -> name
OUTCOME_NAMES: dict[int, str] = {r.code: r.name for r in REASONS}
#: what a stage leaves in ``Ledger.why`` when it did not drop the packet
NO_DROP = -1


def reason(name: str) -> Reason:
    """The row of outcome ``name`` (KeyError with the known names otherwise)."""
    for r in REASONS:
        if r.name == name:
            return r
    raise KeyError(f"unknown outcome {name!r}; known: {', '.join(OUTCOMES)}")
