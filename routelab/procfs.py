"""/proc-style views of a run: rt_cache_stat, netstat -i, snmp, a perf-top profile.

Kernel: net/ipv4/route.c rt_cache_stat_get_info (2.4.22: ``/proc/net/rt_cache_stat``,
no header, one line of 17 hexadecimal fields per CPU); ``/proc/net/stat/rt_cache``
(2.6.11, with a header whose names omit ``in_slow_mc``); net-tools
``netstat -i`` reading ``/proc/net/dev`` (kernel.md s2, s7).
"""

from __future__ import annotations

from .ipv4.route import STAT_FIELDS
from .result import Result

__all__ = ["arp_cache_stat", "kernel_version", "ip_neigh",
           "rt_cache_stat", "rt_cache_stat_table", "netstat_i",
           "snmp", "perf_top", "softnet_stat", "dev_counters"]


def rt_cache_stat(res: Result, *, header: bool = False) -> str:
    """``/proc/net/rt_cache_stat`` as the kernel prints it.

    One line per CPU, 17 eight-digit hexadecimal fields in kernel order;
    ``entries`` (the global dst count) is the same on every line.  With
    ``header=True`` the 2.6.11 ``/proc/net/stat/rt_cache`` header is added,
    which -- like the kernel's -- lists only 16 names (``in_slow_mc`` is
    missing) above 17 values.
    """
    rows = res.counters.get("rt_cache_stat")
    if rows is None:
        return "(kernel without a route cache: no rt_cache_stat)"
    lines = []
    if header:
        lines.append(" ".join(f for f in STAT_FIELDS if f != "in_slow_mc"))
    for row in rows:
        lines.append(" ".join(f"{v & 0xFFFFFFFF:08x}" for v in row))
    return "\n".join(lines)


def rt_cache_stat_table(res: Result) -> str:
    """The same counters as a labelled decimal table (one column per CPU)."""
    rows = res.counters.get("rt_cache_stat")
    if rows is None:
        return "(kernel without a route cache: no rt_cache_stat)"
    ncpu = len(rows)
    head = f"{'counter':<18}" + "".join(f"{'cpu' + str(c):>14}" for c in range(ncpu))
    out = [head]
    for i, name in enumerate(STAT_FIELDS):
        out.append(f"{name:<18}" + "".join(f"{rows[c][i]:>14,}" for c in range(ncpu)))
    return "\n".join(out)


def dev_counters(res: Result) -> list[dict]:
    """Per-device counters as ``/proc/net/dev`` holds them, mapped like net-tools.

    RX-DRP = rx_dropped + rx_missed_errors, RX-OVR = rx_fifo_errors
    (net/core/dev.c dev_seq_printf_stats, 2.6.0).  The e1000 driver reports
    the NIC's missed-packet count (MPC) in both ``rx_missed_errors`` and
    ``rx_fifo_errors``, its no-receive-buffer count (RNBC) as ``rx_dropped``,
    and adds both to ``rx_errors`` with the error counters the model never
    raises (CRC, alignment, length, carrier extension): so RX-ERR is RNBC +
    MPC and reads about the same as RX-DRP.  Kernel:
    drivers/net/e1000/e1000_main.c e1000_update_stats (v2.6.0 and 2.4.24,
    MaximeChretien/linux-history).  The non-NAPI e100 reports neither here
    (its drops are the backlog's, in softnet_stat).
    """
    dev = res.counters["dev"]
    out = []
    for i, name in enumerate(dev["names"]):
        nic = res.config.devices[i].profile
        rx_dropped = dev["rnbc"][i] if nic.napi else 0
        rx_errors = dev["rx_errors"][i]
        if nic.name == "e1000":
            rx_errors += dev["rnbc"][i] + dev["rx_missed"][i]
        out.append({
            "Iface": name, "MTU": res.config.devices[i].mtu,
            "RX-OK": dev["rx_packets"][i], "RX-ERR": rx_errors,
            "RX-DRP": rx_dropped + dev["rx_missed"][i], "RX-OVR": dev["rx_fifo"][i],
            "TX-OK": dev["tx_packets"][i], "TX-ERR": dev["tx_errors"][i],
            "TX-DRP": dev["tx_dropped"][i], "TX-OVR": dev["tx_fifo"][i],
        })
    return out


def netstat_i(res: Result) -> str:
    """``netstat -i`` (net-tools) for the run's devices."""
    cols = ["Iface", "MTU", "RX-OK", "RX-ERR", "RX-DRP", "RX-OVR", "TX-OK", "TX-ERR",
            "TX-DRP", "TX-OVR"]
    rows = dev_counters(res)
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["Kernel Interface table",
             " ".join(f"{c:<{widths[c]}}" if c == "Iface" else f"{c:>{widths[c]}}" for c in cols)]
    for r in rows:
        lines.append(" ".join(f"{r[c]:<{widths[c]}}" if c == "Iface" else f"{r[c]:>{widths[c]}}"
                              for c in cols))
    return "\n".join(lines)


def snmp(res: Result) -> str:
    """IP and ICMP MIB counters in the two-line layout of ``/proc/net/snmp``."""
    lines = []
    for proto, table in (("Ip", res.counters["ip"]), ("Icmp", res.counters["icmp"])):
        lines.append(f"{proto}: " + " ".join(table))
        lines.append(f"{proto}: " + " ".join(str(v) for v in table.values()))
    return "\n".join(lines)


