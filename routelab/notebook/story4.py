"""Notebook 04 (a container's TCP through the host's forward path): runs, skb drawings, profiles.

The reported figures (:data:`REPORT`) are from the Linux containers list
thread "[PATCHSET] 2.6.20-lxc8" (Benjamin Thery, Kirill Korotaev, Eric W.
Biederman, 2007), as summarised in the project brief (stories.md s4).  The
model's figures come from :func:`routelab.scenarios.container.run`; the skb
drawings from real :mod:`routelab.core.skb` objects built the way
``routelab.hosts.tcp`` builds them (tcp_sendmsg, tcp_transmit_skb) and
``ip_forward`` treats them (skb_cow).
"""

from __future__ import annotations

import functools
import html
import textwrap

import ipywidgets as W  # noqa: N812 - as in widgets.py
import numpy as np

from ..core import skb as _skb
from ..hosts.tcp import IP_HDR, MAX_TCP_HEADER, TCP_HDR
from ..result import Result
from ..scenarios import container
from .plots import OKABE_ITO, new_figure
from .widgets import Explorer, control_for

__all__ = [
    "FEATURES_KIRILL", "GROUPS", "REPORT", "VARIANTS", "anatomy_alt", "anatomy_figure",
    "container_explorer", "container_readout", "grouped_points", "model_vs_report",
    "profile_alt", "profile_figure", "run_variant", "skb_walkthrough", "variants_table",
]

MSS = container.MSS

#: The features Kirill Korotaev proposed the pair device advertise.
FEATURES_KIRILL = "LLTX,HW_CSUM,SG,HIGHDMA"

#: The thread's netperf figures: (Mbit/s, CPU %) without and with a container (unpatched).
REPORT = {"host": (719.78, 10.45), "container": (719.37, 21.88)}

#: The variants the notebook compares: label and knobs.
VARIANTS = {
    "host": ("host's own netperf", dict(path="host")),
    "container": ("container, 2.6.20 as is", dict(path="container")),
    "skip": ("container, cow=skip (the hack)", dict(path="container", cow="skip")),
    "trap": ("skip + Kirill's features, 2.6.20",
             dict(path="container", cow="skip", pair_features=FEATURES_KIRILL)),
    "fixed": ("skip + features, PARTIAL kept",
              dict(path="container", cow="skip", pair_features=FEATURES_KIRILL,
                   kernel="2.6.20-fwdcsum")),
    "features": ("features, PARTIAL kept, no skip",
                 dict(path="container", pair_features=FEATURES_KIRILL,
                      kernel="2.6.20-fwdcsum")),
}

#: Profile rows grouped for the stacked bars: (group, colour, substrings of row names).
GROUPS = (
    ("copy from user (+ checksum)", OKABE_ITO["vermillion"],
     ("copy_from_user", "csum_partial_copy_generic")),
    ("skb_cow copy", OKABE_ITO["reddish_purple"], ("skb_cow",)),
    ("TCP (send, ACKs)", OKABE_ITO["blue"],
     ("sys_sendmsg", "tcp_sendmsg", "skb_clone+tcp", "tcp_v4_rcv", "tcp_clean_rtx")),
    ("pair device + container RX", OKABE_ITO["orange"],
     ("(container)", "(ACK, container)")),
    ("host RX + route lookup", OKABE_ITO["sky_blue"],
     ("napi_poll_rx", "netif_rx", "netif_receive_skb", "net_rx_action", "ip_rcv",
      "ip_route_input", "neigh_lookup", "arp_bind")),
    ("ip_forward + TTL", OKABE_ITO["yellow"], ("ip_forward",)),
    ("IP output + NIC TX", OKABE_ITO["bluish_green"], ("ip_output", "tx_complete")),
)
_OTHER = ("other", "#999999")


def _group_of(row: str) -> str:
    for name, _, keys in GROUPS:
        if any(k in row for k in keys):
            return name
    return _OTHER[0]


