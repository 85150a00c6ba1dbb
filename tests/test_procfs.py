"""Tests for routelab.procfs: the /proc-style views."""

from __future__ import annotations

import re

import numpy as np
import pytest

from routelab import procfs
from routelab.ipv4.route import STAT_FIELDS
from routelab.scenarios import ping


@pytest.fixture(scope="module")
def res2():
    # two CPUs, a small cache so the GC counters are non-zero
    return ping.run(seed=5, kernel="2.6.0", cpu="p4-xeon-2400x2", nic="e1000",
                    background_pps=1500, duration=0.5, gc_thresh=16, max_size=64)


def test_rt_cache_stat_one_hex_line_per_cpu(res2):
    text = procfs.rt_cache_stat(res2)
    lines = text.splitlines()
    assert len(lines) == res2.config.ncpus == 2
    rows = res2.counters["rt_cache_stat"]
    for line, row in zip(lines, rows, strict=True):
        fields = line.split(" ")
        assert len(fields) == 17
        assert all(re.fullmatch(r"[0-9a-f]{8}", f) for f in fields)
        assert [int(f, 16) for f in fields] == row
    # entries (the global dst count) comes first and is the same on every line
    assert lines[0].split()[0] == lines[1].split()[0]
    assert int(lines[0].split()[0], 16) == res2.counters["dst"]["entries"]
    tot = np.asarray([[int(f, 16) for f in ln.split()] for ln in lines]).sum(axis=0)
    assert tot[STAT_FIELDS.index("gc_total")] == res2.summary()["gc_total"] > 0


def test_rt_cache_stat_header_has_16_names(res2):
    lines = procfs.rt_cache_stat(res2, header=True).splitlines()
    names = lines[0].split()
    assert len(names) == 16 and "in_slow_mc" not in names      # the 2.6.11 quirk
    assert names == [f for f in STAT_FIELDS if f != "in_slow_mc"]
    assert all(len(ln.split()) == 17 for ln in lines[1:])


def test_rt_cache_stat_without_route_cache():
    res = ping.run(seed=1, kernel="2.0", background_pps=100, duration=0.2)
    assert "no rt_cache_stat" in procfs.rt_cache_stat(res)
    assert "no rt_cache_stat" in procfs.rt_cache_stat_table(res)


def test_rt_cache_stat_table(res2):
    lines = procfs.rt_cache_stat_table(res2).splitlines()
    assert lines[0].split() == ["counter", "cpu0", "cpu1"]
    assert [ln.split()[0] for ln in lines[1:]] == list(STAT_FIELDS)


def test_netstat_i(res2):
    lines = procfs.netstat_i(res2).splitlines()
    assert lines[0] == "Kernel Interface table"
    assert lines[1].split() == ["Iface", "MTU", "RX-OK", "RX-ERR", "RX-DRP", "RX-OVR", "TX-OK",
                                "TX-ERR", "TX-DRP", "TX-OVR"]
    assert [ln.split()[0] for ln in lines[2:]] == ["eth0", "eth1"]
    rows = procfs.dev_counters(res2)
    for ln, row in zip(lines[2:], rows, strict=True):
        assert ln.split() == [str(v) for v in row.values()]
    assert sum(r["RX-OK"] for r in rows) == sum(res2.counters["dev"]["rx_packets"])


def test_snmp_and_softnet_and_perf_top(res2):
    snmp = procfs.snmp(res2).splitlines()
    assert len(snmp) == 4 and snmp[0].startswith("Ip: ") and snmp[2].startswith("Icmp: ")
    assert len(snmp[0].split()) == len(snmp[1].split())
    sn = procfs.softnet_stat(res2).splitlines()
    assert len(sn) == 2 and all(len(ln.split()) == 3 for ln in sn)
    top = procfs.perf_top(res2, limit=5).splitlines()
    assert len(top) == 6 and "Overhead" in top[0]


@pytest.fixture(scope="module")
def worm24():
    from routelab.scenarios import worm
    return worm.run(seed=1, duration=2.0, worm_hosts=3, kernel="2.4.24")


def test_kernel_version():
    assert procfs.kernel_version("2.4.24-nocache") == (2, 4, 24)
    assert procfs.kernel_version("2.6.0-rcu-bh") == (2, 6, 0)
    assert procfs.kernel_version("2.0") == (2, 0)


def test_arp_cache_stat_as_the_kernel_had_it(worm24):
    # 2.4.24 has no /proc/net/stat/arp_cache (first in 2.6.9): the view is
    # the missing file and the rate-limited overflow warnings
    text = procfs.arp_cache_stat(worm24)
    assert "No such file or directory" in text and "2.6.9" in text
    n = worm24.counters["neigh"]["table_overflows"]
    shown = int(text.split("\n")[3].split()[0])
    assert shown == min(n, 10)                 # (2 s: the burst only)
    # the model's counters in the later kernel's layout, on request
    later = procfs.arp_cache_stat(worm24, layout="2.6.9").splitlines()
    assert later[0].startswith("entries  allocs") and len(later[1].split()) == 11
    with pytest.raises(Exception, match="layout"):
        procfs.arp_cache_stat(worm24, layout="2.6")
    # a 2.6.20 kernel has the file
    res = ping.run(seed=1, kernel="2.6.20", background_pps=200, duration=0.2)
    assert procfs.arp_cache_stat(res).startswith("entries  allocs")


def test_icmp_messages_look_up_their_output_route(worm24):
    # icmp_send does ip_route_output before its rate limit (2.4.24 icmp.c):
    # every message the router originates counts an out_hit or out_slow_tot
    rows = worm24.counters["rt_cache_stat"]
    out_hit = sum(r[STAT_FIELDS.index("out_hit")] for r in rows)
    out_slow = sum(r[STAT_FIELDS.index("out_slow_tot")] for r in rows)
    icmp = worm24.counters["icmp"]
    assert icmp["OutMsgs"] > 0 and out_slow > 0
    assert out_hit + out_slow >= icmp["OutMsgs"]
    # one miss per (destination, error-or-reply): far fewer than the messages
    assert out_slow < out_hit
