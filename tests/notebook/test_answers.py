"""The question registry (routelab.notebook.answers) and the checker built on it."""

from __future__ import annotations

import ast
import re
import string

import pytest

from routelab.notebook import checker
from routelab.notebook.answers import QUESTIONS, Question, for_notebook, question
from routelab.notebook.checks import Feedback, ask, feedback

NOTEBOOKS = sorted({nb for nb, _ in QUESTIONS})


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def fragments(template: str, min_len: int = 12) -> list[str]:
    """The literal pieces of a hint/explanation template long enough to recognise."""
    parts = [lit for lit, *_ in string.Formatter().parse(template)]
    return [p.strip() for p in parts if len(p.strip()) >= min_len]


def _toy(**kw) -> Question:
    calls = []

    def solve(run):
        calls.append(run)
        return {"expected": 4.0, "secret": 123.456}

    q = Question("toy", "q", "guess", "a number: the toy value, in ms", solve, unit="ms", tol=0.5,
                 hint="think about the secret hint", explanation="because {secret} explains it",
                 **kw)
    return q, calls


# -- no answer: nothing revealed ------------------------------------------------------------

@pytest.mark.parametrize("missing", [None, ...])
def test_no_answer_reveals_nothing_and_runs_nothing(missing):
    q, calls = _toy()
    fb = feedback(q, missing, run="a run")
    assert fb.status == "missing" and not fb.ok and not calls, "solve must not run"
    assert fb.hint == fb.explanation == ""
    for shown in (fb.text(), fb.html()):
        assert "Write your prediction first" in shown and "guess" in shown
        for secret in ("4", "123", "secret", "explains", "Hint", "Why", "<details"):
            assert secret not in shown


@pytest.mark.parametrize(("nb", "qid"), list(QUESTIONS))
def test_every_question_unanswered_reveals_nothing(nb, qid):
    q = question(nb, qid)
    fb = ask(nb, qid, None)            # no facts needed: solve does not run
    assert fb.status == "missing" and not fb.hint and not fb.explanation
    for piece in fragments(q.hint) + fragments(q.explanation):
        assert piece not in fb.text()
    assert fb.text().startswith(f"… Write your prediction first: set {q.variable} to ")
    if q.kind == "choice":
        assert all(c in fb.text() for c in q.choices)   # the options are not the answer


def test_answer_of_the_wrong_kind_reveals_nothing():
    q, calls = _toy()
    fb = feedback(q, "four-ish", run="r")
    assert fb.status == "invalid" and "Expected a number in ms" in fb.message
    assert not fb.hint and not fb.explanation and "4" not in fb.message


# -- answered: verdict, hint on wrong answers, explanation in <details> --------------------------

def test_wrong_answer_gets_hint_and_collapsed_explanation():
    q, calls = _toy()
    fb = feedback(q, 9, run="r")
    assert calls == ["r"] and fb.status == "wrong"
    assert fb.message.startswith("✗ Not quite: you said 9 ms, which is too high; the model "
                                 "gives 4 ms")
    assert fb.hint == "think about the secret hint"
    assert fb.explanation == "Because 123.456 explains it"   # capitalised
    page = fb.html()
    assert re.search(r"<details><summary>[^<]*</summary><p>Because 123.456 explains it</p>"
                     r"</details>", page)
    assert "Hint:" in fb.text() and "Why: Because" in fb.text()


def test_right_answer_gets_explanation_but_no_hint():
    q, _ = _toy()
    fb = feedback(q, "4.3 ms", run="r")
    assert fb.ok and fb.message.startswith("✓ Right") and not fb.hint
    assert "<details>" in fb.html() and fb.explanation


def test_html_is_escaped():
    fb = Feedback("wrong", "✗ <b>", hint="a < b", explanation="`x & y`")
    page = fb.html()
    assert "&lt;b&gt;" in page and "a &lt; b" in page and "<code>x &amp; y</code>" in page


