#!/usr/bin/env python3
"""Write the student copies and the answer keys of the notebooks (``make student``).

For every ``notebooks/NN-*.ipynb``:

* ``student/NN-*.ipynb`` -- the notebook with every ``solution`` cell (the
  cell where a student writes an answer, ``x = None`` in ``notebooks/``)
  replaced by a stub that raises ``NotImplementedError`` saying what to
  write there and that "Run Selected Cell and All Below" carries on after
  it, and with all outputs and execution timestamps cleared.  "Run All"
  stops at the first question until the student has answered it.
  ``notebooks/index.ipynb`` is copied alongside, so the navigation links
  work.
* ``solutions/NN-*.py`` -- the answer key: for each question, in notebook
  order, a ``# %% [qid]`` cell with the code that answers it (from
  ``routelab/notebook/answers.py``).  Put a cell's code in place of the
  notebook's ``solution`` cell and its check shows ✓
  (``tests/notebook/test_handout.py`` does exactly that for every question).

Both directories are generated (git-ignored); ``scripts/test.sh`` writes them
on every run.  Usage::

    python scripts/student.py [--notebooks DIR] [--student DIR] [--solutions DIR]
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from routelab.notebook.answers import Question, for_notebook  # noqa: E402

#: The cell tags of a question (see docs/development.md).
EXERCISE, SOLUTION, CHECK = "exercise", "solution", "check"

_BLANK = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*(None|\.\.\.)\s*(#.*)?$")
_KEY_CELL = re.compile(r"^# %% \[([a-z0-9-]+)\] (\w+)$", re.M)


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def course_notebooks(nbdir: Path) -> list[Path]:
    """The numbered notebooks ``NN-*.ipynb`` of ``nbdir``, in order."""
    return sorted(p for p in nbdir.glob("[0-9][0-9]-*.ipynb"))


def blank_variable(source: str) -> str | None:
    """The answer variable a solution cell leaves blank (``x = None`` / ``x = ...``), or None."""
    lines = [ln for ln in source.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if len(lines) != 1:
        return None
    m = _BLANK.match(lines[0])
    return m.group(1) if m else None


def solution_cells(nb, stem: str) -> list[tuple[int, Question]]:
    """``(cell index, question)`` of every ``solution`` cell, checked against answers.py."""
    by_var = {q.variable: q for q in for_notebook(stem)}
    out = []
    for i, cell in enumerate(nb.cells):
        if SOLUTION not in tags(cell):
            continue
        var = blank_variable(cell.source)
        if cell.cell_type != "code" or var is None:
            raise ValueError(f"{stem} cell {i}: a solution cell must be one line `name = None` "
                             f"(got {cell.source!r})")
        if var not in by_var:
            raise ValueError(f"{stem} cell {i}: {var!r} is not an answer variable of "
                             f"{stem} in routelab/notebook/answers.py")
        out.append((i, by_var[var]))
    return out


def stub(q: Question) -> str:
    """The code that replaces a solution cell in the student copy.

    A stub, not ``x = None``: it stops "Run All" here until the student has
    answered.  The comment says what to write and how to carry on.
    """
    what = f"{q.variable} = <{q.prompt}>"
    return (f"# Replace this whole cell with your answer:  {what}\n"
            "# then carry on with Run > Run Selected Cell and All Below.\n"
            f"raise NotImplementedError({('Write your answer here: ' + what)!r})")


def student_copy(nb, stem: str):
    """The student copy of a notebook: solution cells stubbed, outputs cleared."""
    out = copy.deepcopy(nb)
    for i, q in solution_cells(out, stem):
        out.cells[i].source = stub(q)
    for cell in out.cells:
        cell.metadata.pop("execution", None)       # the source run's timestamps
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    out.metadata.pop("widgets", None)
    out.metadata["routelab"] = {"copy": "student", "from": f"notebooks/{stem}.ipynb"}
    return out


def answer_key(nb, stem: str) -> str:
    """``solutions/<stem>.py``: one ``# %% [qid] variable`` cell per question, in order."""
    lines = [f"# Answer key for notebooks/{stem}.ipynb, written by scripts/student.py from",
             "# routelab/notebook/answers.py (do not edit: edit answers.py).  Each cell below",
             "# answers one question: put its code in place of the question's answer cell",
             "# (`variable = None` in notebooks/; in student/ a stub that raises",
             "# NotImplementedError) and that question's check shows a tick.", ""]
    for _i, q in solution_cells(nb, stem):
        lines += [f"# %% [{q.qid}] {q.variable}", q.solution.strip(), ""]
    return "\n".join(lines)


def parse_answer_key(text: str) -> dict[str, str]:
    """``{qid: code}`` from an answer key written by :func:`answer_key`."""
    marks = list(_KEY_CELL.finditer(text))
    return {m.group(1): text[m.end(): nxt.start() if nxt else len(text)].strip()
            for m, nxt in zip(marks, [*marks[1:], None], strict=True)}


def solved_copy(nb, stem: str, key: dict[str, str]):
    """The notebook with every solution cell replaced by its answer from ``key``."""
    out = copy.deepcopy(nb)
    for i, q in solution_cells(out, stem):
        out.cells[i].source = key[q.qid]
    return out


def write_all(nbdir: Path, student: Path, solutions: Path) -> list[Path]:
    student.mkdir(parents=True, exist_ok=True)
    solutions.mkdir(parents=True, exist_ok=True)
    written = []
    for path in course_notebooks(nbdir):
        nb = nbformat.read(path, as_version=4)
        stem = path.stem
        s = student / path.name
        nbformat.write(student_copy(nb, stem), s)
        k = solutions / f"{stem}.py"
        k.write_text(answer_key(nb, stem), encoding="utf-8")
        written += [s, k]
    index = nbdir / "index.ipynb"
    if index.exists():
        (student / index.name).write_bytes(index.read_bytes())
        written.append(student / index.name)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    ap.add_argument("--student", type=Path, default=ROOT / "student")
    ap.add_argument("--solutions", type=Path, default=ROOT / "solutions")
    args = ap.parse_args(argv)
    try:
        written = write_all(args.notebooks, args.student, args.solutions)
    except (ValueError, KeyError) as exc:
        print(f"student.py: {exc}", file=sys.stderr)
        return 1
    for p in written:
        print(f"wrote {p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
