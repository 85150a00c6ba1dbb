"""Prose whose numbers come from the model: a markdown paragraph computed from a run.

A number in a notebook's text that the model produced must not be typed in
by hand (the model changes; the text would not).  A notebook writes such a
paragraph as a code cell instead::

    say(f"The cache grows for about {t_fill:.1f} s and then stops at "
        f"**{peak:,} entries**.")

The paragraph is shown as Markdown (``text/markdown``) with the same text
as ``text/plain``, so nbval compares the numbers on every run and a
text-only viewer shows them too.  Numbers a notebook keeps in markdown
cells are asserted against the notebook's outputs by
``tests/notebook/test_prose_numbers.py``.
"""

from __future__ import annotations

import textwrap

__all__ = ["say"]


def say(text: str) -> None:
    """Display ``text`` (Markdown; common indentation removed) as a paragraph of the notebook.

    Returns nothing, so the cell shows no ``Out[]`` echo.
    """
    from IPython.display import display

    if not isinstance(text, str) or not text.strip():
        raise ValueError("say() needs the paragraph's text")
    body = textwrap.dedent(text).strip()
    display({"text/markdown": body, "text/plain": body}, raw=True)
