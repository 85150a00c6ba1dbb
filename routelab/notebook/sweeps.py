"""Sweeps in the notebooks: heatmaps of a :class:`routelab.sweep.SweepTable`, and the
precomputed sweeps of stories 1 and 2 ("where is the cliff").

``heatmap(table, "ping_rtt_ms_p50", x="outside_welchia", y="kernel")`` returns
``(fig, alt)`` for :func:`routelab.notebook.plots.show`: one cell per grid
point, coloured by the seed-mean of the value with *cividis* (a sequential
map made to read the same with every common colour-vision deficiency, and in
greyscale), each cell also printed as a number so nothing depends on colour
alone, labelled axes with the knobs' units, and an alt text that names the
cliff: for each row, the first column where the value crosses ``threshold``.

:func:`load` reads ``routelab/data/sweep_story1.json`` / ``sweep_story2.json``,
written by ``benchmarks/sweep_story1.py`` / ``sweep_story2.py --save`` (a few
minutes on 2 cores; a live sweep of 80 runs would stall a notebook).
"""

from __future__ import annotations

import json
import math
from importlib import resources

import numpy as np

from ..sweep import SweepTable
from .plots import new_figure

__all__ = ["load", "made", "heatmap", "cliff", "cliff_sentence", "LABELS"]

#: Readable names of the summary values the notebooks plot (value -> (label, unit)).
LABELS = {
    "ping_rtt_ms_p50": ("median ping", "ms"),
    "ping_rtt_ms_p95": ("95th-percentile ping", "ms"),
    "ping_loss_pct": ("ping loss", "%"),
    "cpu_busy_pct": ("CPU busy", "%"),
    "cpu_ksoftirqd_pct": ("CPU in ksoftirqd", "%"),
    "rcu_grace_ms_p95": ("95th-percentile grace period", "ms"),
    "rcu_grace_ms_p50": ("median grace period", "ms"),
    "rcu_pending_max": ("most entries waiting for RCU", "entries"),
    "dropped_packets": ("dropped packets", "packets"),
}


def load(story: str | int) -> SweepTable:
    """The precomputed sweep of story ``1`` or ``2`` (``routelab/data/sweep_storyN.json``)."""
    name = f"sweep_story{story}.json"
    try:
        text = resources.files("routelab").joinpath("data", name).read_text()
    except FileNotFoundError:
        raise FileNotFoundError(f"routelab/data/{name} is missing: run "
                                f"'python benchmarks/sweep_story{story}.py --save'") from None
    return SweepTable.from_json(text)


def made(story: str | int) -> dict:
    """How the precomputed sweep was made (script, routelab version, compiled, wall time)."""
    text = resources.files("routelab").joinpath("data", f"sweep_story{story}.json").read_text()
    return json.loads(text).get("made", {})


def _label(value: str) -> tuple[str, str]:
    return LABELS.get(value, (value.replace("_", " "), ""))


def _knob_label(table: SweepTable, knob: str) -> str:
    from ..scenarios import get

    spec = get(table.scenario).KNOBS.get(knob)
    unit = f" [{spec.unit}]" if spec is not None and spec.unit else ""
    return knob.replace("_", " ") + unit


def cliff(table: SweepTable, value: str, x: str, y: str, threshold: float,
          **where) -> dict:
    """``{row value: first x where the seed-mean of value > threshold, or None}``."""
    xs, ys, grid = table.pivot(value, x, y, **where)
    out = {}
    for yv, line in zip(ys, grid, strict=True):
        above = [xv for xv, v in zip(xs, line, strict=True) if not math.isnan(v) and v > threshold]
        out[yv] = above[0] if above else None
    return out


def cliff_sentence(table: SweepTable, value: str, x: str, y: str, threshold: float,
                   **where) -> str:
    """One sentence per the rows of :func:`cliff`: "2.4.24: from 8; 2.0: not up to 24"."""
    c = cliff(table, value, x, y, threshold, **where)
    top = table.grid[x][-1]
    return "; ".join(f"{_tick(yv)}: from {_tick(xv)}" if xv is not None
                     else f"{_tick(yv)}: not up to {_tick(top)}" for yv, xv in c.items())


