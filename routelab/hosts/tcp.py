"""TCP endpoints: netperf's TCP_STREAM sender and the receiver beyond the wire.

Kernel (2.6.20, sagsango/linux-2.6.20 @ 7925ece7): net/ipv4/tcp.c
tcp_sendmsg, select_size; net/ipv4/tcp_output.c tcp_write_xmit,
tcp_transmit_skb (a *clone* of the write-queue skb is sent, or a pskb_copy
when the original is still cloned by an earlier send); net/ipv4/tcp_input.c
tcp_ack, tcp_clean_rtx_queue, tcp_rtt_estimator, tcp_init_cwnd,
__tcp_ack_snd_check, tcp_incr_quickack, tcp_send_delayed_ack;
net/ipv4/tcp_timer.c tcp_retransmit_timer; include/net/tcp.h
(TCP_ATO_MIN = HZ/25, TCP_RTO_MIN = HZ/5, TCP_TIMEOUT_INIT = 3 HZ,
TCP_MAX_QUICKACKS 16, MAX_TCP_HEADER = 128 + MAX_HEADER).

:class:`TcpSender` is netperf's socket on the engine's machine: in the
host's own stack (``path="host"``: local output with ``run.ip_output``, B's
ACKs through ``ip_local_deliver``) or in a container (``path="container"``:
its segments cross the pair device into the host, ``run.inject`` on that
device; the ACKs come back through the host's forward path and the pair
device, ``Host.deliver``).  Its CPU work is the machine's: every function
is charged with :meth:`Host.charge` under its kernel name.
:class:`TcpReceiver` is host B beyond the NIC (its own machine: nothing
charged) with its NIC (:class:`~routelab.hosts.nic.HostNic`) for the ACKs.

Sequence numbers count *segments* (every segment is a full MSS): the
packet's ``tag`` is the segment's number, an ACK's ``tag`` the next segment
B expects (the cumulative ACK).

Simplified (stated where they matter): no handshake (the connection is
established at time 0 with no RTT sample: the first RTO is 3 s); every
segment is a full MSS (netperf writes far faster than the link drains, so
the write queue always holds more than a segment); Reno slow start and
congestion avoidance with NewReno-style fast retransmit (2.6.20's default
is CUBIC; in a loss-free LAN run the window is set by slow start and the
receive window, where the two agree); cwnd grows only when it limits
(tcp_is_cwnd_limited); no SACK, no timestamps' RTT (one timed segment per
RTT, Karn's rule); B's application reads at once, so its advertised window
is constant (``window`` bytes) and every ACK moves it; the send buffer
grows with cwnd (tcp_should_expand_sndbuf; never locked by netperf here),
so it never limits.
"""

from __future__ import annotations

import math

from .. import costs as _costs
from ..core import skb as _skb
from ..core.skbuff import CHECKSUM_NONE, CHECKSUM_PARTIAL, KIND
from ..errors import KnobError
from ..hardware import NETIF_F, NETIF_F_ALL_CSUM
from ..ipv4.ip_forward import ip_forward_csum
from . import Host

__all__ = ["TcpSender", "TcpReceiver", "sock_caps", "MAX_TCP_HEADER", "TCP_HDR", "IP_HDR",
           "ETH_HLEN", "ACK_LEN"]

MAX_HEADER = 32                   # LL_MAX_HEADER without tunnels (ASSUMED config)
MAX_TCP_HEADER = 128 + MAX_HEADER
TCP_HDR = 32                      # 20 + timestamps option (12)
IP_HDR = 20
ETH_HLEN = 14
ACK_LEN = IP_HDR + TCP_HDR        # a pure ACK's IP length
TCP_RTO_MIN = 0.2
TCP_RTO_MAX = 120.0
TCP_TIMEOUT_INIT = 3.0
TCP_ATO_MIN = 0.04
TCP_MAX_QUICKACKS = 16
TSO_MAX_SEGS = 44                 # 64 KB skb: (65535 - headers) // 1448
_SG, _TSO, _GSO = NETIF_F["SG"], NETIF_F["TSO"], NETIF_F["GSO"]
_TCP_DATA, _TCP_ACK = KIND["tcp_data"], KIND["tcp_ack"]


