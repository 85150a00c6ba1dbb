"""Answer checks for "predict, then run" questions.

A student writes a prediction into a variable; a check prints ✓ or ✗ with
the model's answer and an explanation.  Checks never raise: an answer of
the wrong type (text where a number was asked, a typo in a choice, ``None``)
gets a message saying what was expected.

Each ``check_*`` prints its feedback and returns nothing (so a notebook cell
shows no ``Out[]`` echo); the ``*_feedback`` functions return ``(ok, text)``
for tests and for other tools.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

__all__ = ["check_choice", "check_number", "choice_feedback", "number_feedback"]

RIGHT, WRONG, TODO = "✓", "✗", "…"


def _fmt(x: float) -> str:
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    return f"{x:,.6g}" if abs(x) < 1e6 else f"{x:,.0f}"


def _with_unit(x, unit: str) -> str:
    return f"{_fmt(x)} {unit}".strip()


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


def number_feedback(answer, expected: float, tol: float = 0.0, unit: str = "", *,
                    rel: float | None = None, hint: str = "", explanation: str = "",
                    name: str = "your answer") -> tuple[bool, str]:
    """``(ok, feedback)`` for a numeric prediction.

    ``answer`` is right when ``|answer - expected| <= max(tol, rel * |expected|)``.
    A number written as text ("3", "0.4 ms") is accepted.
    """
    allowed = max(tol, (rel or 0.0) * abs(expected))
    if answer is None or answer is Ellipsis:
        return False, (f"{TODO} No prediction yet: set {name} to a number "
                       f"(in {unit}) and run this cell again." if unit else
                       f"{TODO} No prediction yet: set {name} to a number and run this cell again.")
    v, why = _as_number(answer)
    if v is None:
        return False, (f"{WRONG} Expected a number{f' in {unit}' if unit else ''} for {name}, "
                       f"got {why}. Write it like 0.5 (no quotes needed).")
    shown = _with_unit(answer if isinstance(answer, numbers.Real) else v, unit)
    right = _with_unit(expected, unit)
    within = f" (anything within ±{_with_unit(allowed, unit)} counts)" if allowed else ""
    if abs(v - expected) <= allowed + 1e-12 * max(1.0, abs(expected)):
        text = f"{RIGHT} Right: you said {shown}; the model gives {right}{within}."
        ok = True
    else:
        direction = "high" if v > expected else "low"
        text = (f"{WRONG} Not quite: you said {shown}, which is too {direction}; "
                f"the model gives {right}{within}.")
        ok = False
    return ok, _with_notes(text, ok, hint, explanation)


def check_number(answer, expected: float, tol: float = 0.0, unit: str = "", *,
                 rel: float | None = None, hint: str = "", explanation: str = "",
                 name: str = "your answer") -> None:
    """Print ✓/✗ feedback on a numeric prediction (see :func:`number_feedback`)."""
    print(number_feedback(answer, expected, tol, unit, rel=rel, hint=hint,
                          explanation=explanation, name=name)[1])


def _with_notes(text: str, ok: bool, hint: str, explanation: str) -> str:
    """Add the hint (wrong answers only) and the explanation to a feedback line."""
    if hint and not ok:
        text += f"\n  Hint: {hint}"
    if explanation:
        text += f"\n  Why: {explanation}"
    return text


def _norm(x) -> str:
    return " ".join(str(x).lower().split())


def choice_feedback(answer, expected: str, choices: Sequence[str], *, hint: str = "",
                    explanation: str = "", name: str = "your answer") -> tuple[bool, str]:
    """``(ok, feedback)`` for a multiple-choice prediction.

    ``answer`` may be the choice's text (case and spacing ignored) or its
    letter ("a", "b", ...) in the order of ``choices``.
    """
    choices = list(choices)
    if expected not in choices:
        raise ValueError(f"expected answer {expected!r} is not among the choices")
    letters = "abcdefghijklmnopqrstuvwxyz"
    listing = "; ".join(f"{letters[i]}) {c}" for i, c in enumerate(choices))
    if answer is None or answer is Ellipsis:
        return False, f"{TODO} No prediction yet: set {name} to one of: {listing}."
    if not isinstance(answer, str):
        return False, (f"{WRONG} Expected one of the choices as text (or its letter) for "
                       f"{name}, got {type(answer).__name__} {answer!r}. Choices: {listing}.")
    a = _norm(answer).rstrip(")")
    picked = None
    if len(a) == 1 and a in letters[: len(choices)]:
        picked = choices[letters.index(a)]
    else:
        for c in choices:
            if _norm(c) == a:
                picked = c
    if picked is None:
        return False, (f"{WRONG} {answer!r} is not one of the choices. "
                       f"Set {name} to one of: {listing}.")
    if picked == expected:
        text, ok = f"{RIGHT} Right: {picked}.", True
    else:
        text = f"{WRONG} Not quite: you chose \"{picked}\"; the model says \"{expected}\"."
        ok = False
    return ok, _with_notes(text, ok, hint, explanation)


def check_choice(answer, expected: str, choices: Sequence[str], *, hint: str = "",
                 explanation: str = "", name: str = "your answer") -> None:
    """Print ✓/✗ feedback on a multiple-choice prediction (see :func:`choice_feedback`)."""
    print(choice_feedback(answer, expected, choices, hint=hint, explanation=explanation,
                          name=name)[1])
