"""Answer checks for "predict, then run" questions.

A notebook asks its questions through :func:`checker`::

    check = checker("00-packet-journey")                 # once, in the setup cell
    check("busier-router", rtt_prediction_ms, run=res2)   # in a check cell

The question (expected answer, tolerance, hint, explanation) is looked up
in :mod:`routelab.notebook.answers`; the cell holds none of it.  Until the
answer variable holds something (it starts as ``None`` or ``...``) the check
only says "write your prediction first" -- no model value, no hint, no
explanation, and the model is not even consulted.  After an answer it shows
✓ or ✗, the model's value, the hint (wrong answers only) and the
explanation, the latter collapsed in an HTML ``<details>``.

Checks never raise on a student's answer: text where a number was asked, a
typo in a choice or a list get a message saying what was expected.  The
output is a ``text/html`` bundle with a ``text/plain`` fallback (what nbval
compares); :func:`ask` returns the :class:`Feedback` itself for tests and
other tools.
"""

from __future__ import annotations

import html
import math
import numbers
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .answers import Question, for_notebook, question

__all__ = ["Feedback", "ask", "checker", "choice_feedback", "feedback", "number_feedback"]

RIGHT, WRONG, TODO = "✓", "✗", "…"


@dataclass(frozen=True)
class Feedback:
    """What a check shows.

    ``status`` is ``"missing"`` (no answer yet), ``"invalid"`` (an answer of
    the wrong kind), ``"right"`` or ``"wrong"``.  ``hint`` and
    ``explanation`` are empty unless an answer of the right kind was given.
    """

    status: str
    message: str
    hint: str = ""
    explanation: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "right"

    def text(self) -> str:
        """Plain text: the message, then "Hint:" and "Why:" lines."""
        lines = [self.message]
        if self.hint:
            lines.append(f"  Hint: {self.hint}")
        if self.explanation:
            lines.append(f"  Why: {self.explanation}")
        return "\n".join(lines)

    def html(self) -> str:
        """HTML: the message, the hint, and the explanation in a collapsed ``<details>``."""
        parts = [f'<div class="routelab-check routelab-check-{self.status}">',
                 f"<p>{_inline(self.message)}</p>"]
        if self.hint:
            parts.append(f"<p><b>Hint:</b> {_inline(self.hint)}</p>")
        if self.explanation:
            parts.append("<details><summary>Why? (the explanation)</summary>"
                         f"<p>{_inline(self.explanation)}</p></details>")
        parts.append("</div>")
        return "".join(parts)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": self.text(), "text/html": self.html()}


