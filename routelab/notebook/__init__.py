"""Helpers for the notebooks (and only the notebooks): figures, explorers, answer checks.

Notebooks import what they need in one setup cell::

    from routelab.notebook import packet_journey, show, checker, say, ...

- :func:`show` -- display a matplotlib Figure as an ``<img>`` that carries its alt text
- :func:`packet_journey` -- one packet through every stage (routelab.journey)
- :func:`ping_journey_figure`, :func:`packet_journey_explorer` -- notebook 00
- :func:`checker` -- a notebook's ``check(qid, answer, **facts)`` for "predict, then run"
  questions (answers, hints and explanations live in :mod:`routelab.notebook.answers`)
- :func:`say` -- a markdown paragraph whose numbers are computed from a run
- :func:`control_for`, :class:`Explorer` -- build new explorers from knob metadata
- :func:`rcu_timeline`, :func:`rcu_primer_figure`, :func:`rcu_primer_alt`,
  :func:`rcu_primer_explorer` -- notebook 02's RCU primer
"""

from ..journey import packet_journey
from .checks import checker
from .explorers import EXPLORERS, packet_journey_explorer, ping_journey_figure
from .plots import OKABE_ITO, new_figure, show
from .prose import say
from .rcu_primer import (
    RcuTimeline,
    rcu_primer_alt,
    rcu_primer_explorer,
    rcu_primer_figure,
    rcu_timeline,
)
from .widgets import Explorer, control_for

__all__ = [
           "EXPLORERS",
           "OKABE_ITO",
           "Explorer",
           "checker",
           "control_for",
           "new_figure",
           "packet_journey",
           "packet_journey_explorer",
           "ping_journey_figure",
           "say",
           "show",
           "RcuTimeline",
           "rcu_primer_alt",
           "rcu_primer_explorer",
           "rcu_primer_figure",
           "rcu_timeline",
]
