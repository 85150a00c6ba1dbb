"""The notebooks as files: questions wired to answers.py, nothing given away, navigation.

Reads the .ipynb files (no execution):

* no code cell holds a question's hint or explanation (they live in
  routelab/notebook/answers.py), and no check passes its own;
* every question of answers.py has, in order, an ``exercise`` markdown cell,
  a ``solution`` cell ``variable = None`` and a ``check`` cell
  ``check("qid", variable, ...)``; the setup cell makes ``check``;
* the stored outputs show every check in its "no answer yet" state;
* every notebook starts and ends with a navigation line (course map,
  previous, next), every link to a notebook resolves, no notebook promises
  one that does not exist, and the index lists every notebook with the time
  and prerequisites the notebook itself states.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest

from routelab.notebook.answers import QUESTIONS, for_notebook

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = Path(os.environ.get("ROUTELAB_NOTEBOOKS_DIR") or REPO / "notebooks").resolve()
COURSE = sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]-*.ipynb"))
INDEX = NOTEBOOKS_DIR / "index.ipynb"
pytestmark = pytest.mark.skipif(not COURSE, reason=f"no NN-*.ipynb in {NOTEBOOKS_DIR}")
_ids = [p.stem for p in COURSE]


def load(path: Path) -> list[dict]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for c in cells:
        if isinstance(c["source"], list):
            c["source"] = "".join(c["source"])
    return cells


def tags(cell) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def text_of(cell) -> str:
    return "".join(o.get("text", "") if isinstance(o.get("text", ""), str) else "".join(o["text"])
                   for o in cell.get("outputs", [])) + "".join(
        "".join(o.get("data", {}).get("text/plain", "")) for o in cell.get("outputs", []))


def fragments(template: str, min_len: int = 12) -> list[str]:
    import string
    return [lit.strip() for lit, *_ in string.Formatter().parse(template)
            if len(lit.strip()) >= min_len]


def check_calls(source: str) -> list[tuple[str, str]]:
    """``(qid, variable)`` of every ``check("qid", variable, ...)`` call in a cell."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "check":
            qid = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) \
                else None
            var = node.args[1].id if len(node.args) > 1 and isinstance(node.args[1], ast.Name) \
                else None
            out.append((qid, var))
    return out


# -- nothing given away ---------------------------------------------------------------------

@pytest.mark.parametrize("path", COURSE, ids=_ids)
def test_no_code_cell_holds_a_hint_or_an_explanation(path):
    code = [(i, c["source"]) for i, c in enumerate(load(path)) if c["cell_type"] == "code"]
    for q in QUESTIONS.values():
        for piece in fragments(q.hint) + fragments(q.explanation):
            for i, src in code:
                assert piece not in src, (f"{path.name} cell {i} holds text of {q.notebook}/"
                                          f"{q.qid}'s hint or explanation: {piece!r}")
    for i, src in code:
        assert not re.search(r"\b(hint|explanation)\s*=", src), \
            f"{path.name} cell {i} passes its own hint/explanation to a check"
        assert "check_number(" not in src and "check_choice(" not in src, \
            f"{path.name} cell {i}: ask questions with check(qid, answer, ...)"


@pytest.mark.parametrize("path", COURSE, ids=_ids)
def test_questions_are_wired_to_answers_in_order(path):
    cells = load(path)
    stem = path.stem
    qs = for_notebook(stem)
    setup = next(c for c in cells if c["cell_type"] == "code")
    assert f'check = checker("{stem}")' in setup["source"], "the setup cell makes check()"
    sol = [i for i, c in enumerate(cells) if "solution" in tags(c)]
    chk = [i for i, c in enumerate(cells) if "check" in tags(c)]
    ex = [i for i, c in enumerate(cells) if "exercise" in tags(c)]
    assert len(sol) == len(chk) == len(qs), (sol, chk, [q.qid for q in qs])
    prev = -1
    for q, s, k in zip(qs, sol, chk, strict=True):
        src = cells[s]["source"]
        assert cells[s]["cell_type"] == "code"
        assert re.search(rf"^{q.variable} = (None|\.\.\.)\b", src, re.M), \
            f"{stem}: the solution cell of {q.qid} must start as `{q.variable} = None`: {src!r}"
        assert check_calls(cells[k]["source"]) == [(q.qid, q.variable)], cells[k]["source"]
        assert s < k, f"{stem}: {q.qid} is checked before it is answered"
        assert any(prev < e < s and cells[e]["cell_type"] == "markdown" for e in ex), \
            f"{stem}: {q.qid} has no `exercise` markdown cell before its solution cell"
        prev = s
    stray = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and i not in chk
             and check_calls(c["source"])]
    assert not stray, f"{stem}: check() called outside a `check` cell: {stray}"


