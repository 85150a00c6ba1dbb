"""Scenario ``nfs``: NFS writes over UDP from a Linux 2.4.19 client (story 3).

Trond Myklebust's set-up (stories.md s3): ``iozone -c -e -t1 -s 120m
-r128k`` on an NFSv3 mount with ``wsize`` 32 KiB over UDP, a switched
100 Mbit/s full-duplex link to a Solaris server.  The client is the machine
the engine runs (:class:`~routelab.router.Router` with one device ``eth0``,
an e100 at ``link_mbps``); iozone, the NFS write path, sunrpc and the UDP
socket are a local :class:`~routelab.hosts.nfs.NfsClient` whose fragments
leave through ``run.ip_output`` (pfifo_fast, ``txqueuelen``) with the socket
as owner, so every TX completion is a ``sock_wfree``.  The server is an
:class:`~routelab.hosts.nfs.NfsServer` beyond eth0: lossy wire, reassembly of
the chosen kind (``routelab.ipv4.ip_fragment.RECEIVERS``), service time,
replies back through the client's ``ip_rcv``.  docs/story3-nfs.md has the
design and what each piece follows in the kernel source.

``kernel`` picks the client (sources.md "Story 3", "Which version"):

``2.4.19`` (default)
    the unfixed sender (every fragment through ``sock_alloc_send_skb``) and
    2.4.19's never-set 64 KB ``sndbuf``, with **2.4.20's RTT timer and AIMD
    window** (``rpc_timer=rtt``, ``cwnd=aimd``): sources.md's recommendation,
    as Trond's "ordinary kernel" was a 2.4.19-pre carrying his RTT and
    congestion-control work.  ``cwnd=2.4.19 rpc_timer=fixed`` gives vanilla
    2.4.19's own transport.
``2.4.20``
    DaveM's fix (``frag_alloc=force-wmalloc``) and sunrpc's own buffer,
    ``sndbuf`` = (wsize + 100 + 512) x 16 x 2 (1,068,160 B at 32 KiB), slot
    table 16, congestion taken at transmit, resends first.

Set-up quantities the report leaves open (documented ranges, fitted only on
the unpatched case: docs/calibration-story3.md): ``rpciod_wake_us`` (how
long after the write-space wake-up rpciod runs the task), ``server_us``
(service time per WRITE), ``cpu``.

Summary keys (``--json`` too): ``write_MBps`` (file bytes / elapsed, MB =
10**6 B), ``elapsed_s`` (first write() to the COMMIT's reply: iozone's -c
-e timing), ``rpcs``, ``rpc_resends`` (woken after EAGAIN and sent again),
``rpc_timeouts``, ``eagain_sends``, ``datagrams_incomplete`` (some but not
all fragments left), ``fragments_sent``, ``fragments_wasted`` (sent, but
of a datagram the server never rebuilt), ``reasm_oks``, ``reasm_fails``,
``reasm_timeouts`` (the server's counters), ``link_util_pct`` (client to
server wire busy over elapsed), ``client_cpu_pct`` (the client's CPU
seconds -- its own rows, local output, the replies' receive path; not the
periodic timers -- over elapsed).  Host counters are in
``result.counters["hosts"]`` (``local/17`` the client, ``eth0`` the server).

``trace=True`` attaches ``result.nfs_trace`` (also
``result.extra["nfs_trace"]``), a dict of bounded numpy arrays (see
:class:`~routelab.hosts.nfs.NfsTrace`): ``gauge`` {``t_s``, ``wmem_alloc``,
``sndbuf``} at each send-buffer change; ``events`` {``t_s``, ``xid``,
``attempt``, ``event`` (code into ``event_names`` = send, frag_tx, eagain,
sleep, wake, resend, timeout, reply), ``frag_offset`` (bytes, -1 if none),
``frag_index`` (k-th fragment sent, -1 if none; for ``eagain`` the number
sent before it)}; ``server`` {``xid``, ``attempt``, ``fragments_arrived``,
``outcome`` in completed / expired / evicted / pending (or the queue's other
fate names)}; ``truncated``.
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import PacketTrace, ip_to_int
from ..errors import KnobError
from ..hosts.nfs import WRITE_CALL_HDR, NfsClient, NfsServer, NfsTrace
from ..hosts.nic import HostNic
from ..ipv4.fib import Fib, Route
from ..ipv4.ip_fragment import RECEIVERS, IpDefrag, fragment_plan
from ..ipv4.udp import SOCK_MIN_SNDBUF, UDP_HLEN, truesize_2419
from ..result import Result
from ..router import Device, Router
from ..sunrpc import CWND_VARIANTS, MAXREQS, TIMER_VARIANTS
from ..sysctl import Knob
from .common import run_scenario

__all__ = ["NAME", "TITLE", "KNOBS", "SUMMARY_KEYS", "run", "build", "resolve_setup",
           "sndbuf_2420"]

NAME = "nfs"
TITLE = "NFS writes over UDP from a 2.4.19 client: half-sent datagrams (story 3)"

SERVERS = ("solaris", "linux-2.4.19", "linux-2.4.22")
FRAG_ALLOC = ("sock-alloc-send-skb", "force-wmalloc")
#: RPC_SLACK_SPACE (2.4.20 include/linux/sunrpc/xprt.h) and nfs_read_super's +100
RPC_SLACK_SPACE = 512

KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob("kernel", "2.4.19", str, choices=("2.4.19", "2.4.20"),
         help="Client kernel: 2.4.19 (unfixed sender, 64 KB sndbuf) or 2.4.20 (the fix and "
              "sunrpc's 1 MB buffer)."),
    Knob("frag_alloc", None, str, choices=FRAG_ALLOC,
         help="Fragment allocation: sock-alloc-send-skb (every fragment checks sndbuf) or "
              "force-wmalloc (only the first: the fix); default from the kernel."),
    Knob("sndbuf", None, int, 1, 1 << 26, "bytes",
         "The RPC socket's sk->sndbuf; default 65535 (2.4.19) or (wsize+612)*32 (2.4.20)."),
    Knob("cwnd", "aimd", str, choices=CWND_VARIANTS,
         help="sunrpc congestion window: 2.4.19 (congtime-held growth) or aimd (2.4.20)."),
    Knob("rpc_timer", "rtt", str, choices=TIMER_VARIANTS,
         help="Retransmit timer: fixed (timeo doubling, 2.4.19) or rtt (2.4.20 estimator)."),
    Knob("timeo", 7, int, 1, 600, "0.1 s", "Mount option timeo (tenths of a second)."),
    Knob("retrans", 3, int, 0, 100, "retries", "Mount option retrans."),
    Knob("wsize", 32768, int, 1024, 32768, "bytes", "NFS wsize (multiple of 1024).",
         step=1024),
    Knob("server", "solaris", str, choices=SERVERS,
         help="Server reassembly: solaris (1 MB, 60 s, prune oldest), linux-2.4.19 "
              "(256/192 KB sweep), linux-2.4.22 (LRU)."),
    Knob("ipfrag_high_thresh", None, int, 0, 1 << 40, "bytes",
         "Server reassembly limit; default the server's.", procname="net.ipv4.ipfrag_high_thresh"),
    Knob("ipfrag_low_thresh", None, int, 0, 1 << 40, "bytes",
         "Server evictor target; default the server's.", procname="net.ipv4.ipfrag_low_thresh"),
    Knob("ipfrag_time", None, float, 0.01, 3600.0, "s",
         "Server reassembly timeout; default the server's (30 s; solaris 60 s).",
         procname="net.ipv4.ipfrag_time"),
    Knob("link_mbps", 100.0, float, 1.0, 10000.0, "Mbit/s", "Link speed (full duplex).",
         step=10),
    Knob("txqueuelen", 100, int, 1, 100000, "frames", "Client qdisc length (Ethernet 100)."),
    Knob("loss_pct", 0.0, float, 0.0, 50.0, "%", "Client-to-server frames lost.", step=0.1),
    Knob("file_mb", 120.0, float, 0.03125, 2048.0, "MiB", "iozone -s (file size).", step=1),
    Knob("cpu", "piii-1000", str,
         choices=("piii-1000", "celeron-1200", "duron-900", "k6-200"),
         help="Client CPU profile (routelab.hardware)."),
    Knob("rpciod_wake_us", 135.0, float, 0.0, 100000.0, "us",
         "Set-up (fitted): mean of rpciod's latency (exponential) from the write-space "
         "wake-up to resending."),
    Knob("server_us", 500.0, float, 0.0, 1e6, "us",
         "Set-up: server time per WRITE (NFS code and the disk's share)."),
    Knob("commit_us", 20000.0, float, 0.0, 1e7, "us",
         "Set-up: server time per COMMIT (up to 1 MiB of unstable data to its disk)."),
    Knob("trace", False, bool, help="Attach result.nfs_trace (bounded arrays)."),
    Knob("duration", 600.0, float, 0.01, 1e5, "s",
         "Simulated time limit: the run lasts this long, and stops there if the file is "
         "not written by then (alias max_s)."),
]}

CLIENT, SERVER = "10.0.0.1", "10.0.0.2"
#: the run's time bins (Result.cpu etc.): 0.1 s, as runs last up to ``duration``
BIN_S = 0.1

SUMMARY_KEYS = ("write_MBps", "elapsed_s", "rpcs", "rpc_resends", "rpc_timeouts",
                "eagain_sends", "datagrams_incomplete", "fragments_sent", "fragments_wasted",
                "reasm_oks", "reasm_fails", "reasm_timeouts", "link_util_pct", "client_cpu_pct")


def sndbuf_2420(wsize: int) -> int:
    """sunrpc's send buffer in 2.4.20: rpc_setbufsize(clnt, wsize + 100, ...)
    -> sndsize = that + RPC_SLACK_SPACE; xprt_sock_setbufsize sets
    sk->sndbuf = sndsize * RPC_MAXCONG * 2 (net/sunrpc/xprt.c, clnt.c,
    fs/nfs/inode.c, 2.4.20): 1,068,160 B at wsize 32,768."""
    return (wsize + 100 + RPC_SLACK_SPACE) * 16 * 2


def resolve_setup(v: dict) -> dict:
    """Derived values and the refusal of impossible combinations."""
    kern = v["kernel"]
    fa = v["frag_alloc"] or ("sock-alloc-send-skb" if kern == "2.4.19" else "force-wmalloc")
    if v["wsize"] % 1024:
        raise KnobError("wsize", v["wsize"], "a multiple of 1024 in [1024, 32768]")
    sndbuf = v["sndbuf"]
    if sndbuf is None:
        sndbuf = 65535 if kern == "2.4.19" else sndbuf_2420(v["wsize"])
    one = truesize_2419(1500)
    if sndbuf < max(one, SOCK_MIN_SNDBUF):
        raise KnobError("sndbuf", sndbuf,
                        f"at least {max(one, SOCK_MIN_SNDBUF)} B: below one fragment's truesize "
                        f"({one} B) every datagram stops after its first fragment, and "
                        f"SO_SNDBUF cannot go below SOCK_MIN_SNDBUF ({SOCK_MIN_SNDBUF} B)")
    rules = RECEIVERS[v["server"]]
    high = rules.high if v["ipfrag_high_thresh"] is None else v["ipfrag_high_thresh"]
    low = min(rules.low, high) if v["ipfrag_low_thresh"] is None else v["ipfrag_low_thresh"]
    if low > high:
        raise KnobError("ipfrag_low_thresh", low,
                        f"at most ipfrag_high_thresh ({high}): low cannot be above high")
    t = rules.time if v["ipfrag_time"] is None else v["ipfrag_time"]
    nfr = len(fragment_plan(v["wsize"] + WRITE_CALL_HDR + UDP_HLEN, 1500).payload_sizes())
    return {"frag_alloc": fa, "sndbuf": int(sndbuf), "ipfrag_high_thresh": int(high),
            "ipfrag_low_thresh": int(low), "ipfrag_time": float(t),
            "fragments_per_write": nfr}


def build(values: dict, seed: int, trace: NfsTrace | None = None):
    """Router (the client) with its hosts, and the empty offered trace."""
    s = resolve_setup(values)
    kern = values["kernel"]
    client = NfsClient(
        ip_to_int(CLIENT), ip_to_int(SERVER),
        file_bytes=int(round(values["file_mb"] * (1 << 20))), record=131072,
        wsize=values["wsize"], sndbuf=s["sndbuf"], frag_alloc=s["frag_alloc"],
        slots=MAXREQS[kern], cwnd=values["cwnd"],
        cong_at="reserve" if kern == "2.4.19" else "transmit",
        rpc_timer=values["rpc_timer"], timeo_s=values["timeo"] / 10.0,
        retrans=values["retrans"], wake_s=values["rpciod_wake_us"] * 1e-6,
        resend_first=kern == "2.4.20", trace=trace, seed=seed)
    defrag = IpDefrag(values["server"], s["ipfrag_high_thresh"], s["ipfrag_low_thresh"],
                      s["ipfrag_time"])
    speed = values["link_mbps"] * 1e6
    nic = HostNic(speed, txqueuelen=1000)
    server = NfsServer(defrag, client, nic, ip_to_int(SERVER),
                       service_s=values["server_us"] * 1e-6,
                       commit_s=values["commit_us"] * 1e-6, loss_pct=values["loss_pct"],
                       seed=seed)
    devices = [Device("eth0", "e100", 0, speed_bps=speed)]
    fib = Fib(routes=[Route("10.0.0.0/24", oif=0)], local_addrs=[CLIENT])
    router = Router("2.4.24", values["cpu"], devices, fib, seed=seed, hosts={0: server},
                    local_hosts={17: client}, sysctl={"txqueuelen": values["txqueuelen"]},
                    arp_static=[(0, SERVER)])
    return router, PacketTrace.build(np.zeros(0), saddr=0, daddr=0)


def _client_cpu_s(res: Result) -> float:
    """The client machine's CPU seconds for the transfer: every profile row
    (the host's own charges, ``ip_output (local)``, the receive path of the
    replies) but the periodic timers, which run on to the end of the run."""
    return float(sum(v for k, v in res.profile.items() if "timer" not in k))


def _summary(res: Result, router: Router, setup: dict, values: dict) -> dict:
    client = router.local_hosts[17]
    server = router.hosts[0]
    c = client.c
    done = client.t_done
    elapsed = done if done == done else res.duration
    fb = client.written if done == done else 0
    snmp = server.defrag.snmp
    # fragments put on the wire for attempts the server never rebuilt
    completed = {a for a, o in server.outcome.items() if o == "completed"}
    wasted = sum(n for a, n in enumerate(client.sent_per_attempt) if a not in completed)
    wire_bits = client.wire_bits
    return {
        "write_MBps": round(fb / elapsed / 1e6, 4) if elapsed > 0 else 0.0,
        "elapsed_s": round(elapsed, 6),
        "rpcs": c["rpcs"],
        "rpc_resends": c["rpc_resends"],
        "rpc_timeouts": c["rpc_timeouts"],
        "eagain_sends": c["eagain_sends"],
        "datagrams_incomplete": c["datagrams_incomplete"],
        "fragments_sent": c["fragments_sent"],
        "fragments_wasted": wasted,
        "reasm_oks": snmp["ReasmOKs"],
        "reasm_fails": snmp["ReasmFails"],
        "reasm_timeouts": snmp["ReasmTimeout"],
        "link_util_pct": round(100.0 * float(wire_bits) / (values["link_mbps"] * 1e6) / elapsed, 3)
        if elapsed > 0 else 0.0,
        "client_cpu_pct": round(100.0 * _client_cpu_s(res) / elapsed, 3) if elapsed > 0 else 0.0,
    }


def run(seed: int = 1, **knobs) -> Result:
    """Run the scenario; see ``KNOBS`` and the module docstring."""
    from .common import resolve
    if "max_s" in knobs:            # the first name of ``duration`` (NFS-API commit)
        knobs = dict(knobs)
        knobs["duration"] = knobs.pop("max_s")
    values = resolve(KNOBS, knobs)
    setup = resolve_setup(values)
    holder: dict = {}

    def build_kept(v, sd):
        tr = NfsTrace() if v["trace"] else None
        holder["trace"] = tr
        holder["router"], trace = build(v, sd, tr)
        return holder["router"], trace

    res = run_scenario(NAME, KNOBS, build_kept, values, seed, 1500, bin_s=BIN_S,
                       summary=lambda r: _summary(r, holder["router"], setup, values))
    router = holder["router"]
    res.extra["knobs"] = dict(values, **setup)
    if holder["trace"] is not None:
        server = router.hosts[0]
        arr = holder["trace"].arrays(server.datagram_rows())
        res.extra["nfs_trace"] = arr
        res.nfs_trace = arr
    return res