def grouped_points(res: Result) -> dict[str, float]:
    """CPU points (percent of all of host A's CPUs) per group of kernel functions.

    The profile is the whole busy time, charged when the work is queued; the
    busy time is measured in the run's window, so the two differ by work in
    flight at its end (< 2 %).  The groups are scaled to add up to the run's
    ``cpu_load_pct`` exactly, so a bar's length is the load the run reports."""
    out = {name: 0.0 for name, _, _ in GROUPS}
    out[_OTHER[0]] = 0.0
    for row, sec in res.counters["cpu_by_function"].items():
        out[_group_of(row)] += sec
    total = sum(out.values())
    load = res.summary()["cpu_load_pct"]
    scale = load / total if total > 0 else 0.0
    return {g: v * scale for g, v in out.items()}


@functools.lru_cache(maxsize=32)
def _run(items: tuple, duration: float, seed: int) -> Result:
    return container.run(seed=seed, duration=duration, **dict(items))


def run_variant(name: str, duration: float = 0.1, seed: int = 1, **more) -> Result:
    """The container scenario for one of :data:`VARIANTS` (cached per arguments)."""
    if name not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    knobs = {**VARIANTS[name][1], **more}
    return _run(tuple(sorted(knobs.items())), float(duration), int(seed))


def variants_table(runs: dict[str, Result]) -> str:
    """Throughput, CPU, copies, checksums, bad checksums of each run, one row each."""
    head = (f"{'variant':<34} {'Mbit/s':>8} {'CPU %':>6} {'copies/seg':>10} "
            f"{'B copied/seg':>12} {'sw csum/seg':>11} {'bad csum at B':>13}")
    rows = [head, "-" * len(head)]
    for name, res in runs.items():
        s = res.summary()
        rows.append(f"{VARIANTS.get(name, (name,))[0]:<34} {s['throughput_mbps']:>8.2f} "
                    f"{s['cpu_load_pct']:>6.2f} {s['copies_per_packet']:>10.2f} "
                    f"{s['bytes_copied_per_packet']:>12,.0f} {s['sw_checksums_per_packet']:>11.0f} "
                    f"{s['bad_checksums']:>13,}")
    return "\n".join(rows)


def model_vs_report(host: Result, cont: Result) -> str:
    """The two calibrated cases: the thread's figures next to the model's."""
    out = [f"{'case':<24} {'report Mbit/s':>13} {'model Mbit/s':>12} {'report CPU %':>12} "
           f"{'model CPU %':>11}", "-" * 76]
    for label, key, res in (("no container (host)", "host", host),
                            ("container, unpatched", "container", cont)):
        s = res.summary()
        mb, pct = REPORT[key]
        out.append(f"{label:<24} {mb:>13.2f} {s['throughput_mbps']:>12.2f} {pct:>12.2f} "
                   f"{s['cpu_load_pct']:>11.2f}")
    return "\n".join(out)


# -- the skb's anatomy ------------------------------------------------------------------------

