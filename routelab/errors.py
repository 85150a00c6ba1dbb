"""Errors raised by routelab for bad input.

Every knob is validated where it enters the model (constructor, CLI, widget).
A bad value raises :class:`KnobError`, whose message names the knob, the value
and the valid range, so a student sees one clear line instead of a traceback
from deep inside the model.
"""

from __future__ import annotations


class RoutelabError(Exception):
    """Base class of routelab's own errors."""


class KnobError(RoutelabError, ValueError):
    """A knob (sysctl, scenario parameter) was given an invalid value.

    Parameters
    ----------
    knob : str
        Knob name as the user wrote it (e.g. ``background_pps``).
    value : object
        The rejected value.
    valid : str
        Human-readable description of the valid range or choices.
    """

    def __init__(self, knob: str, value: object, valid: str) -> None:
        self.knob = knob
        self.value = value
        self.valid = valid
        super().__init__(f"{knob}={value!r} is not valid: expected {valid}")