@pytest.mark.parametrize("path", COURSE, ids=_ids)
def test_stored_outputs_show_no_answer_yet(path):
    cells = load(path)
    for i, c in enumerate(cells):
        if "check" in tags(c):
            out = text_of(c)
            assert out.startswith("… Write your prediction first"), (path.name, i, out)
            for bad in ("✓", "✗", "Hint:", "Why:", "the model gives"):
                assert bad not in out


# -- navigation, links, promises --------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+\.ipynb)\)")


@pytest.mark.parametrize("k", range(len(COURSE)), ids=_ids)
def test_navigation_line_at_top_and_bottom(k):
    path = COURSE[k]
    cells = load(path)
    want = {"index.ipynb"}
    if k > 0:
        want.add(COURSE[k - 1].name)
    if k + 1 < len(COURSE):
        want.add(COURSE[k + 1].name)
    for where, cell in (("first", cells[0]), ("last", cells[-1])):
        assert cell["cell_type"] == "markdown" and "nav" in tags(cell), f"{where} cell: nav line"
        assert set(LINK.findall(cell["source"])) == want, (where, cell["source"])
        assert len(cell["source"].splitlines()) == 1, "one line"


@pytest.mark.parametrize("path", [*COURSE, INDEX] if INDEX.exists() else COURSE,
                         ids=[*_ids, "index"] if INDEX.exists() else _ids)
def test_links_resolve_and_nothing_is_promised(path):
    for i, c in enumerate(load(path)):
        if c["cell_type"] != "markdown":
            continue
        for target in LINK.findall(c["source"]):
            assert (path.parent / target).exists(), f"{path.name} cell {i} links {target}"
        for m in re.finditer(r"\bnotebooks? (\d\d)\b", c["source"]):
            assert list(NOTEBOOKS_DIR.glob(f"{m.group(1)}-*.ipynb")), \
                f"{path.name} cell {i} mentions notebook {m.group(1)}, which does not exist"
        for promise in ("later notebook", "next notebooks will", "will follow", "planned",
                        "coming soon", "four stories", "four threads"):
            assert promise not in c["source"].lower(), f"{path.name} cell {i}: {promise!r}"


def _stated(cells, what: str) -> str:
    for c in cells:
        m = re.search(rf"\*\*{what}:\*\*\s*(.+?)(?:\.\s|\.$)", c["source"], re.S)
        if m:
            return " ".join(m.group(1).split())
    return ""


@pytest.mark.skipif(not INDEX.exists(), reason="no notebooks/index.ipynb")
def test_index_maps_every_notebook_with_its_own_time_and_prerequisites():
    index = load(INDEX)
    for path in COURSE:
        entry = [c for c in index if c["source"].lstrip().startswith("## ")
                 and f"]({path.name})" in c["source"].lstrip().splitlines()[0]]
        assert len(entry) == 1, f"index.ipynb needs one section heading linking {path.name}"
        text = entry[0]["source"]
        for part in ("**Story.**", "**You will:**", "**Time:**", "**Before this:**"):
            assert part in text, f"index entry of {path.name} lacks {part}"
        own = load(path)
        for what in ("Time", "Before this"):
            stated = _stated(own, what)
            assert stated, f"{path.name} states no **{what}:**"
            assert _stated([entry[0]], what) == stated, (path.name, what)