def skb_walkthrough(gso: bool = False, cow: str = "normal") -> list[tuple[str, list]]:
    """One data segment's skbs at three moments, from real :mod:`routelab.core.skb` objects.

    1. ``tcp_sendmsg`` builds the original (MAX_TCP_HEADER of headroom, the
       1448-byte payload linear -- or, with SG+GSO on the pair device, in a
       page frag) and ``skb_entail`` calls ``skb_header_release``;
    2. ``tcp_transmit_skb`` sends a clone (``skb_clone``), which gets the
       TCP and IP headers pushed;
    3. the host's ``ip_forward`` runs ``skb_cow(skb, 16)`` on the clone
       (not with ``cow="skip"``).

    Returns ``[(moment, [(name, state), ...]), ...]``: each state is
    :meth:`routelab.core.skb.Skb.state` plus ``copied`` (bytes the step memcpy'd).
    """
    if cow not in ("normal", "skip"):
        raise ValueError(f"cow={cow!r}: expected 'normal' or 'skip'")
    if gso:
        orig = _skb.alloc_skb(MAX_TCP_HEADER)
        _skb.skb_reserve(orig, MAX_TCP_HEADER)
        _skb.skb_add_frag(orig, MSS)
    else:
        orig = _skb.alloc_skb(MAX_TCP_HEADER + MSS)
        _skb.skb_reserve(orig, MAX_TCP_HEADER)
        _skb.skb_put(orig, MSS)
    _skb.skb_header_release(orig)
    steps = [("1. tcp_sendmsg: the segment on the write queue",
              [("original (write queue)", {**orig.state(), "copied": 0})])]
    clone = _skb.skb_clone(orig)
    _skb.skb_push(clone, TCP_HDR + IP_HDR)
    steps.append(("2. tcp_transmit_skb: a clone goes down the stack",
                  [("original (write queue)", {**orig.state(), "copied": 0}),
                   ("clone (sent)", {**clone.state(), "copied": 0})]))
    copied = _skb.skb_cow(clone, 16) if cow == "normal" else 0
    what = "skb_cow copies the clone" if copied else (
        "skb_cow skipped: the clone still shares the data" if cow == "skip"
        else "skb_cow: nothing to do")
    steps.append((f"3. host's ip_forward: {what}",
                  [("original (write queue)", {**orig.state(), "copied": 0}),
                   ("clone (forwarded)", {**clone.state(), "copied": copied})]))
    return steps


_SEG = {"headroom": "#dddddd", "data": OKABE_ITO["blue"], "tailroom": "#f2f2f2",
        "shinfo": OKABE_ITO["orange"], "frag": OKABE_ITO["bluish_green"]}


def anatomy_figure(steps: list[tuple[str, list]], tests: bool = True):
    """Draw :func:`skb_walkthrough`'s moments: one panel each; a row per sk_buff head.

    Each row shows the data buffer the head points to (bytes from ``head``):
    headroom up to ``data``, the linear data up to ``tail``, tailroom up to
    ``end``, then skb_shared_info with ``dataref`` (all refs / header-free
    refs) and any page frags.  Heads that share one buffer say so.  With
    ``tests=False`` the labels leave out what ``skb_cloned()`` and
    ``skb_header_cloned()`` return (a reader works it out from the counts)."""
    height = 1.0 + sum(0.55 + 0.6 * len(h) for _, h in steps)
    fig, axes = new_figure(len(steps), 1, size=(7.6, height),
                           title="One TCP segment's skbs: head, data, tail, end, dataref",
                           gridspec_kw={"height_ratios": [len(h) for _, h in steps]})
    axes = np.atleast_1d(axes)
    width = max(st["end"] for _, heads in steps for _, st in heads) + 520
    for ax, (moment, heads) in zip(axes, steps, strict=True):
        ax.set_title(moment, loc="left", fontsize=9)
        owners: dict[int, list[str]] = {}
        for name, st in heads:
            owners.setdefault(st["buffer"], []).append(name)
        for y, (name, st) in enumerate(reversed(heads)):
            d, t, e = st["data"], st["tail"], st["end"]
            for x0, x1, key in ((0, d, "headroom"), (d, t, "data"), (t, e, "tailroom")):
                if x1 > x0:
                    ax.barh(y, x1 - x0, left=x0, height=0.42, color=_SEG[key],
                            edgecolor="black", linewidth=0.5)
            ax.barh(y, 150, left=e, height=0.42, color=_SEG["shinfo"], edgecolor="black",
                    linewidth=0.5)
            ax.text(e + 75, y, f"dataref {st['dataref']}/{st['dataref_nohdr']}", ha="center",
                    va="center", fontsize=7)
            x = e + 170
            for _ in range(st["nr_frags"]):
                ax.barh(y, 300, left=x, height=0.42, color=_SEG["frag"], edgecolor="black",
                        linewidth=0.5)
                ax.text(x + 150, y, f"page frag {st['data_len']} B", ha="center",
                        va="center", fontsize=7)
                x += 320
            shared = len(owners[st["buffer"]]) > 1
            flags = f"cloned={int(st['cloned'])}"
            if tests:
                flags += (f" skb_cloned()={int(st['skb_cloned'])} "
                          f"header_cloned={int(st['skb_header_cloned'])}")
            note = f"buffer #{st['buffer'] % 1000}" + (" (shared)" if shared else "")
            if st["copied"]:
                note += f", {st['copied']:,} B copied"
            ax.text(0, y + 0.26, f"{name}: data {d}, tail {t}, end {e}; {flags}; {note}",
                    fontsize=7, va="bottom")
        ax.set_ylim(-0.35, len(heads) - 0.25)
        ax.set_yticks([])
        ax.set_xlim(0, width)
        ax.grid(False)
    axes[-1].set_xlabel("offset from skb->head [bytes]; skb_shared_info and page frags drawn "
                        "schematically, not to scale")
    from matplotlib.patches import Patch
    fig.legend(handles=[Patch(color=_SEG[k], label=lab) for k, lab in (
        ("headroom", "headroom"), ("data", "linear data (headers + payload)"),
        ("tailroom", "tailroom"), ("shinfo", "skb_shared_info"), ("frag", "page frag"))],
        loc="outside lower center", ncol=5, fontsize=7, frameon=False)
    return fig


