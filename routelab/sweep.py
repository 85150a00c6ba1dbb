"""Parameter sweeps: every combination of a knob grid, several seeds, any executor.

``sweep("worm", {"worm_hosts": [0, 1, 2, 3], "cpu": ["k6-200", "duron-900"]}, seeds=3)``
runs the scenario once per grid point and seed and returns a :class:`SweepTable`,
a tidy table with one row per run: the grid's knobs, the seed, every key of the
run's ``summary()`` and an ``error`` column (``None`` for a run that worked).

Where the runs go
-----------------
Any :class:`concurrent.futures.Executor` runs them: by default a process pool
sized to the machine (``os.cpu_count()`` workers, no more than there are runs);
a Dask cluster through ``dask.distributed.Client(...).get_executor()`` (every
worker needs routelab installed, at the same version); ``executor="serial"``
runs them one after another in this process (what happens in the browser, where
Pyodide has no processes).

Why the table does not depend on the executor
---------------------------------------------
A run is a pure function of (scenario, knobs, seed): every scenario draws its
random numbers from ``numpy.random.default_rng(seed)`` and holds no state
between runs.  The runs are submitted in grid order, each result is put back at
its own row, whatever order the workers finish in, and the summary keys are the
union of the successful runs' keys in row order.  Compiled and pure-Python
workers give bit-identical results (``benchmarks/fingerprint.py``), so a mixed
cluster is fine too.

A run that fails (an exception in the model, a worker that died) becomes a row
with its knobs, its seed and ``error`` = the exception's type and message; the
other rows are kept.  :attr:`SweepTable.failures` lists them.

Nothing here is kernel behaviour; it is the experiment harness around the model.
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import io
import itertools
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import KnobError

__all__ = ["sweep", "SweepTable", "SerialExecutor", "parse_grid_arg", "run_point"]

SEED_COLUMN = "seed"
ERROR_COLUMN = "error"
MAX_RUNS = 100_000        # a grid this large is a typo (a student's 2 GB server)


# --------------------------------------------------------------------------- one run
def _plain(value: Any) -> Any:
    """A summary value as a plain Python number/str (numpy scalars unwrapped)."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def run_point(scenario: str, knobs: Mapping[str, Any], seed: int) -> dict:
    """Run ``scenario`` once; ``{"summary": {...}}`` or ``{"error": "Type: message"}``.

    Module-level (picklable) so that process pools and Dask workers can call it.
    Exceptions are caught here, on the worker, so the message survives
    whatever the executor does with exceptions.
    """
    try:
        from .scenarios import get

        res = get(scenario).run(seed=int(seed), **dict(knobs))
        return {"summary": {str(k): _plain(v) for k, v in res.summary().items()}}
    except Exception as exc:   # reported per point, never lost
        return {"error": f"{type(exc).__name__}: {exc}"}


# --------------------------------------------------------------------------- executors
class SerialExecutor(cf.Executor):
    """Runs each submitted call at once, in this process (Pyodide; debugging)."""

    def submit(self, fn, /, *args, **kwargs):
        fut: cf.Future = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:   # handed to the caller via the future
            fut.set_exception(exc)
        return fut


def _default_executor(nruns: int) -> cf.Executor:
    """A process pool sized to the machine, or serial where there are no processes."""
    if sys.platform == "emscripten" or nruns <= 1:
        return SerialExecutor()
    import multiprocessing

    workers = max(1, min(os.cpu_count() or 1, nruns))
    # spawn: the same on Linux, macOS and Windows, and safe inside a Jupyter
    # kernel, whose threads a fork would copy mid-flight
    return cf.ProcessPoolExecutor(max_workers=workers,
                                  mp_context=multiprocessing.get_context("spawn"))


# --------------------------------------------------------------------------- progress
def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class _Progress:
    """tqdm on a terminal (silent when stderr is not one), an ipywidgets bar in a notebook,
    or a callable ``progress(done, total)``."""

    def __init__(self, progress, total: int, label: str) -> None:
        self.total, self.done = total, 0
        self._call = progress if callable(progress) else None
        self._bar = self._widget = self._text = None
        if self._call is not None or not progress:
            return
        if _in_notebook():
            try:
                import ipywidgets as W
                from IPython.display import display
            except ImportError:
                return
            self._widget = W.IntProgress(value=0, min=0, max=total, description=label,
                                         bar_style="info", layout=W.Layout(width="420px"))
            self._text = W.HTML(f"0 / {total}")
            display(W.HBox([self._widget, self._text]))
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, desc=label, unit="run", disable=None, file=sys.stderr)

    def step(self, failed: bool) -> None:
        self.done += 1
        if self._call is not None:
            self._call(self.done, self.total)
        elif self._bar is not None:
            self._bar.update(1)
        elif self._widget is not None:
            self._widget.value = self.done
            if failed:
                self._widget.bar_style = "warning"
            self._text.value = f"{self.done} / {self.total}"

    def close(self, nfailed: int) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self._widget is not None:
            self._widget.bar_style = "warning" if nfailed else "success"
            self._text.value = f"{self.done} runs" + (f", {nfailed} failed" if nfailed else "")