def _tick(v) -> str:
    """A grid value as a label: 250000.0 -> "250k", 8 -> "8", "2.4.24" as it is."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if v >= 10_000 and v % 1000 == 0:
        return f"{v / 1000:g}k"
    return f"{v:g}"


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "--"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.0f}"
    return f"{v:.1f}"


def heatmap(table: SweepTable, value: str, x: str, y: str, *, threshold: float | None = None,
            log: bool = False, title: str | None = None, size=(7.6, 3.2), **where):
    """A heatmap of ``value`` (seed-mean) over the grid knobs ``x`` (across) and ``y`` (down).

    ``threshold``: the level that counts as "over the cliff"; cells above it are
    outlined and the alt text names, per row, the first column above it.
    ``log``: a logarithmic colour scale (latencies spanning decades).  Other grid
    knobs with several values are pinned with ``where`` (``cpu="k6-200"``).
    Returns ``(fig, alt)``.
    """
    from matplotlib.colors import LogNorm, Normalize

    xs, ys, grid = table.pivot(value, x, y, **where)
    z = np.array(grid, dtype=float)
    name, unit = _label(value)
    ok = z[~np.isnan(z)]
    lo, hi = (float(ok.min()), float(ok.max())) if ok.size else (0.0, 1.0)
    if log and lo > 0:
        norm = LogNorm(vmin=lo, vmax=max(hi, lo * 1.01))
    else:
        log = False
        norm = Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1)
    fig, ax = new_figure(size=size)
    ax.grid(False)
    im = ax.imshow(np.ma.masked_invalid(z), cmap="cividis", norm=norm, aspect="auto",
                   origin="upper", interpolation="nearest")
    cmap = im.get_cmap()
    for i in range(len(ys)):
        for j in range(len(xs)):
            v = z[i, j]
            if math.isnan(v):
                shade = 1.0
            else:
                r, g, b, _ = cmap(norm(v))
                shade = 0.2126 * r + 0.7152 * g + 0.0722 * b
            ax.text(j, i, _fmt(v), ha="center", va="center", fontsize=7,
                    color="black" if shade > 0.5 else "white")
            if threshold is not None and not math.isnan(v) and v > threshold:
                ax.add_patch(_outline(j, i))
    ax.set_xticks(range(len(xs)), [_tick(v) for v in xs])
    ax.set_yticks(range(len(ys)), [_tick(v) for v in ys])
    ax.set_xlabel(_knob_label(table, x))
    ax.set_ylabel(_knob_label(table, y))
    bar = fig.colorbar(im, ax=ax, pad=0.02)
    bar.set_label(f"{name} [{unit}]" if unit else name)
    pinned = {**table.fixed, **where}
    setting = ", ".join(f"{k}={v}" for k, v in pinned.items() if k not in (x, y))
    nseeds = len(table.seeds)
    ax.set_title(title or f"{table.scenario}: {name}, mean of {nseeds} seed"
                 f"{'s' if nseeds > 1 else ''}" + (f" ({setting})" if setting else ""))
    seeds = f"mean of {nseeds} seed{'s' if nseeds > 1 else ''}"
    rows = ", ".join(_tick(v) for v in ys)
    scale = " (logarithmic colour scale)" if log else ""
    alt = (f"Heatmap of the {name} ({unit}, {seeds}) for {x.replace('_', ' ')} "
           f"{_tick(xs[0])} to {_tick(xs[-1])} across and {y.replace('_', ' ')} down ({rows}); "
           f"values from {_fmt(lo)} to {_fmt(hi)} {unit}, darker blue low, lighter yellow "
           f"high{scale}, each cell labelled with its value.")
    if threshold is not None:
        alt += (f" Cells above {threshold:g} {unit} are outlined; first "
                f"{x.replace('_', ' ')} above it per row: "
                + cliff_sentence(table, value, x, y, threshold, **where) + ".")
    return fig, alt


def _outline(j: int, i: int):
    from matplotlib.patches import Rectangle

    return Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="#D55E00", linewidth=1.6)