def anatomy_alt(steps: list[tuple[str, list]], tests: bool = True) -> str:
    """Text alternative of :func:`anatomy_figure` (same ``tests``): every head's offsets
    and counts."""
    parts = []
    for moment, heads in steps:
        bufs = {st["buffer"] for _, st in heads}
        desc = "; ".join(
            f"{name}: data {st['data']}, tail {st['tail']}, end {st['end']}, "
            f"{st['nr_frags']} page frag(s), dataref {st['dataref']} "
            f"(header-free {st['dataref_nohdr']}), cloned flag {int(st['cloned'])}"
            + (f", skb_cloned {st['skb_cloned']}, skb_header_cloned {st['skb_header_cloned']}"
               if tests else "")
            + (f", {st['copied']:,} bytes copied" if st["copied"] else "")
            for name, st in heads)
        share = (" The heads share one data buffer." if len(heads) > 1 and len(bufs) == 1
                 else " Each head has its own data buffer." if len(heads) > 1 else "")
        parts.append(f"{moment}: {desc}.{share}")
    return "Drawing of one TCP segment's skbs. " + " ".join(parts)


# -- stacked CPU profiles ---------------------------------------------------------------------

def profile_figure(runs: dict[str, Result], report: tuple[str, ...] = ("host", "container")):
    """Horizontal stacked bars: CPU points per group of kernel functions, per variant,
    with the thread's total CPU for the reported cases as hatched grey bars."""
    rows: list[tuple[str, dict | float]] = []
    for name, res in runs.items():
        if name in report:
            rows.append((f"report: {name}", REPORT[name][1]))
        rows.append((f"model: {VARIANTS.get(name, (name,))[0]}", grouped_points(res)))
    fig, ax = new_figure(size=(7.6, 0.9 + 0.42 * len(rows)),
                         title="Host A's CPU per kernel-function group (netperf TCP_STREAM)")
    ys = list(range(len(rows)))[::-1]
    colors = {name: c for name, c, _ in GROUPS} | {_OTHER[0]: _OTHER[1]}
    seen = set()
    top = 0.0
    for y, (_label, val) in zip(ys, rows, strict=True):
        if isinstance(val, float):
            ax.barh(y, val, color="#bbbbbb", hatch="//", edgecolor="#555555",
                    label=None if "report" in seen else "reported total (no breakdown)")
            seen.add("report")
            ax.text(val + 0.2, y, f"{val:.2f} %", va="center", fontsize=7)
            top = max(top, val)
            continue
        left = 0.0
        for g, pts in val.items():
            if pts <= 0:
                continue
            ax.barh(y, pts, left=left, color=colors[g], edgecolor="white", linewidth=0.4,
                    label=None if g in seen else g)
            seen.add(g)
            left += pts
        ax.text(left + 0.2, y, f"{left:.2f} %", va="center", fontsize=7)
        top = max(top, left)
    ax.set_yticks(ys, [r[0] for r in rows], fontsize=8)
    ax.set_xlim(0, top * 1.12 + 0.5)
    ax.set_xlabel("CPU load of host A [% of both CPUs]")
    fig.legend(loc="outside lower center", ncol=3, fontsize=7, frameon=False)
    return fig


