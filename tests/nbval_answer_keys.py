"""The answer keys' checks, run in nbval's own kernel of each notebook (no second run).

``tests/notebook/test_handout.py::test_answer_key_passes_every_check`` asks
whether the notebook with every ``solution`` cell filled from its answer key
shows ✓ in every ``check`` cell.  Run on its own, that is a second full
execution of the notebook beside nbval's (minutes for notebook 02).  When
nbval runs the same notebook in the same pytest process (scripts/test.sh:
one session, and the notebook's nbval cells and its hand-out tests are one
``xdist_group``, nbval's cells first -- tests/conftest.py), this plugin
answers the question in nbval's kernel instead: right after nbval has run
and compared a ``check`` cell (answer ``None``), it executes, in that kernel
and without history,

1. the answer key's code for that question (``held_s = 1.8``),
2. the check cell's source again, whose text output it records, and
3. the solution cell's own source (``held_s = None``) to put the state back,

so every later cell runs, and is compared by nbval, exactly as before.

This is the answer-key run only when the answer-key notebook would reach each
check in the same state, which :func:`plan` requires of a notebook before the
plugin touches it (otherwise the hand-out test executes the answer-key copy
itself, as it always did): each answer key is one assignment of a constant
expression (no names: its value cannot depend on the kernel); each question
has exactly one check cell, which is one ``check("qid", variable, ...)`` call;
and no other code cell mentions the answer variable.  Then the answer-key
notebook differs from the committed one only in what those assignments bind
and what the check cells display (``check`` returns nothing), and the kernel
state at each check is the same.  And the answer-key notebook "runs to the
end" exactly when the committed one does, which nbval checks: the record is
used only when every nbval cell of the notebook passed in this process.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("routelab_student_for_nbval",
                                               REPO / "scripts" / "student.py")
student = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(student)

#: Seconds allowed for one injected execution (an assignment or one check).
TIMEOUT_S = 120


@dataclass
class Step:
    qid: str
    key: str          # the answer key's code for the question
    blank: str        # the solution cell's own source (``variable = None``)


@dataclass
class Record:
    """What nbval's run of one notebook gave the answer keys, in this process."""

    key: dict[str, str]
    steps: dict[str, Step]               # check cell source -> what to run after it
    expected: int = 0                    # nbval cells collected for the notebook
    passed: int = 0
    failed: bool = False
    outputs: dict[str, str] = field(default_factory=dict)   # qid -> text of the solved check

    @property
    def complete(self) -> bool:
        return (not self.failed and self.expected > 0 and self.passed == self.expected
                and set(self.outputs) == {s.qid for s in self.steps.values()})


RECORDS: dict[Path, Record] = {}


def _constant(expr: ast.AST) -> bool:
    allowed = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.Tuple,
               ast.List, ast.Load)
    return all(isinstance(n, allowed) for n in ast.walk(expr))


def _check_call(source: str) -> tuple[str, str] | None:
    """``(qid, variable)`` if the cell is exactly one ``check("qid", variable, ...)`` call."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return None
    if len(body) != 1 or not isinstance(body[0], ast.Expr):
        return None
    call = body[0].value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
            and call.func.id == "check" and len(call.args) >= 2
            and isinstance(call.args[0], ast.Constant) and isinstance(call.args[1], ast.Name)):
        return None
    return call.args[0].value, call.args[1].id


def plan(nb, stem: str, key: dict[str, str]) -> dict[str, Step] | str:
    """What to run after each check cell, or why this notebook's keys cannot share nbval's run."""
    try:
        sol = student.solution_cells(nb, stem)
    except ValueError as exc:
        return str(exc)
    if not sol:
        return "no questions"
    steps: dict[str, Step] = {}
    code = [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    for i, q in sol:
        if q.qid not in key:
            return f"{q.qid}: not in the answer key"
        tree = ast.parse(key[q.qid])
        if not (len(tree.body) == 1 and isinstance(tree.body[0], ast.Assign)
                and [getattr(t, "id", None) for t in tree.body[0].targets] == [q.variable]
                and _constant(tree.body[0].value)):
            return f"{q.qid}: the answer key is not `{q.variable} = <constant expression>`"
        checks = [src for j, src in code
                  if student.CHECK in student.tags(nb.cells[j])
                  and _check_call(src) == (q.qid, q.variable)]
        if len(checks) != 1:
            return f"{q.qid}: {len(checks)} check cells that are one check() call"
        mention = re.compile(rf"\b{re.escape(q.variable)}\b")
        others = [j for j, src in code if j != i and src != checks[0] and mention.search(src)]
        if others:
            return f"{q.qid}: {q.variable} is also used in cells {others}"
        if checks[0] in steps:
            return f"{q.qid}: its check cell's source is not unique"
        steps[checks[0]] = Step(q.qid, key[q.qid], nb.cells[i].source)
    return steps


def _execute(kernel, source: str) -> str:
    """Run ``source`` in nbval's kernel (no history); its text, as the hand-out test reads it."""
    kc = kernel.kc
    msg_id = kc.execute(source, store_history=False, allow_stdin=False, stop_on_error=False)
    while True:
        msg = kc.get_shell_msg(timeout=TIMEOUT_S)
        if msg["parent_header"].get("msg_id") == msg_id:
            break
    parts = []
    while True:
        msg = kc.get_iopub_msg(timeout=TIMEOUT_S)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content.get("execution_state") == "idle":
            break
        if kind == "stream":
            parts.append(content.get("text", ""))
        elif kind in ("display_data", "execute_result"):
            parts.append(content.get("data", {}).get("text/plain", ""))
        elif kind == "error":
            raise RuntimeError(f"{content.get('ename')}: {content.get('evalue')}")
    return "".join(parts)


def _is_course_cell(item) -> bool:
    return type(item).__name__ == "IPyNbCell" and re.match(r"\d\d-", Path(item.path).name)


def _record(item) -> Record | None:
    path = Path(item.path).resolve()
    if path not in RECORDS:
        nb, stem = item.parent.nb, path.stem
        key = student.parse_answer_key(student.answer_key(nb, stem))
        steps = plan(nb, stem, key)
        RECORDS[path] = Record(key, steps) if isinstance(steps, dict) else None
    return RECORDS[path]


class AnswerKeysInNbval:
    """The plugin (registered by tests/conftest.py)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        RECORDS.clear()
        for item in items:
            if _is_course_cell(item):
                rec = _record(item)
                if rec is not None:
                    rec.expected += 1

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        if not _is_course_cell(item):
            return (yield)
        rec = _record(item)
        try:
            result = yield
        except BaseException:
            if rec is not None:
                rec.failed = True
            raise
        if rec is None:
            return result
        rec.passed += 1
        step = rec.steps.get(item.cell.source)
        if step is not None:
            kernel = item.parent.kernel
            try:
                _execute(kernel, step.key)
                rec.outputs[step.qid] = _execute(kernel, item.cell.source)
                _execute(kernel, step.blank)
            except Exception as exc:  # noqa: BLE001 - the hand-out test reports it
                rec.outputs[step.qid] = f"(answer key not checked in nbval's kernel: {exc!r})"
        return result


def complete_record(path: Path) -> Record | None:
    """The record of nbval's run of ``path`` in this process, if every cell of it passed."""
    rec = RECORDS.get(Path(path).resolve())
    return rec if rec is not None and rec.complete else None
