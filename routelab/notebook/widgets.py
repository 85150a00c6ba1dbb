"""Controls built from knob metadata, and the :class:`Explorer` that drives a live figure.

A control's range, step, unit and help text come from the model's
:class:`routelab.sysctl.Knob` (one place for ranges); a notebook may narrow
the range for teaching, but never widen it past what the knob accepts.

An :class:`Explorer` shows its controls, a one-line readout (CSS class
``routelab-readout``) and a figure.  On every change it re-simulates,
updates the figure's artists in place, renders a PNG and swaps it, as an
``<img>`` that carries the figure's alt text, into an ``ipywidgets.HTML``
inside an ``Output`` widget.  (``ipywidgets.Image`` cannot carry alt text:
its view in ipywidgets 8.1 sets only ``src``, ``width`` and ``height``.)
Bad combinations become a friendly line in the readout, never a traceback.
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager

import ipywidgets as W
from matplotlib.figure import Figure

from ..errors import KnobError, RoutelabError
from ..sysctl import Knob
from .plots import img_html, png_bytes

__all__ = ["READOUT_CLASS", "Explorer", "control_for"]

READOUT_CLASS = "routelab-readout"
_STYLE = {"description_width": "initial"}


def _label(knob: Knob, description: str | None) -> str:
    text = description or knob.name.replace("_", " ")
    return f"{text} [{knob.unit}]" if knob.unit and knob.kind is not bool else text


def control_for(knob: Knob, *, description: str | None = None, value=None, min=None, max=None,
                step=None, options: Sequence | None = None) -> W.ValueWidget:
    """A slider, dropdown or checkbox for ``knob``.

    Parameters
    ----------
    knob : Knob
        Where the type, range, unit and help text come from.
    description : str, optional
        Label (default: the knob's name); the unit is appended.
    value, min, max, step : optional
        Narrower range or another start value.  Each is validated against the
        knob, so a control can never offer a value the model rejects.
    options : sequence, optional
        Subset of ``knob.choices`` (or ``(label, value)`` pairs) for a dropdown.

    The widget's ``routelab_name`` attribute holds ``knob.name``.
    """
    tip = knob.help + (f" Valid: {knob.valid_text()}." if knob.help else "")
    label = _label(knob, description)
    if knob.choices:
        opts = list(options) if options is not None else list(knob.choices)
        for o in opts:
            knob.validate(o[1] if isinstance(o, tuple) else o)
        start = knob.validate(value) if value is not None else knob.default
        w = W.Dropdown(options=opts, value=start, description=label, tooltip=tip, style=_STYLE)
    elif knob.kind is bool:
        start = knob.validate(value) if value is not None else bool(knob.default)
        w = W.Checkbox(value=start, description=label, tooltip=tip, indent=False)
    elif knob.kind in (int, float):
        lo = knob.validate(min) if min is not None else knob.min
        hi = knob.validate(max) if max is not None else knob.max
        if lo is None or hi is None:
            raise KnobError(knob.name, (lo, hi),
                            "a bounded range for a slider (give min= and max=)")
        start = knob.validate(value) if value is not None else knob.default
        if start is None:
            raise KnobError(knob.name, None, "a start value (its default is derived; give value=)")
        if not lo <= start <= hi:
            raise KnobError(knob.name, start, f"a start value inside the slider range [{lo}, {hi}]")
        default_step = 1 if knob.kind is int else (hi - lo) / 100
        st = step if step is not None else (knob.step or default_step)
        extra = {}
        if knob.kind is float:
            # whole-number steps (pps, bytes) read better without decimals
            extra["readout_format"] = ",.0f" if float(st).is_integer() else ".3g"
        cls = W.IntSlider if knob.kind is int else W.FloatSlider
        w = cls(value=start, min=lo, max=hi, step=st, description=label, tooltip=tip,
                continuous_update=False, style=_STYLE,
                layout=W.Layout(width="380px", margin="2px 16px 2px 0"), **extra)
    else:
        raise KnobError(knob.name, knob.kind, "a knob of kind int, float, bool or str")
    w.routelab_name = knob.name
    return w


def _plain(text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", text))


class Explorer:
    """Controls + live figure + readout, re-simulated on every change.

    Parameters
    ----------
    controls : mapping name -> widget, or a sequence of widgets from :func:`control_for`
    update : callable(**values) -> str or (str, str)
        Re-simulates for the control values, updates ``figure``'s artists in
        place and returns the readout (HTML allowed) or ``(readout, alt)``.
    figure : matplotlib Figure
        The figure ``update`` draws into.
    title : str, optional
        A heading shown above the controls.
    dpi : int
        Resolution of the live PNG (lower is faster).
    render : callable() -> bytes, optional
        Makes the PNG after ``update`` (default: a full ``savefig`` of
        ``figure``); e.g. a cached-background renderer that redraws only the
        artists that change.

    Attributes
    ----------
    widget : ipywidgets.VBox       what the notebook displays
    image : ipywidgets.HTML        the live figure, an ``<img alt=...>`` (inside ``output``)
    readout : ipywidgets.HTML      the one-line readout (class ``routelab-readout``)
    description : ipywidgets.HTML  the figure's text alternative, in a collapsed <details>
    alt : str                      that text (the ``<img>`` gets a generic one if empty)
    last_error : str or None       the message shown for the last failed update
    """

    def __init__(self, controls: Mapping[str, W.ValueWidget] | Sequence[W.ValueWidget],
                 update: Callable[..., str | tuple[str, str]], figure: Figure, *,
                 title: str = "", dpi: int = 80,
                 render: Callable[[], bytes] | None = None) -> None:
        if not isinstance(controls, Mapping):
            controls = {w.routelab_name: w for w in controls}
        self.controls: dict[str, W.ValueWidget] = dict(controls)
        self._fn = update
        self.figure = figure
        self.dpi = dpi
        self._render = render or (lambda: png_bytes(self.figure, dpi=self.dpi))
        self.last_error: str | None = None
        self.alt = ""
        self.title = title
        self._png = b""
        self._holding = False
        self.image = W.HTML(layout=W.Layout(max_width="100%"))
        self.output = W.Output()
        self.output.append_display_data(self.image)
        self.readout = W.HTML()
        self.readout.add_class(READOUT_CLASS)
        # The text alternative of the live figure.  (Not the Image widget's tooltip:
        # with ipywidgets 8.1 in JupyterLab 4 a tooltip on an Image breaks its view.)
        self.description = W.HTML()
        box = W.Box(list(self.controls.values()),
                    layout=W.Layout(display="flex", flex_flow="row wrap"))
        parts = ([W.HTML(f"<b>{html.escape(title)}</b>")] if title else []) + \
            [box, self.readout, self.output, self.description]
        self.widget = W.VBox(parts)
        for w in self.controls.values():
            w.observe(self._on_change, names="value")
        self.redraw()

    @property
    def css_width(self) -> int:
        """The figure's width on the page [CSS px]: its inches at 100 px per inch.

        Rendered at ``dpi`` >= 100 the PNG has at least one pixel per CSS
        pixel, so its text stays sharp; at a lower ``dpi`` the browser
        scales it up instead of showing it small.
        """
        return round(float(self.figure.get_size_inches()[0]) * 100)

    # -- values -------------------------------------------------------------------
    @property
    def values(self) -> dict:
        """Current control values by knob name."""
        return {name: w.value for name, w in self.controls.items()}

    @property
    def readout_text(self) -> str:
        """The readout without HTML tags."""
        return _plain(self.readout.value)

    @property
    def png(self) -> bytes:
        """The figure currently shown."""
        return self._png

    # -- updating -----------------------------------------------------------------
    @contextmanager
    def _hold(self):
        self._holding = True
        try:
            yield
        finally:
            self._holding = False

    def _on_change(self, change) -> None:
        if not self._holding:
            self.redraw()

    def update(self, **values) -> float:
        """Set controls by name, re-simulate and redraw once; return elapsed seconds.

        For headless use (tests, benchmarks): the same work a slider move
        triggers in the browser.  Unknown names or out-of-range values show
        up in the readout like any other bad input.
        """
        t0 = time.perf_counter()
        unknown = sorted(set(values) - set(self.controls))
        if unknown:
            self._show_error(KnobError(unknown[0], values[unknown[0]],
                                       "one of the controls: " + ", ".join(self.controls)))
            return time.perf_counter() - t0
        try:
            with self._hold():
                for name, v in values.items():
                    self.controls[name].value = v
        except Exception as exc:  # noqa: BLE001 - a bad value is shown, not raised
            self._show_error(KnobError(name, v, f"a value this control accepts ({exc})"))
            return time.perf_counter() - t0
        self.redraw()
        return time.perf_counter() - t0

    def redraw(self) -> None:
        """Re-simulate for the current values and refresh the figure and readout."""
        try:
            out = self._fn(**self.values)
        except Exception as exc:  # noqa: BLE001 - students see a message, not a traceback
            self._show_error(exc)
            return
        readout, alt = out if isinstance(out, tuple) else (out, "")
        self.last_error = None
        try:
            png = self._render()
        except Exception as exc:  # noqa: BLE001
            self._show_error(exc)
            return
        self.alt = alt
        self._png = png
        self.image.value = img_html(png, alt or f"Figure of the explorer {self.title!r}; "
                                    f"its readout: {_plain(readout)}", width=self.css_width)
        self.description.value = (
            f"<details><summary>Figure description</summary>{html.escape(alt)}</details>"
            if alt else "")
        self.readout.value = readout

    def _show_error(self, exc: BaseException) -> None:
        if isinstance(exc, KnobError):
            msg = (f"{exc.knob} = {exc.value!r} does not work here: expected {exc.valid}. "
                   "The figure still shows the last good setting.")
        elif isinstance(exc, (RoutelabError, ValueError)):
            msg = f"{exc} The figure still shows the last good setting."
        else:
            msg = (f"Something unexpected went wrong ({type(exc).__name__}: {exc}). "
                   "The figure still shows the last good setting; please tell your instructor.")
        self.last_error = msg
        self.readout.value = f"<span style='color:#D55E00'>⚠ {html.escape(msg)}</span>"

    # -- display ------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)
