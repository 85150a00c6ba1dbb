"""Story 1's second pass (issue 24): walk costs from the struct layout, the
board's interrupt I/O, TX completion of the router's own frames, the
neighbour thresholds as a set-up, and the study functions."""

import math

import numpy as np
import pytest

from routelab.costs import (
    COMPOSITION,
    PATH,
    STRUCT_OFFSETS,
    UP_PATH,
    WALK_FIELDS,
    cost_table,
    lines_read,
)
from routelab.errors import KnobError
from routelab.hardware import BOARDS, cpu_profile
from routelab.scenarios import story1_study as st
from routelab.scenarios import worm


def test_lines_per_step_follow_the_layout():
    # K6 build, 32-byte lines: refcnt (52) and next (0) are in different lines
    assert lines_read("neigh_gc_entry", 32) == 2
    # 64-byte lines (Duron): both in line 0
    assert lines_read("neigh_gc_entry", 64) == 1
    # lookup reads dev (12) and primary_key (100): two lines either way
    assert lines_read("neigh_chain_step", 32) == 2 and lines_read("neigh_chain_step", 64) == 2
    # a route-cache chain step: next (0) and key.dst (124)
    assert lines_read("chain_step", 32) == 2
    # a line size that holds the whole object: one line
    assert all(lines_read(w, 256) == 1 for w in WALK_FIELDS)
    assert STRUCT_OFFSETS["neighbour"]["refcnt"] == 52


def test_board_costs_k6():
    b = BOARDS["k6-200"]
    cpu = cpu_profile("k6-200")
    fn = cost_table(cpu).fn
    want = UP_PATH["neigh_gc_entry"] / cpu.ipc / cpu.hz + 2 * b.walk_line_ns * 1e-9
    assert fn["neigh_gc_entry"] == pytest.approx(want)
    l2 = cost_table(cpu, {"board_cache": "l2"}).fn
    assert l2["neigh_gc_entry"] == pytest.approx(want - 2 * (b.walk_line_ns - b.l2_line_ns) * 1e-9)
    # the interrupt's port and register I/O is added to irq_rx
    plain = PATH["irq_rx"] / cpu.ipc / cpu.hz + 2 * cpu.mem_latency_ns * 1e-9
    assert fn["irq_rx"] == pytest.approx(plain + b.irq_io_s)
    # an explicit override of the walk's cycles is kept (not the UP figure)
    ov = cost_table(cpu, {"neigh_gc_entry": 40.0}).fn
    want40 = 40.0 / cpu.ipc / cpu.hz + 2 * b.walk_line_ns * 1e-9
    assert ov["neigh_gc_entry"] == pytest.approx(want40)


def test_other_cpus_keep_their_charges():
    cpu = cpu_profile("p4-xeon-2400x2")
    fn = cost_table(cpu).fn
    assert fn["neigh_gc_entry"] == pytest.approx(
        PATH["neigh_gc_entry"] / cpu.ipc / cpu.hz + cpu.mem_latency_ns * 1e-9)


def test_board_cache_is_validated():
    with pytest.raises(KnobError, match="board_cache"):
        cost_table(cpu_profile("k6-200"), {"board_cache": "sram"})
    with pytest.raises(KnobError, match="board_cache"):
        worm.run(duration=0.5, board_cache="sram")


def test_own_frames_pay_tx_completion():
    assert COMPOSITION["arp_xmit"][-1] == "tx_complete"
    assert COMPOSITION["icmp_send"][-1] == "tx_complete"


def test_thresholds_keep_the_defaults_ratios():
    assert st.thresholds(1024) == {"neigh_gc_thresh1": 128, "neigh_gc_thresh2": 512,
                                   "neigh_gc_thresh3": 1024}
    assert st.thresholds(4096)["neigh_gc_thresh2"] == 2048


def test_fill_time_grows_with_gc_thresh3():
    small = st.run_logged(seed=1, duration=6.0, **st.thresholds(1024))
    big = st.run_logged(seed=1, duration=6.0, **st.thresholds(4096))
    f_small, f_big = st.fill_time(small), st.fill_time(big)
    assert 0 < f_small < 6.0
    assert math.isinf(f_big)        # ~25 s to fill 4096 at the sourced load
    assert small.counters["neigh"]["table_fulls"] > 0
    assert big.counters["neigh"]["table_fulls"] == 0
    with pytest.raises(ValueError):
        st.fill_time(worm.run(duration=0.5))


def test_steady_and_delay_vs_busy():
    res = worm.run(seed=1, duration=4.0, outside_welchia=10)
    s = st.steady(res, 2.0)
    assert 0 < s["busy_pct"] <= 100 and s["pings"] == 20
    d = st.delay_vs_busy(res, window_s=0.5, t0=1.0)
    assert len(d["sent_s"]) == len(d["busy"]) == len(d["rtt_ms"])
    b = np.array(d["busy"], dtype=float)
    assert np.all((b >= 0) & (b <= 1.0 + 1e-9))
    assert sum(r["pings"] for r in d["by_busy"]) == len(d["sent_s"])
    units = st.unit_sizes(res)
    walk = units[0]["largest_ms"]
    # (1025 entries x ~0.5 us) + buckets: about half a millisecond on the K6
    assert 0.4 < walk < 0.7
    assert st.work_units(res)["longest_ms"][0] > 0


def test_kernel_20_walks_use_its_own_small_structures():
    # 2.0.40's struct rtable and struct arp_table keep the fields a walk reads
    # in the first 32 bytes: one line per step on the K6, where 2.4 needs two
    for walk in ("chain_step_20", "gc_entry_20", "neigh_chain_step_20"):
        assert lines_read(walk, 32) == 1
    cpu = cpu_profile("k6-200")
    fn = cost_table(cpu).fn
    assert fn["chain_step_20"] < fn["chain_step"]
    # other CPUs: the 2.0 walks charge what the 2.4 walks do
    other = cost_table(cpu_profile("opteron-2400x2")).fn
    assert other["chain_step_20"] == other["chain_step"]


def test_hosts_arp_requests_reach_arp_process():
    from routelab.ipv4.arp import ARPOP_REQUEST
    from routelab.scenarios.common import resolve
    from routelab.scenarios.worm import KNOBS, _host_arp, plan_of

    values = resolve(KNOBS, {"duration": 20.0})
    plan = plan_of(values)
    host = int(plan.infected(np.random.default_rng(1), 1)[0])
    tr = _host_arp(np.random.default_rng(2), host, 0, "welchia", values, plan, 20.0)
    if tr.t.size:
        # only targets the host resolves itself (its own subnet), each once
        assert not plan.reaches_router(np.uint32(host), tr.daddr).any()
        assert np.unique(tr.daddr).size == tr.daddr.size
        assert (tr.tag == ARPOP_REQUEST).all()
    # (seed 1's Welchia reaches its own /24 within the first minute)
    on = worm.run(seed=1, duration=60.0)
    off = worm.run(seed=1, duration=60.0, host_arp_tries=0)
    n = on.counters["neigh"]["arp_rcv_request"]
    assert n > 0 and off.counters["neigh"]["arp_rcv_request"] == 0
    row = "ip_route_input (ARP requests, uncached)"
    assert on.profile[row] > 0 and off.profile.get(row, 0.0) == 0.0
    three = worm.run(seed=1, duration=60.0, host_arp_tries=3)
    assert three.counters["neigh"]["arp_rcv_request"] > n