# --------------------------------------------------------------------------- the table
def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class SweepTable:
    """The result of :func:`sweep`: one row per run (knobs, seed, summary keys, error).

    ``rows`` are dicts in grid order (the first grid knob varies slowest, then
    the seeds); ``columns`` are the grid knobs, ``seed``, the summary keys and
    ``error``.  Export with :meth:`to_csv`, :meth:`to_json`, :meth:`to_pandas`;
    :meth:`from_json` reads an export back (precomputed sweeps).
    """

    def __init__(self, scenario: str, grid: Mapping[str, Sequence], seeds: Sequence[int],
                 fixed: Mapping[str, Any], rows: list[dict], columns: list[str]) -> None:
        self.scenario = scenario
        self.grid = {k: list(v) for k, v in grid.items()}
        self.seeds = [int(s) for s in seeds]
        self.fixed = dict(fixed)
        self.rows = rows
        self.columns = columns

    # -- views
    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SweepTable) and self.to_json() == other.to_json()

    __hash__ = None   # mutable rows

    @property
    def knobs(self) -> list[str]:
        """The grid's knob names, in grid order."""
        return list(self.grid)

    @property
    def summary_keys(self) -> list[str]:
        return [c for c in self.columns
                if c not in self.grid and c not in (SEED_COLUMN, ERROR_COLUMN)]

    @property
    def failures(self) -> list[dict]:
        """The failed runs: ``{knobs..., "seed", "error"}`` each."""
        return [{**{k: r[k] for k in self.grid}, SEED_COLUMN: r[SEED_COLUMN],
                 ERROR_COLUMN: r[ERROR_COLUMN]} for r in self.rows if r[ERROR_COLUMN]]

    def column(self, name: str) -> list:
        """The values of one column, in row order."""
        if name not in self.columns:
            raise KnobError("column", name, "one of " + ", ".join(self.columns))
        return [r.get(name) for r in self.rows]

    def mean_over_seeds(self, value: str) -> dict[tuple, float]:
        """``{grid point (tuple of knob values): mean of value over its successful seeds}``;
        a point where every seed failed maps to NaN."""
        self.column(value)
        acc: dict[tuple, list[float]] = {}
        for r in self.rows:
            key = tuple(r[k] for k in self.grid)
            acc.setdefault(key, [])
            v = r.get(value)
            if r[ERROR_COLUMN] is None and v is not None:
                acc[key].append(float(v))
        return {k: (sum(v) / len(v) if v else math.nan) for k, v in acc.items()}

    def pivot(self, value: str, x: str, y: str, **where: Any):
        """``(xs, ys, grid)``: the seed-mean of ``value`` with ``x`` across and ``y`` down.

        Other grid knobs must be pinned with ``where`` (``cpu="k6-200"``) unless
        they have a single value.  ``grid[i][j]`` is the value at ``ys[i]``, ``xs[j]``.
        """
        for name in (x, y, *where):
            if name not in self.grid:
                raise KnobError("pivot knob", name, "a grid knob: " + ", ".join(self.grid))
        free = [k for k in self.grid if k not in (x, y) and k not in where
                and len(self.grid[k]) > 1]
        if free:
            raise KnobError("pivot", free[0], f"pinned with {free[0]}=... (one of "
                            f"{self.grid[free[0]]}), as it has several values")
        means = self.mean_over_seeds(value)
        xs, ys = self.grid[x], self.grid[y]
        names = list(self.grid)
        out = []
        for yv in ys:
            line = []
            for xv in xs:
                want = {**{k: self.grid[k][0] for k in names}, **where, x: xv, y: yv}
                line.append(means.get(tuple(want[k] for k in names), math.nan))
            out.append(line)
        return list(xs), list(ys), out

    def __repr__(self) -> str:
        nf = len(self.failures)
        points = math.prod(len(v) for v in self.grid.values())
        ns = len(self.seeds)
        return (f"SweepTable({self.scenario!r}: {len(self.rows)} runs = {points} points x "
                f"{ns} seed{'s' if ns != 1 else ''}, {nf} failed)")

    # -- exports
    def to_records(self) -> list[dict]:
        """The rows as dicts with every column (missing summary keys as ``None``)."""
        return [{c: r.get(c) for c in self.columns} for r in self.rows]

    def to_pandas(self):
        """A ``pandas.DataFrame`` of :meth:`to_records` (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("SweepTable.to_pandas() needs pandas (pip install pandas); "
                              "to_csv() and to_json() need nothing") from exc
        return pd.DataFrame.from_records(self.to_records(), columns=self.columns)

    def to_csv(self, path: str | Path | None = None) -> str:
        """CSV text (a header, then one line per run); written to ``path`` if given."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        for r in self.to_records():
            w.writerow(["" if r[c] is None else r[c] for c in self.columns])
        text = buf.getvalue()
        if path is not None:
            Path(path).write_text(text)
        return text

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "grid": self.grid, "seeds": self.seeds,
                "fixed": self.fixed, "columns": self.columns,
                "rows": [{c: _json_value(v) for c, v in r.items()} for r in self.to_records()]}

    def to_json(self, path: str | Path | None = None, indent: int | None = None) -> str:
        """JSON text ``{scenario, grid, seeds, fixed, columns, rows}`` (NaN as null)."""
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            Path(path).write_text(text + "\n")
        return text

    @classmethod
    def from_dict(cls, data: Mapping) -> SweepTable:
        return cls(data["scenario"], data["grid"], data["seeds"], data.get("fixed", {}),
                   [dict(r) for r in data["rows"]], list(data["columns"]))

    @classmethod
    def from_json(cls, source: str | Path) -> SweepTable:
        """Read :meth:`to_json`'s output (a path, or the JSON text itself)."""
        text = str(source)
        if not text.lstrip().startswith("{"):
            text = Path(source).read_text()
        return cls.from_dict(json.loads(text))


