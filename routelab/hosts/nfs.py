"""Story 3's two ends: a Linux 2.4 NFS client writing over UDP, and its server.

:class:`NfsClient` is the machine the engine runs (a local host for UDP,
``Router(local_hosts={17: client})``).  It is iozone writing a file in
``record`` bytes per write() (128 KiB), the NFS write path turning the
dirty pages into ``wsize`` WRITE RPCs, sunrpc's UDP transport (slot table,
congestion window, retransmit timer: :mod:`routelab.sunrpc`), and the
socket (:class:`~routelab.ipv4.udp.UdpSocket`) whose fragments leave
through ``run.ip_output`` with the client as their owner, so each TX
completion is a ``sock_wfree`` (:meth:`tx_complete`) that can wake rpciod.

:class:`NfsServer` sits beyond the client's NIC (the switch and the server's
own machine: nothing it does is charged to the client): each frame may be
lost on the wire, goes through the server's reassembly
(:class:`~routelab.ipv4.ip_fragment.IpDefrag` of the chosen receiver kind,
``ip_expire`` on the run's clock) and a rebuilt WRITE is served in
``service_s`` (one at a time) and answered through the server's
:class:`~routelab.hosts.nic.HostNic`, whose frame reaches the client's
``ip_rcv`` -> ``ip_local_deliver`` -> :meth:`NfsClient.deliver`.

Kernel (sources.md "Story 3"; trees [V2419] bticino/linux-2.4.19-rmk7-pxa2-btweb
and [V2420] sndrzt/linux-2.4.20.lite @ 426c5ed):

* fs/nfs/write.c nfs_updatepage, nfs_strategy, nfs_flush_list,
  nfs_flush_one (2.4.19): a WRITE per ``wsize`` of contiguous dirty pages
  (NFSv3: at ``wpages`` dirty requests), started async (rpciod), NFS_UNSTABLE.
  fs/nfs/pagelist.c nfs_create_request / nfs_try_to_free_pages: at most
  MAX_REQUEST_HARD = 256 page requests per mount (include/linux/nfs_flushd.h),
  counting pages dirty, in a WRITE, or written unstable and not yet
  committed; at the limit the writer waits for the busy WRITEs, then sends
  a COMMIT of the unstable ones (nfs_commit_list) and waits for it.  So at
  wsize 32 KiB a COMMIT follows every 1 MiB.  fsync/close (iozone ``-e
  -c``) flush the rest and COMMIT.
* net/sunrpc/xprt.c do_xprt_transmit, xprt_sendmsg, xprt_write_space,
  xprt_timer; net/sunrpc/clnt.c call_status (2.4.19): the whole request is
  sent MSG_DONTWAIT; an EAGAIN with SOCK_NOSPACE becomes -ENOMEM, and the
  task sleeps on ``xprt->sending`` (timeout ``to_current``) still holding
  the transport, so no other request is sent meanwhile; xprt_write_space
  wakes it once ``sock_writeable`` (wmem_alloc < sndbuf/2); call_status
  counts an rpcretrans and the request is rebuilt and sent again whole
  (new IP ID, same XID).  If the sleep times out it is an RPC timeout.
* net/core/sock.c sock_wfree, sock_writeable (2.4.19).

Simplified (each stated where it matters): the sender builds a request's
fragments in one step at the time rpciod runs it (their queueing times are
spread by the per-fragment CPU cost, but TX completions during that time
are seen only afterwards: at most one at 100 Mbit/s); a frame refused by
the qdisc (``txqueuelen``) is freed at once (kfree_skb -> sock_wfree: the
silent drop of a socket without IP_RECVERR); the server
identifies a rebuilt datagram's RPC from its offset-0 fragment (the XID is
there) -- the model reads it, and the frame's IP ID, offset, MF and length
(the same values as its header fields), from the client's ``frame_meta``
table by the frame's ``tag`` (one lookup instead of five field reads);
replies are never lost (only client->server frames cross the lossy
direction); the two timer classes used are WRITE's and COMMIT's.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..core.skbuff import KIND
from ..costs import wire_bytes
from ..ipv4.ip_fragment import IP_MIN_IHL, IpFragment
from ..ipv4.udp import UDP_HLEN, SendStatus, UdpSocket, truesize_2419
from ..sunrpc import MAXREQS, Cwnd, make_timer
from . import Host
from .nic import HostNic

__all__ = ["NfsClient", "NfsServer", "NfsTrace", "WRITE_CALL_HDR", "WRITE_REPLY_LEN",
           "COMMIT_CALL_LEN", "EVENTS", "PAGE_SIZE", "MAX_REQUEST_HARD"]

PAGE_SIZE = 4096
#: fs/nfs/write.c / include/linux/nfs_page.h (2.4.19): page requests per mount
MAX_REQUEST_HARD = 256
#: Bytes of a NFSv3 WRITE call before the data: RPC call header with
#: AUTH_UNIX credentials (~100 B with a short host name and a few groups)
#: and the WRITE arguments (file handle 36 B, offset, count, stable, data
#: length: 56 B).  ASSUMED 164: it makes a 32 KiB WRITE 32,940 B of UDP
#: payload + 8 = 23 fragments at MTU 1500, as sources.md counts.
WRITE_CALL_HDR = 164
#: IP bytes of a WRITE reply (RPC reply header, status, wcc_data with
#: attributes, count, committed, verifier): ASSUMED 160 + 28.
WRITE_REPLY_LEN = 188
#: IP bytes of a COMMIT call: ASSUMED 160 (header, file handle, offset, count).
COMMIT_CALL_LEN = 160

#: event codes of :class:`NfsTrace` (index = code)
EVENTS = ("send", "frag_tx", "eagain", "sleep", "wake", "resend", "timeout", "reply")
_EV = {e: i for i, e in enumerate(EVENTS)}

# CPU work on the client, reference cycles (routelab.costs convention:
# divided by the profile's ipc and clock).  All ASSUMED (no measured source
# for a 2.4.19 PIII): of the order of a context switch, an skb allocation
# plus header build, a UDP receive and an RPC wake-up.
RPCIOD_WAKE_CYCLES = 2000.0     # rpciod scheduled, __rpc_execute picks the task
XDR_ENCODE_CYCLES = 1500.0      # nfs3_xdr_writeargs + call_encode
FRAG_BUILD_CYCLES = 700.0       # ip_build_xmit_slow per fragment: alloc_skb, header, getfrag
REPLY_CYCLES = 3000.0           # udp_rcv + udp_data_ready + xprt lookup + call_decode
TXC_CYCLES = 150.0              # sock_wfree + kfree_skb at TX clean
WRITE_SYSCALL_CYCLES = 3000.0   # sys_write + nfs_updatepage per page bookkeeping (x pages)


class NfsTrace:
    """Bounded records of one run (``trace=True``; the notebook's timelines).

    ``gauge``: ``t_s``, ``wmem_alloc``, ``sndbuf`` at every change of the
    send buffer.  ``events``: ``t_s``, ``xid``, ``attempt``, ``event``
    (code into :data:`EVENTS`), ``frag_offset`` (bytes; -1 if none),
    ``frag_index`` (0 = the first fragment sent, -1 if none).  ``server``:
    per datagram attempt seen by the server: ``xid``, ``attempt``,
    ``fragments_arrived``, ``outcome`` (``completed`` / ``expired`` /
    ``evicted`` / ``pending``).  Each record kind keeps at most ``limit``
    rows (the first ones); ``truncated`` says whether any was cut.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = int(limit)
        self._g: list = []
        self._e: list = []
        self.truncated = False

    def gauge_add(self, t: float, wmem: int, sndbuf: int) -> None:
        if len(self._g) < self.limit:
            self._g.append((t, wmem, sndbuf))
        else:
            self.truncated = True

    def event(self, t: float, xid: int, attempt: int, ev: str, off: int = -1,
              idx: int = -1) -> None:
        if len(self._e) < self.limit:
            self._e.append((t, xid, attempt, _EV[ev], off, idx))
        else:
            self.truncated = True

    def arrays(self, server_rows) -> dict:
        g = np.array(self._g, dtype=np.float64).reshape(-1, 3)
        e = np.array(self._e, dtype=np.float64).reshape(-1, 6)
        rows = list(server_rows)[: self.limit]
        outcome = np.array([r[3] for r in rows], dtype="<U9")
        s = np.array([r[:3] for r in rows], dtype=np.int64).reshape(-1, 3)
        return {
            "gauge": {"t_s": g[:, 0], "wmem_alloc": g[:, 1].astype(np.int64),
                      "sndbuf": g[:, 2].astype(np.int64)},
            "events": {"t_s": e[:, 0], "xid": e[:, 1].astype(np.int64),
                       "attempt": e[:, 2].astype(np.int64),
                       "event": e[:, 3].astype(np.int8), "frag_offset": e[:, 4].astype(np.int64),
                       "frag_index": e[:, 5].astype(np.int64)},
            "event_names": EVENTS,
            "server": {"xid": s[:, 0], "attempt": s[:, 1], "fragments_arrived": s[:, 2],
                       "outcome": outcome},
            "truncated": self.truncated or len(server_rows) > self.limit,
        }


class _Req:
    """One RPC (a WRITE of ``data`` bytes, or the COMMIT with data 0)."""

    __slots__ = ("xid", "data", "pages", "commit", "attempts", "first_sent", "last_sent",
                 "tstate", "timer", "has_cong", "done", "sleeping")

    def __init__(self, xid: int, data: int, pages: int, commit: bool) -> None:
        self.xid, self.data, self.pages, self.commit = xid, data, pages, commit
        self.attempts = 0
        self.first_sent = -1.0
        self.last_sent = -1.0
        self.tstate: dict | None = None
        self.timer = None
        self.has_cong = False
        self.done = False
        self.sleeping = False


class NfsClient(Host):
    """iozone + NFS write path + sunrpc UDP transport + 2.4 UDP socket.

    Parameters
    ----------
    saddr, daddr : int       client and server addresses
    file_bytes : int         bytes iozone writes (``-s``)
    record : int             bytes per write() (``-r``)
    wsize : int              NFS wsize
    sndbuf : int             the socket's sk->sndbuf
    frag_alloc : str         "sock-alloc-send-skb" (2.4.19) | "force-wmalloc" (2.4.20)
    slots : int              slot table size (RPC_MAXREQS)
    cwnd : str               "2.4.19" | "aimd" (routelab.sunrpc.Cwnd)
    cong_at : str            "reserve" (2.4.19) | "transmit" (2.4.20)
    rpc_timer : str          "fixed" | "rtt"
    timeo_s, retrans         mount options
    wake_s : float           mean of rpciod's scheduling latency after a wake-up
    cpu : int                the CPU everything is charged on
    trace : NfsTrace | None
    """

    def __init__(self, saddr: int, daddr: int, *, file_bytes: int, record: int = 131072,
                 wsize: int = 32768, sndbuf: int = 65535,
                 frag_alloc: str = "sock-alloc-send-skb", slots: int = MAXREQS["2.4.19"],
                 cwnd: str = "aimd", cong_at: str = "reserve", rpc_timer: str = "rtt",
                 timeo_s: float = 0.7, retrans: int = 3, wake_s: float = 0.0002,
                 resend_first: bool = False, cpu: int = 0, trace: NfsTrace | None = None,
                 seed: int = 0) -> None:
        super().__init__()
        self.saddr, self.daddr = int(saddr), int(daddr)
        self.file_bytes = int(file_bytes)
        self.record = int(record)
        self.wsize = int(wsize)
        self.sndbuf = int(sndbuf)
        self.frag_alloc = frag_alloc
        self.slots = int(slots)
        self.cwnd_variant = cwnd
        self.cong_at = cong_at
        self.rpc_timer = rpc_timer
        self.timeo_s, self.retrans = float(timeo_s), int(retrans)
        self.wake_s = float(wake_s)
        self.resend_first = bool(resend_first)
        self.seed = int(seed)
        self.cpu = int(cpu)
        self.trace = trace

    # -- set-up ---------------------------------------------------------------------
    def start(self, run, dev: int) -> None:
        super().start(run, dev)
        r = run.r
        per = 1.0 / (r.cpu.ipc * r.cpu.hz)
        self._c_wake = RPCIOD_WAKE_CYCLES * per
        self._c_xdr = XDR_ENCODE_CYCLES * per
        self._c_frag = FRAG_BUILD_CYCLES * per
        self._c_reply = REPLY_CYCLES * per
        self._c_txc = TXC_CYCLES * per
        self._c_page = WRITE_SYSCALL_CYCLES * per
        #: csum_partial_copy_generic per byte (copy and checksum of user data:
        #: udp_getfrag), and the write()'s copy_from_user into the page cache
        self._c_csum_byte = 1.0 / r.cpu.csum_bw + 1.0 / r.cpu.copy_bw
        self._c_copy_byte = 1.0 / r.cpu.copy_bw
        policy = "2.4.19" if self.frag_alloc == "sock-alloc-send-skb" else "2.4.20"
        self.sock = UdpSocket(self.sndbuf, nonblocking=True, alloc_policy=policy,
                              truesize=truesize_2419)
        self.cw = Cwnd(self.cwnd_variant)
        self.timer = make_timer(self.rpc_timer, self.timeo_s, self.retrans)
        self.free_slots = self.slots
        self.backlog: deque = deque()       # requests waiting for a slot (and 2.4.19: cong)
        self.txq: deque = deque()           # requests with a slot, waiting for the transport
        self.snd_task: _Req | None = None   # holds the transport (sleeping for write space)
        self.inflight: dict[int, _Req] = {}
        self.skbs: dict = {}                # tag -> TxSkb on the wire or queued
        #: tag -> (attempt id, IP ID, offset, MF, IP length): the header
        #: fields of each frame sent, which the server reads (see NfsServer)
        self.frame_meta: list = []
        self._wire_cache: dict = {}
        self._txc_n = 0
        self.attempt_of: list = []          # attempt id -> (xid, attempt)
        self.sent_per_attempt: list = []    # attempt id -> frames the qdisc took
        self.wire_bits = 0.0
        self._tag = 0
        self.next_xid = 1
        self.written = 0                    # bytes write() has taken
        self.dirty = 0                      # bytes dirty, not yet in a WRITE
        self.outstanding_pages = 0          # nr_requests: dirty + in a WRITE + unstable
        self.unstable = 0                   # pages WRITTEN (NFS_UNSTABLE), not committed
        self.commit_inflight = False
        self.commit_xids: set = set()
        self.writer_waiting = False
        self.t_done = float("nan")
        self.commit_sent = False
        self.c = dict.fromkeys(("rpcs", "rpc_resends", "rpc_timeouts", "rpc_majors",
                                "eagain_sends", "datagrams_incomplete", "datagrams_sent",
                                "fragments_sent", "qdisc_drops", "replies", "dup_replies",
                                "wakeups", "sleep_timeouts", "writes", "writer_stalls"), 0)
        self.cpu_s = 0.0
        self._wake_t = run.clock.timer("rpciod wake (write space)", self._wake_fire,
                                       cpu=self.cpu, raw=True)
        self._write_t = run.clock.timer("iozone write()", self._write_fire, cpu=self.cpu,
                                        raw=True)
        self._wake_pending = False
        self._rng = np.random.default_rng([self.seed, 34])
        self._lat, self._li = [], 0
        self._write_t.mod(0.0)
        if self.trace is not None:
            self.trace.gauge_add(0.0, 0, self.sndbuf)

    def _charge(self, fn: str, s: float, t: float) -> None:
        self.cpu_s += s
        self.charge(fn, s, t, self.cpu)

    # -- the application and the NFS write path --------------------------------------
    def _write_fire(self, now: float) -> float:
        """iozone's next write(): pages into the page cache, WRITEs as wsize fills."""
        t = now
        while self.written < self.file_bytes:
            if self.outstanding_pages >= MAX_REQUEST_HARD:
                self.writer_waiting = True
                self.c["writer_stalls"] += 1
                self._maybe_commit(t)
                return 0.0
            n = min(self.record, self.file_bytes - self.written)
            pages = -(-n // PAGE_SIZE)
            cost = n * self._c_copy_byte + pages * self._c_page
            self._charge("sys_write+nfs_updatepage (copy_from_user)", cost, t)
            t += cost
            self.written += n
            self.dirty += n
            self.outstanding_pages += pages
            self.c["writes"] += 1
            while self.dirty >= self.wsize:
                self.dirty -= self.wsize
                self._new_rpc(self.wsize, t)
            if t > now + 1e-4:          # let the run go on; resume after this write's copy
                self._write_t.mod(t)
                return 0.0
        if self.dirty:                  # fsync: flush the partial WRITE
            d, self.dirty = self.dirty, 0
            self._new_rpc(d, t)
        self._maybe_commit(t)
        return 0.0

    def _writes_busy(self) -> bool:
        return bool(self.backlog or self.txq or self.snd_task is not None
                    or len(self.inflight) > (1 if self.commit_inflight else 0))

    def _maybe_commit(self, t: float) -> None:
        """Send a COMMIT for the unstable pages when nothing else is busy and
        either the writer is stuck at MAX_REQUEST_HARD (pagelist.c
        nfs_try_to_free_pages: wait for the busy WRITEs, then nfs_commit_list)
        or the file is written (iozone -e -c: fsync/close)."""
        if self.commit_inflight or self._writes_busy() or self.dirty:
            return
        done = self.written >= self.file_bytes
        if not (self.writer_waiting or done):
            return
        if not self.unstable and not (done and not self.commit_sent):
            return
        if done:
            self.commit_sent = True
        self.commit_inflight = True
        self._new_rpc(0, t, commit=True)

    def _new_rpc(self, data: int, t: float, commit: bool = False) -> None:
        pages = self.unstable if commit else -(-data // PAGE_SIZE)
        req = _Req(self.next_xid, data, pages, commit)
        if commit:
            self.commit_xids.add(req.xid)
        self.next_xid += 1
        self.c["rpcs"] += 1
        self.backlog.append(req)
        self._admit(t)

    # -- sunrpc: slots, window, transport -------------------------------------------
    def _admit(self, t: float) -> None:
        """xprt_reserve: give slots to the backlog in order (2.4.19 also takes cong)."""
        while self.backlog and self.free_slots > 0:
            if self.cong_at == "reserve" and not self.cw.can_get():
                break
            req = self.backlog.popleft()
            self.free_slots -= 1
            if self.cong_at == "reserve":
                self.cw.get()
                req.has_cong = True
            req.tstate = self.timer.new_request(5 if req.commit else 4)
            req.timer = self.run.clock.timer(f"rpc timer xid {req.xid}", self._make_fire(req),
                                             cpu=self.cpu, raw=True)
            self.inflight[req.xid] = req
            self.txq.append(req)
        self._kick(t)

    def _make_fire(self, req: _Req):
        def fire(now: float) -> float:
            self._timeout(req, now)
            return 0.0
        return fire

    def _kick(self, t: float) -> None:
        """rpciod runs call_transmit for queued requests while the transport is free."""
        while self.snd_task is None and self.txq:
            req = self.txq[0]
            if not req.has_cong:
                if not self.cw.get():
                    return                     # 2.4.20: waits for the window
                req.has_cong = True
            self.txq.popleft()
            t = self._transmit(req, t)

    def _transmit(self, req: _Req, t: float) -> float:
        """do_xprt_transmit: the whole request through udp_sendmsg; returns when
        rpciod is done with it."""
        run = self.run
        req.attempts += 1
        req.last_sent = t                   # rq_xtime: set at every transmission
        if req.first_sent < 0:
            req.first_sent = t
        att = len(self.attempt_of)
        self.attempt_of.append((req.xid, req.attempts))
        self.sent_per_attempt.append(0)
        length = COMMIT_CALL_LEN - IP_MIN_IHL - UDP_HLEN if req.commit else \
            req.data + WRITE_CALL_HDR
        tr = self.trace
        if tr is not None:
            tr.event(t, req.xid, req.attempts, "send")
        t += self._c_xdr
        self._charge("call_encode+nfs3_xdr_writeargs", self._c_xdr, t)
        res = self.sock.sendmsg(length, t)
        self.c["datagrams_sent"] += 1
        f = {"iif": 0, "saddr": self.saddr, "daddr": self.daddr, "proto": 17,
             "kind": KIND["udp"], "frag_id": res.datagram_id or 0xFFFF}
        multi = res.n_frags > 1
        meta = self.frame_meta
        wires = self._wire_cache
        skbs = self.skbs
        spa = self.sent_per_attempt
        t0 = t
        for k, skb in enumerate(res.skbs):
            size = skb.size
            t += self._c_frag + (size - IP_MIN_IHL) * self._c_csum_byte
            tag = len(meta)
            meta.append((att, f["frag_id"], skb.offset, not skb.last, size))
            g = dict(f, length=size, tag=tag)
            if multi:
                g["frag_off"] = skb.offset >> 3
                g["mf"] = not skb.last
            skbs[tag] = skb
            if tr is not None:
                tr.gauge_add(t, self.sock.wmem_alloc, self.sndbuf)
                tr.event(t, req.xid, req.attempts, "frag_tx", skb.offset, k)
            dep = run.ip_output(g, t, self, tag, 0)
            if dep != dep:                    # qdisc full: freed now, silently
                self.c["qdisc_drops"] += 1
                del skbs[tag]
                self._wfree(skb, t)
            else:
                spa[att] += 1
                w = wires.get(size)
                if w is None:
                    w = wires[size] = float(wire_bytes(size)) * 8.0
                self.wire_bits += w
        self.c["fragments_sent"] += len(res.skbs)
        # ip_build_xmit_slow + udp_getfrag for every fragment, and the TX
        # cleaning done since the last send (charged together: same CPU total)
        self._charge("ip_build_xmit_slow+udp_getfrag (csum_partial_copy)", t - t0, t0)
        self._flush_txc(t0)
        if res.status is SendStatus.OK:
            req.timer.mod(t + self.timer.rto(req.tstate))
            return t
        # EAGAIN part-way (or before any fragment): xprt_sendmsg -> -ENOMEM
        self.c["eagain_sends"] += 1
        if res.skbs:
            self.c["datagrams_incomplete"] += 1
        if tr is not None:
            tr.event(t, req.xid, req.attempts, "eagain", -1, len(res.skbs))
        if self.sock.wmem_alloc < self.sndbuf // 2:
            # write space came back while sending (qdisc frees): go again at once
            self.c["rpc_resends"] += 1
            self.txq.appendleft(req)
            return t
        req.sleeping = True
        self.snd_task = req
        if tr is not None:
            tr.event(t, req.xid, req.attempts, "sleep")
        req.timer.mod(t + req.tstate["current"])   # the sleep's timeout: to_current
        return t

    def _wfree(self, skb, t: float) -> None:
        """sock_wfree -> xprt_write_space: wake the sleeping sender at half the buffer."""
        self.sock.sock_wfree(skb)
        if self.trace is not None:
            self.trace.gauge_add(t, self.sock.wmem_alloc, self.sndbuf)
        if (self.snd_task is not None and not self._wake_pending
                and self.sock.wmem_alloc < self.sndbuf // 2):
            self._wake_pending = True
            self._wake_t.mod(t + self._wake_latency())

    def _wake_latency(self) -> float:
        """rpciod's scheduling latency after rpc_wake_up_task: exponential with
        mean ``wake_s`` (ASSUMED shape: a wake-up from the TX interrupt waits
        for the next schedule() of a busy box -- other interrupts, softirqs,
        iozone's own copying -- which has no fixed phase against the wire's
        123 us per frame).  Seeded per run."""
        if self.wake_s <= 0.0:
            return 0.0
        if self._li >= len(self._lat):
            self._lat, self._li = self._rng.exponential(self.wake_s, 4096).tolist(), 0
        v = self._lat[self._li]
        self._li += 1
        return v

    def tx_complete(self, tag: int, t: float) -> None:
        skb = self.skbs.pop(tag, None)
        if skb is None:
            return
        self._txc_n += 1
        self._wfree(skb, t)

    def _flush_txc(self, t: float) -> None:
        """Charge the TX cleaning (sock_wfree + kfree_skb per frame) done so far."""
        if self._txc_n:
            self._charge("sock_wfree+kfree_skb (TX clean)", self._txc_n * self._c_txc, t)
            self._txc_n = 0

    def finish(self, t: float) -> None:
        self._flush_txc(t)

    def _wake_fire(self, now: float) -> float:
        """rpciod runs the woken task: call_status counts a retransmission and
        call_transmit sends the whole request again."""
        self._wake_pending = False
        req = self.snd_task
        if req is None:
            return 0.0
        self._resend_after_sleep(req, now, woken=True)
        return 0.0

    def _resend_after_sleep(self, req: _Req, now: float, woken: bool) -> None:
        req.sleeping = False
        self.snd_task = None
        req.timer.stop()
        self.c["wakeups" if woken else "sleep_timeouts"] += 1
        t = now + self._c_wake
        self._charge("rpciod wake-up (schedule)", self._c_wake, now)
        if self.trace is not None:
            self.trace.event(now, req.xid, req.attempts, "wake" if woken else "timeout")
        if woken:
            self.c["rpc_resends"] += 1
            if self.trace is not None:
                self.trace.event(t, req.xid, req.attempts, "resend")
        self.txq.appendleft(req)
        self._kick(t)

    def _timeout(self, req: _Req, now: float) -> None:
        if req.done:
            return
        self.c["rpc_timeouts"] += 1
        if req.sleeping:
            # no write space within to_current: the sleep ends -ETIMEDOUT and
            # call_timeout adjusts the timeout; the window is not touched
            # (xprt_adjust_cwnd runs only from xprt_timer, a reply timeout)
            if not self.timer.adjust(req.tstate):
                self.c["rpc_majors"] += 1
            self._resend_after_sleep(req, now, woken=False)
            return
        self.cw.on_timeout(now)
        if not self.timer.timeout(req.tstate):
            self.c["rpc_majors"] += 1
        if self.trace is not None:
            self.trace.event(now, req.xid, req.attempts, "timeout")
        t = now + self._c_wake
        self._charge("rpciod wake-up (schedule)", self._c_wake, now)
        if self.resend_first:
            self.txq.appendleft(req)    # 2.4.20: resends first
        else:
            self.txq.append(req)
        self._kick(t)

    # -- replies --------------------------------------------------------------------
    def deliver(self, j: int, t: float) -> None:
        att = int(self.run.field(j, "tag"))
        xid, attempt = self.attempt_of[att]
        self._charge("udp_rcv+xprt data_ready+call_decode", self._c_reply, t)
        t += self._c_reply
        req = self.inflight.get(xid)
        if req is None:
            self.c["dup_replies"] += 1
            return
        self.c["replies"] += 1
        if self.trace is not None:
            self.trace.event(t, xid, attempt, "reply")
        req.done = True
        req.timer.stop()
        self.timer.sample(req.tstate, t - req.last_sent)   # (not if a reply timed out)
        self.timer.reply()
        if req.has_cong:
            self.cw.on_reply(t)
            self.cw.put()
        del self.inflight[xid]
        self.free_slots += 1
        if req is self.snd_task:
            self.snd_task = None
            req.sleeping = False
        try:
            self.txq.remove(req)
        except ValueError:
            pass
        if req.commit:
            # the committed pages are released (nfs_commit_done)
            self.commit_inflight = False
            self.outstanding_pages -= req.pages
            self.unstable -= req.pages
            if (self.written >= self.file_bytes and self.commit_sent
                    and self.outstanding_pages == 0):
                self.t_done = t
                return
        else:
            self.unstable += req.pages      # NFS_UNSTABLE: kept until a COMMIT
        if self.writer_waiting and self.outstanding_pages < MAX_REQUEST_HARD:
            self.writer_waiting = False
            self._write_t.mod(t)
        self._admit(t)
        self._maybe_commit(t)

    def counters(self) -> dict:
        out = dict(self.c)
        out.update({"cwnd_final": self.cw.requests, "cwnd_grows": self.cw.grows,
                    "cwnd_halvings": self.cw.halvings, "wmem_alloc_end": self.sock.wmem_alloc,
                    "sndbuf": self.sndbuf, "client_cpu_s": self.cpu_s,
                    "done_s": self.t_done, "bytes_written": self.written})
        if self.rpc_timer == "rtt":
            out["rtt_samples"] = self.timer.samples
            out["rto_s_end"] = self.timer.rto_base()
        return out


class NfsServer(Host):
    """The server beyond the switch: lossy wire in, reassembly, service, reply.

    Parameters
    ----------
    defrag : IpDefrag     the server's reassembly (receiver kind and limits)
    client : NfsClient    (to read an attempt's XID, see the module doc)
    nic : HostNic         the server's own NIC for the replies
    service_s : float     time to serve one WRITE (the NFS code, data into the page cache)
    commit_s : float      time to serve a COMMIT (the unstable data to disk)
    loss_pct : float      client->server frames lost on the wire
    seed : int
    """

    kinds = ("udp",)

    def __init__(self, defrag, client: NfsClient, nic: HostNic, addr: int, *,
                 service_s: float = 0.0005, commit_s: float = 0.02, loss_pct: float = 0.0,
                 seed: int = 0) -> None:
        super().__init__()
        self.defrag, self.client, self.nic = defrag, client, nic
        self.addr = int(addr)
        self.service_s = float(service_s)
        self.commit_s = float(commit_s)
        self.loss_pct = float(loss_pct)
        self.seed = int(seed)

    def start(self, run, dev: int) -> None:
        super().start(run, dev)
        self.nic.start(run, None, name="nfs server nic")
        self.rng = np.random.default_rng([self.seed, 33])
        self._draws, self._di = None, 0
        self.defrag.arm(run.clock, self._expired, 0, name="server ip_expire", raw=True)
        self.defrag.on_kill = self._killed
        self.busy = 0.0
        self.frames_in = 0
        self.wire_lost = 0
        self.served = 0
        self.unfragmented = 0
        self.arrived: dict[int, int] = {}    # attempt -> fragments arrived
        self.outcome: dict[int, str] = {}
        self._reply = {"iif": dev, "saddr": self.addr, "daddr": self.client.saddr,
                       "proto": 17, "kind": KIND["udp"], "length": WRITE_REPLY_LEN}

    def _expired(self, now: float, expired) -> float:
        return 0.0

    def _killed(self, tags, fate: str) -> None:
        if tags:
            self.outcome.setdefault(int(tags[0]), fate)

    def deliver(self, j: int, t: float) -> None:
        fld = self.run.field
        self.frames_in += 1
        p = self.loss_pct
        if p > 0.0:
            if self._draws is None or self._di >= len(self._draws):
                self._draws, self._di = self.rng.random(4096).tolist(), 0
            u = self._draws[self._di]
            self._di += 1
            if u < p / 100.0:
                self.wire_lost += 1
                return
        att, ipid, off, mf, length = self.client.frame_meta[fld(j, "tag")]
        self.arrived[att] = self.arrived.get(att, 0) + 1
        frag = IpFragment(ipid, self.client.saddr, self.addr, 17, off, mf, b"", 0, 64, False,
                          IP_MIN_IHL, length - IP_MIN_IHL, att)
        if off == 0 and not mf:
            self.unfragmented += 1
        dg = self.defrag.ip_defrag(frag, t)
        if dg is None:
            return
        if dg.mixed:
            return                      # a bad UDP checksum: dropped by udp_rcv
        a = int(dg.tag)
        self.outcome[a] = "completed"
        start = t if t > self.busy else self.busy
        xid = self.client.attempt_of[a][0]      # (the RPC header names the procedure)
        done = start + (self.commit_s if xid in self.client.commit_xids else self.service_s)
        self.busy = done
        self.served += 1
        r = self._reply
        r["tag"] = a
        self.nic.xmit(r, done)

    def datagram_rows(self) -> list:
        """(xid, attempt, fragments_arrived, outcome) per attempt seen."""
        rows = []
        for a, n in self.arrived.items():
            xid, att = self.client.attempt_of[a]
            rows.append((xid, att, n, self.outcome.get(a, "pending")))
        return rows

    def counters(self) -> dict:
        out = dict(self.defrag.stats())
        out.update({"frames_in": self.frames_in, "wire_lost": self.wire_lost,
                    "served": self.served, "unfragmented": self.unfragmented,
                    "queued_fragments": self.defrag.queued_fragments()})
        out.update({"nic_" + k: v for k, v in self.nic.counters().items()})
        return out
