"""The explorers the notebooks show, built here so benchmarks can build the same ones.

Each ``*_explorer()`` returns an :class:`~routelab.notebook.widgets.Explorer`
wired to a scenario; the notebook only displays it, and
``benchmarks/bench_sliders.py`` drives the very same object headlessly.
"""

from __future__ import annotations

import html

import numpy as np

from ..journey import packet_journey
from ..result import Result
from ..scenarios import ping
from .plots import PingJourneyFigure, ping_series
from .rcu_primer import rcu_primer_explorer
from .story1 import worm_explorer
from .story2 import rcu_explorer
from .story3 import nfs_explorer
from .story4 import container_explorer
from .story5 import diversity_explorer
from .widgets import Explorer, control_for

__all__ = [
    "EXPLORERS",
    "packet_journey_explorer",
    "ping_conditions",
    "ping_journey_figure",
    "ping_readout",
]


def _journey_of_ping(knobs: dict):
    """The journey of one echo request of a ping run (a route-cache hit)."""
    return packet_journey(kernel=knobs["kernel"], cpu=knobs["cpu"], nic=knobs["nic"],
                          length=knobs["ping_size"], ttl=knobs["ping_ttl"],
                          df=knobs["ping_df"], mtu=knobs["mtu"], cache_hit=True)


def ping_conditions(knobs: dict) -> str:
    """A figure title naming the conditions of a ping run."""
    return (f"{knobs['cpu']}, {knobs['kernel']}: ping {knobs['ping_size']} B, "
            f"TTL {knobs['ping_ttl']}, DF {'on' if knobs['ping_df'] else 'off'}, "
            f"MTU {knobs['mtu']}, {knobs['background_pps']:,.0f} pps background")


def ping_journey_figure(res: Result, fig: PingJourneyFigure | None = None) -> PingJourneyFigure:
    """Draw (or redraw) the two-panel ping figure for a ping run's result.

    ``res`` comes from :func:`routelab.scenarios.ping.run`.
    """
    knobs = res.extra["knobs"]
    fig = fig or PingJourneyFigure(duration=res.duration)
    fig.update(res, _journey_of_ping(knobs), ping_conditions(knobs))
    return fig


def ping_readout(res: Result, journey) -> str:
    """The explorer's one-line readout (HTML) for a ping run."""
    k = res.extra["knobs"]
    sent, rtt = ping_series(res)
    ok = rtt[np.isfinite(rtt)]
    cpu = res.summary()["cpu_busy_pct"]
    if journey.outcome == "forwarded":
        frames = f"{journey.nfrag} frame{'s' if journey.nfrag > 1 else ''}"
        pkt = f"ping {k['ping_size']} B, TTL {k['ping_ttl']}→{k['ping_ttl'] - 1}, {frames}"
    else:
        pkt = f"ping {k['ping_size']} B, TTL {k['ping_ttl']}"
    if ok.size:
        loss = 100.0 * (1 - ok.size / max(sent.size, 1))
        lat = (f"RTT p50 <b>{np.percentile(ok, 50):.2f} ms</b>, "
               f"p95 {np.percentile(ok, 95):.2f} ms, "
               f"loss {loss:.0f} %")
    else:
        why = {"drop_ttl": "TTL expired in ip_forward (ICMP time exceeded)",
               "drop_frag_needed": f"DF set and {k['ping_size']} B > MTU {k['mtu']} "
                                   "(ICMP fragmentation needed)"}.get(journey.outcome,
                                                                      "every ping lost")
        lat = f"<b>no replies</b>: {html.escape(why)}"
    return (f"<b>{html.escape(k['cpu'])}</b> | {pkt} | {lat} | router CPU {cpu:.1f} % busy"
            f" | one request: {journey.cpu_seconds * 1e6:.1f} µs CPU")


def packet_journey_explorer(*, duration: float = 2.0, seed: int = 1, dpi: int = 100,
                            **start) -> Explorer:
    """Notebook 00's explorer: ping through a K6-200 (or another CPU) router.

    Controls: packet size, TTL, DF, MTU, background load, CPU.  Each change
    re-runs :func:`routelab.scenarios.ping.run` for ``duration`` simulated
    seconds (kernel 2.4.24, e100 NICs) and redraws the ping RTT and the
    journey of one echo request.  ``start`` overrides the controls' initial
    values (by knob name).
    """
    K = ping.KNOBS
    controls = [
        control_for(K["ping_size"], description="packet size", min=28, max=9000, step=4,
                    value=start.get("ping_size")),
        control_for(K["ping_ttl"], description="TTL", value=start.get("ping_ttl")),
        control_for(K["mtu"], description="MTU out", value=start.get("mtu")),
        control_for(K["background_pps"], description="background load", max=10000.0, step=500,
                    value=start.get("background_pps")),
        control_for(K["cpu"], description="CPU", value=start.get("cpu")),
        control_for(K["ping_df"], description="DF (don't fragment)", value=start.get("ping_df")),
    ]
    fig = PingJourneyFigure(duration=duration)

    def update(**values) -> tuple[str, str]:
        res = ping.run(seed=seed, duration=duration, **values)
        journey = _journey_of_ping(res.extra["knobs"])
        fig.update(res, journey, ping_conditions(res.extra["knobs"]))
        return ping_readout(res, journey), fig.alt

    return Explorer(controls, update, fig.fig, dpi=dpi, render=lambda: fig.render_png(dpi),
                    title="Explorer: one ping through a loaded router")


#: Explorer builders by notebook, for benchmarks/bench_sliders.py.
EXPLORERS = {"00-packet-journey": packet_journey_explorer,
             "01-worm-cache-thrash": worm_explorer,
             "02-rcu-primer": rcu_primer_explorer,
             "02-rcu-softirq-latency": rcu_explorer,
             "03-fragment-flooding": nfs_explorer,
             "04-container-checksums": container_explorer,
             "05-route-cache-removed": diversity_explorer}