# --------------------------------------------------------------------------- the sweep
def _seed_list(seeds: int | Iterable[int]) -> list[int]:
    if isinstance(seeds, bool):
        raise KnobError("seeds", seeds, "a number of seeds >= 1 or a list of seeds")
    if isinstance(seeds, int):
        if seeds < 1:
            raise KnobError("seeds", seeds, "a number of seeds >= 1 (seeds 1..N) "
                            "or a list of non-negative integers")
        return list(range(1, seeds + 1))
    out = []
    for s in seeds:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise KnobError("seeds", s, "non-negative integers")
        out.append(int(s))
    if not out or len(set(out)) != len(out):
        raise KnobError("seeds", list(seeds) if not out else out,
                        "at least one seed, each once")
    return out


def _validated_grid(specs: Mapping, scenario: str, grid: Mapping[str, Any]) -> dict[str, list]:
    if not isinstance(grid, Mapping) or not grid:
        raise KnobError("grid", grid, "a dict of knob name -> list of values, at least one knob")
    out: dict[str, list] = {}
    for name, values in grid.items():
        if name == SEED_COLUMN:
            raise KnobError("grid knob", name, "a knob of the scenario (give seeds with seeds=)")
        if name not in specs:
            raise KnobError("grid knob", name,
                            f"a knob of scenario {scenario!r}: " + ", ".join(sorted(specs)))
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            values = [values]
        checked = [specs[name].validate(v) for v in values]
        if not checked:
            raise KnobError(name, [], f"at least one value ({specs[name].valid_text()})")
        if len(set(map(repr, checked))) != len(checked):
            raise KnobError(name, checked, "each value once")
        out[name] = checked
    return out


