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