def _inline(text: str) -> str:
    """Escape for HTML; `code` becomes <code>code</code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _fmt(x: float) -> str:
    """A number as people write it: 4 significant digits, thousands separators."""
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = max(0, 3 - int(math.floor(math.log10(abs(x)))))
    return f"{round(x, digits):,.{digits}f}".rstrip("0").rstrip(".") if digits else f"{x:,.0f}"


def _with_unit(x, unit: str) -> str:
    return f"{_fmt(x)} {unit}".strip()


def _missing(answer) -> bool:
    return answer is None or answer is Ellipsis


def _as_number(answer):
    """The answer as a float, or ``None`` with a reason."""
    if isinstance(answer, bool):
        return None, "True/False"
    if isinstance(answer, numbers.Real):
        v = float(answer)
        return (v, "") if math.isfinite(v) else (None, repr(answer))
    if isinstance(answer, str):
        text = answer.strip().replace(",", "").replace("_", "")
        try:
            v = float(text.split()[0]) if text else float("nan")
        except ValueError:
            return None, f"the text {answer!r}"
        if math.isfinite(v):
            return v, ""
        return None, f"the text {answer!r}"
    return None, f"{type(answer).__name__} {answer!r}"


def _number(answer, expected: float, tol: float, unit: str, rel: float | None,
            name: str, prompt: str) -> tuple[str, str]:
    """``(status, message)`` for a numeric answer."""
    if _missing(answer):
        return "missing", _todo(name, prompt or (f"a number (in {unit})" if unit else "a number"))
    v, why = _as_number(answer)
    if v is None:
        return "invalid", (f"{WRONG} Expected a number{f' in {unit}' if unit else ''} for {name}, "
                           f"got {why}. Write it like 0.5 (no quotes needed).")
    allowed = max(tol, (rel or 0.0) * abs(expected))
    shown = _with_unit(answer if isinstance(answer, numbers.Real) else v, unit)
    right = _with_unit(expected, unit)
    if rel and allowed > tol:
        within = f" (anything within ±{rel:.0%}, i.e. ±{_with_unit(allowed, unit)}, counts)"
    elif allowed:
        within = f" (anything within ±{_with_unit(allowed, unit)} counts)"
    else:
        within = ""
    if abs(v - expected) <= allowed + 1e-12 * max(1.0, abs(expected)):
        return "right", f"{RIGHT} Right: you said {shown}; the model gives {right}{within}."
    direction = "high" if v > expected else "low"
    return "wrong", (f"{WRONG} Not quite: you said {shown}, which is too {direction}; "
                     f"the model gives {right}{within}.")


def _todo(name: str, prompt: str) -> str:
    return f"{TODO} Write your prediction first: set {name} to {prompt}. Then run this cell again."


def _norm(x) -> str:
    return " ".join(str(x).lower().split())


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _listing(choices: Sequence[str]) -> str:
    return "; ".join(f"{_LETTERS[i]}) {c}" for i, c in enumerate(choices))


def _choice(answer, expected: str, choices: Sequence[str], name: str) -> tuple[str, str]:
    """``(status, message)`` for a multiple-choice answer (text or letter)."""
    choices = list(choices)
    if expected not in choices:
        raise ValueError(f"expected answer {expected!r} is not among the choices")
    listing = _listing(choices)
    if _missing(answer):
        return "missing", _todo(name, f"one of: {listing}")
    if not isinstance(answer, str):
        return "invalid", (f"{WRONG} Expected one of the choices as text (or its letter) for "
                           f"{name}, got {type(answer).__name__} {answer!r}. Choices: {listing}.")
    a = _norm(answer).rstrip(")")
    picked = None
    if len(a) == 1 and a in _LETTERS[: len(choices)]:
        picked = choices[_LETTERS.index(a)]
    else:
        for c in choices:
            if _norm(c) == a:
                picked = c
    if picked is None:
        return "invalid", (f"{WRONG} {answer!r} is not one of the choices. "
                           f"Set {name} to one of: {listing}.")
    if picked == expected:
        return "right", f"{RIGHT} Right: {picked}."
    return "wrong", f"{WRONG} Not quite: you chose \"{picked}\"; the model says \"{expected}\"."


def _notes(status: str, message: str, hint: str, explanation: str) -> Feedback:
    """Hint on wrong answers only; explanation on any answer of the right kind."""
    answered = status in ("right", "wrong")
    return Feedback(status, message, hint if status == "wrong" else "",
                    explanation if answered else "")


def number_feedback(answer, expected: float, tol: float = 0.0, unit: str = "", *,
                    rel: float | None = None, hint: str = "", explanation: str = "",
                    name: str = "your answer", prompt: str = "") -> tuple[bool, str]:
    """``(ok, text)`` for a numeric answer (the building block of :func:`ask`).

    ``answer`` is right when ``|answer - expected| <= max(tol, rel * |expected|)``.
    A number written as text ("3", "0.4 ms") is accepted.
    """
    status, msg = _number(answer, expected, tol, unit, rel, name, prompt)
    fb = _notes(status, msg, hint, explanation)
    return fb.ok, fb.text()


def choice_feedback(answer, expected: str, choices: Sequence[str], *, hint: str = "",
                    explanation: str = "", name: str = "your answer") -> tuple[bool, str]:
    """``(ok, text)`` for a multiple-choice answer (the building block of :func:`ask`).

    ``answer`` may be the choice's text (case and spacing ignored) or its
    letter ("a", "b", ...) in the order of ``choices``.
    """
    status, msg = _choice(answer, expected, choices, name)
    fb = _notes(status, msg, hint, explanation)
    return fb.ok, fb.text()


def feedback(q: Question, answer, **facts) -> Feedback:
    """The :class:`Feedback` for ``answer`` to question ``q``, solving it from ``facts``.

    ``q.solve`` runs only when there is an answer, so an unanswered question
    costs nothing and reveals nothing.
    """
    if _missing(answer):
        prompt = q.prompt if q.kind == "number" else f"one of: {_listing(q.choices)}"
        return Feedback("missing", _todo(q.variable, prompt))
    values = q.solve(**facts)
    expected = values["expected"]
    if q.kind == "choice":
        status, msg = _choice(answer, expected, q.choices, q.variable)
    else:
        status, msg = _number(answer, float(expected), q.tol, q.unit, q.rel, q.variable,
                              q.prompt)
    why = q.explanation.format_map(values)
    return _notes(status, msg, q.hint.format_map(values), why[:1].upper() + why[1:])


def ask(notebook: str, qid: str, answer, **facts) -> Feedback:
    """The :class:`Feedback` for ``answer`` to question ``qid`` of ``notebook``."""
    return feedback(question(notebook, qid), answer, **facts)


def checker(notebook: str) -> Callable[..., None]:
    """The ``check`` function of one notebook.

    ``check(qid, answer, **facts)`` displays the feedback on ``answer`` to
    question ``qid`` (see :mod:`routelab.notebook.answers`); ``facts`` are the
    model runs the question is solved from.  It returns nothing, so the cell
    has no ``Out[]`` echo.  An unknown notebook raises ``KeyError`` at once.
    """
    for_notebook(notebook)

    def check(qid: str, answer, **facts) -> None:
        from IPython.display import display

        display(ask(notebook, qid, answer, **facts))

    check.__doc__ = f"Check an answer to one of notebook {notebook}'s questions."
    return check