def sweep(scenario: str, grid: Mapping[str, Sequence], seeds: int | Iterable[int] = 1,
          executor: cf.Executor | str | None = None, progress: bool | Callable = True,
          **fixed: Any) -> SweepTable:
    """Run ``scenario`` at every point of ``grid`` with every seed; one row per run.

    Parameters
    ----------
    scenario : str
        A scenario name (``routelab.scenarios.SCENARIOS``), e.g. ``"worm"``.
    grid : dict
        Knob name -> values, e.g. ``{"worm_hosts": [0, 1, 2, 3], "cpu": ["k6-200"]}``.
        Every value is validated first: a bad knob or value raises
        :class:`~routelab.errors.KnobError` naming it and the valid range, before
        anything runs.
    seeds : int or list of int
        ``N`` means seeds 1..N (the CLI's default seed is 1); or the seeds themselves.
    executor : concurrent.futures.Executor, "serial" or None
        Where the runs go; ``None``: a process pool of ``os.cpu_count()`` workers,
        shut down afterwards.  An executor you pass is left running.
    progress : bool or callable
        True: a tqdm bar on a terminal, an ipywidgets bar in a notebook; a callable
        is called as ``progress(done, total)`` after each run.
    **fixed
        Other knobs, the same for every run (e.g. ``duration=5``).

    Returns
    -------
    SweepTable
        Identical for the same arguments, whatever the executor and the order
        in which its workers finish.
    """
    from .scenarios import SCENARIOS, get

    name = getattr(scenario, "NAME", scenario)
    if name not in SCENARIOS:
        raise KnobError("scenario", name, "one of " + ", ".join(SCENARIOS))
    specs = get(name).KNOBS
    checked = _validated_grid(specs, name, grid)
    seed_list = _seed_list(seeds)
    for k, v in fixed.items():
        if k in checked:
            raise KnobError(k, v, "either a grid knob or a fixed knob, not both")
        if k not in specs:
            raise KnobError(k, v, f"a knob of scenario {name!r}: " + ", ".join(sorted(specs)))
        fixed[k] = specs[k].validate(v)

    points = [dict(zip(checked, combo, strict=True))
              for combo in itertools.product(*checked.values())]
    runs = [(p, s) for p in points for s in seed_list]
    if len(runs) > MAX_RUNS:
        raise KnobError("grid size", len(runs), f"at most {MAX_RUNS:,} runs (points x seeds)")

    own = executor is None or executor == "serial"
    if executor == "serial":
        executor = SerialExecutor()
    elif executor is None:
        executor = _default_executor(len(runs))
    elif not isinstance(executor, cf.Executor) and not hasattr(executor, "submit"):
        raise KnobError("executor", executor, "a concurrent.futures.Executor, 'serial' or None")

    bar = _Progress(progress, len(runs), f"sweep {name}")
    outcomes: list[dict | None] = [None] * len(runs)
    try:
        futures = {executor.submit(run_point, name, {**fixed, **p}, s): i
                   for i, (p, s) in enumerate(runs)}
        for fut in cf.as_completed(futures):
            i = futures[fut]
            try:
                outcomes[i] = fut.result()
            except Exception as exc:   # a dead worker, a lost task
                outcomes[i] = {"error": f"{type(exc).__name__}: {exc}"}
            bar.step("error" in outcomes[i])
    finally:
        if own:
            executor.shutdown(wait=True, cancel_futures=True)

    keys: dict[str, None] = {}
    for out in outcomes:
        for k in out.get("summary", {}):
            keys.setdefault(k, None)
    columns = [*checked, SEED_COLUMN, *[k for k in keys if k not in checked
                                         and k not in (SEED_COLUMN, ERROR_COLUMN)], ERROR_COLUMN]
    rows = []
    for (p, s), out in zip(runs, outcomes, strict=True):
        summary = out.get("summary", {})
        row = {**p, SEED_COLUMN: s}
        row.update({k: summary.get(k) for k in columns[len(checked) + 1:-1]})
        row[ERROR_COLUMN] = out.get("error")
        rows.append(row)
    table = SweepTable(name, checked, seed_list, fixed, rows, columns)
    bar.close(len(table.failures))
    return table


def parse_grid_arg(text: str) -> tuple[str, list[str]]:
    """``"worm_hosts=0,1,2"`` -> ``("worm_hosts", ["0", "1", "2"])`` (CLI ``--grid``).

    ``a:b`` or ``a:b:step`` in place of the list gives an integer range, ends
    included (``worm_hosts=0:30:10`` -> 0, 10, 20, 30).
    """
    name, sep, values = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name or not values.strip():
        raise KnobError("--grid", text, "KNOB=V1,V2,... (e.g. worm_hosts=0,1,2,3)")
    parts = [v.strip() for v in values.split(",")]
    if len(parts) == 1 and parts[0].count(":") in (1, 2):
        try:
            nums = [int(x) for x in parts[0].split(":")]
        except ValueError:
            nums = None
        if nums is not None:
            lo, hi, step = (*nums, 1) if len(nums) == 2 else nums
            if step <= 0 or hi < lo:
                raise KnobError("--grid", text, "LO:HI[:STEP] with LO <= HI and STEP > 0")
            return name, [str(v) for v in range(lo, hi + 1, step)]
    if any(not p for p in parts):
        raise KnobError("--grid", text, "comma-separated values, none empty")
    return name, parts