def test_checker_displays_text_and_html(monkeypatch):
    shown = []
    import IPython.display
    monkeypatch.setattr(IPython.display, "display", shown.append)
    check = checker("00-packet-journey")
    assert check("busier-router", None) is None
    (fb,) = shown
    bundle = fb._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    assert bundle["text/plain"].startswith("… Write your prediction first: set rtt_prediction_ms")


def test_unknown_notebook_or_question_names_the_known_ones():
    with pytest.raises(KeyError, match="00-packet-journey"):
        checker("99-nothing")
    with pytest.raises(KeyError, match="busier-router"):
        ask("00-packet-journey", "no-such-question", 1)


# -- the registry ---------------------------------------------------------------------------

def test_questions_are_grouped_by_notebook_in_order():
    for nb in NOTEBOOKS:
        qs = for_notebook(nb)
        assert [q.notebook for q in qs] == [nb] * len(qs)
        assert len({q.variable for q in qs}) == len(qs), f"{nb}: two questions share a variable"
        assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]*", q.qid) for q in qs)
    with pytest.raises(TypeError):
        QUESTIONS[("x", "y")] = None   # read-only


@pytest.mark.parametrize(("nb", "qid"), list(QUESTIONS))
def test_solution_sets_the_variable_to_an_answer_of_the_right_kind(nb, qid):
    q = question(nb, qid)
    tree = ast.parse(q.solution)
    assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Assign), q.solution
    (target,) = tree.body[0].targets
    assert isinstance(target, ast.Name) and target.id == q.variable
    ns: dict = {}
    exec(compile(tree, f"<solution {nb}/{qid}>", "exec"), ns)   # noqa: S102 - our own key
    value = ns[q.variable]
    if q.kind == "choice":
        letters = "abcdefghijklmnopqrstuvwxyz"[: len(q.choices)]
        assert value in q.choices or value in letters, value
    else:
        assert isinstance(value, int | float) and not isinstance(value, bool)


@pytest.mark.parametrize(("nb", "qid"), list(QUESTIONS))
def test_texts_say_what_to_write_without_the_answer(nb, qid):
    q = question(nb, qid)
    assert q.prompt and q.hint and q.explanation
    assert "expected" not in _fields(q.hint), "a hint must not quote the answer"
    assert q.variable not in q.prompt


def test_small_cache_is_judged_by_median_and_loss():
    from routelab.notebook.answers import SMALL_CACHE, _small_verdict

    base = {"ping_rtt_ms_p50": 112.0, "ping_loss_pct": 42.0}
    assert _small_verdict(base, {"ping_rtt_ms_p50": 1.2, "ping_loss_pct": 92.0}) == SMALL_CACHE[2]
    assert _small_verdict(base, {"ping_rtt_ms_p50": 1.2, "ping_loss_pct": 40.0}) == SMALL_CACHE[0]
    assert _small_verdict(base, {"ping_rtt_ms_p50": 300.0, "ping_loss_pct": 40.0}) == \
        SMALL_CACHE[3]
    assert _small_verdict(base, {"ping_rtt_ms_p50": 110.0, "ping_loss_pct": 44.0}) == \
        SMALL_CACHE[1]


def test_worm_misses_explanation_never_explains_a_negative_surplus_as_replies():
    from routelab.notebook.answers import _extra_misses

    class Run:
        def __init__(self, misses, probes):
            self._s = {"in_slow_tot": misses}
            self.duration = 10.0
            self.packets = {"kind": __import__("numpy").array([1] * probes)}
            self.offered = probes

        def summary(self):
            return self._s

    fewer = _extra_misses(Run(0, 0), Run(1330, 1400))
    assert fewer["surplus"] < 0 and "answers" not in fewer["rest"]
    more = _extra_misses(Run(0, 0), Run(1500, 1400))
    assert more["surplus"] > 0 and "answers" in more["rest"]
