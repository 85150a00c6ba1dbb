"""Every counter of a run, in one place: what the kernel would show in
``/proc/net/snmp``, ``/proc/net/dev``, ``/proc/net/softnet_stat``,
``/proc/net/rt_cache_stat``, ``/proc/net/stat/arp_cache``, and the model's own.

Kernel: the MIB counters are bumped where the packet meets its fate
(``IP_INC_STATS_BH`` in ip_input.c, ip_forward.c, ip_output.c, route.c;
2.4.24, 2.6.0); the model counts most of them afterwards, window by window,
from the outcome column -- same totals, no work per packet.  The rest are
read off the run's stage objects when it ends (:meth:`Counters.collect`).
"""

from __future__ import annotations

import numpy as np

from ..core.dropreason import OUTCOMES as OC
from ..ipv4.route import STAT_FIELDS as _RT_STAT

_S_OUT_HIT, _S_OUT_SLOW = _RT_STAT.index("out_hit"), _RT_STAT.index("out_slow_tot")

__all__ = ["Counters", "DEV_FIELDS", "MIB_FIELDS", "REASM_FIELDS"]

#: per-device counters (``netstat -i`` / ``/proc/net/dev`` columns)
DEV_FIELDS = ("rx_packets", "rx_errors", "rx_dropped", "rx_missed", "rx_fifo", "rnbc",
              "tx_packets", "tx_errors", "tx_dropped", "tx_fifo", "qdisc_drops")
#: the Ip MIB counters the model keeps (``/proc/net/snmp``)
MIB_FIELDS = ("InReceives", "InHdrErrors", "InAddrErrors", "ForwDatagrams", "InDiscards",
              "InDelivers", "OutRequests", "OutDiscards", "OutNoRoutes", "ReasmTimeout",
              "ReasmReqds", "ReasmOKs", "ReasmFails", "FragOKs", "FragFails", "FragCreates")
#: (in the order of the Ip: line of /proc/net/snmp, Kernel: net/ipv4/proc.c
#: snmp4_ipstats_list (2.6.20, sagsango/linux-2.6.20), without Forwarding,
#: DefaultTTL and InUnknownProtos, which the model does not keep)
#: the counters a machine's reassembly keeps: a local host that reassembles
#: (``Host.ip_mib``) reports them, and the machine's own MIB shows them
REASM_FIELDS = ("ReasmTimeout", "ReasmReqds", "ReasmOKs", "ReasmFails")
#: MIB counter <- the outcome that counts in it
_MIB_OF_OUTCOME = (("InDiscards", "drop_dst_overflow"), ("InAddrErrors", "drop_martian"),
                   ("InHdrErrors", "drop_hdr"), ("OutNoRoutes", "drop_no_route"),
                   ("OutDiscards", "drop_qdisc"), ("InDelivers", "local"),
                   ("FragFails", "drop_frag_needed"))


