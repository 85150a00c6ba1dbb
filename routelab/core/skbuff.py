"""Packets as arrays: the model's ``struct sk_buff``.

Kernel: include/linux/skbuff.h, net/core/skbuff.c (2.4, 2.6).

A run never builds one Python object per packet.  The offered traffic is a
:class:`PacketTrace`: one numpy array per header field or skb property,
sorted by arrival time.  The stateless stages work on whole arrays; the
per-packet loop in :mod:`routelab.router` reads a window of them through
:class:`routelab.sim.columns.Packets` (typed views when compiled).

:data:`COLUMNS` is the one table of every packet column: the trace's header
fields, and the per-packet columns the loop reads (which of them, with what
C type, and which stage writes each).  :class:`PacketTrace`, the array
stages (:func:`routelab.prepare.column_data`) and the run's ``Packets``
all read it.

Only what the forwarding path looks at is kept: addresses, TOS, protocol,
length, TTL, DF, the fragment fields (IP id, offset, MF), the header error
(if the generator injected one), whether the skb arrives *cloned* (TCP keeps
the original for retransmission, story 4), its headroom and its checksum
state (``ip_summed``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import KnobError

__all__ = ["SOCKET_KINDS", "PacketTrace", "Column", "COLUMNS", "HEADER", "PACKET_SPECS", "KIND",
           "HDR_ERR",
           "CHECKSUM_NONE", "CHECKSUM_PARTIAL", "CHECKSUM_UNNECESSARY", "CHECKSUM_COMPLETE",
           "IP_OFFSET_MAX", "skb_cow_needed", "ip_to_int", "int_to_ip"]

# Traffic classes (the generator's label, not a header field).  Besides plots
# and per-class statistics they decide which host beyond a device sees a
# packet (routelab.hosts.kind_mask), whether the router answers an echo
# request (ipv4/ip_input.ip_local_deliver) and which packets are ARP frames
# (routelab.prepare).
KIND = {"background": 0, "worm": 1, "ping_request": 2, "ping_reply": 3, "flood": 4,
        "local": 5, "icmp_error": 6, "reply": 7, "arp": 8, "tcp_data": 9, "tcp_ack": 10,
        "udp": 11}
KIND_NAMES = {v: k for k, v in KIND.items()}
# kinds a local socket sends and receives (story 4's TCP, story 3's UDP datagrams
# and their fragments): a local one is handed to its socket, not to the router's
# own ICMP (routelab.prepare.local_socket)
SOCKET_KINDS = (KIND["tcp_data"], KIND["tcp_ack"], KIND["udp"])

# Header defects ip_rcv checks for (the generator may inject them).
HDR_ERR = {"ok": 0, "version": 1, "ihl": 2, "checksum": 3, "length": 4}

# skb->ip_summed, the skb's checksum state.  Kernel: include/linux/skbuff.h
# (2.6.20, sagsango/linux-2.6.20).  On receive: NONE = the device did not
# check the packet; UNNECESSARY = the device verified it; COMPLETE = the
# device handed over the sum of the whole packet in skb->csum.  On output:
# NONE = the protocol already filled in its checksum; PARTIAL = the device
# (or skb_checksum_help) must still sum from the transport header to the end.
# 2.4 (2.4.24) and 2.6.0 (MaximeChretien/linux-history), and 2.6.18 as far as
# we know, have one value 1 named CHECKSUM_HW for both COMPLETE (receive) and
# PARTIAL (output); the split into two names (PARTIAL keeping the value 1)
# came with 2.6.19 (version not checked in a tree).
CHECKSUM_NONE, CHECKSUM_PARTIAL, CHECKSUM_UNNECESSARY, CHECKSUM_COMPLETE = 0, 1, 2, 3

# iph->frag_off holds three flag bits and a 13-bit offset (IP_OFFSET = 0x1FFF)
# counted in 8-byte units (include/net/ip.h): the largest offset field.
IP_OFFSET_MAX = 0x1FFF


@dataclass(frozen=True, slots=True)
class Column:
    """One packet column (a row of :data:`COLUMNS`).

    Attributes
    ----------
    name : str
    dtype : numpy type
        The trace's dtype for a header field; else the dtype of the
        per-packet column.
    default : object
        A header field's value when a trace is built without it (``None``:
        required, or not a header field).
    header : bool
        A field of :class:`PacketTrace` (and of ``run.header(j)``).
    typed : str or None
        ``array.array`` type code of the per-packet column the run's loop
        reads through a typed view (``Packets.<name>``; declared in
        ``sim/columns.pxd``), or ``None`` if the loop does not read it.
    writer : str
        Who writes it: the traffic generators (and hosts, through
        ``run.inject``), an array stage (named), or the run.
    src : tuple
        For a per-packet column, where its values come from:
        ``("trace", field)``, ``("stage", key of the array stages' dict)``,
        ``("run", column)`` (starts as a copy of that column) or
        ``("run", value)`` (starts filled with the value).
    valid : tuple or None
        ``(lo, hi)``: a value given to :meth:`PacketTrace.build` outside it
        is a KnobError.
    doc : str
    """

    name: str
    dtype: type
    default: object
    header: bool
    typed: str | None
    writer: str
    src: tuple = ()
    valid: tuple | None = None
    doc: str = ""


_TRAFFIC = "traffic generators; hosts (run.inject)"

#: every packet column: the trace's header fields first (in the trace's order),
#: then the per-packet columns only the array stages and the run write
COLUMNS: tuple[Column, ...] = (
    Column("t", np.float64, None, True, "d", _TRAFFIC, ("trace", "t"),
           doc="arrival time of the last bit at the router's NIC [s]"),
    Column("iif", np.int16, 0, True, None, _TRAFFIC, doc="input interface index"),
    Column("saddr", np.uint32, None, True, "q", _TRAFFIC, ("trace", "saddr"),
           doc="IPv4 source address (host order)"),
    Column("daddr", np.uint32, None, True, None, _TRAFFIC,
           doc="IPv4 destination address (host order)"),
    Column("tos", np.uint8, 0, True, None, _TRAFFIC, doc="IP TOS byte"),
    Column("proto", np.uint8, 17, True, "q", _TRAFFIC, ("trace", "proto"),
           doc="1 ICMP, 6 TCP, 17 UDP"),
    Column("length", np.int32, 1500, True, None, _TRAFFIC, doc="IP total length [B]"),
    Column("ttl", np.uint8, 64, True, None, _TRAFFIC, doc="IP time to live"),
    Column("df", np.bool_, False, True, None, _TRAFFIC, doc="Don't Fragment"),
    Column("cloned", np.bool_, False, True, None, _TRAFFIC,
           doc="skb_cloned() is true on arrival"),
    Column("headroom", np.int16, 16, True, None, _TRAFFIC,
           doc="headroom in front of the IP header [B]"),
    Column("hdr_err", np.uint8, 0, True, None, _TRAFFIC,
           doc="0 = header fine, else a HDR_ERR code"),
    Column("kind", np.uint8, 0, True, "q", _TRAFFIC, ("trace", "kind"),
           doc="traffic class (KIND)"),
    Column("tag", np.int32, -1, True, "q", _TRAFFIC, ("trace", "tag"),
           doc="scenario-defined id (ping sequence number), -1 if none"),
    Column("frag_id", np.uint16, 0, True, None, _TRAFFIC, valid=(0, 0xFFFF),
           doc="IP identification (iph->id): the fragments of one datagram share it"),
    Column("frag_off", np.uint16, 0, True, None, _TRAFFIC, valid=(0, IP_OFFSET_MAX),
           doc="fragment offset in 8-byte units, as the 13-bit offset of iph->frag_off "
               "(bytes = 8 * frag_off); 0 for a whole datagram or its first fragment"),
    Column("mf", np.bool_, False, True, None, _TRAFFIC,
           doc="More Fragments (IP_MF): set on every fragment but the last"),
    Column("ip_summed", np.uint8, CHECKSUM_NONE, True, None, _TRAFFIC,
           valid=(CHECKSUM_NONE, CHECKSUM_COMPLETE),
           doc="skb->ip_summed on arrival: CHECKSUM_NONE / PARTIAL / UNNECESSARY / COMPLETE "
               "(0-3, 2.6.20 values)"),
    # -- per-packet columns of the run (sim.columns.Packets) ------------------------------
    Column("dev", np.int64, None, False, "q", _TRAFFIC, ("trace", "iif"),
           doc="input device (the trace's iif)"),
    Column("key", np.uint64, None, False, "Q", "prepare (flow key)", ("stage", "key"),
           doc="daddr << 32 | saddr"),
    Column("ik", np.int64, None, False, "q", "prepare (flow key)", ("stage", "ik"),
           doc="iif << 8 | tos"),
    Column("h", np.int64, None, False, "q", "rt_hash (prepare)", ("stage", "h"),
           doc="route-cache hash bucket"),
    Column("cls", np.int64, None, False, "q", "classify", ("stage", "cls"),
           doc="packet class after the array stages (prepare.C_*)"),
    Column("cost", np.float64, None, False, "d", "classify", ("stage", "cost"),
           doc="state-independent CPU cost [s]"),
    Column("oif", np.int64, None, False, "q", "fib_lookup", ("stage", "oif"),
           doc="output device"),
    Column("nfrag", np.int64, None, False, "q", "ip_output_plan", ("stage", "nfrag"),
           doc="frames sent (1 = not fragmented)"),
    Column("wire", np.float64, None, False, "d", "ip_output_plan (prepare)",
           ("stage", "wire_s"), doc="seconds on the output link, all fragments"),
    Column("fifo", np.int64, None, False, "q", "prepare (NIC RX FIFO)",
           ("stage", "fifo_slots"), doc="frames of this size the input NIC's FIFO holds"),
    Column("rtype", np.int64, None, False, "q", "fib_lookup", ("stage", "rtype"),
           doc="route type (fib.RTN)"),
    Column("gw", np.int64, None, False, "q", "fib_lookup", ("stage", "gw"),
           doc="next-hop gateway"),
    Column("nrules", np.int64, None, False, "q", "fib_lookup", ("stage", "nrules"),
           doc="policy rules examined"),
    Column("vfib", np.float64, None, False, "d", "fib_validate_source (prepare)",
           ("stage", "vfib_cost"),
           doc="seconds of fib_validate_source's FIB lookups on a cache miss"),
    Column("martian", np.int64, None, False, "q", "martian_class (ip_input)",
           ("stage", "martian"), doc="martian address class (0 = fine)"),
    Column("iwire", np.float64, None, False, "d", "prepare (ICMP reply size)",
           ("stage", "icmp_wire_s"), doc="seconds on the input link of an ICMP answer"),
    Column("path_cost", np.float64, None, False, "d", "classify", ("stage", "path_cost"),
           doc="cost of the path after the route lookup [s]"),
    Column("t_start", np.float64, None, False, "d", "the run (dispatch)", ("run", "t"),
           doc="service start [s] (starts as the arrival time)"),
    Column("t_depart", np.float64, None, False, "d", "the run (dispatch)",
           ("run", float("nan")), doc="departure from the output link [s], NaN if none"),
)

#: the trace's header fields, in order
HEADER: tuple[Column, ...] = tuple(c for c in COLUMNS if c.header)
_BY_NAME = {c.name: c for c in COLUMNS}

#: the run's per-packet columns (``sim.columns.Packets``): name -> (type code,
#: start) with start None for an input (from :func:`routelab.prepare.column_data`),
#: a column name (an output starting as a copy of it) or a value (an output
#: starting filled with it)
PACKET_SPECS: dict[str, tuple[str, object]] = {
    c.name: (c.typed, c.src[1] if c.src[0] == "run" else None)
    for c in COLUMNS if c.typed is not None}


class PacketTrace:
    """Offered packets, one array element per packet, sorted by ``t``.

    One attribute per header field of :data:`COLUMNS` (the table below);
    build one with :meth:`build`.
    """

    __slots__ = tuple(c.name for c in HEADER)

    DTYPES = {c.name: c.dtype for c in HEADER}
    DEFAULTS = {c.name: c.default for c in HEADER if c.default is not None}

    def __init__(self, **arrays) -> None:
        if arrays.keys() != PacketTrace.DTYPES.keys():
            missing = sorted(set(PacketTrace.DTYPES) - set(arrays))
            unknown = sorted(set(arrays) - set(PacketTrace.DTYPES))
            raise TypeError(f"PacketTrace fields: missing {missing}, unknown {unknown}")
        for name, a in arrays.items():
            setattr(self, name, a)

    def __repr__(self) -> str:
        return f"PacketTrace({len(self)} packets)"

    @classmethod
    def build(cls, t, **cols) -> "PacketTrace":
        """Make a trace from ``t`` and any columns; others take defaults.

        Scalars broadcast.  The result is sorted by time (stable).  A value
        outside a column's ``valid`` range (the fragment offset, the
        checksum state) is a KnobError.
        """
        t = np.asarray(t, dtype=np.float64)
        n = t.shape[0]
        unknown = set(cols) - set(cls.DTYPES)
        if unknown:
            raise TypeError(f"unknown packet fields: {sorted(unknown)}")
        arrays = {"t": t}
        for c in HEADER:
            name = c.name
            if name == "t":
                continue
            if name in cols:
                v = np.asarray(cols[name])
                if c.valid is not None and v.size:
                    lo, hi = c.valid
                    bad = (v < lo) | (v > hi)
                    if bad.any():
                        raise KnobError(name, v[bad].flat[0].item(),
                                        f"an integer in [{lo}, {hi}]")
                a = np.broadcast_to(v, (n,)).astype(c.dtype)
            elif c.default is None:
                raise TypeError(f"PacketTrace.build needs {name}")
            else:
                a = np.full(n, c.default, dtype=c.dtype)
            arrays[name] = a
        tr = cls(**arrays)
        return tr.sorted()

    def __len__(self) -> int:
        return int(self.t.shape[0])

    def take(self, idx) -> "PacketTrace":
        """Subset (or reorder) by an index array or boolean mask."""
        return PacketTrace(**{name: getattr(self, name)[idx] for name in self.DTYPES})

    def sorted(self) -> "PacketTrace":
        """Return the trace sorted by arrival time (stable)."""
        if len(self) < 2 or bool(np.all(self.t[1:] >= self.t[:-1])):
            return self
        return self.take(np.argsort(self.t, kind="stable"))

    @staticmethod
    def concat(traces: list["PacketTrace"]) -> "PacketTrace":
        """Merge traces into one, sorted by time."""
        traces = [tr for tr in traces if len(tr)]
        if not traces:
            return PacketTrace.build(np.zeros(0), saddr=0, daddr=0)
        merged = PacketTrace(**{name: np.concatenate([getattr(tr, name) for tr in traces])
                                for name in PacketTrace.DTYPES})
        return merged.sorted()


PacketTrace.__doc__ += "\n    Fields\n    ------\n" + "".join(
    f"    {c.name} : {np.dtype(c.dtype).name}\n        {c.doc}"
    + (f" (default {c.default!r})" if c.default is not None else " (required)")
    + "\n" for c in HEADER)


def skb_cow_needed(cloned, headroom, needed):
    """Would ``skb_cow(skb, needed)`` copy the packet?  (vectorised)

    Kernel: include/linux/skbuff.h skb_cow (2.4.2x, 2.6.11): reallocate the
    head (``pskb_expand_head``, copying the linear data) when the headroom is
    below ``max(16, needed)`` or the skb is cloned.
    """
    need = np.maximum(16, needed)
    return np.asarray(cloned, dtype=bool) | (np.asarray(headroom) < need)


def ip_to_int(dotted: str) -> int:
    """'10.0.0.1' -> 167772161."""
    parts = [int(p) for p in dotted.split(".")]
    if len(parts) != 4 or any(p < 0 or p > 255 for p in parts):
        raise ValueError(f"not an IPv4 address: {dotted!r}")
    return (parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]


def int_to_ip(x: int) -> str:
    """167772161 -> '10.0.0.1'."""
    x = int(x)
    return f"{(x >> 24) & 255}.{(x >> 16) & 255}.{(x >> 8) & 255}.{x & 255}"