def profile_alt(runs: dict[str, Result], report: tuple[str, ...] = ("host", "container")) -> str:
    """Text alternative of :func:`profile_figure`: each bar's total and its three largest parts."""
    parts = []
    for name, res in runs.items():
        if name in report:
            parts.append(f"reported {name}: {REPORT[name][1]:.2f} % in total")
        pts = grouped_points(res)
        big = sorted(pts.items(), key=lambda kv: -kv[1])[:3]
        parts.append(f"model {VARIANTS.get(name, (name,))[0]}: {sum(pts.values()):.2f} % "
                     "(largest: " + ", ".join(f"{g} {p:.2f}" for g, p in big) + ")")
    return ("Stacked horizontal bars of host A's CPU load in percent, split by group of "
            "kernel functions. " + "; ".join(parts) + ".")


# -- the explorer -----------------------------------------------------------------------------

#: The pair-device feature sets the explorer offers (TSO/GSO on the pair device is not
#: modelled: the scenario rejects it).
PAIR_OPTIONS = (("none (etun as assumed)", "none"), ("SG", "SG"), ("IP_CSUM", "IP_CSUM"),
                ("HW_CSUM", "HW_CSUM"), ("NO_CSUM", "NO_CSUM"),
                ("Kirill's: LLTX,HW_CSUM,SG,HIGHDMA", FEATURES_KIRILL))
KERNEL_OPTIONS = (("2.6.20 (ip_forward sets CHECKSUM_NONE)", "2.6.20"),
                  ("later: PARTIAL kept on forward", "2.6.20-fwdcsum"))


class ProfileBar:
    """The explorer's figure: one stacked bar (the current run) under the two reported totals."""

    def __init__(self) -> None:
        self.fig, self.ax = new_figure(size=(7.4, 2.5))
        ax = self.ax
        colors = [c for _, c, _ in GROUPS] + [_OTHER[1]]
        names = [g for g, _, _ in GROUPS] + [_OTHER[0]]
        for key, y in (("host", 2), ("container", 1)):
            ax.barh(y, REPORT[key][1], color="#bbbbbb", hatch="//", edgecolor="#555555",
                    label="reported total" if key == "host" else None)
        self.bars = [ax.barh(0, 0.0, left=0.0, color=c, edgecolor="white", label=n)[0]
                     for n, c in zip(names, colors, strict=True)]
        self.total = ax.text(0, 0, "", va="center", fontsize=8)
        ax.set_yticks([2, 1, 0], ["report: host", "report: container", "model: this run"],
                      fontsize=8)
        ax.set_xlabel("CPU load of host A [% of both CPUs]")
        self.fig.legend(loc="outside right upper", fontsize=7, frameon=False)
        self._alt = ""

    def update(self, res: Result) -> None:
        pts = grouped_points(res)
        left = 0.0
        for bar, val in zip(self.bars, pts.values(), strict=True):
            bar.set_x(left)
            bar.set_width(val)
            left += val
        self.total.set_position((left + 0.3, 0))
        s = res.summary()
        # a collapsed transfer leaves an empty bar: say why on the figure itself
        collapsed = (f": the transfer collapsed, {s['bad_checksums']:,} bad checksums at host B"
                     if s["bad_checksums"] else "")
        self.total.set_text(f"{left:.2f} %{collapsed}")
        self.ax.set_xlim(0, max(30.0, left * 1.15))
        k = res.extra["knobs"]
        # the title names the run, so a knob that moves nothing still shows it ran
        setting = (f"netperf on the {k['path']}, {k['nic']}"
                   f"{' + TSO' if k.get('nic_tso') else ''}, send {k['send_size']:,} B")
        if k["path"] == "container":
            setting += f", cow={k['cow']}, pair {k['pair_features']}, {k['kernel']}"
        # over the axes, not the figure, so that the legend on the right stays clear of it
        title = f"CPU of host A: {setting}".replace(" B", "\u00a0B")   # keep "16,384 B" whole
        self.ax.set_title(textwrap.fill(title, 58), fontsize=9)
        big = sorted(pts.items(), key=lambda kv: -kv[1])[:3]
        self._alt = (f"Stacked bar of this run's CPU load ({setting}), {left:.2f} % of both CPUs"
                     f"{collapsed} "
                     "(largest: " + ", ".join(f"{g} {p:.2f}" for g, p in big) +
                     f"), under the reported totals {REPORT['host'][1]} % (host) and "
                     f"{REPORT['container'][1]} % (container).")

    @property
    def alt(self) -> str:
        return self._alt


