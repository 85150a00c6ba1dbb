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
    """Else a parallel run cannot put the longest first (see docs/development.md).

    Every non-empty code cell must carry its timestamps; a notebook that really
    takes longer than ``UNKNOWN_RUN_S`` (notebook 02 on a loaded machine) is fine.
    """
    for path in sorted((Path(__file__).parent.parent / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        untimed = [i for i, c in enumerate(cells)
                   if c.get("cell_type") == "code" and "".join(c.get("source", "")).strip()
                   and not {"iopub.execute_input", "shell.execute_reply"}
                   <= set(c.get("metadata", {}).get("execution", {}))]
        assert not untimed, f"{path.name}: no timings in cells {untimed}"
        assert notebook_run_seconds(path) > 0


def test_schedule_order_heaviest_unit_first_and_units_stay_together():
    units = ["t1", "nb-a", "nb-a", "t2", "nb-b", "nb-b", "nb-b", "t3", "h-a", "h-a"]
    weight = {"t1": 0, "t2": 0, "t3": 0, "nb-a": 10.0, "nb-b": 100.0, "h-a": 12.0}
    order = schedule_order(units, weight)
    assert [units[i] for i in order] == ["nb-b"] * 3 + ["h-a"] * 2 + ["nb-a"] * 2 + \
        ["t1", "t2", "t3"]
    assert order[:3] == [4, 5, 6] and order[5:7] == [1, 2]     # cells keep their order
    assert sorted(order) == list(range(len(units)))


def test_schedule_order_puts_nbval_cells_before_the_hand_out_tests_of_their_notebook():
    units = ["notebook-a", "notebook-a", "t", "notebook-a", "notebook-a"]   # hand-out first
    phase = [1, 1, 0, 0, 0]                   # items 3, 4: nbval cells
    order = schedule_order(units, {"notebook-a": 50.0, "t": 0.0}, phase)
    assert order == [3, 4, 0, 1, 2]


# -- the answer keys checked in nbval's kernel (tests/nbval_answer_keys.py) ----------------
STEM = "00-packet-journey"          # a notebook of answers.py: question busier-router
CHECK_DEF = ("def check(qid, answer, **facts):\n"
             "    print('write your prediction first' if answer is None\n"
             "          else '✓ right' if answer == 0.41 else '✗ wrong')")


def _tiny_notebook(check_src='check("busier-router", rtt_prediction_ms)', extra=None):
    import nbformat
    cells = [nbformat.v4.new_code_cell(CHECK_DEF, execution_count=1),
             nbformat.v4.new_code_cell("rtt_prediction_ms = None   # <- your prediction",
                                       execution_count=2),
             nbformat.v4.new_code_cell("x = 2\nprint(x)", execution_count=3,
                                       outputs=[nbformat.v4.new_output("stream", text="2\n")]),
             nbformat.v4.new_code_cell(check_src, execution_count=4, outputs=[
                 nbformat.v4.new_output("stream", text="write your prediction first\n")])]
    cells[1].metadata["tags"] = ["solution"]
    cells[3].metadata["tags"] = ["check"]
    if extra:
        cells.append(nbformat.v4.new_code_cell(extra))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def test_plan_shares_nbval_run_only_when_the_answer_key_run_would_be_the_same():
    import nbval_answer_keys as nak
    key = {"busier-router": "rtt_prediction_ms = 0.41"}
    steps = nak.plan(_tiny_notebook(), STEM, key)
    assert list(steps.values()) == [nak.Step("busier-router", key["busier-router"],
                                             "rtt_prediction_ms = None   # <- your prediction")]
    assert "constant" in nak.plan(_tiny_notebook(), STEM,
                                  {"busier-router": "rtt_prediction_ms = res.summary()"})
    assert "also used" in nak.plan(_tiny_notebook(extra="print(rtt_prediction_ms)"), STEM, key)
    assert "check cells" in nak.plan(
        _tiny_notebook('check("busier-router", rtt_prediction_ms); y = 1'), STEM, key)


def test_the_committed_notebooks_share_nbval_run_with_their_answer_keys():
    """Else the answer-key test executes the notebook again (slower CI, same checks)."""
    import nbformat
    import nbval_answer_keys as nak
    for path in sorted((Path(__file__).parent.parent / "notebooks").glob("[0-9][0-9]-*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        key = nak.student.parse_answer_key(nak.student.answer_key(nb, path.stem))
        assert isinstance(nak.plan(nb, path.stem, key), dict), nak.plan(nb, path.stem, key)


@pytest.mark.timeout(300)
def test_nbval_run_records_each_answer_keys_check_and_restores_the_blank(tmp_path):
    """A nested pytest --nbval: the key's check is recorded, and nbval still passes after it."""
    import subprocess
    import sys

    import nbformat
    nbformat.write(_tiny_notebook(), tmp_path / f"{STEM}.ipynb")
    tests_dir = Path(__file__).parent
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tests_dir)!r})\nimport nbval_answer_keys\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(nbval_answer_keys.AnswerKeysInNbval(), 'ak')\n")
    (tmp_path / "test_probe.py").write_text(
        "import json, nbval_answer_keys as nak\n"
        "def test_probe():\n"
        "    (rec,) = nak.RECORDS.values()\n"
        "    print('RECORD', json.dumps([rec.complete, rec.passed, rec.outputs]))\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--nbval",
         "--nbval-current-env", "-s", "-q", f"{STEM}.ipynb", "test_probe.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    line = next(ln for ln in proc.stdout.splitlines() if "RECORD" in ln)
    complete, passed, outputs = json.loads(line.split("RECORD", 1)[1])
    assert complete and passed == 4
    assert outputs == {"busier-router": "✓ right\n"}


def test_scheduling_units_keep_a_notebook_with_its_hand_out_tests_and_modules_together():
    from conftest import scheduling_unit
    nb = "notebook-02-rcu-softirq-latency"
    assert scheduling_unit("notebooks/02-rcu-softirq-latency.ipynb::Cell 7") == nb
    assert scheduling_unit("tests/notebook/test_handout.py::test_answer_key_passes_every_check"
                           "[02-rcu-softirq-latency]") == nb
    assert scheduling_unit("tests/notebook/test_handout.py::test_student_copy_runs_up_to_its_"
                           "first_stub[02-rcu-softirq-latency]") == nb
    browser = ("tests/browser/test_notebooks_browser.py::"
               "test_notebook_runs_and_explorers_respond[01]")
    assert scheduling_unit(browser) == browser
    helpers = "tests/notebook/test_notebook_helpers.py"
    assert scheduling_unit(f"{helpers}::test_every_control_changes_readout_and_figure[change5]") \
        == helpers
