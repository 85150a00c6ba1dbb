"""Student copies and answer keys (scripts/student.py, ``make student``).

* every solution cell of every notebook becomes a stub in the student copy,
  and nothing else changes but the cleared outputs;
* each student copy runs without error up to its first stub, which raises
  the stub's ``NotImplementedError``;
* each notebook, with its solution cells filled from ``solutions/NN-*.py``,
  runs to the end and every check shows ✓.

The last two execute the notebooks (about the time of an nbval run).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from routelab.notebook.answers import for_notebook

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = Path(os.environ.get("ROUTELAB_NOTEBOOKS_DIR") or REPO / "notebooks").resolve()

_spec = importlib.util.spec_from_file_location("routelab_student", REPO / "scripts" / "student.py")
student = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(student)

NOTEBOOKS = student.course_notebooks(NOTEBOOKS_DIR)
pytestmark = pytest.mark.skipif(not NOTEBOOKS, reason=f"no NN-*.ipynb in {NOTEBOOKS_DIR}")
_ids = [p.stem for p in NOTEBOOKS]


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    """``student/`` and ``solutions/`` written by the script itself, into a temporary dir."""
    out = tmp_path_factory.mktemp("handout")
    assert student.main(["--notebooks", str(NOTEBOOKS_DIR), "--student", str(out / "student"),
                         "--solutions", str(out / "solutions")]) == 0
    return out


def _run(nb, path: Path) -> None:
    NotebookClient(nb, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()


def _text(cell) -> str:
    return "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "")
                   for o in cell.get("outputs", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_student_copy_stubs_every_solution_cell_and_nothing_else(path, handout):
    nb = nbformat.read(path, as_version=4)
    copy = nbformat.read(handout / "student" / path.name, as_version=4)
    stubs = dict(student.solution_cells(nb, path.stem))
    assert [q.qid for q in stubs.values()] == [q.qid for q in for_notebook(path.stem)]
    assert len(copy.cells) == len(nb.cells)
    for i, (orig, new) in enumerate(zip(nb.cells, copy.cells, strict=True)):
        if i in stubs:
            q = stubs[i]
            assert new.source == student.stub(q)
            assert "raise NotImplementedError(" in new.source and q.prompt in new.source
            for secret in (q.solution, q.hint, q.explanation):
                assert secret not in new.source
        else:
            assert new.source == orig.source, f"cell {i} changed"
        if new.cell_type == "code":
            assert new.outputs == [] and new.execution_count is None
    has_index = (NOTEBOOKS_DIR / "index.ipynb").exists()
    assert (handout / "student" / "index.ipynb").exists() == has_index


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_answer_key_has_one_cell_per_question(path, handout):
    key = student.parse_answer_key((handout / "solutions" / f"{path.stem}.py").read_text())
    qs = for_notebook(path.stem)
    assert list(key) == [q.qid for q in qs]
    assert all(key[q.qid] == q.solution.strip() for q in qs)


def test_a_solution_cell_must_leave_a_known_variable_blank():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("rtt_prediction_ms = 0.4")
    cell.metadata["tags"] = ["solution"]
    nb.cells = [cell]
    with pytest.raises(ValueError, match="must be one line"):
        student.solution_cells(nb, "00-packet-journey")
    cell.source = "no_such_answer = None   # <- your prediction"
    with pytest.raises(ValueError, match="not an answer variable"):
        student.solution_cells(nb, "00-packet-journey")
    cell.source = "# a comment\nrtt_prediction_ms = ...   # <- your prediction"
    assert [q.qid for _, q in student.solution_cells(nb, "00-packet-journey")] == ["busier-router"]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_student_copy_runs_up_to_its_first_stub(path, handout):
    copy_path = handout / "student" / path.name
    nb = nbformat.read(copy_path, as_version=4)
    first = min(student.solution_cells(nbformat.read(path, as_version=4), path.stem))[0]
    with pytest.raises(CellExecutionError) as ei:
        _run(nb, copy_path)
    assert ei.value.ename == "NotImplementedError", ei.value
    failed = [i for i, c in enumerate(nb.cells)
              if any(o.get("output_type") == "error" for o in c.get("outputs", []))]
    assert failed == [first], f"the first error is in cell {failed}, not the first stub {first}"
    assert "Write your answer here" in ei.value.evalue
    for i, c in enumerate(nb.cells[:first]):
        if c.cell_type == "code" and c.source.strip():
            assert c.execution_count is not None, f"cell {i} before the stub did not run"
            assert not any(o.get("name") == "stderr" for o in c.outputs), f"stderr in cell {i}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids)
def test_answer_key_passes_every_check(path, handout):
    key = student.parse_answer_key((handout / "solutions" / f"{path.stem}.py").read_text())
    nb = student.solved_copy(nbformat.read(path, as_version=4), path.stem, key)
    _run(nb, path)
    checks = [c for c in nb.cells if student.CHECK in student.tags(c)]
    assert len(checks) == len(for_notebook(path.stem))
    for c in checks:
        out = _text(c)
        assert out.startswith("✓"), f"{path.stem}: {c.source!r} says:\n{out}"
