"""routelab.sweep: same table on every executor, failures kept, CLI, exports.

The runs are kept short (worm, 0.5 simulated seconds: ~0.1 s each compiled)
so the whole module takes seconds on the 2-core CI machine.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

import routelab
from routelab.errors import KnobError
from routelab.sweep import SerialExecutor, SweepTable, parse_grid_arg, sweep

ROOT = Path(__file__).resolve().parents[1]
GRID = {"worm_hosts": [0, 1, 2, 3], "cpu": ["k6-200", "duron-900", "piii-1000"]}
SHORT = {"duration": 0.5}


@pytest.fixture(scope="module")
def pool_table():
    """The 4 x 3 grid x 2 seeds on the default executor (a process pool)."""
    return sweep("worm", GRID, seeds=2, progress=False, **SHORT)


def test_table_shape_and_order(pool_table):
    t = pool_table
    assert len(t) == 4 * 3 * 2 and not t.failures
    assert t.columns[:3] == ["worm_hosts", "cpu", "seed"] and t.columns[-1] == "error"
    # grid order: the first knob slowest, then the second, then the seeds
    assert [(r["worm_hosts"], r["cpu"], r["seed"]) for r in t.rows[:4]] == [
        (0, "k6-200", 1), (0, "k6-200", 2), (0, "duron-900", 1), (0, "duron-900", 2)]
    assert {"cpu_busy_pct", "ping_rtt_ms_p50", "offered_packets"} <= set(t.summary_keys)
    for r in t.rows:
        assert r["offered_packets"] == r["forwarded_packets"] + r["local_packets"] \
            + r["dropped_packets"]
    # the knobs reach the runs: more worms, more packets offered (same seed, same CPU)
    by = {(r["worm_hosts"], r["cpu"], r["seed"]): r for r in t.rows}
    assert by[(3, "k6-200", 1)]["offered_packets"] > by[(0, "k6-200", 1)]["offered_packets"]
    # a table row equals the scenario's own run with the same knobs and seed
    one = routelab.scenarios.get("worm").run(seed=2, worm_hosts=2, cpu="duron-900", **SHORT)
    row = by[(2, "duron-900", 2)]
    assert {k: row[k] for k in one.summary()} == pytest.approx(one.summary())


def test_same_table_on_a_two_worker_dask_cluster(pool_table):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=40) as cluster, \
            distributed.Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        table = sweep("worm", GRID, seeds=2, executor=client.get_executor(), progress=False,
                      **SHORT)
    assert table == pool_table
    assert table.to_json() == pool_table.to_json()


class _ReversedExecutor(cf.ThreadPoolExecutor):
    """Finishes the runs in about the reverse of the order they were submitted."""

    def __init__(self, n):
        super().__init__(max_workers=n)
        self.n, self.i, self.finished = n, 0, []

    def submit(self, fn, /, *args, **kwargs):
        delay = 0.02 * (self.n - self.i)
        self.i += 1
        index = self.i

        def late():
            time.sleep(delay)
            out = fn(*args, **kwargs)
            self.finished.append(index)
            return out
        return super().submit(late)


def test_order_of_completion_does_not_matter(pool_table):
    grid = {"worm_hosts": [0, 3], "cpu": ["k6-200", "duron-900"]}
    ex = _ReversedExecutor(8)
    with ex:
        rev = sweep("worm", grid, seeds=2, executor=ex, progress=False, **SHORT)
    assert ex.finished != sorted(ex.finished)       # really out of order
    serial = sweep("worm", grid, seeds=2, executor="serial", progress=False, **SHORT)
    assert rev == serial
    sub = [r for r in pool_table.rows if r["worm_hosts"] in (0, 3)
           and r["cpu"] in ("k6-200", "duron-900")]
    assert serial.rows == sub


def test_a_failed_point_is_reported_and_the_others_kept():
    # 2 M pps for 30 s is more than one run may offer: that point fails in the model
    t = sweep("ping", {"background_pps": [100, 2_000_000, 200]}, seeds=[4, 5],
              executor="serial", progress=False, duration=30)
    assert len(t) == 6
    assert [(f["background_pps"], f["seed"]) for f in t.failures] == [(2e6, 4), (2e6, 5)]
    assert all("offered packets" in f["error"] and "40,000,000" in f["error"]
               for f in t.failures)
    good = [r for r in t.rows if r["error"] is None]
    assert [r["background_pps"] for r in good] == [100, 100, 200, 200]
    assert all(r["offered_packets"] > 0 for r in good)
    bad = [r for r in t.rows if r["error"]]
    assert all(r["offered_packets"] is None for r in bad)
    assert math.isnan(t.mean_over_seeds("cpu_busy_pct")[(2e6,)])


class _DyingWorkerExecutor(SerialExecutor):
    """A worker that dies on the second run (the future raises, not the model)."""

    def __init__(self):
        self.n = 0

    def submit(self, fn, /, *args, **kwargs):
        self.n += 1
        if self.n == 2:
            fut = cf.Future()
            fut.set_exception(cf.process.BrokenProcessPool("worker 2 was killed"))
            return fut
        return super().submit(fn, *args, **kwargs)


def test_a_dead_worker_loses_only_its_run():
    t = sweep("worm", {"worm_hosts": [0, 1]}, seeds=2, executor=_DyingWorkerExecutor(),
              progress=False, **SHORT)
    assert [f["seed"] for f in t.failures] == [2] and t.failures[0]["worm_hosts"] == 0
    assert "BrokenProcessPool: worker 2 was killed" == t.failures[0]["error"]
    assert sum(r["error"] is None for r in t.rows) == 3


def test_bad_grid_knob_and_value_raise_one_clear_error():
    with pytest.raises(KnobError, match=r"worm_hosts=99 .*\[0, 30\]"):
        sweep("worm", {"worm_hosts": [0, 99]}, progress=False)
    with pytest.raises(KnobError, match=r"grid knob='wormhosts' .*worm_hosts"):
        sweep("worm", {"wormhosts": [0]}, progress=False)
    with pytest.raises(KnobError, match=r"cpu='pentium' .*'k6-200'"):
        sweep("worm", {"cpu": ["pentium"]}, progress=False)
    with pytest.raises(KnobError, match="seeds"):
        sweep("worm", {"worm_hosts": [0]}, seeds=0, progress=False)
    with pytest.raises(KnobError, match="at least one value"):
        sweep("worm", {"worm_hosts": []}, progress=False)
    with pytest.raises(KnobError, match="scenario"):
        sweep("nosuch", {"worm_hosts": [0]}, progress=False)


def test_exports_round_trip(tmp_path):
    t = sweep("worm", {"worm_hosts": [0, 2]}, seeds=[3], executor="serial",
              progress=False, **SHORT)
    back = SweepTable.from_json(t.to_json(tmp_path / "t.json"))
    assert back == t and SweepTable.from_json(tmp_path / "t.json") == t
    csv_text = t.to_csv(tmp_path / "t.csv")
    lines = csv_text.splitlines()
    assert lines[0].split(",") == t.columns and len(lines) == 3
    assert (tmp_path / "t.csv").read_text() == csv_text
    assert json.loads(t.to_json())["rows"][1]["worm_hosts"] == 2
    xs, ys, grid = sweep("worm", {"worm_hosts": [0, 2], "cpu": ["k6-200", "duron-900"]},
                         executor="serial", progress=False, **SHORT).pivot(
                             "cpu_busy_pct", x="worm_hosts", y="cpu")
    assert xs == [0, 2] and ys == ["k6-200", "duron-900"] and grid[0][0] > grid[1][0]


def test_to_pandas():
    t = sweep("worm", {"worm_hosts": [0]}, executor="serial", progress=False, **SHORT)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            t.to_pandas()
        return
    df = t.to_pandas()
    assert list(df.columns) == t.columns and len(df) == 1


def test_progress_callable_and_quiet_terminal(capsys):
    seen = []
    sweep("worm", {"worm_hosts": [0, 1]}, seeds=2, executor="serial",
          progress=lambda done, total: seen.append((done, total)), **SHORT)
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    # progress=True off a terminal (pytest captures stderr): tqdm stays silent
    sweep("worm", {"worm_hosts": [0]}, executor="serial", progress=True, **SHORT)
    assert capsys.readouterr().err == ""


def test_parse_grid_arg():
    assert parse_grid_arg("worm_hosts=0,1,2") == ("worm_hosts", ["0", "1", "2"])
    assert parse_grid_arg("worm-hosts=0:30:10") == ("worm_hosts", ["0", "10", "20", "30"])
    assert parse_grid_arg("cpu=k6-200") == ("cpu", ["k6-200"])
    for bad in ("worm_hosts", "=1", "worm_hosts=", "worm_hosts=1,,2", "worm_hosts=5:1"):
        with pytest.raises(KnobError, match="--grid"):
            parse_grid_arg(bad)


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "routelab", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_cli_json_matches_the_library():
    p = cli("sweep", "worm", "--grid", "worm_hosts=0,1", "--grid", "cpu=k6-200,duron-900",
            "--seeds", "2", "--duration", "0.5", "--workers", "2", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["scenario"] == "worm" and out["seeds"] == [1, 2]
    assert out["grid"] == {"worm_hosts": [0, 1], "cpu": ["k6-200", "duron-900"]}
    assert len(out["rows"]) == 8
    lib = sweep("worm", {"worm_hosts": [0, 1], "cpu": ["k6-200", "duron-900"]}, seeds=2,
                executor="serial", progress=False, **SHORT)
    assert SweepTable.from_dict(out) == lib


def test_cli_text_table_and_bad_grid():
    p = cli("sweep", "worm", "--grid", "worm_hosts=0,1", "--duration", "0.5",
            "--no-progress", "--keys", "cpu_busy_pct")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[1].split() == ["worm_hosts", "seed", "cpu_busy_pct"]
    assert len(p.stdout.splitlines()) == 4
    for args, words in ((["--grid", "worm_hosts=0,99"], ["worm_hosts=99", "[0, 30]"]),
                        (["--grid", "wormhosts=1"], ["wormhosts", "worm_hosts"]),
                        (["--grid", "cpu=k7"], ["cpu='k7'", "k6-200"]),
                        ([], ["--grid"])):
        p = cli("sweep", "worm", *args, "--duration", "0.5")
        assert p.returncode == 2, (args, p.stderr)
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
        assert all(w in err[0] for w in words), err[0]


def test_cli_failed_runs_exit_1_with_one_line_each():
    p = cli("sweep", "ping", "--grid", "background_pps=100,2000000", "--duration", "30",
            "--workers", "1", "--json")
    assert p.returncode == 1
    assert len(json.loads(p.stdout)["rows"]) == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("failed: background_pps=2000000.0, seed=1")


def test_default_pool_uses_spawn_and_the_machine_size(monkeypatch):
    import importlib

    sw = importlib.import_module("routelab.sweep")   # routelab.sweep is the function

    made = {}

    class Spy(cf.ProcessPoolExecutor):
        def __init__(self, max_workers, mp_context):
            made.update(workers=max_workers, method=mp_context.get_start_method())
            super().__init__(max_workers=max_workers, mp_context=mp_context)

    monkeypatch.setattr(sw.cf, "ProcessPoolExecutor", Spy)
    monkeypatch.setattr(sw.os, "cpu_count", lambda: 3)
    sweep("worm", {"worm_hosts": [0, 1]}, seeds=2, progress=False, **SHORT)
    assert made == {"workers": 3, "method": "spawn"}


def test_cli_scheduler_runs_on_a_dask_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=40) as cluster:
        p = cli("sweep", "worm", "--grid", "worm_hosts=0,3", "--seeds", "2", "--duration",
                "0.5", "--scheduler", cluster.scheduler_address, "--json")
        with distributed.Client(cluster) as client:
            # the scheduler saw tasks of routelab.sweep.run_point: the runs went there
            seen = client.run_on_scheduler(
                lambda dask_scheduler: "run_point" in dask_scheduler.task_prefixes)
    assert p.returncode == 0, p.stderr
    assert seen
    lib = sweep("worm", {"worm_hosts": [0, 3]}, seeds=2, executor="serial", progress=False,
                **SHORT)
    assert SweepTable.from_dict(json.loads(p.stdout)) == lib


def test_notebook_progress_is_an_ipywidgets_bar(monkeypatch):
    import importlib

    import IPython.display

    sw = importlib.import_module("routelab.sweep")
    shown = []
    monkeypatch.setattr(sw, "_in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda w: shown.append(w))
    sweep("worm", {"worm_hosts": [0, 1]}, executor="serial", **SHORT)
    (box,) = shown
    bar, label = box.children
    assert type(bar).__name__ == "IntProgress" and bar.value == bar.max == 2
    assert bar.bar_style == "success" and label.value == "2 runs"
