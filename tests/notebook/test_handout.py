"""Student copies and answer keys (scripts/student.py, ``make student``).

* every solution cell of every notebook becomes a stub in the student copy,
  and nothing else changes but the cleared outputs;
* each student copy runs without error up to its first stub, which raises
  the stub's ``NotImplementedError``;
* each notebook, with its solution cells filled from ``solutions/NN-*.py``,
  runs to the end and every check shows ✓.

The last two execute the notebooks, at most once each:

* When nbval has just run the same notebook in this pytest process (the
  whole of scripts/test.sh is one session), the answer keys were checked in
  nbval's kernel, right after each check cell (tests/nbval_answer_keys.py says
  when that is the same as running the answer-key copy); the answer-key test
  reads those results and the student copy runs only up to its stub.
* Otherwise one kernel per notebook (:func:`handout_run`) runs the student
  copy's cells up to its first stub, the stub, and then the answer-key copy
  from that cell on.  The two copies are the same notebook up to the first
  stub (the first test checks it), so this is the student copy's run and the
  answer key's run.

A notebook's nbval cells and its two tests here are one work unit of a
parallel run (``scheduling_unit`` in tests/conftest.py), so they run in the
same worker, nbval's cells first.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import nbval_answer_keys  # tests/: on sys.path, as for tests/conftest.py
import pytest
from conftest import notebook_group
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


def _client(nb, path: Path) -> NotebookClient:
    return NotebookClient(nb, timeout=900, kernel_name="python3",
                          resources={"metadata": {"path": str(path.parent)}})


def _run(nb, path: Path) -> None:
    _client(nb, path).execute()


@dataclass
class HandoutRun:
    """One notebook's student copy run to its first stub, and its answer key run to the end."""

    first: int                          # index of the first solution cell (the first stub)
    student: object                     # the student copy, executed up to and with the stub
    student_error: CellExecutionError | None
    solved: object                      # the notebook with the answer key, executed (or None)
    solved_error: Exception | None
    shared: bool = field(default=False)  # both ran in one kernel


_RUNS: dict[Path, HandoutRun] = {}


def handout_run(path: Path, handout: Path, with_key: bool = True) -> HandoutRun:
    """Execute ``path``'s student copy and answer-key copy once, for both tests below.

    One kernel runs the student copy's cells up to and including its first stub
    (which must raise), then the answer-key copy's cells from that index to the
    end.  Before the first stub the two copies hold the same sources (checked
    here; else each runs in a kernel of its own), so the kernel state at the
    stub is the student's, and after it the answer key's; the stub changes no
    state, it only raises.  Each copy runs in its own directory, as on its own:
    the kernel starts in the student copy's and changes to the notebook's
    before the answer key's cells (a silent ``os.chdir``, no history).
    """
    key_path = path.resolve()
    if key_path in _RUNS and (_RUNS[key_path].solved is not None or not with_key):
        return _RUNS[key_path]
    copy_path = handout / "student" / path.name
    student_nb = nbformat.read(copy_path, as_version=4)
    original = nbformat.read(path, as_version=4)
    first = min(student.solution_cells(original, path.stem))[0]
    key = student.parse_answer_key((handout / "solutions" / f"{path.stem}.py").read_text())
    solved = student.solved_copy(original, path.stem, key)
    same_prefix = [c.source for c in student_nb.cells[:first]] == \
        [c.source for c in solved.cells[:first]]
    student_error = solved_error = None
    shared = False
    client = _client(solved, copy_path)
    if same_prefix:
        client.reset_execution_trackers()
        with client.setup_kernel():
            client.wait_for_reply(client.kc.kernel_info())
            for i, cell in enumerate(student_nb.cells[: first + 1]):
                try:
                    client.execute_cell(cell, i, execution_count=client.code_cells_executed + 1)
                except CellExecutionError as exc:
                    student_error = exc
                    break
            shared = (student_error is not None and student_error.ename == "NotImplementedError"
                      and _error_cells(student_nb) == [first])
            if shared and with_key:
                cd = f"import os as _o; _o.chdir({str(path.parent)!r}); del _o"
                reply = client.wait_for_reply(client.kc.execute(cd, silent=True,
                                                                store_history=False))
                assert reply["content"]["status"] == "ok", reply["content"]
                for i, cell in enumerate(solved.cells[:first]):
                    cell.outputs = student_nb.cells[i].get("outputs", [])
                    cell.execution_count = student_nb.cells[i].get("execution_count")
                try:
                    for i in range(first, len(solved.cells)):
                        client.execute_cell(solved.cells[i], i,
                                            execution_count=client.code_cells_executed + 1)
                except Exception as exc:  # noqa: BLE001 - reported by the answer-key test
                    solved_error = exc
    else:
        try:
            _run(student_nb, copy_path)
        except CellExecutionError as exc:
            student_error = exc
    if not shared and with_key:   # the student part went wrong (or differs): the key alone
        solved = student.solved_copy(original, path.stem, key)
        try:
            _run(solved, path)
        except Exception as exc:  # noqa: BLE001 - reported by the answer-key test
            solved_error = exc
    if not with_key:
        solved = None
    _RUNS[key_path] = HandoutRun(first, student_nb, student_error, solved, solved_error, shared)
    return _RUNS[key_path]