def sock_caps(features: int) -> dict:
    """What a socket takes from its route device's features.

    Kernel: include/net/sock.h sk_setup_caps (sk_route_caps = the output
    device's features; GSO-capable -> also SG and HW_CSUM), net/core/dev.c
    register_netdevice (SG dropped without a checksum feature, TSO without
    SG), net/ipv4/tcp.c select_size and tcp_sendmsg (2.6.20).

    Returns ``csum_partial`` (CHECKSUM_PARTIAL: plain copy from user; else
    csum_and_copy_from_user), ``sg`` and ``gso`` (payload in page frags, skbs
    up to 64 KB), ``linear`` (payload bytes in the linear area: all of it
    unless SG+GSO; a 1448-byte MSS is below SKB_MAX_HEAD(MAX_TCP_HEADER)).
    """
    f = int(features)
    if (f & _SG) and not (f & NETIF_F_ALL_CSUM):
        f &= ~_SG
    if (f & _TSO) and not (f & _SG):
        f &= ~_TSO
    gso = bool(f & (_TSO | _GSO))
    return {"csum_partial": bool(f & NETIF_F_ALL_CSUM) or gso, "sg": bool(f & _SG) or gso,
            "gso": gso, "tso": bool(f & _TSO), "features": f}


class TcpSender(Host):
    """netperf TCP_STREAM's sending socket (see the module docstring).

    Parameters
    ----------
    path : "host" or "container"
    caps : dict            :func:`sock_caps` of the socket's route device
    addr, peer : int       its address and B's
    oif : int              the host path's output device (the NIC)
    pair : int             the container path's pair device (where segments enter)
    window : int           B's advertised receive window, bytes
    mss : int
    send_size : int        bytes per send() call (netperf -m)
    cpu : int              the CPU netperf and its softirq work run on
    skip_cow : bool        the host runs OpenVZ's hack (the clone is not copied)
    tso_segs : int         segments per TSO skb (host path on a TSO NIC), 1 = none
    """

    kinds = ("tcp_ack",)

    def __init__(self, path: str, caps: dict, addr: int, peer: int, *, oif: int = 0,
                 pair: int = 1, window: int = 65535, mss: int = 1448, send_size: int = 16384,
                 cpu: int = 0, skip_cow: bool = False, tso_segs: int = 1) -> None:
        super().__init__()
        if path not in ("host", "container"):
            raise KnobError("path", path, "'host' or 'container'")
        if not (isinstance(send_size, int) and send_size >= 1):
            raise KnobError("send_size", send_size, "an integer >= 1 byte")
        if not (isinstance(window, int) and window >= mss):
            raise KnobError("window", window, f"an integer >= the MSS ({mss} B)")
        self.path = path
        self.caps = dict(caps)
        self.addr, self.peer = int(addr), int(peer)
        self.oif, self.pair = int(oif), int(pair)
        self.window = int(window)
        self.mss = int(mss)
        self.send_size = int(send_size)
        self.cpu = int(cpu)
        self.skip_cow = bool(skip_cow)
        self.tso_segs = max(1, int(tso_segs))

    # -- the run ---------------------------------------------------------------------
    def start(self, run, dev: int) -> None:
        super().start(run, dev)
        fn = run.r.costs.fn
        ct = run.r.costs
        mss = self.mss
        per_byte = ct.copy_s_per_byte + (0.0 if self.caps["csum_partial"]
                                         else ct.csum_s_per_byte)
        # tcp_sendmsg: the system call's share per segment, the skb, the bytes
        # (csum_and_copy_from_user = copy and checksum in one pass, priced as both)
        self.c_syscall = fn["sys_sendmsg"] * mss / self.send_size
        self.c_copy = per_byte * mss
        self.c_skb = fn["tcp_sendmsg_skb"]
        self.c_xmit = _costs.composed(fn, "tcp_xmit")
        self.c_pair = fn["dev_queue_xmit"] + fn["pair_xmit"]   # (noqueue: tx_queue_len 0)
        self.c_rcv = _costs.composed(fn, "tcp_rcv_ack")
        self.c_clean = fn["tcp_clean_rtx_skb"]
        self.c_txc = fn["tx_complete"]
        # the container's own receive of an ACK the pair device netif_rx'd to it:
        # its backlog, IP, its route cache, local delivery; and the ACK's checksum in
        # software (ip_forward left CHECKSUM_NONE; <= 76 B: summed at once)
        self.c_ct_rx = (_costs.composed(fn, "receive_pair") + _costs.composed(fn, "route_hit")
                        + fn["ip_local_deliver"])
        self.c_ack_csum = TCP_HDR * ct.csum_s_per_byte
        self.snd_una = 0
        self.snd_nxt = 0
        self.high = 0                      # highest segment sent + 1
        self.cwnd = 3.0 if mss > 1095 else 4.0   # tcp_init_cwnd (mss 1096..1460)
        self.ssthresh = 1e9
        self.rwnd = max(1, self.window // mss)
        self.srtt = 0.0
        self.rttvar = 0.0
        self.rto = TCP_TIMEOUT_INIT
        self.backoff = 0
        self.timed = -1                    # segment timed for an RTT sample
        self.timed_at = 0.0
        self.dupacks = 0
        self.recover = -1
        self.wq: dict = {}                 # segment -> original skb (write/retransmit queue)
        self.sent = 0                      # segments transmitted (with retransmissions)
        self.retrans = 0
        self.qdisc_drops = 0
        self.timeouts = 0
        self.acks = 0
        self.copies = 0
        self.bytes_copied = 0
        self.clone_states: list = []       # snapshots of the first segment's skbs
        self.rto_timer = run.clock.timer("tcp retransmit timer", self._rto_fire, cpu=self.cpu,
                                         raw=True)
        self._tso = self.tso_segs > 1 and self.path == "host"
        self._fields = {"saddr": self.addr, "daddr": self.peer, "proto": 6, "ttl": 64,
                        "df": True, "kind": _TCP_DATA, "iif": self.pair,
                        "length": IP_HDR + TCP_HDR + mss,
                        "ip_summed": CHECKSUM_PARTIAL if self.caps["csum_partial"]
                        else CHECKSUM_NONE}
        # the connection is up at 0: the initial window leaves then (a timer: the
        # run's packet columns exist only once it has begun)
        self.up = run.clock.timer("tcp connection up", self._up, cpu=self.cpu, raw=True)
        self.up.mod(0.0)

    def _up(self, now: float) -> float:
        self._push(now)
        return 0.0

    # -- the write queue's skbs ------------------------------------------------------
    def _new_skb(self, seq: int) -> _skb.Skb:
        """tcp_sendmsg's skb for segment ``seq``: MAX_TCP_HEADER of headroom, the
        payload linear (or, with SG+GSO, in a page frag); skb_entail releases the
        header."""
        mss = self.mss
        if self.caps["gso"]:
            s = _skb.alloc_skb(MAX_TCP_HEADER)
            _skb.skb_reserve(s, MAX_TCP_HEADER)
            _skb.skb_add_frag(s, mss)
        else:
            s = _skb.alloc_skb(MAX_TCP_HEADER + mss)
            _skb.skb_reserve(s, MAX_TCP_HEADER)
            _skb.skb_put(s, mss)
        s.ip_summed = CHECKSUM_PARTIAL if self.caps["csum_partial"] else CHECKSUM_NONE
        _skb.skb_header_release(s)
        self.wq[seq] = s
        return s

    def _transmit(self, seq: int, t: float) -> float:
        """tcp_transmit_skb of segment ``seq`` at ``t``: the clone goes down the
        stack; returns when the stack's work is done (and charges it)."""
        orig = self.wq.get(seq)
        first = orig is None
        cost = 0.0
        if first:
            orig = self._new_skb(seq)
            cost += self.c_syscall + self.c_skb + self.c_copy
            self.charge("sys_sendmsg", self.c_syscall, t, self.cpu)
            self.charge("tcp_sendmsg (skb)", self.c_skb, t, self.cpu)
            self.charge("csum_partial_copy_generic" if not self.caps["csum_partial"]
                        else "copy_from_user", self.c_copy, t, self.cpu)
        if _skb.skb_cloned(orig):          # a previous clone still out: pskb_copy
            clone, nb = _skb.pskb_copy(orig)
            self.bytes_copied += nb
        else:
            clone = _skb.skb_clone(orig)
        _skb.skb_push(clone, TCP_HDR + IP_HDR)
        cost += self.c_xmit
        self.charge("skb_clone+tcp_transmit_skb+ip_queue_xmit", self.c_xmit, t, self.cpu)
        self.sent += 1
        if seq < self.high:
            self.retrans += 1
        return t + cost, clone

    def _xmit_container(self, seq: int, t: float) -> None:
        done, clone = self._transmit(seq, t)
        # dev_queue_xmit on the pair (noqueue), the pair's xmit (skb_orphan:
        # the socket's wmem back at once), eth_type_trans pulls the header
        _skb.skb_push(clone, ETH_HLEN)
        self.charge("dev_queue_xmit+pair_xmit (container)", self.c_pair, done, self.cpu)
        _skb.skb_pull(clone, ETH_HLEN)
        f = self._fields
        f["tag"] = seq
        f["cloned"] = _skb.skb_cloned(clone)
        f["headroom"] = _skb.skb_headroom(clone)
        snap = seq == 0 and not self.clone_states
        if snap:
            self.clone_states.append(("original after skb_clone", self.wq[seq].state()))
            self.clone_states.append(("clone entering the host", clone.state()))
        # the host's ip_forward: skb_cow on the clone (not with OpenVZ's hack)
        if not self.skip_cow:
            nb = _skb.skb_cow(clone, 16)
            if nb:
                self.copies += 1
                self.bytes_copied += nb
        if snap:
            self.clone_states.append(("clone after ip_forward's skb_cow", clone.state()))
            self.clone_states.append(("original after skb_cow", self.wq[seq].state()))
        _skb.kfree_skb(clone)              # (freed at the NIC's TX completion)
        self.run.inject(f, done + self.c_pair)

    def _xmit_host(self, seqs: list, t: float) -> None:
        done, clone = self._transmit(seqs[0], t)
        for s in seqs[1:]:                 # (a TSO skb carries several segments)
            if s not in self.wq:
                self._new_skb(s)
                c = self.c_copy + self.c_syscall
                self.charge("sys_sendmsg", self.c_syscall, t, self.cpu)
                self.charge("csum_partial_copy_generic" if not self.caps["csum_partial"]
                            else "copy_from_user", self.c_copy, t, self.cpu)
                done += c
            self.sent += 1
        f = self._fields
        f["iif"] = self.oif
        f["tag"] = seqs[0]
        if len(seqs) > 1:
            frames = [(IP_HDR + TCP_HDR + self.mss, s) for s in seqs]
            f["length"] = IP_HDR + TCP_HDR + self.mss * len(seqs)
            dep = self.run.ip_output(f, done, self, seqs[0], self.oif, frames=frames)
            f["length"] = IP_HDR + TCP_HDR + self.mss
        else:
            dep = self.run.ip_output(f, done, self, seqs[0], self.oif)
        if dep != dep:                     # the qdisc refused it (a loss TCP recovers)
            self.qdisc_drops += len(seqs)
        _skb.kfree_skb(clone)              # (its TX completion; the original stays)

    def _push(self, t: float) -> None:
        """tcp_write_xmit: send what cwnd and B's window allow."""
        limit = self.snd_una + min(int(self.cwnd), self.rwnd)
        while self.snd_nxt < limit:
            if self.path == "container":
                self._xmit_container(self.snd_nxt, t)
                n = 1
            else:
                n = 1
                if self._tso:
                    n = min(limit - self.snd_nxt, self.tso_segs)
                    if self._tso_should_defer(n):
                        break
                self._xmit_host(list(range(self.snd_nxt, self.snd_nxt + n)), t)
            if self.timed < 0 and self.snd_nxt >= self.high:
                self.timed, self.timed_at = self.snd_nxt, t
            self.snd_nxt += n
            if self.snd_nxt > self.high:
                self.high = self.snd_nxt
        if self.snd_una < self.snd_nxt and not self.rto_timer.pending():
            self.rto_timer.mod(t + self.rto)

    def _tso_should_defer(self, n: int) -> bool:
        """tcp_tso_should_defer (tcp_output.c, 2.6.20): with data in flight and
        recovery not running, wait for more ACKs rather than send a TSO skb of
        ``n`` segments when neither a full 64 KB skb nor a third
        (sysctl_tcp_tso_win_divisor = 3) of the window can go.  Simplified:
        the "defer for less than two ticks" limit never ends a deferral (ACKs
        come every few microseconds here)."""
        if n >= self.tso_segs or self.snd_nxt == self.snd_una or self.recover >= 0:
            return False
        chunk = min(self.rwnd, int(self.cwnd)) // 3
        return n < chunk

    # -- ACKs ---------------------------------------------------------------------------
    def deliver(self, j: int, t: float) -> None:
        ack = int(self.run.field(j, "tag"))
        self.acks += 1
        cost = self.c_rcv
        if self.path == "container":
            cost += self.c_ct_rx + self.c_ack_csum
            self.charge("netif_rx+ip_rcv+ip_route_input+ip_local_deliver (container)",
                        self.c_ct_rx, t, self.cpu)
            self.charge("__skb_checksum_complete (ACK, container)", self.c_ack_csum, t, self.cpu)
        self.charge("tcp_v4_rcv+tcp_ack", self.c_rcv, t, self.cpu)
        if ack > self.snd_una:
            n = ack - self.snd_una
            for s in range(self.snd_una, ack):
                orig = self.wq.pop(s, None)
                if orig is not None:
                    _skb.kfree_skb(orig)
            cc = self.c_clean * n
            cost += cc
            self.charge("tcp_clean_rtx_queue (kfree_skb)", cc, t, self.cpu)
            if self.timed >= 0 and ack > self.timed:
                self._rtt_sample(t - self.timed_at)
                self.timed = -1
            self.backoff = 0
            if self.recover >= 0:
                if ack > self.recover:     # recovery over: deflate
                    self.cwnd = self.ssthresh
                    self.recover = -1
                else:                      # partial ACK: resend the next hole
                    self.snd_una = ack
                    self._resend(self.snd_una, t + cost)
            elif self.snd_nxt - self.snd_una >= int(self.cwnd):   # cwnd-limited
                if self.cwnd < self.ssthresh:
                    self.cwnd += n
                else:
                    self.cwnd += n / self.cwnd
            self.snd_una = ack
            self.dupacks = 0
            self.rto_timer.stop()
        elif ack == self.snd_una and self.snd_nxt > self.snd_una:
            self.dupacks += 1
            if self.dupacks == 3 and self.recover < 0:    # fast retransmit
                self.ssthresh = max(2.0, (self.snd_nxt - self.snd_una) / 2.0)
                self.cwnd = self.ssthresh + 3
                self.recover = self.snd_nxt - 1
                self._resend(self.snd_una, t + cost)
        self._push(t + cost)

    def _resend(self, seq: int, t: float) -> None:
        self.timed = -1                    # Karn: no sample from a retransmission
        if self.path == "container":
            self._xmit_container(seq, t)
        else:
            self._xmit_host([seq], t)

    def _rtt_sample(self, m: float) -> None:
        """tcp_rtt_estimator + tcp_set_rto (Jacobson/Karels; RTO >= TCP_RTO_MIN)."""
        if self.srtt == 0.0:
            self.srtt, self.rttvar = m, m / 2.0
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(m - self.srtt)
            self.srtt = 0.875 * self.srtt + 0.125 * m
        self.rto = min(TCP_RTO_MAX, max(TCP_RTO_MIN, self.srtt + 4.0 * self.rttvar))

    def _rto_fire(self, now: float) -> float:
        """tcp_retransmit_timer: back to one segment, resend the oldest."""
        if self.snd_una >= self.snd_nxt:
            return 0.0
        self.timeouts += 1
        self.ssthresh = max(2.0, (self.snd_nxt - self.snd_una) / 2.0)
        self.cwnd = 1.0
        self.recover = -1
        self.dupacks = 0
        self.snd_nxt = self.snd_una        # go-back-N from the hole
        self.backoff += 1
        self.rto = min(TCP_RTO_MAX, self.rto * 2.0)
        self.timed = -1
        self._push(now)
        return 0.0

    def tx_complete(self, tag: int, t: float) -> None:
        """The NIC freed a transmitted clone (host path): the driver's TX clean
        and kfree_skb (sock_wfree; nothing waits on the memory here), charged
        as the forward path's TX completion is (costs ``tx_complete``)."""
        self.charge("tx_complete (driver TX clean, kfree_skb)", self.c_txc, t, self.cpu)

    def counters(self) -> dict:
        return {"segments_sent": self.sent, "retransmits": self.retrans,
                "timeouts": self.timeouts, "acks_received": self.acks,
                "qdisc_drops": self.qdisc_drops,
                "snd_una": self.snd_una, "cwnd": round(self.cwnd, 3),
                "srtt_us": round(self.srtt * 1e6, 2), "copies_skb_cow": self.copies,
                "bytes_copied": self.bytes_copied}


class TcpReceiver(Host):
    """Host B: netperf's receiving socket behind its own NIC (not charged).

    Parameters
    ----------
    nic : HostNic          B's NIC, for its ACKs
    addr, peer : int       B's address and the sender's
    window : int           the window it advertises (bytes)
    mss : int
    coalesce_s : float     its NIC's receive interrupt coalescing: a frame
                           is processed when the interrupt fires,
                           ``coalesce_s`` after the first frame of a batch
                           (tg3 rx-usecs style; 0 = at once)
    service_s : float      B's own CPU time per data segment (driver, stack,
                           the copy to netperf's buffer), served FIFO: the
                           ACK for a segment is decided when B has processed
                           it, so a busy B slows the ACK clock
    forward_csum : str     the *sender's host's* KernelProfile.forward_csum:
                           whether a CHECKSUM_PARTIAL segment crossing its
                           forward path still gets its checksum filled in
                           (:func:`routelab.ipv4.ip_forward.ip_forward_csum`)
    forwarded : bool       the segments crossed that forward path (container)

    The ACK rule is 2.6.20's ``__tcp_ack_snd_check``: ACK now when more
    than one full segment is unacknowledged (the window always moves here:
    the application reads at once), in quick-ACK mode (the first
    ``min(window / (2 mss), 16)`` segments, tcp_incr_quickack), or when
    data is out of order; else the delayed-ACK timer (TCP_ATO_MIN, 40 ms).
    A segment whose checksum was never filled in is a checksum error
    (TCP_MIB_INERRS): dropped, no ACK.
    """

    kinds = ("tcp_data",)

    def __init__(self, nic, addr: int, peer: int, *, window: int = 65535, mss: int = 1448,
                 coalesce_s: float = 0.0, service_s: float = 0.0, forward_csum: str = "none",
                 forwarded: bool = False) -> None:
        super().__init__()
        if not (isinstance(coalesce_s, (int, float)) and 0 <= coalesce_s < 1):
            raise KnobError("coalesce_s", coalesce_s, "a number of seconds in [0, 1)")
        if not (isinstance(service_s, (int, float)) and 0 <= service_s < 1):
            raise KnobError("service_s", service_s, "a number of seconds in [0, 1)")
        self.service_s = float(service_s)
        self.nic = nic
        self.addr, self.peer = int(addr), int(peer)
        self.window = int(window)
        self.mss = int(mss)
        self.coalesce_s = float(coalesce_s)
        self.forward_csum = forward_csum
        self.forwarded = bool(forwarded)

    def start(self, run, dev: int) -> None:
        super().start(run, dev)
        self.nic.start(run, None, "host B nic")
        self.rcv_nxt = 0
        self.rcv_wup = 0
        self.quick = min(max(self.window // (2 * self.mss), 2), TCP_MAX_QUICKACKS)
        self.ofo: set = set()
        self.batch_end = -math.inf
        self.busy = 0.0
        self.end = run.duration
        self.rcv_end = 0                   # in order by the end of the run
        self.delack = run.clock.timer("host B delayed ACK", self._delack_fire, raw=True)
        self.segments = 0
        self.bad_csum = 0
        self.dups = 0
        self.acks_sent = 0
        self.delayed_acks = 0
        self.first_t = math.nan
        self.last_t = math.nan
        self._ack = {"saddr": self.addr, "daddr": self.peer, "proto": 6, "ttl": 64,
                     "length": ACK_LEN, "kind": _TCP_ACK, "iif": dev, "df": True,
                     "ip_summed": CHECKSUM_NONE}
        self._unfilled_partial = False
        if self.forwarded:
            after = ip_forward_csum([CHECKSUM_PARTIAL], self.forward_csum)[0]
            self._unfilled_partial = int(after) != CHECKSUM_PARTIAL

    def checksum_ok(self, ip_summed: int) -> bool:
        """Was the segment's TCP checksum filled in before it left host A?
        A CHECKSUM_PARTIAL skb promises that someone will; after a forward
        path that reset it to CHECKSUM_NONE nobody does (the 2.6.20 trap)."""
        return not (ip_summed == CHECKSUM_PARTIAL and self._unfilled_partial)

    def deliver(self, j: int, t: float) -> None:
        run = self.run
        seq = int(run.field(j, "tag"))
        # the NIC's interrupt: at the end of the coalescing batch
        if t > self.batch_end:
            self.batch_end = t + self.coalesce_s
        t = self.batch_end
        # B's CPU: one segment after another
        t = (self.busy if self.busy > t else t) + self.service_s
        self.busy = t
        self.segments += 1
        if not self.checksum_ok(int(run.field(j, "ip_summed"))):
            self.bad_csum += 1             # tcp_v4_rcv: csum_error, TCP_MIB_INERRS
            return
        if seq == self.rcv_nxt:
            self.rcv_nxt += 1
            while self.rcv_nxt in self.ofo:
                self.ofo.discard(self.rcv_nxt)
                self.rcv_nxt += 1
            if self.first_t != self.first_t:
                self.first_t = t
            self.last_t = t
            if t <= self.end:
                self.rcv_end = self.rcv_nxt
        elif seq > self.rcv_nxt:
            self.ofo.add(seq)
            self._send_ack(t)
            return
        else:
            self.dups += 1
            self._send_ack(t)
            return
        if self.rcv_nxt - self.rcv_wup > 1 or self.quick > 0 or self.ofo:
            self._send_ack(t)
        elif not self.delack.pending():
            self.delack.mod(t + TCP_ATO_MIN)

    def _send_ack(self, t: float) -> None:
        f = self._ack
        f["tag"] = self.rcv_nxt
        self.nic.xmit(f, t)
        self.acks_sent += 1
        self.rcv_wup = self.rcv_nxt
        if self.quick > 0:
            self.quick -= 1
        if self.delack.pending():
            self.delack.stop()

    def _delack_fire(self, now: float) -> float:
        if self.rcv_nxt > self.rcv_wup:
            self.delayed_acks += 1
            self._send_ack(now)
        return 0.0

    def counters(self) -> dict:
        c = {"segments_received": self.segments, "in_order": self.rcv_nxt,
             "in_order_by_end": self.rcv_end,
             "bad_checksums": self.bad_csum, "duplicates": self.dups,
             "acks_sent": self.acks_sent, "delayed_acks": self.delayed_acks}
        c.update({"nic_" + k: v for k, v in self.nic.counters().items()})
        return c
