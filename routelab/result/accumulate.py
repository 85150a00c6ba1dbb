"""Per-packet outputs and array-derived statistics, gathered window by window."""

from __future__ import annotations

import numpy as np

from .bins import hardirq_in_bins
from .profile import packet_profile

__all__ = ["Accumulator", "PROFILE_COLUMNS"]

#: the array stages' columns the profile reads (of offered and born packets)
PROFILE_COLUMNS = ("napi", "fwd_cost", "out_cost", "route_hit_cost")


class Accumulator:
    """Keeps each window's packets (offered ones first, then those born in the run).

    A plain trace is one window.  With ``keep_times`` off, only the outcome,
    device, kind and tag of each packet are kept (8 bytes a packet).
    """

    def __init__(self, keep_times: bool, ncpu: int, edges: np.ndarray) -> None:
        self.keep_times = keep_times
        self.edges = edges
        self.parts: dict[str, list] = {k: [] for k in ("outcome", "dev", "kind", "tag", "t",
                                                         "t_start", "t_depart")}
        self.irq = np.zeros((ncpu, edges.size - 1))
        self.prof: dict[str, float] = {}

    def add(self, config, has_cache: bool, p: dict, pk, p_born: dict | None = None) -> None:
        """Keep one window's packets: ``p`` (the array stages' columns of the
        offered ones), ``pk`` (the window's :class:`~routelab.sim.columns.Packets`)
        and ``p_born`` (the array stages' columns of the packets born in the
        window, in order, or ``None`` if none was)."""
        n, n0 = pk.n, pk.n0
        o = np.frombuffer(pk.outcome, dtype=np.uint8).astype(np.int8)
        dev = pk.array("dev").astype(np.int16)
        part = self.parts
        part["outcome"].append(o)
        part["dev"].append(dev)
        part["kind"].append(pk.array("kind").astype(np.uint8))
        part["tag"].append(pk.array("tag").astype(np.int32))
        ts = pk.array("t_start")
        if self.keep_times:
            part["t"].append(pk.array("t").astype(np.float64))
            part["t_start"].append(np.array(ts, dtype=np.float64))
            part["t_depart"].append(np.array(pk.array("t_depart"), dtype=np.float64))
        self.irq += hardirq_in_bins(config, p, {"outcome": o, "t_start": ts, "dev": dev}, n0,
                                    self.edges)
        cols = {}
        for name in PROFILE_COLUMNS:
            a = np.broadcast_to(np.asarray(p[name]), (n0,))
            if p_born is not None:
                b = np.broadcast_to(np.asarray(p_born[name]), (n - n0,))
                a = np.concatenate([a, b])
            cols[name] = a
        m = n if p_born is not None else n0     # (without p_born: the offered packets only)
        arrays = {"outcome": o[:m], "dev": dev[:m], "cls": pk.array("cls", m),
                  "rtype": pk.array("rtype", m), "kind": pk.array("kind", m)}
        for name, secs in packet_profile(config, has_cache, cols, arrays).items():
            self.prof[name] = self.prof.get(name, 0.0) + secs

    def packets(self) -> dict:
        """The per-packet arrays of the whole run."""
        out = {}
        for name, parts in self.parts.items():
            if parts:
                out[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
        self.parts = {}
        return out
