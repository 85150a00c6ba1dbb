"""Figures for the notebooks: colour-blind-safe, labelled, with alt text.

Figures are plain :class:`matplotlib.figure.Figure` objects on an Agg
canvas -- no pyplot, so nothing is shown behind the notebook's back and no
global state changes.  :func:`show` puts one into the notebook as an ``<img>`` that carries
its alt text (:func:`img_html`); an explorer renders the same figure to PNG
bytes with :func:`png_bytes` after updating its artists in place and swaps
the same kind of ``<img>`` into its output.

Colours are the Okabe-Ito palette (Okabe and Ito, "Color Universal
Design", 2002), distinguishable with the common colour-vision deficiencies.
"""

from __future__ import annotations

import base64
import html
import io

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..core.skbuff import KIND
from ..journey import GROUPS, Journey
from ..result import Result

__all__ = [
    "CACHE_SERIES",
    "COLORS",
    "OKABE_ITO",
    "PNG_SIGNATURE",
    "BlitRenderer",
    "LiveFigure",
    "PingJourneyFigure",
    "fit_title",
    "new_figure",
    "nice_ceiling",
    "ping_series",
    "img_html",
    "png_bytes",
    "show",
]

OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7",
}
#: Default colour order (yellow last: it is faint on white).
COLORS = [OKABE_ITO[k] for k in ("blue", "orange", "bluish_green", "vermillion", "sky_blue",
                                 "reddish_purple", "black", "yellow")]

#: How every figure draws the route-cache series, so a series looks the same in
#: each notebook (colour, line style and legend label).
CACHE_SERIES = {
    "entries": dict(color=OKABE_ITO["orange"], linewidth=1.4, label="dst entries"),
    "hashed": dict(color=OKABE_ITO["bluish_green"], linewidth=1.0, linestyle="--",
                   label="in the hash"),
    "rcu": dict(color=OKABE_ITO["sky_blue"], linewidth=1.2, linestyle="-.",
                label="waiting for RCU"),
    "garbage": dict(color=OKABE_ITO["reddish_purple"], linewidth=2.2, linestyle=":",
                    label="garbage list", zorder=3),
}