class Counters:
    """The run's counters (see the module docstring).

    Attributes
    ----------
    stats : dict      per-device lists, :data:`DEV_FIELDS`
    mib : dict        :data:`MIB_FIELDS`
    lookups : list    route lookups per CPU (rt_cache_stat in_hit is lookups
                      minus slow-path calls, worked out at the end)
    """

    def __init__(self, ndev: int, ncpus: int, dev_cpu, c_hdr: int, c_arp: int) -> None:
        self.stats = {name: [0] * ndev for name in DEV_FIELDS}
        self.mib = dict.fromkeys(MIB_FIELDS, 0)
        self.lookups = [0] * ncpus
        self._dev_cpu = np.asarray(dev_cpu, dtype=np.int64)
        self._c_hdr, self._c_arp = c_hdr, c_arp

    def count_window(self, pk, has_cache: bool, isfrag=None) -> None:
        """Counters that follow from a window's outcomes (the kernel counts them
        as it goes): rx_missed/rx_fifo (NAPI ring and FIFO full), rx_packets
        (every packet the NIC did not miss), InReceives (every packet past the
        ring/backlog), the MIB counters of each outcome, ForwDatagrams,
        FragOKs/FragCreates (forwarded or dropped by the qdisc), tx_packets of
        forwarded frames, route lookups per CPU.  ``isfrag`` (optional): which
        of the window's packets are fragments (see InDelivers below)."""
        stats, mib = self.stats, self.mib
        o = np.frombuffer(pk.outcome, dtype=np.uint8).astype(np.int8)
        dev = pk.array("dev").astype(np.int64)
        cls = pk.array("cls")
        oif = pk.array("oif").astype(np.int64)
        nfrag = pk.array("nfrag").astype(np.int64)
        ndev = len(stats["rx_packets"])
        per_dev = np.bincount(dev, minlength=ndev)
        missed = o == OC["drop_rx_missed"]
        per_dev_missed = np.bincount(dev[missed], minlength=ndev)
        for di in range(ndev):
            stats["rx_missed"][di] += int(per_dev_missed[di])
            stats["rx_fifo"][di] += int(per_dev_missed[di])
            stats["rx_packets"][di] += int(per_dev[di]) - int(per_dev_missed[di])
        received = ~missed & (o != OC["drop_backlog"])
        # (ARP frames are received too, but they are not IP: no InReceives)
        mib["InReceives"] += int(np.count_nonzero(received & (cls != self._c_arp)))
        counts = np.bincount(o[o >= 0], minlength=len(OC))
        for counter, outcome in _MIB_OF_OUTCOME:
            mib[counter] += int(counts[OC[outcome]])
        # a fragment delivered locally goes to ip_defrag first: InDelivers
        # counts the datagram rebuilt from it (ip_local_deliver_finish), which
        # the reassembling host reports (``collect``), not each fragment
        if isfrag is not None:
            mib["InDelivers"] -= int(np.count_nonzero(isfrag & (o == OC["local"])))
        fwd = (o == OC["forwarded"]) | (o == OC["drop_qdisc"])
        mib["ForwDatagrams"] += int(np.count_nonzero(fwd))
        frag = fwd & (nfrag > 1)
        mib["FragOKs"] += int(np.count_nonzero(frag))
        mib["FragCreates"] += int(nfrag[frag].sum())
        sent = o == OC["forwarded"]
        # (packets not sent are counted in an extra bin ndev and ignored)
        tx = np.bincount(np.where(sent, oif, ndev), weights=nfrag, minlength=ndev + 1)
        for di in range(ndev):
            stats["tx_packets"][di] += int(tx[di])
        if has_cache:
            looked = received & (cls != self._c_hdr) & (cls != self._c_arp)
            lk = np.bincount(self._dev_cpu[dev[looked]], minlength=len(self.lookups))
            for cc in range(len(self.lookups)):
                self.lookups[cc] += int(lk[cc])

    def collect(self, run, hosts: dict) -> dict:
        """Everything, read off the ended run's stage objects, as plain data."""
        r, stats = run.r, self.stats
        for nd in run.devices:
            stats["rnbc"][nd.index] = nd.rnbc
            stats["qdisc_drops"][nd.index] += nd.qdisc_drops
            stats["tx_packets"][nd.index] += nd.tx_packets
        sn, cpus, icmp, arp, cache = run.softnet, run.cpus, run.icmp, run.arp, run.cache
        out = {
            "dev": {"names": [d.name for d in r.devices], **{k: list(v) for k, v in stats.items()}},
            "ip": dict(self.mib), "icmp": dict(icmp.counters),
            "softnet": {"dropped": [s.dropped for s in sn], "throttled": [s.throttled for s in sn],
                        "time_squeeze": [s.time_squeeze for s in sn],
                        "ctxsw": [c.ctxsw for c in cpus],
                        "ksoftirqd_wakeups": [c.ksoftirqd_wakeups for c in cpus]},
        }
        out["icmp"]["RateLimited"] = icmp.limited
        out["icmp"]["HostUnreachs"] = icmp.host_unreach
        if arp is not None:
            out["neigh"] = arp.counters()
            out["neigh"]["entries"] = arp.tbl.entries
            out["neigh"]["table_overflows"] = cache.neigh_overflows if cache is not None else 0
        c20 = getattr(run, "cache20", None)
        if c20 is not None:
            out["rt20"] = {**c20.counters, **c20.census()}
        if cache is not None:
            rows = cache.stat_rows()
            # the output route lookups of the ICMP messages the router sent
            # (routelab.ipv4.icmp.Icmp.out_hit), on the CPU of their device
            for nd in run.devices:
                c = r.devices[nd.index].cpu
                rows[c][_S_OUT_HIT] += icmp.out_hit[nd.index]
                rows[c][_S_OUT_SLOW] += icmp.out_slow[nd.index]
            out["rt_cache_stat"] = rows
            out["dst"] = {"entries": cache.dst.entries, "allocated": cache.dst.allocated,
                          "destroyed": cache.dst.destroyed, "garbage": len(cache.dst.garbage),
                          "gc_runs": cache.dst.gc_runs, "gc_walked": cache.dst.gc_walked,
                          "alloc_failed": cache.dst.alloc_failed, "buckets": cache.buckets,
                          "gc_thresh": cache.dst.gc_thresh, "max_size": cache.max_size,
                          "flushes": cache.flushes}
            out["rcu"] = {"mode": cache.rcu.mode, "pending": cache.rcu.pending,
                          "invoked": cache.rcu.invoked,
                          "grace_periods": int(cache.rcu.grace_periods().size)}
        out["sched"] = {
            "user_ticks": [c.user_ticks for c in cpus], "slivers": [c.slivers for c in cpus],
            # seconds ksoftirqd was the current task (what top charges to it)
            "ksoftirqd_s": [c.ksoftirqd_s for c in cpus]}
        if r.user_task:
            out["sched"]["loop_gap_s"] = [c.loop_gap for c in cpus]
            out["sched"]["loop_user_s"] = [c.loop_user_s for c in cpus]
            out["sched"]["tasks"] = [c.tasks(run.duration) for c in cpus]
        for _, h in run._host_labels():
            if h.dev >= 0:
                continue                   # (another machine's reassembly is its own)
            for name, v in h.ip_mib().items():
                if name not in REASM_FIELDS:
                    raise KeyError(f"Host.ip_mib: {name!r} is not one of {REASM_FIELDS}")
                out["ip"][name] += int(v)
                if name == "ReasmOKs":
                    out["ip"]["InDelivers"] += int(v)
        if hosts:
            out["hosts"] = hosts
        return out