def softnet_stat(res: Result) -> str:
    """``/proc/net/softnet_stat``: per CPU, packets processed, dropped, time_squeeze (hex)."""
    import numpy as np

    from .result import OUTCOMES

    sn = res.counters["softnet"]
    out = res.packets["outcome"]
    cpu_of_dev = np.array([d.cpu for d in res.config.devices])
    cpu = cpu_of_dev[res.packets["dev"].astype(np.int64)]
    reached = (out != OUTCOMES["drop_rx_missed"]) & (out != OUTCOMES["drop_backlog"])
    lines = []
    for c in range(len(sn["dropped"])):
        processed = int(np.count_nonzero(reached & (cpu == c)))
        lines.append(f"{processed:08x} {sn['dropped'][c]:08x} {sn['time_squeeze'][c]:08x}")
    return "\n".join(lines)


def perf_top(res: Result, limit: int = 15) -> str:
    """A ``perf top``-like table: CPU share per kernel function over the run."""
    prof = res.profile
    total_cpu = res.duration * res.config.ncpus
    tot = sum(prof.values()) or 1.0
    hz = res.config.cpu.hz
    lines = [f"{'Overhead':>9}  {'of CPU':>7}  {'Mcycles':>9}  function"]
    for name, secs in list(prof.items())[:limit]:
        lines.append(f"{100 * secs / tot:8.2f}%  {100 * secs / total_cpu:6.2f}%  "
                     f"{secs * hz / 1e6:9.2f}  {name}")
    return "\n".join(lines)


def kernel_version(name: str) -> tuple[int, ...]:
    """The release numbers at the start of a kernel profile's name
    (``"2.4.24-nocache"`` -> ``(2, 4, 24)``)."""
    nums = []
    for part in name.split("-")[0].split("."):
        if not part.isdigit():
            break
        nums.append(int(part))
    return tuple(nums)


#: The first release with /proc/net/stat/arp_cache (neigh_stat_seq_fops in
#: net/core/neighbour.c: in v2.6.9, not in v2.6.0 or v2.6.1,
#: MaximeChretien/linux-history).
ARP_CACHE_STAT_SINCE = (2, 6, 9)


def arp_cache_stat(res: Result, layout: str = "kernel") -> str:
    """The neighbour table's counters as the run's kernel would show them.

    ``/proc/net/stat/arp_cache`` first appears in 2.6.9.  An earlier kernel
    (2.4.24, 2.6.0, 2.6.1) keeps only allocations, failed resolutions and
    received probes in ``tbl->stats`` and exports none of them
    (include/net/neighbour.h struct neigh_statistics, 2.4.24): what its
    admin could see was the ``Neighbour table overflow.`` warning that
    rt_intern_hash prints when arp_bind_neighbour finds the table full
    (net/ipv4/route.c, 2.4.24), under ``net_ratelimit`` (a burst of 10, then
    one per 5 s: net/core/utils.c net_msg_burst/net_msg_cost), and ``ip
    neigh``.  So for those kernels this returns the shell's view of the
    missing file and the warnings' count.

    ``layout="2.6.9"`` prints the model's counters in 2.6.9's hex layout
    whatever the kernel (one row: the model has one table-wide set, not one
    per CPU) -- a later kernel's view of the same table, to be labelled as
    such.  Empty without a neighbour table (kernel 2.0, ``neighbours=False``).

    Simplified: the printed warnings are bounded by the rate limit as if the
    overflows were spread over the run (``min(n, 10 + duration / 5)``).
    """
    from .core.neighbour import STAT_FIELDS

    if layout not in ("kernel", "2.6.9"):
        from .errors import KnobError
        raise KnobError("layout", layout, "'kernel' or '2.6.9'")
    c = res.counters.get("neigh")
    if c is None:
        return ""
    if layout == "kernel" and kernel_version(res.config.kernel.name) < ARP_CACHE_STAT_SINCE:
        n = int(c.get("table_overflows", 0))
        shown = min(n, 10 + int(res.duration // 5))
        return (f"$ cat /proc/net/stat/arp_cache\n"
                f"cat: /proc/net/stat/arp_cache: No such file or directory"
                f"  ({res.config.kernel.name}: the file arrived in 2.6.9)\n"
                f"$ dmesg | grep -c 'Neighbour table overflow'\n{shown}"
                + (f"  (net_ratelimit: {n:,} overflows in the run)" if n > shown else ""))
    head = ("entries  allocs destroys hash_grows  lookups hits  res_failed  "
            "rcv_probes_mcast rcv_probes_ucast  periodic_gc_runs forced_gc_runs")
    groups = (("entries",), ("allocs", "destroys", "hash_grows"), ("lookups", "hits"),
              ("res_failed",), ("rcv_probes_mcast", "rcv_probes_ucast"),
              ("periodic_gc_runs", "forced_gc_runs"))
    assert sum(len(g) for g in groups) == len(STAT_FIELDS)
    row = "  ".join(" ".join(f"{int(c[f]):08x}" for f in g) for g in groups)
    return head + "\n" + row


def ip_neigh(res: Result, limit: int = 20) -> str:
    """``ip neigh``-like listing of the neighbour table at the end of the run
    (the first ``limit`` entries, then a count of the rest)."""
    text = res.extra.get("ip_neigh", "")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) > limit:
        lines = lines[:limit] + [f"... and {len(lines) - limit} more entries"]
    return "\n".join(lines)
