"""Helpers for the notebooks (and only the notebooks): figures, explorers, answer checks.

Notebooks import what they need in one setup cell::

    from routelab.notebook import packet_journey, show, check_number, ...

- :func:`show` -- display a matplotlib Figure as a PNG with alt text
- :func:`packet_journey` -- one packet through every stage (routelab.journey)
- :func:`ping_journey_figure`, :func:`packet_journey_explorer` -- notebook 00
- :func:`check_number`, :func:`check_choice` -- "predict, then run" feedback
- :func:`control_for`, :class:`Explorer` -- build new explorers from knob metadata
- :func:`rcu_timeline`, :func:`rcu_primer_figure`, :func:`rcu_primer_alt`,
  :func:`rcu_primer_explorer` -- notebook 02's RCU primer
"""

from ..journey import packet_journey
from .checks import check_choice, check_number
from .explorers import EXPLORERS, packet_journey_explorer, ping_journey_figure
from .plots import OKABE_ITO, new_figure, show
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
           "check_choice",
           "check_number",
           "control_for",
           "new_figure",
           "packet_journey",
           "packet_journey_explorer",
           "ping_journey_figure",
           "show",
           "RcuTimeline",
           "rcu_primer_alt",
           "rcu_primer_explorer",
           "rcu_primer_figure",
           "rcu_timeline",
]
