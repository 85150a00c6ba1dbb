"""IP receive: header checks and martian classification, and local delivery.

Kernel: net/ipv4/ip_input.c ip_rcv, ip_rcv_finish, ip_local_deliver;
net/ipv4/route.c ip_route_input_slow martian checks (2.4.22, 2.6.11).

The header checks and the martian classification do not depend on any
cache or queue state, so they run on the whole trace at once; the run
applies their verdicts.  :func:`ip_local_deliver` is the per-packet stage
for packets addressed to the router itself.
"""

from __future__ import annotations

import cython
import numpy as np

from ..core.dropreason import OUTCOMES
from ..core.skbuff import KIND, PacketTrace
from .icmp import ICMP_ECHOREPLY

__all__ = ["ip_rcv", "martian_class", "ip_local_deliver", "MARTIAN_SRC", "MARTIAN_DST",
           "IPPROTO_ICMP"]

IPPROTO_ICMP = 1
# (C constants when compiled)
_O_LOCAL, _IPPROTO_ICMP, _PING_REQUEST_K, _ECHOREPLY = (OUTCOMES["local"], IPPROTO_ICMP,
                                                        KIND["ping_request"], ICMP_ECHOREPLY)

MARTIAN_SRC, MARTIAN_DST = 1, 2


def ip_rcv(tr: PacketTrace) -> np.ndarray:
    """Header sanity checks of ``ip_rcv``; returns the drop code per packet.

    Kernel: net/ipv4/ip_input.c ip_rcv: version must be 4, ihl >= 5, the
    header checksum must verify (``ip_fast_csum``) and the total length must
    fit the received data.  Failures count in ``InHdrErrors`` and the packet
    is freed.  The generator marks defective packets in ``hdr_err`` rather
    than carrying header bytes (simplification); the check order is the
    kernel's, so one code per packet is enough.

    Returns
    -------
    numpy.ndarray of uint8
        0 where the header is fine, else the HDR_ERR code.
    """
    too_short = tr.length < 20
    err = tr.hdr_err.copy()
    err[(err == 0) & too_short] = 4
    return err


def martian_class(saddr, daddr) -> np.ndarray:
    """0, MARTIAN_SRC or MARTIAN_DST per packet.

    Kernel: net/ipv4/route.c ip_route_input_slow: a multicast, limited
    broadcast, zero-network or loopback *source*, or a zero-network or
    loopback *destination*, is martian: counted (``in_martian_src``/
    ``in_martian_dst``) and dropped, never cached.
    """
    s = np.asarray(saddr, dtype=np.uint32)
    dd = np.asarray(daddr, dtype=np.uint32)
    top_s = s >> np.uint32(24)
    top_d = dd >> np.uint32(24)
    bad_src = (top_s == 0) | (top_s == 127) | ((top_s & 0xF0) == 0xE0) | (s == 0xFFFFFFFF)
    bad_dst = (top_d == 0) | (top_d == 127)
    out = np.zeros(s.shape[0], dtype=np.int8)
    out[bad_dst] = MARTIAN_DST
    out[bad_src] = MARTIAN_SRC
    return out


@cython.locals(j=cython.Py_ssize_t, d=cython.long, now=cython.double, dep=cython.double,
               proto=cython.long)
def ip_local_deliver(stack, pk, j: int, d: int, now: float) -> int:
    """Packet ``j`` of ``pk`` (arrived on device ``d``) is for the router itself.

    Kernel: net/ipv4/ip_input.c ip_local_deliver, ip_local_deliver_finish:
    the packet is handed to its protocol.  ICMP echo requests are answered
    by the router's own ``icmp_rcv`` -> ``icmp_echo`` (the reply leaves by
    ``d``; the ping log notes it); a packet of a protocol a local host was
    registered for (``stack.local_hosts``) goes to that host.  Every local
    packet counts in ``InDelivers``.  ``stack`` is the run.
    """
    stack.ledger.drop(j, _O_LOCAL)
    proto = pk.proto[j]
    if proto == _IPPROTO_ICMP and pk.kind[j] == _PING_REQUEST_K:
        dep = stack.icmp.icmp_send(_ECHOREPLY, d, now, pk.iwire[j], pk.saddr[j], True)
        pk.t_depart[j] = dep
        stack.pings.answered(pk.tag[j], pk.t[j], dep)
    host = stack.local_hosts.get(proto)
    if host is not None:
        stack.deliver_at(now, host, j)   # (in the run's time order)
    return 0