def container_readout(res: Result) -> str:
    """The explorer's one-line readout (HTML)."""
    s = res.summary()
    k = res.extra["knobs"]
    bad = (f" | <b>{s['bad_checksums']:,} bad checksums at B</b>" if s["bad_checksums"]
           else "")
    tso = "TSO on" if k.get("nic_tso") else "TSO off"
    return (f"<b>{html.escape(k['path'])}</b>, cow={html.escape(k['cow'])}, pair "
            f"{html.escape(k['pair_features'])}, {html.escape(str(k['kernel']))}, "
            f"{html.escape(str(k['nic']))} {tso}, send {k['send_size']:,} B | "
            f"<b>{s['throughput_mbps']:.1f} Mbit/s</b> at "
            f"<b>{s['cpu_load_pct']:.2f} % CPU</b> | copies/seg {s['copies_per_packet']:.2f} "
            f"({s['bytes_copied_per_packet']:,.0f} B) | software checksums/seg "
            f"{s['sw_checksums_per_packet']:.0f}{bad}")


def container_explorer(*, duration: float = 0.05, seed: int = 1, dpi: int = 100,
                       **start) -> Explorer:
    """Notebook 04's explorer: netperf from the host or a container, live stacked profile.

    Controls: path, cow, the pair device's features, the forward path's
    checksum handling (kernel), NIC, NIC TSO, send size.  Each change re-runs
    :func:`routelab.scenarios.container.run` for ``duration`` simulated seconds.
    """
    K = container.KNOBS
    pair = W.Dropdown(options=list(PAIR_OPTIONS), value=start.get("pair_features", "none"),
                      description="pair device features", style={"description_width": "initial"})
    pair.routelab_name = "pair_features"
    kern = W.Dropdown(options=list(KERNEL_OPTIONS), value=start.get("kernel", "2.6.20"),
                      description="kernel", style={"description_width": "initial"})
    kern.routelab_name = "kernel"
    controls = [
        control_for(K["path"], description="netperf runs on", value=start.get("path")),
        control_for(K["cow"], description="skb_cow in ip_forward", value=start.get("cow")),
        pair, kern,
        control_for(K["nic"], description="NIC", value=start.get("nic")),
        control_for(K["nic_tso"], description="TSO on the NIC", value=start.get("nic_tso")),
        control_for(K["send_size"], description="netperf send size", min=1024, max=65536,
                    step=1024, value=start.get("send_size")),
    ]
    fig = ProfileBar()
    path, cow = controls[0], controls[1]

    def host_only(change=None) -> None:
        # netperf on the host forwards nothing: the hack, the pair device's
        # features and the forward path's checksum handling do not apply, so
        # their controls are greyed out meanwhile
        off = path.value == "host"
        cow.disabled = off
        pair.disabled = off
        kern.disabled = off      # (what the forward path does with checksums)

    path.observe(host_only, names="value")
    host_only()

    def update(**values) -> tuple[str, str]:
        if values.get("path") == "host":
            values = dict(values, cow="normal", pair_features="none", kernel="2.6.20")
        res = container.run(seed=seed, duration=duration, **values)
        fig.update(res)
        return container_readout(res), fig.alt

    return Explorer(controls, update, fig.fig, dpi=dpi,
                    title="Explorer: netperf through a pair device and the host's forward path")
