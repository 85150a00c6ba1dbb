"""Packets as arrays: the model's ``struct sk_buff``.

Kernel: include/linux/skbuff.h, net/core/skbuff.c (2.4, 2.6).

A run never builds one Python object per packet.  The offered traffic is a
:class:`PacketTrace`: one numpy array per header field or skb property,
sorted by arrival time.  The stateless stages work on whole arrays; the
per-packet loop in :mod:`routelab.router` reads a window of them through
:class:`routelab.sim.columns.Packets` (typed views when compiled).

Only what the forwarding path looks at is kept: addresses, TOS, protocol,
length, TTL, DF, the header error (if the generator injected one), whether
the skb arrives *cloned* (TCP keeps the original for retransmission, story
4) and its headroom.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

__all__ = ["PacketTrace", "KIND", "HDR_ERR", "skb_cow_needed", "ip_to_int", "int_to_ip"]

# Traffic classes (the generator's label, not a header field).  Besides plots
# and per-class statistics they decide which host beyond a device sees a
# packet (routelab.hosts.kind_mask), whether the router answers an echo
# request (ipv4/ip_input.ip_local_deliver) and which packets are ARP frames
# (routelab.prepare).
KIND = {"background": 0, "worm": 1, "ping_request": 2, "ping_reply": 3, "flood": 4,
        "local": 5, "icmp_error": 6, "reply": 7, "arp": 8}
KIND_NAMES = {v: k for k, v in KIND.items()}

# Header defects ip_rcv checks for (the generator may inject them).
HDR_ERR = {"ok": 0, "version": 1, "ihl": 2, "checksum": 3, "length": 4}


@dataclass(slots=True)
class PacketTrace:
    """Offered packets, one array element per packet, sorted by ``t``.

    Attributes
    ----------
    t : float64 [s]       arrival time of the last bit at the router's NIC
    iif : int16           input interface index
    saddr, daddr : uint32 IPv4 addresses (host order)
    tos : uint8           IP TOS byte
    proto : uint8         1 ICMP, 6 TCP, 17 UDP
    length : int32 [B]    IP total length
    ttl : uint8
    df : bool             Don't Fragment
    cloned : bool         skb_cloned() is true on arrival
    headroom : int16 [B]  headroom in front of the IP header
    hdr_err : uint8       0 = header fine, else a HDR_ERR code
    kind : uint8          traffic class (KIND)
    tag : int32           scenario-defined id (ping sequence number), -1 if none
    """

    t: np.ndarray
    iif: np.ndarray
    saddr: np.ndarray
    daddr: np.ndarray
    tos: np.ndarray
    proto: np.ndarray
    length: np.ndarray
    ttl: np.ndarray
    df: np.ndarray
    cloned: np.ndarray
    headroom: np.ndarray
    hdr_err: np.ndarray
    kind: np.ndarray
    tag: np.ndarray

    DTYPES = {"t": np.float64, "iif": np.int16, "saddr": np.uint32, "daddr": np.uint32,
              "tos": np.uint8, "proto": np.uint8, "length": np.int32, "ttl": np.uint8,
              "df": np.bool_, "cloned": np.bool_, "headroom": np.int16,
              "hdr_err": np.uint8, "kind": np.uint8, "tag": np.int32}
    DEFAULTS = {"iif": 0, "tos": 0, "proto": 17, "length": 1500, "ttl": 64, "df": False,
                "cloned": False, "headroom": 16, "hdr_err": 0, "kind": 0, "tag": -1}

    @classmethod
    def build(cls, t, **cols) -> "PacketTrace":
        """Make a trace from ``t`` and any columns; others take defaults.

        Scalars broadcast.  The result is sorted by time (stable).
        """
        t = np.asarray(t, dtype=np.float64)
        n = t.shape[0]
        unknown = set(cols) - set(cls.DTYPES)
        if unknown:
            raise TypeError(f"unknown packet fields: {sorted(unknown)}")
        arrays = {"t": t}
        for name, dtype in cls.DTYPES.items():
            if name == "t":
                continue
            if name in cols:
                a = np.broadcast_to(np.asarray(cols[name]), (n,)).astype(dtype)
            elif name in ("saddr", "daddr"):
                raise TypeError(f"PacketTrace.build needs {name}")
            else:
                a = np.full(n, cls.DEFAULTS[name], dtype=dtype)
            arrays[name] = a
        tr = cls(**arrays)
        return tr.sorted()

    def __len__(self) -> int:
        return int(self.t.shape[0])

    def take(self, idx) -> "PacketTrace":
        """Subset (or reorder) by an index array or boolean mask."""
        return PacketTrace(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})

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
        merged = PacketTrace(**{f.name: np.concatenate([getattr(tr, f.name) for tr in traces])
                                for f in fields(PacketTrace)})
        return merged.sorted()


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
