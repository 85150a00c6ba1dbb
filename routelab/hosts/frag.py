"""A fragmenting UDP sender beyond a wire, and a receiver that reassembles.

The two ends of the ``frag`` scenario (story 3, reassembly on its own):

:class:`FragSender`
    A host beyond one of the router's devices that sends ``count``
    datagrams of ``datagram_bytes`` UDP data, one every ``1 / rate`` s, each
    cut into fragments as ``ip_fragment`` cuts them (22 x 1480 + 352 B of IP
    payload for 32 KiB at MTU 1500), and hands the fragments to its
    :class:`~routelab.hosts.nic.HostNic`, whose wire loses each frame with
    probability ``loss_pct``.  The IP ID is a 16-bit counter starting at a
    seeded random value and stepping by one per datagram (2.4's
    ``inet_getid`` per destination; 6.x hashes per flow -- one flow here),
    skipping 0 (a raw sender with ID 0 gets one chosen by the kernel: the
    ``--real`` run must match).  Each fragment's ``tag`` is the datagram's
    number, so a datagram glued from two senders' datagrams that shared an
    ID is noticed (``IpDatagram.mixed``).

:class:`FragReceiver`
    A *local* host for UDP (``Router(local_hosts={17: ...})``): the packets
    ``ip_local_deliver`` hands it go through ``ip_defrag`` of an
    :class:`~routelab.ipv4.ip_fragment.IpDefrag` (receiver kind and limits
    as given), whose ``ip_expire`` runs on the run's clock.  It charges the
    CPU of the router's machine (it *is* that machine) for each fragment
    queued and each queue freed, and counts the datagrams handed to UDP.

Kernel: net/ipv4/ip_input.c ip_local_deliver (fragments go to ip_defrag
before the protocol; 2.4.19, 2.6.20), net/ipv4/ip_fragment.c.

Costs (reference cycles, converted with the CPU profile's ipc and clock like
``routelab.costs.PATH``): ``IP_DEFRAG_CYCLES`` per fragment (ip_find's hash
walk, ip_frag_queue's list insert, the memory accounting) and
``IP_FRAG_FREE_CYCLES`` per fragment freed by eviction or expiry
(kfree_skb), both ASSUMED (no measured source; of the order of the
``ip_local_deliver`` entry, 250); ``ip_frag_reasm`` is list splicing (no
copy in 2.4 and later): ASSUMED ``IP_FRAG_REASM_CYCLES`` per datagram.  The
UDP receive of a rebuilt datagram (checksum, copy to the socket) is not
charged: nobody reads the socket in this scenario.
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import KIND
from ..ipv4.ip_fragment import IP_MIN_IHL, IpDefrag, IpFragment, fragment_plan
from . import Host
from .nic import HostNic

__all__ = ["FragSender", "FragReceiver", "UDP_HLEN", "IP_DEFRAG_CYCLES",
           "IP_FRAG_FREE_CYCLES", "IP_FRAG_REASM_CYCLES"]

#: UDP header bytes (RFC 768).
UDP_HLEN = 8
#: ASSUMED reference cycles per fragment taken by ip_defrag (see the module doc).
IP_DEFRAG_CYCLES = 400.0
#: ASSUMED reference cycles per fragment freed when its queue is killed.
IP_FRAG_FREE_CYCLES = 120.0
#: ASSUMED reference cycles per datagram rebuilt (ip_frag_reasm).
IP_FRAG_REASM_CYCLES = 300.0


class FragSender(Host):
    """Beyond a device: sends fragmented UDP datagrams (see the module doc).

    Parameters
    ----------
    saddr, daddr : int         addresses (host order)
    datagram_bytes : int       UDP data per datagram
    rate : float               datagrams per second
    count : int                datagrams sent (the first at ``t0``)
    mtu : int                  the sender's link MTU
    speed_bps : float          its link's bit rate
    loss_pct : float           each frame lost on the wire with this probability
    seed : int                 the loss draws and the first IP ID
    order : str                "ascending" (ip_fragment) or "descending"
                               (2.4's ip_build_xmit_slow: highest offset first)
    txqueuelen : int           its qdisc
    t0 : float                 first send
    """

    kinds: tuple = ()

    def __init__(self, saddr: int, daddr: int, datagram_bytes: int, rate: float, count: int,
                 mtu: int = 1500, speed_bps: float = 1e9, loss_pct: float = 0.0, seed: int = 0,
                 order: str = "ascending", txqueuelen: int = 1000, t0: float = 0.0) -> None:
        super().__init__()
        self.saddr, self.daddr = int(saddr), int(daddr)
        self.datagram_bytes = int(datagram_bytes)
        self.rate = float(rate)
        self.count = int(count)
        self.mtu = int(mtu)
        self.speed_bps = float(speed_bps)
        self.loss_pct = float(loss_pct)
        self.seed = int(seed)
        self.order = order
        self.txqueuelen = int(txqueuelen)
        self.t0 = float(t0)
        plan = fragment_plan(self.datagram_bytes + UDP_HLEN, self.mtu)
        sizes = plan.payload_sizes()
        offs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist()
        rows = [(int(o), int(s), i < len(sizes) - 1) for i, (o, s) in enumerate(zip(offs, sizes,
                                                                                 strict=True))]
        if order == "descending":
            rows.reverse()
        #: (offset bytes, payload bytes, MF) of each fragment, in sending order
        self.rows = rows
        #: the NIC's counters when the frames are offered as the trace
        #: (:meth:`frames` was called): the host then sends nothing itself
        self.offered: dict | None = None

    @property
    def fragments_per_datagram(self) -> int:
        return len(self.rows)

    def first_id(self) -> int:
        """The first datagram's IP ID (seeded, never 0)."""
        return int(np.random.default_rng([self.seed, 22]).integers(1, 0x10000))

    def ip_id(self, k: int) -> int:
        """IP ID of datagram ``k``: the counter, stepping over 0."""
        return (self.first_id() - 1 + k) % 0xFFFF + 1

    def start(self, run, dev: int) -> None:
        super().start(run, dev)
        if self.offered is not None:
            return          # its frames are the run's offered trace (see frames())
        rng = np.random.default_rng([self.seed, 3])
        self.nic = HostNic(self.speed_bps, self.txqueuelen, 0.0, self.loss_pct, rng)
        self.nic.start(run, None, name="frag sender nic")
        self.sent = 0
        self._id0 = self.first_id()
        self._timer = run.clock.timer("frag sender", self._send, raw=True)
        self._prime(run)
        if self.count > 0:
            self._timer.mod(self.t0)

    def _prime(self, run) -> None:
        """Work out the array stages of every fragment header this sender will
        send, in one batch (``run.prime_injections``: a speed-up only; the
        headers differ by IP ID, so ``inject``'s cache would miss on each)."""
        n = min(self.count, 0xFFFF)          # IDs repeat after 65,535 datagrams
        ids = (self._id0 - 1 + np.arange(n)) % 0xFFFF + 1
        m = len(self.rows)
        off = np.array([r[0] for r in self.rows], dtype=np.int64)
        size = np.array([r[1] for r in self.rows], dtype=np.int64)
        mf = np.array([r[2] for r in self.rows], dtype=bool)
        run.prime_injections({
            "iif": np.full(n * m, self.dev, dtype=np.int16),
            "saddr": np.full(n * m, self.saddr, dtype=np.uint32),
            "daddr": np.full(n * m, self.daddr, dtype=np.uint32),
            "proto": np.full(n * m, 17, dtype=np.uint8),
            "kind": np.full(n * m, KIND["udp"], dtype=np.uint8),
            "length": np.tile(IP_MIN_IHL + size, n).astype(np.int32),
            "frag_id": np.repeat(ids, m).astype(np.uint16),
            "frag_off": np.tile(off >> 3, n).astype(np.uint16),
            "mf": np.tile(mf, n),
        })

    def _send(self, now: float) -> float:
        k = self.sent
        ipid = (self._id0 - 1 + k) % 0xFFFF + 1
        xmit = self.nic.xmit
        f = {"iif": self.dev, "saddr": self.saddr, "daddr": self.daddr, "proto": 17,
             "kind": KIND["udp"], "frag_id": ipid, "tag": k}
        for off, size, mf in self.rows:
            g = dict(f)
            g["length"] = IP_MIN_IHL + size
            g["frag_off"] = off >> 3
            g["mf"] = mf
            xmit(g, now)
        self.sent = k + 1
        if self.sent < self.count:
            self._timer.mod(self.t0 + self.sent / self.rate)
        return 0.0

    def frames(self):
        """The frames this sender's NIC delivers to the router, worked out
        ahead (an open-loop sender: nothing in the run reacts on it), for a
        run that offers them as its trace instead of injecting them one by
        one.  The same arithmetic as :meth:`HostNic.xmit` in the same order
        (departure after the link is free, the qdisc's tail drop, one loss
        draw per frame sent, from the same seeded generator), so a run
        either way sees the same frames at the same times.

        Returns ``(columns, counters)``: arrays ``t, length, frag_id,
        frag_off, mf, tag`` of the frames that reach the router, and this
        host's :meth:`counters` as the NIC would have counted them.
        """
        from collections import deque

        from ..costs import wire_bytes
        rng = np.random.default_rng([self.seed, 3])
        loss = self.loss_pct / 100.0
        draws, di = None, 0
        speed, qlen = self.speed_bps, self.txqueuelen
        wires = [float(wire_bytes(IP_MIN_IHL + size)) * 8.0 / speed for _, size, _ in self.rows]
        id0 = self.first_id()
        link_free = 0.0
        q: deque = deque()
        out_t, out_k, out_i = [], [], []
        sent = dropped = lost = nbytes = 0
        for k in range(self.count):
            now = self.t0 + k / self.rate if k else self.t0
            while q and q[0] <= now:
                q.popleft()
            for i, w in enumerate(wires):
                if len(q) > qlen:
                    dropped += 1
                    continue
                dep = (link_free if link_free > now else now) + w
                link_free = dep
                sent += 1
                nbytes += IP_MIN_IHL + self.rows[i][1]
                q.append(dep)
                if loss > 0.0:
                    if draws is None or di >= len(draws):
                        draws, di = rng.random(4096).tolist(), 0
                    u = draws[di]
                    di += 1
                    if u < loss:
                        lost += 1
                        continue
                out_t.append(dep)
                out_k.append(k)
                out_i.append(i)
        kk = np.array(out_k, dtype=np.int64)
        ii = np.array(out_i, dtype=np.int64)
        off = np.array([r[0] for r in self.rows], dtype=np.int64)
        size = np.array([r[1] for r in self.rows], dtype=np.int64)
        mf = np.array([r[2] for r in self.rows], dtype=bool)
        cols = {"t": np.array(out_t, dtype=np.float64),
                "length": (IP_MIN_IHL + size[ii]).astype(np.int32),
                "frag_id": ((id0 - 1 + kk) % 0xFFFF + 1).astype(np.uint16),
                "frag_off": (off[ii] >> 3).astype(np.uint16),
                "mf": mf[ii], "tag": kk.astype(np.int32)}
        ctr = {"datagrams_sent": self.count, "tx_packets": sent, "tx_dropped": dropped,
               "tx_bytes": nbytes}
        if loss > 0.0:
            ctr["wire_lost"] = lost
        self.offered = ctr
        return cols, ctr

    def counters(self) -> dict:
        if self.offered is not None:
            return dict(self.offered)
        return {"datagrams_sent": self.sent, **self.nic.counters()}


class FragReceiver(Host):
    """A local UDP endpoint that reassembles (see the module doc).

    Parameters
    ----------
    defrag : IpDefrag          the reassembler (receiver kind and limits)
    cpu : int                  the CPU its work is charged on
    """

    def __init__(self, defrag: IpDefrag, cpu: int = 0) -> None:
        super().__init__()
        self.defrag = defrag
        self.cpu = int(cpu)

    def start(self, run, dev: int) -> None:
        super().start(run, dev)
        r = run.r
        per = 1.0 / (r.cpu.ipc * r.cpu.hz)
        self._w_frag = IP_DEFRAG_CYCLES * per
        self._w_free = IP_FRAG_FREE_CYCLES * per
        self._w_reasm = IP_FRAG_REASM_CYCLES * per
        self.defrag.arm(run.clock, self._expired, self.cpu, name="ip_expire")
        self.delivered = 0        # datagrams handed to UDP whole and unmixed
        self.mixed = 0            # rebuilt from two datagrams' fragments (bad checksum)
        self.not_fragmented = 0
        self._freed_seen = 0

    def _expired(self, now: float, expired) -> float:
        return self._charge_frees()

    def _charge_frees(self) -> float:
        fates = self.defrag.fates
        freed = (fates["evicted"] + fates["expired"] + fates["killed"] + fates["too_far"]
                 + fates["overlapped"])
        n = freed - self._freed_seen
        self._freed_seen = freed
        return n * self._w_free

    def deliver(self, j: int, t: float) -> None:
        fld = self.run.field
        length = fld(j, "length")
        frag = IpFragment(fld(j, "frag_id"), fld(j, "saddr"), fld(j, "daddr"), fld(j, "proto"),
                          fld(j, "frag_off") * 8, bool(fld(j, "mf")), b"", 0, 64, False,
                          IP_MIN_IHL, length - IP_MIN_IHL, fld(j, "tag"))
        d = self.defrag
        ok0 = d.snmp["ReasmOKs"]
        dg = d.ip_defrag(frag, t)
        w = self._w_frag + self._charge_frees()
        if dg is not None:
            if d.snmp["ReasmOKs"] == ok0:
                self.not_fragmented += 1
            else:
                w += self._w_reasm
            if dg.mixed:
                self.mixed += 1
            else:
                self.delivered += 1
        self.run.charge("ip_defrag", w, t, self.cpu)

    def ip_mib(self) -> dict:
        """The reassembly's SNMP counters, into the machine's Ip MIB."""
        snmp = self.defrag.snmp
        return {k: snmp[k] for k in ("ReasmTimeout", "ReasmReqds", "ReasmOKs", "ReasmFails")}

    def counters(self) -> dict:
        out = dict(self.defrag.stats())
        out["delivered"] = self.delivered
        out["mixed"] = self.mixed
        return out

