"""The scheduling of a parallel test run (tests/conftest.py, scripts/test.sh)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import UNKNOWN_RUN_S, notebook_run_seconds, schedule_order


def _cell(source, start=None, end=None):
    meta = {}
    if start:
        meta["execution"] = {"iopub.execute_input": start, "shell.execute_reply": end}
    return {"cell_type": "code", "source": source, "metadata": meta, "outputs": []}


def test_notebook_run_seconds_sums_the_recorded_cell_timings(tmp_path):
    path = tmp_path / "01-a.ipynb"
    cells = [_cell("x = 1", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.500Z"),
             _cell("y = 2", "2026-01-01T00:00:02.000Z", "2026-01-01T00:01:02.000Z"),
             _cell("   "),                                     # empty: never timed
             {"cell_type": "markdown", "source": "# t", "metadata": {}}]
    path.write_text(json.dumps({"cells": cells}))
    assert notebook_run_seconds(path) == pytest.approx(61.5)
    new = tmp_path / "02-b.ipynb"                               # a cell without timings
    new.write_text(json.dumps({"cells": [*cells, _cell("z = 3")]}))
    assert notebook_run_seconds(new) == UNKNOWN_RUN_S
    assert notebook_run_seconds(tmp_path / "missing.ipynb") == UNKNOWN_RUN_S


def test_the_committed_notebooks_have_recorded_timings():
    """Else a parallel run cannot put the longest first (see docs/development.md)."""
    for path in sorted((Path(__file__).parent.parent / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        assert notebook_run_seconds(path) < UNKNOWN_RUN_S, f"{path.name}: no cell timings"


def test_schedule_order_heaviest_unit_first_and_units_stay_together():
    units = ["t1", "nb-a", "nb-a", "t2", "nb-b", "nb-b", "nb-b", "t3", "h-a", "h-a"]
    weight = {"t1": 0, "t2": 0, "t3": 0, "nb-a": 10.0, "nb-b": 100.0, "h-a": 12.0}
    order = schedule_order(units, weight)
    assert [units[i] for i in order] == ["nb-b"] * 3 + ["h-a"] * 2 + ["nb-a"] * 2 + \
        ["t1", "t2", "t3"]
    assert order[:3] == [4, 5, 6] and order[5:7] == [1, 2]     # cells keep their order
    assert sorted(order) == list(range(len(units)))