def _error_cells(nb) -> list[int]:
    return [i for i, c in enumerate(nb.cells)
            if any(o.get("output_type") == "error" for o in c.get("outputs", []))]


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


def _executes(f):
    """Marks of the two executing tests: one scheduling unit per notebook (shared kernel)."""
    f = pytest.mark.timeout(900)(f)
    return pytest.mark.executes_notebook(param="path")(f)


def _group(paths):
    return [pytest.param(p, id=p.stem, marks=pytest.mark.xdist_group(notebook_group(p)))
            for p in paths]


@_executes
@pytest.mark.parametrize("path", _group(NOTEBOOKS))
def test_student_copy_runs_up_to_its_first_stub(path, handout):
    # the answer key too, in the same kernel, unless nbval's run has answered it already
    run = handout_run(path, handout, with_key=nbval_answer_keys.complete_record(path) is None)
    nb, first = run.student, run.first
    assert first == min(student.solution_cells(nbformat.read(path, as_version=4), path.stem))[0]
    assert isinstance(run.student_error, CellExecutionError), \
        f"the student copy ran past its first stub (cell {first}) without an error"
    assert run.student_error.ename == "NotImplementedError", run.student_error
    failed = _error_cells(nb)
    assert failed == [first], f"the first error is in cell {failed}, not the first stub {first}"
    assert "Write your answer here" in run.student_error.evalue
    for i, c in enumerate(nb.cells[:first]):
        if c.cell_type == "code" and c.source.strip():
            assert c.execution_count is not None, f"cell {i} before the stub did not run"
            assert not any(o.get("name") == "stderr" for o in c.outputs), f"stderr in cell {i}"


@_executes
@pytest.mark.parametrize("path", _group(NOTEBOOKS))
def test_answer_key_passes_every_check(path, handout):
    key = student.parse_answer_key((handout / "solutions" / f"{path.stem}.py").read_text())
    qs = for_notebook(path.stem)
    rec = nbval_answer_keys.complete_record(path)
    if rec is not None:   # nbval ran this notebook in this process and checked the keys in it
        assert rec.key == key, "nbval's kernel checked another answer key than solutions/"
        assert sorted(rec.outputs) == sorted(q.qid for q in qs)
        for q in qs:
            out = rec.outputs[q.qid]
            assert out.startswith("✓"), f"{path.stem}: check of {q.qid} says:\n{out}"
        return
    run = handout_run(path, handout)
    if run.solved_error is not None:
        raise run.solved_error
    nb = run.solved
    checks = [c for c in nb.cells if student.CHECK in student.tags(c)]
    assert len(checks) == len(qs)
    for c in checks:
        out = _text(c)
        assert out.startswith("✓"), f"{path.stem}: {c.source!r} says:\n{out}"


def test_one_kernel_runs_the_student_copy_then_the_answer_key_each_in_its_own_dir(tmp_path):
    """handout_run: the stub raises, each copy sees its own directory, the key is checked."""
    stem = "00-packet-journey"
    nbdir, out = tmp_path / "nb", tmp_path / "out"
    nbdir.mkdir()
    cells = [nbformat.v4.new_code_cell("import os\nprint(os.getcwd())"),
             nbformat.v4.new_code_cell("rtt_prediction_ms = None   # <- your prediction"),
             nbformat.v4.new_code_cell("print(os.getcwd())"),
             nbformat.v4.new_code_cell("print('✓' if rtt_prediction_ms == 0.41 else '✗')")]
    cells[1].metadata["tags"] = ["solution"]
    cells[3].metadata["tags"] = ["check"]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    path = nbdir / f"{stem}.ipynb"
    nbformat.write(nb, path)
    assert student.main(["--notebooks", str(nbdir), "--student", str(out / "student"),
                         "--solutions", str(out / "solutions")]) == 0
    run = handout_run(path, out)
    assert run.shared and run.first == 1 and run.solved_error is None
    assert run.student_error.ename == "NotImplementedError"
    assert _error_cells(run.student) == [1]
    assert _text(run.student.cells[0]).strip() == str(out / "student")
    assert _text(run.solved.cells[2]).strip() == str(nbdir)
    assert _text(run.solved.cells[3]).startswith("✓")
    del _RUNS[path.resolve()]
    # a stub that does not raise: the student test's failure, and the key runs on its own
    key = out / "solutions" / f"{stem}.py"
    copy_path = out / "student" / path.name
    copy = nbformat.read(copy_path, as_version=4)
    copy.cells[1].source = "rtt_prediction_ms = 1.0"
    nbformat.write(copy, copy_path)
    key.write_text(key.read_text().replace("rtt_prediction_ms = 0.41", "rtt_prediction_ms = 2"))
    run = handout_run(path, out)
    assert not run.shared and run.student_error is None
    assert _text(run.solved.cells[3]).startswith("✗")
    del _RUNS[path.resolve()]
