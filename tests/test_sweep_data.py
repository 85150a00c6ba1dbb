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


@pytest.mark.parametrize("story,point", [
    (1, {"outside_welchia": 8, "kernel": "2.4.24"}),
    (2, {"pps_per_port": 200_000.0, "kernel": "2.6.0-rcu-bh"})])
def test_precomputed_rows_still_match_the_model(story, point):
    t = sweeps.load(story)
    row = next(r for r in t.rows if all(r[k] == v for k, v in point.items()) and r["seed"] == 1)
    s = get(t.scenario).run(seed=1, **t.fixed, **point).summary()
    # (per-CPU figures such as story 2's passes_irq_exit are lists: compared as they are)
    lists = {k for k, v in s.items() if isinstance(v, (list, tuple))}
    assert {k: list(row[k]) for k in lists} == {k: list(s[k]) for k in lists}, \
        f"re-run benchmarks/sweep_story{story}.py --save: the model moved"
    assert {k: row[k] for k in s if k not in lists} == \
        pytest.approx({k: v for k, v in s.items() if k not in lists}, rel=1e-12, nan_ok=True), \
        f"re-run benchmarks/sweep_story{story}.py --save: the model moved"


def test_the_cliffs_the_notebook_sections_describe():
    c1 = sweeps.cliff(sweeps.load(1), "ping_rtt_ms_p50", "outside_welchia", "kernel", 10)
    assert c1["2.4.24-nocache"] is None          # no cache, no cliff
    assert c1["2.4.24"] is not None                 # 2.4's cache falls over ...
    assert c1["2.0"] is None or c1["2.0"] > c1["2.4.24"]   # ... later or never on 2.0
    c2 = sweeps.cliff(sweeps.load(2), "rcu_grace_ms_p95", "pps_per_port", "kernel", 20)
    assert c2["2.6.0-rcu-bh"] is None and c2["2.6.0"] is not None


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
