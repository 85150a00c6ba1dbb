"""The precomputed sweeps of notebooks 01/02 (routelab/data/sweep_story*.json) and the heatmap.

A precomputed table must still be what the model gives: a few of its rows are
run again here.  If a model change moves them, re-run
``python benchmarks/sweep_story1.py --save`` (and ``_story2.py``).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from routelab.notebook import sweeps
from routelab.notebook.plots import PNG_SIGNATURE, png_bytes
from routelab.scenarios import get

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _script(name):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    import sys

    sys.path.insert(0, str(BENCH))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(BENCH))
    return mod


@pytest.mark.parametrize("story", [1, 2])
def test_precomputed_table_is_the_scripts_grid_and_complete(story):
    t = sweeps.load(story)
    script = _script(f"sweep_story{story}")
    assert t.grid == {k: [get(t.scenario).KNOBS[k].validate(v) for v in vals]
                      for k, vals in script.GRID.items()}
    assert t.fixed == script.FIXED and t.seeds == list(range(1, script.SEEDS + 1))
    n = math.prod(len(v) for v in t.grid.values()) * len(t.seeds)
    assert len(t) == n and not t.failures
    assert sweeps.made(story)["by"] == f"benchmarks/sweep_story{story}.py"


def _flat(d: dict) -> dict:
    """pytest.approx takes no nested values: a per-CPU list becomes one key per CPU."""
    out = {}
    for k, v in d.items():
        if isinstance(v, (list, tuple)):
            out.update({f"{k}[{i}]": x for i, x in enumerate(v)})
        else:
            out[k] = v
    return out


@pytest.mark.parametrize("story,point", [
    (1, {"outside_welchia": 8, "kernel": "2.4.24"}),
    (2, {"pps_per_port": 200_000.0, "kernel": "2.6.0-rcu-bh"})])
def test_precomputed_rows_still_match_the_model(story, point):
    t = sweeps.load(story)
    row = next(r for r in t.rows if all(r[k] == v for k, v in point.items()) and r["seed"] == 1)
    s = get(t.scenario).run(seed=1, **t.fixed, **point).summary()
    assert _flat({k: row[k] for k in s}) == pytest.approx(_flat(dict(s)), rel=1e-12, nan_ok=True), \
        f"re-run benchmarks/sweep_story{story}.py --save: the model moved"


def test_the_cliffs_the_notebook_sections_describe():
    c1 = sweeps.cliff(sweeps.load(1), "ping_rtt_ms_p50", "outside_welchia", "kernel", 10)
    assert c1["2.4.24-nocache"] is None          # no cache, no cliff
    assert c1["2.4.24"] is not None                 # 2.4's cache falls over ...
    assert c1["2.0"] is None or c1["2.0"] > c1["2.4.24"]   # ... later or never on 2.0
    c2 = sweeps.cliff(sweeps.load(2), "rcu_grace_ms_p95", "pps_per_port", "kernel", 20)
    assert c2["2.6.0-rcu-bh"] is None and c2["2.6.0"] is not None
    # notebook 01 reads the loss map too: the no-cache patch loses pings long before
    # 2.4.24's replies slow down, and 2.0 goes bad last
    loss = sweeps.cliff(sweeps.load(1), "ping_loss_pct", "outside_welchia", "kernel", 5)
    assert loss["2.4.24-nocache"] is not None and loss["2.4.24-nocache"] < c1["2.4.24"]
    # notebook 02: the CPUs saturate at the same rate whatever the kernel's RCU
    busy = sweeps.cliff(sweeps.load(2), "cpu_busy_pct", "pps_per_port", "kernel", 90)
    assert len(set(busy.values())) == 1 and None not in busy.values()


def test_cliff_questions_are_answered_from_the_stored_tables():
    from routelab.notebook import answers

    q1 = answers._cliff_kernel(sweeps.load(1))
    assert q1["expected"] == "2.0" and "2.4.24-nocache: from" in q1["said"]
    t2 = sweeps.load(2)
    assert answers._short_grace(t2)["expected"] == "both patches"
    d = answers._drop_move(t2)
    assert d["expected"] == "no, the same rate" and d["missed"] > 100 * d["overflows"]


def test_heatmap_is_labelled_and_described():
    t = sweeps.load(1)
    fig, alt = sweeps.heatmap(t, "ping_rtt_ms_p50", "outside_welchia", "kernel",
                              threshold=10, log=True)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "outside welchia [hosts]" and ax.get_ylabel() == "kernel"
    assert [tk.get_text() for tk in ax.get_yticklabels()] == t.grid["kernel"]
    assert fig.axes[1].get_ylabel() == "median ping [ms]"
    assert ax.images[0].get_cmap().name == "cividis"
    assert len(ax.texts) == 40                    # every cell carries its number
    assert "2.4.24-nocache: not up to 24" in alt and "logarithmic" in alt
    assert png_bytes(fig).startswith(PNG_SIGNATURE)
    t2 = sweeps.load(2)
    _, alt2 = sweeps.heatmap(t2, "rcu_grace_ms_p95", "pps_per_port", "kernel", threshold=20)
    assert "100k to 300k" in alt2 and "2.6.0-rcu-bh: not up to 300k" in alt2
