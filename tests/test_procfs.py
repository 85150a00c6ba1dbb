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