_STYLE = {"font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "figure.titlesize": 10}


def new_figure(nrows: int = 1, ncols: int = 1, *, title: str = "",
               size: tuple[float, float] = (7.0, 3.4), layout: str | None = "constrained",
               **subplot_kw):
    """A Figure with Okabe-Ito colours and light grids; returns ``(fig, axes)``.

    ``axes`` is a single Axes for 1x1, else the numpy array from ``subplots``
    (extra keywords go to ``Figure.subplots``).  ``layout=None`` skips the
    layout engine (faster redraws; give ``gridspec_kw`` margins instead).
    """
    import matplotlib as mpl

    with mpl.rc_context(_STYLE):
        fig = Figure(figsize=size, layout=layout)
        FigureCanvasAgg(fig)
        axes = fig.subplots(nrows, ncols, squeeze=True, **subplot_kw)
        for ax in np.atleast_1d(axes).ravel():
            ax.set_prop_cycle(color=COLORS)
            ax.grid(True, color="#dddddd", linewidth=0.6)
            ax.set_axisbelow(True)
        if title:
            fig.suptitle(title)
    return fig, axes


#: The 8 bytes every PNG file starts with (what :func:`png_bytes` returns starts so).
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def fit_title(text_artist, text: str, width_frac: float = 0.97) -> None:
    """Set a figure title, breaking it onto two lines if one would be clipped.

    The break goes at the ", " nearest the middle.  The figure must leave
    room above its top axes for two lines (the live figures do).
    """
    text_artist.set_text(text)
    fig = text_artist.get_figure()
    if fig is None or ", " not in text:
        return
    width = text_artist.get_window_extent(fig.canvas.get_renderer()).width
    if width <= width_frac * fig.bbox.width:
        return
    cuts = [i for i in range(len(text)) if text.startswith(", ", i)]
    cut = min(cuts, key=lambda i: abs(i - len(text) / 2))
    text_artist.set_text(text[: cut + 1] + "\n" + text[cut + 2:])


def png_bytes(fig: Figure, dpi: int = 100) -> bytes:
    """Render ``fig`` to PNG bytes (Agg)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    return buf.getvalue()


def img_html(png: bytes, alt: str, *, width: int | None = None) -> str:
    """An ``<img>`` element with the PNG embedded (base64 data URI) and its alt text.

    This is what a screen reader gets: JupyterLab 4.6 and nbconvert 7.17 both
    render a ``text/html`` output's ``<img alt>`` as it is, while neither puts
    the ``alt`` of an ``image/png`` output's metadata on the ``<img>`` they make
    (JupyterLab leaves it out; nbconvert writes "No description has been
    provided for this image").  ``width`` is the figure's natural width in
    CSS pixels; the image never grows past its output area.
    """
    if not isinstance(alt, str) or not alt.strip():
        raise ValueError("a figure needs a non-empty alt text describing it")
    b64 = base64.b64encode(png).decode("ascii")
    size = f' width="{int(width)}"' if width else ""
    return (f'<img alt="{html.escape(alt.strip(), quote=True)}"{size} '
            f'style="max-width:100%;height:auto" src="data:image/png;base64,{b64}">')


def show(fig: Figure, alt: str, *, dpi: int = 100) -> None:
    """Display ``fig`` in the notebook as an image that carries its alt text.

    The output is ``text/html`` (an ``<img alt=...>`` with the PNG embedded,
    see :func:`img_html`) with a ``text/plain`` fallback ``"[figure] <alt>"``:
    a screen reader, a text-only viewer, nbval and a diff all get the
    description.  There is deliberately no separate ``image/png`` copy: every
    front end that shows images picks the HTML first, and a second copy would
    double the notebook's size.  Nothing is returned, so the cell has no
    ``Out[]`` echo.
    """
    from IPython.display import display

    if not isinstance(alt, str) or not alt.strip():
        raise ValueError("show() needs a non-empty alt text describing the figure")
    width = round(float(fig.get_size_inches()[0] * dpi))
    bundle = {"text/html": img_html(png_bytes(fig, dpi=dpi), alt, width=width),
              "text/plain": f"[figure] {alt.strip()}"}
    display(bundle, raw=True)


# -- notebook 00: ping latency and one packet's journey -------------------------------

def ping_series(res: Result) -> tuple[np.ndarray, np.ndarray]:
    """Send time [s] and RTT [ms] of *every* echo request offered (NaN = no reply).

    ``Result.ping`` only lists requests the router forwarded; requests it
    dropped (TTL expired, DF and too big) are added here as lost.
    """
    kind = res.packets["kind"][: res.offered]
    req = kind == KIND["ping_request"]
    sent_all = res.packets["t"][: res.offered][req]
    tags = res.packets["tag"][: res.offered][req]
    rtt_all = np.full(sent_all.size, np.nan)
    if res.ping["seq"].size:
        _, rtt = res.ping_rtt_ms()
        pos = {int(s): i for i, s in enumerate(res.ping["seq"])}
        for i, tag in enumerate(tags):
            k = pos.get(int(tag))
            if k is not None:
                rtt_all[i] = rtt[k]
    return sent_all, rtt_all


_GROUP_LABELS = {"receive": "receive", "route": "route lookup", "forward": "ip_forward",
                 "output": "output + TX", "wire": "on the wire", "icmp": "ICMP error"}
_GROUP_COLORS = {"receive": OKABE_ITO["blue"], "route": OKABE_ITO["orange"],
                 "forward": OKABE_ITO["bluish_green"], "output": OKABE_ITO["reddish_purple"],
                 "wire": OKABE_ITO["sky_blue"], "icmp": OKABE_ITO["vermillion"]}


def nice_ceiling(x: float, floor: float = 1.0) -> float:
    """The smallest of 1, 2, 5 x 10^k that is >= ``x`` (and >= ``floor``)."""
    x = max(float(x), floor)
    k = 10.0 ** np.floor(np.log10(x))
    for m in (1.0, 2.0, 5.0, 10.0):
        if m * k >= x * (1 - 1e-12):
            return float(m * k)
    return float(10 * k)


class BlitRenderer:
    """Fast PNGs of a figure whose *static* part is cached per axis-limit key.

    Text is the slow part of an Agg draw (each glyph is rasterised on every
    draw).  Titles, axis labels, tick labels and legends only change when the
    axis limits do, so the figure is drawn in full once per ``key`` (the
    limits) with the ``dynamic`` artists hidden, that background is kept, and
    later renders restore it and draw only the dynamic artists on top.
    """

    def __init__(self, fig: Figure, dynamic: list, dpi: int = 80, max_cached: int = 32) -> None:
        self.fig = fig
        self.dynamic = dynamic
        self.dpi = dpi
        self.max_cached = max_cached
        self._cache: dict = {}
        self._renderer = None

    def render(self, key) -> bytes:
        from PIL import Image

        fig = self.fig
        if fig.dpi != self.dpi:
            fig.set_dpi(self.dpi)
        canvas = fig.canvas
        renderer = canvas.get_renderer()
        if renderer is not self._renderer:   # resized or re-created: old regions are stale
            self._cache.clear()
            self._renderer = renderer
        bg = self._cache.get(key)
        if bg is None:
            visible = [a.get_visible() for a in self.dynamic]
            for a in self.dynamic:
                a.set_visible(False)
            canvas.draw()
            for a, v in zip(self.dynamic, visible, strict=True):
                a.set_visible(v)
            if len(self._cache) >= self.max_cached:
                self._cache.pop(next(iter(self._cache)))
            bg = self._cache[key] = canvas.copy_from_bbox(fig.bbox)
            renderer = self._renderer = canvas.get_renderer()
        else:
            canvas.restore_region(bg)
        for a in self.dynamic:
            if a.get_visible():
                a.draw(renderer)
        w, h = canvas.get_width_height(physical=True)
        img = Image.frombuffer("RGBA", (w, h), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
        buf = io.BytesIO()
        img.convert("RGB").save(buf, format="png", compress_level=1)
        return buf.getvalue()


class LiveFigure:
    """Base of the explorers' figures: artists updated in place, PNGs via a :class:`BlitRenderer`.

    A subclass builds its figure once, keeps a ``BlitRenderer`` over the
    artists that change in ``self._blit``, sets ``self._alt`` on every update,
    and names in :meth:`_limit_axes` the axes whose limits decide when the
    cached background (titles, ticks, legends) must be drawn again.
    """

    _alt: str = ""
    _blit: BlitRenderer

    def _limit_axes(self) -> list:
        raise NotImplementedError

    def render_png(self, dpi: int = 80) -> bytes:
        """PNG of the current state, redrawing only the artists that change."""
        self._blit.dpi = dpi
        key = tuple((ax.get_xlim(), ax.get_ylim()) for ax in self._limit_axes())
        return self._blit.render(key)

    @property
    def alt(self) -> str:
        """A description of what the figure currently shows."""
        return self._alt


class PingJourneyFigure(LiveFigure):
    """Two panels: ping RTT over time, and where one echo request's time goes.

    Built once; :meth:`update` moves the existing artists (line data, bar
    widths, texts) and :meth:`render_png` redraws only what changed, so an
    explorer can redraw quickly.  ``fig`` is a normal Figure for :func:`show`.
    """

    def __init__(self, duration: float = 10.0, size: tuple[float, float] = (9.0, 3.4)) -> None:
        # Fixed margins instead of a layout engine: the explorer redraws this figure
        # on every slider move, and a layout engine would move things between draws.
        fig, (ax_rtt, ax_j) = new_figure(1, 2, size=size, width_ratios=(1.4, 1.0), layout=None,
                                         gridspec_kw=dict(left=0.07, right=0.975, bottom=0.14,
                                                          top=0.82, wspace=0.33))
        self.fig, self.ax_rtt, self.ax_j = fig, ax_rtt, ax_j
        ax_rtt.set_title("Ping round-trip time")
        ax_rtt.set_xlabel("time [s]")
        ax_rtt.set_ylabel("round-trip time [ms]")
        (self.line,) = ax_rtt.plot([], [], "o-", color=OKABE_ITO["blue"], markersize=3,
                                   linewidth=1, label="reply")
        (self.lost,) = ax_rtt.plot([], [], "x", color=OKABE_ITO["vermillion"], markersize=6,
                                   linestyle="none", label="no reply", clip_on=False)
        ax_rtt.legend(loc="upper right", frameon=True, framealpha=0.9, ncols=2)
        self.msg = ax_rtt.text(0.5, 0.5, "", transform=ax_rtt.transAxes, ha="center",
                               va="center", color=OKABE_ITO["vermillion"])
        ax_rtt.set_xlim(0, duration)
        ax_j.set_title("Router time per echo request")
        ax_j.set_xlabel("time [µs]")
        ypos = np.arange(len(GROUPS))
        self.bars = ax_j.barh(ypos, np.zeros(len(GROUPS)),
                              color=[_GROUP_COLORS[g] for g in GROUPS])
        ax_j.set_yticks(ypos, [_GROUP_LABELS[g] for g in GROUPS])
        ax_j.invert_yaxis()
        self.bar_text = [ax_j.text(0, y, "", va="center", fontsize=8) for y in ypos]
        self.total = ax_j.text(0.97, 0.05, "", transform=ax_j.transAxes, ha="right",
                               va="bottom", fontsize=8)
        self.title = fig.suptitle(" ")
        self._alt = ""
        dynamic = [self.line, self.lost, self.msg, *self.bars, *self.bar_text, self.total,
                   self.title]
        self._blit = BlitRenderer(fig, dynamic)

    def update(self, res: Result, journey: Journey, conditions: str) -> None:
        """Redraw from a ping run and the journey of one of its echo requests."""
        sent, rtt = ping_series(res)
        ok = np.isfinite(rtt)
        self.line.set_data(sent[ok], rtt[ok])
        self.lost.set_data(sent[~ok], np.zeros(int((~ok).sum())))
        top = float(np.max(rtt[ok])) if ok.any() else 1.0
        self.ax_rtt.set_ylim(0, nice_ceiling(top * 1.3))
        self.ax_rtt.set_xlim(0, res.duration)
        self.msg.set_text("" if ok.any() else "no echo replies:\n" + _why_no_reply(journey))
        groups = journey.by_group()
        vmax = nice_ceiling(max(groups.values()) * 1.3)
        for bar, txt, g in zip(self.bars, self.bar_text, GROUPS, strict=True):
            bar.set_width(groups[g])
            txt.set_position((groups[g] + vmax * 0.015, bar.get_y() + bar.get_height() / 2))
            txt.set_text(f"{groups[g]:.1f}" if groups[g] else "")
        self.ax_j.set_xlim(0, vmax)
        self.total.set_text(f"CPU total {journey.cpu_seconds * 1e6:.1f} µs")
        self.title.set_text(conditions)
        self._alt = _alt_text(sent, rtt, journey, conditions)

    def _limit_axes(self) -> list:
        return [self.ax_rtt, self.ax_j]


def _why_no_reply(journey: Journey) -> str:
    if journey.outcome == "drop_ttl":
        return "TTL expired in ip_forward\n(ICMP time exceeded sent back)"
    if journey.outcome == "drop_frag_needed":
        return "DF set and larger than the MTU\n(ICMP fragmentation needed sent back)"
    return "every request or reply was lost"


def _alt_text(sent, rtt, journey: Journey, conditions: str) -> str:
    ok = np.isfinite(rtt)
    if ok.any():
        r = rtt[ok]
        ping = (f"Left: ping round-trip times over {sent.max():.0f} s stay between "
                f"{r.min():.2f} and {r.max():.2f} ms (median {np.median(r):.2f} ms), "
                f"{int((~ok).sum())} of {rtt.size} pings lost.")
    else:
        ping = (f"Left: no echo replies; all {rtt.size} pings lost because "
                + _why_no_reply(journey).replace("\n", " ") + ".")
    groups = journey.by_group()
    total = sum(groups.values())
    cpu = {g: v for g, v in groups.items() if g != "wire"}
    biggest = max(cpu, key=cpu.get)
    right = (f"Right: one echo request spends {total:.1f} µs in the router: "
             f"{journey.cpu_seconds * 1e6:.1f} µs of CPU, the largest CPU share "
             f"{_GROUP_LABELS[biggest]} ({cpu[biggest]:.1f} µs), and "
             f"{groups.get('wire', 0.0):.1f} µs on the wire.")
    return f"{conditions}. {ping} {right}"
