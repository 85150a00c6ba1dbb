"""Notebook 02 helpers (routelab.notebook.story2), headless and on short runs."""

from __future__ import annotations

import numpy as np
import pytest

from routelab.notebook.explorers import EXPLORERS
from routelab.notebook.plots import PNG_SIGNATURE
from routelab.notebook.story2 import (
    REPORT,
    RcuFigure,
    compare_variants,
    grace_period_figure,
    model_vs_report,
    pending_figure,
    rcu_explorer,
    rcu_readout,
    reported_netstat_i,
    reported_rt_cache_stat,
    variants_table,
)
from routelab.procfs import rt_cache_stat


@pytest.fixture(scope="module")
def variants():
    return compare_variants(("2.6.0", "2.6.0-rcu-bh"), duration=0.3, seed=1)


def test_reported_rt_cache_stat_has_the_kernel_layout():
    rows = reported_rt_cache_stat().splitlines()
    assert len(rows) == 2                       # one line per CPU
    fields = rows[0].split()
    assert len(fields) == 17                    # 2.4.22+/2.6 field count
    assert int(fields[0], 16) == REPORT["entries"]
    assert int(fields[14], 16) == REPORT["gc_dst_overflow"]     # third-last column
    assert "????????" in fields                 # what the report does not give


def test_reported_netstat_i_lists_four_ports():
    text = reported_netstat_i()
    assert [ln.split()[0] for ln in text.splitlines()[1:]] == ["eth0", "eth1", "eth2", "eth3"]
    assert "8.8M" in text and "4.6M" in text


def test_model_rows_line_up_with_the_kernel_format(variants):
    # the model's own rt_cache_stat has the same shape as the rebuilt report
    res = variants["2.6.0"]
    model = rt_cache_stat(res).splitlines()
    assert len(model) == 2 and len(model[0].split()) == 17
    table = model_vs_report(res)
    assert "gc_dst_overflow per CPU" in table and "report covers" in table


def test_variants_table_and_figures(variants):
    text = variants_table(variants)
    assert "2.6.0-rcu-bh" in text and "overflows" in text
    fig, alt = grace_period_figure(variants)
    assert "grace-period" in fig.axes[0].get_xlabel() and "call_rcu_bh" in alt
    fig, alt = pending_figure(variants)
    assert "max_size" in alt


def test_bh_grace_periods_are_shorter_than_vanilla(variants):
    v = np.median(variants["2.6.0"].extra["grace_periods_s"])
    b = np.median(variants["2.6.0-rcu-bh"].extra["grace_periods_s"])
    assert b < v


def test_rcu_figure_and_readout(variants):
    res = variants["2.6.0"]
    f = RcuFigure(duration=res.duration)
    f.update(res)
    assert f.render_png(50).startswith(PNG_SIGNATURE)
    assert "grace periods" in f.alt
    ends = res.extra["grace_period_ends_s"]
    assert ends.size == res.extra["grace_periods_s"].size
    assert "kpps" in rcu_readout(res)


def test_explorer_registered_and_updates():
    assert EXPLORERS["02-rcu-softirq-latency"] is rcu_explorer
    ex = rcu_explorer(duration=0.1)
    assert ex.last_error is None
    ex.update(kernel="2.6.0-rcu-bh")
    assert ex.last_error is None and "2.6.0-rcu-bh" in ex.readout_text
    ex.update(flow_len="long")
    assert ex.last_error is not None and "flow_len" in ex.last_error


def test_stalls_figure_lines_up_with_the_rcu_figure():
    from routelab.notebook.story2 import stall_overlap, stalls_figure
    from routelab.scenarios import rcu

    res = rcu.run(seed=1, duration=0.6, flow_len=4)
    fig, alt = stalls_figure({"run": res})
    top = RcuFigure(duration=res.duration)
    top.update(res)
    a, b = fig.axes[0].get_position(), top.ax_e.get_position()
    assert (a.x0, a.x1) == pytest.approx((b.x0, b.x1))
    assert fig.get_size_inches()[0] == pytest.approx(top.fig.get_size_inches()[0])
    assert fig.axes[0].get_xlim() == top.ax_e.get_xlim()
    assert "CPU 0" in alt
    ov = stall_overlap(res, stall_s=0.05, gp_s=0.05)
    assert 0 <= ov["meet_gp"] <= ov["stalls"] and 0 <= ov["gp_share"] <= 1


def test_runqueue_figure_has_alt_text():
    from routelab.notebook.story2 import runqueue_figure

    fig, alt = runqueue_figure()
    assert "expired array" in alt and "swap" in alt
    assert fig.get_size_inches()[0] <= 8


def test_explorer_default_shows_overflows_and_a_whole_title():
    ex = rcu_explorer()
    assert ex.values["duration"] == 0.6 and ex.values["flow_len"] == 8
    assert "dst overflows 0 " not in ex.readout_text
    ex.update(max_size=262_144, sleepers=4)
    fig = ex.figure
    title = fig._suptitle
    box = title.get_window_extent(fig.canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width     # not clipped at either end
