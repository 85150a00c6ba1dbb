"""Notebook 05 (the epilogue: Linux 3.6 removed the route cache): trie drawings, sweeps, explorer.

Everything here is drawn from the model: the trie is a real
:class:`~routelab.ipv4.fib_trie.FibTrie` and its walk the one
:meth:`~routelab.ipv4.fib_trie.FibTrie.lookup` makes (``path=``); the
costs come from :func:`routelab.scenarios.diversity.run`, the attacks from
:mod:`routelab.scenarios.worm` (story 1) and :mod:`routelab.scenarios.rcu`
(story 2) run with ``kernel="3.6"``; the nexthop exceptions from the
diversity scenario's PMTU storm (:func:`routelab.scenarios.diversity.pmtu_exceptions`).
"""

from __future__ import annotations

import functools
import html

import ipywidgets as W  # noqa: N812 - as in widgets.py
import numpy as np

from ..core.skbuff import ip_to_int
from ..ipv4.fib_trie import FibTrie, Leaf
from ..ipv4.fnhe import FNHE_HASH_SIZE, FNHE_RECLAIM_DEPTH, NexthopExceptions
from ..kernels import kernel_profile
from ..result import Result
from ..scenarios import diversity, rcu, worm
from ..scenarios.common import sysctl_of
from ..scenarios.story1_study import thresholds
from ..sysctl import resolve_sysctl, validate_all
from .plots import OKABE_ITO, new_figure
from .widgets import Explorer

__all__ = [
    "ATTACKS", "DESTS", "KERNELS", "SMALL_FIB", "attack_runs", "attack_table", "cache_setup",
    "cost_groups", "diversity_explorer", "diversity_readout", "diversity_sweep",
    "fnhe_growth", "small_trie", "storm_alt", "storm_figure", "storm_run", "sweep_alt",
    "table_stats", "table_triestat",
    "sweep_figure", "sweep_table", "trie_alt", "trie_figure", "trie_walk",
]

#: The three kernels compared on the same CPU.
KERNELS = ("2.4.24", "2.6.0", "3.6")
#: Destination counts of the sweep (1 to the whole /16).
DESTS = (1, 16, 256, 4096, 16384, 65536)
_COLOURS = {"2.4.24": OKABE_ITO["vermillion"], "2.6.0": OKABE_ITO["blue"],
            "3.6": OKABE_ITO["bluish_green"]}
_MARKERS = {"2.4.24": "s", "2.6.0": "o", "3.6": "^"}

#: A small FIB to draw: a default route, some nested prefixes, and the
#: diversity scenario's 198.18.0.0/16.
SMALL_FIB = ("0.0.0.0/0", "10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "172.16.0.0/12",
             "192.168.0.0/16", "192.168.1.0/24", "192.168.2.0/24", "198.18.0.0/16",
             "203.0.113.0/24")


# -- the trie --------------------------------------------------------------------------------

def small_trie(prefixes=SMALL_FIB) -> FibTrie:
    """A FibTrie built by inserting ``prefixes`` in order (values: the prefix text)."""
    t = FibTrie()
    for p in prefixes:
        net, plen = p.split("/")
        t.insert(ip_to_int(net), int(plen), p)
    return t


def trie_walk(trie: FibTrie, addr: str):
    """``(prefix, trace, path)`` of the lookup of ``addr``: the matching prefix
    (or None), its :class:`~routelab.ipv4.fib_trie.LookupTrace`, and the
    nodes it touched, in order."""
    path: list = []
    value, _plen, trace = trie.lookup(ip_to_int(addr), path)
    return value, trace, path


def _dotted(x: int) -> str:
    return ".".join(str((x >> s) & 255) for s in (24, 16, 8, 0))


_LEAF_STEP = 1.35       # horizontal room per leaf (a /24 label is about this wide)


def _layout(trie: FibTrie):
    """Node positions: leaves left to right in key order, a tnode above the
    middle of its children; depth counts tnodes from the root."""
    pos: dict[int, tuple[float, int]] = {}
    edges: list[tuple[object, object, str]] = []
    nodes: list = []
    count = [0]

    def place(n, depth: int) -> float:
        nodes.append(n)
        if isinstance(n, Leaf):
            x = _LEAF_STEP * count[0]
            count[0] += 1
        else:
            xs = []
            for i, c in enumerate(n.child):
                if c is None:
                    continue
                xs.append(place(c, depth + 1))
                edges.append((n, c, format(i, f"0{n.bits}b")))
            x = sum(xs) / len(xs) if xs else float(count[0])
        pos[id(n)] = (x, depth)
        return x

    if trie.root is not None:
        place(trie.root, 0)
    return pos, edges, nodes


def _node_label(n) -> str:
    if isinstance(n, Leaf):
        return "\n".join(f"{_dotted(n.key)}/{plen}" for plen, _m, _v in n.infos)
    last = n.pos + n.bits - 1
    bits = f"bit {n.pos}" if n.bits == 1 else f"bits {n.pos}-{last}"
    return f"tnode\n{bits}"


def trie_figure(trie: FibTrie, addr: str | None = None):
    """The trie drawn as a tree: tnodes (the key bits they index) and leaves
    (their prefixes); with ``addr``, the nodes its lookup touches are marked
    in order and the edges it follows drawn thick."""
    pos, edges, nodes = _layout(trie)
    width = max(x for x, _ in pos.values()) + 1 if pos else 1
    depth = max(d for _, d in pos.values()) + 1 if pos else 1
    title = "The main table's LC-trie for a 10-prefix FIB"
    path = []
    if addr is not None:
        value, trace, path = trie_walk(trie, addr)
        title += f": lookup of {addr} -> {value} ({trace.nodes} nodes touched)"
    fig, ax = new_figure(size=(max(7.5, 0.75 * width), 1.0 + 0.95 * depth), title=title)
    on = {id(n) for n in path}
    walked = {(id(a), id(b)) for a, b in zip(path, path[1:], strict=False)}
    for a, b, bits in edges:
        (x0, y0), (x1, y1) = pos[id(a)], pos[id(b)]
        hot = (id(a), id(b)) in walked
        ax.plot([x0, x1], [-y0, -y1], color=OKABE_ITO["orange"] if hot else "#999999",
                lw=2.6 if hot else 0.9, zorder=1)
        ax.text((x0 + x1) / 2, -(y0 + y1) / 2, bits, fontsize=6.5, ha="center", va="center",
                color="#333333", bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none"),
                zorder=2)
    for n in nodes:
        x, y = pos[id(n)]
        leaf = isinstance(n, Leaf)
        hot = id(n) in on
        ax.text(x, -y, _node_label(n), fontsize=7, ha="center", va="center", zorder=3,
                bbox=dict(boxstyle="round,pad=0.3" if leaf else "square,pad=0.3",
                          fc=("#fde0c5" if hot else "#eeeeee") if leaf
                          else ("#cfe8f7" if not hot else "#fde0c5"),
                          ec=OKABE_ITO["orange"] if hot else "#555555", lw=1.6 if hot else 0.8))
    steps: dict[int, list[str]] = {}
    for k, n in enumerate(path, 1):
        steps.setdefault(id(n), []).append(str(k))
    for nid, ks in steps.items():
        x, y = pos[nid]
        ax.text(x - 0.5, -y + 0.3, ",".join(ks), fontsize=7.5, color=OKABE_ITO["vermillion"],
                fontweight="bold", ha="right", va="center", zorder=4)
    ax.set_xlim(-1.0, width - 0.3)
    ax.set_ylim(-depth + 0.4, 0.6)
    ax.set_axis_off()
    return fig


def trie_alt(trie: FibTrie, addr: str | None = None) -> str:
    """Text alternative of :func:`trie_figure`."""
    st = trie.stats()
    text = (f"Tree drawing of an LC-trie with {st.tnodes} internal nodes (tnodes) and "
            f"{st.leaves} leaves holding {st.prefixes} prefixes; each tnode indexes one or "
            f"more key bits and its edges are labelled with their bit values; mean leaf depth "
            f"{st.mean_depth:.2f}, deepest {st.max_depth}.")
    if addr is not None:
        value, trace, path = trie_walk(trie, addr)
        steps = "; ".join(
            f"{k}. leaf {_node_label(n).replace(chr(10), ', ')}" if isinstance(n, Leaf)
            else f"{k}. tnode at {_node_label(n).split(chr(10))[1]}"
            for k, n in enumerate(path, 1))
        text += (f" The lookup of {addr} touches {trace.nodes} nodes in this order: {steps}; "
                 f"it climbs back to a parent {trace.backtracks} times and returns {value}.")
    return text


# -- cost against destination diversity -------------------------------------------------------

@functools.lru_cache(maxsize=16)
def _sweep(kernels: tuple, dests: tuple, duration: float, seed: int, items: tuple) -> dict:
    out = {}
    for k in kernels:
        for d in dests:
            out[(k, d)] = diversity.run(seed=seed, kernel=k, destinations=d, duration=duration,
                                        **dict(items)).summary()
    return out


def cache_setup(kernel: str = "2.6.0", **knobs) -> dict:
    """The route-cache sysctls the diversity scenario runs ``kernel`` with: its knobs
    resolved as its router resolves them (``routelab.sysctl.resolve_sysctl``), no run."""
    values = validate_all(diversity.KNOBS, {"kernel": kernel, **knobs})
    return resolve_sysctl(kernel_profile(values["kernel"]),
                          dict(sysctl_of(values), rp_filter=values["rp_filter"]))


def diversity_sweep(kernels=KERNELS, dests=DESTS, duration: float = 2.0, seed: int = 1,
                    **knobs) -> dict:
    """Summaries of the diversity scenario by ``(kernel, destinations)``.

    Two simulated seconds by default: the first packet to each destination always
    misses, and in a short run those first misses alone (one per destination) would
    make a cache that holds every destination look as if it did not.
    """
    return dict(_sweep(tuple(kernels), tuple(dests), float(duration), int(seed),
                       tuple(sorted(knobs.items()))))


def _kernels_dests(sweep: dict):
    ks = list(dict.fromkeys(k for k, _ in sweep))
    ds = sorted({d for _, d in sweep})
    return ks, ds


def sweep_table(sweep: dict) -> str:
    """A plain-text table: CPU and route µs per packet (and hit %) per kernel and count."""
    ks, ds = _kernels_dests(sweep)
    head = f"{'destinations':>12}" + "".join(f" | {k + ' CPU':>11} {'route':>6} {'hit %':>6}"
                                              for k in ks)
    lines = [head, "-" * len(head)]
    for d in ds:
        row = f"{d:>12,}"
        for k in ks:
            s = sweep[(k, d)]
            hit = "-" if s["cache_hit_pct"] is None else f"{s['cache_hit_pct']:.1f}"
            row += (f" | {s['cpu_us_per_packet']:>11.3f} {s['route_lookup_us_per_packet']:>6.3f}"
                    f" {hit:>6}")
        lines.append(row)
    lines.append("(µs of CPU per forwarded packet: all of it, and the routing part)")
    return "\n".join(lines)


def sweep_figure(sweep: dict):
    """CPU µs per forwarded packet against destinations (log scale), one line per
    kernel, with the routing part dashed."""
    ks, ds = _kernels_dests(sweep)
    fig, ax = new_figure(size=(7.2, 3.6),
                         title="Cost per forwarded packet against destination diversity "
                               "(same CPU, 100 kpps)")
    for k in ks:
        cpu = [sweep[(k, d)]["cpu_us_per_packet"] for d in ds]
        rt = [sweep[(k, d)]["route_lookup_us_per_packet"] for d in ds]
        ax.plot(ds, cpu, marker=_MARKERS.get(k, "o"), color=_COLOURS.get(k), label=f"{k}: all")
        ax.plot(ds, rt, marker=_MARKERS.get(k, "o"), color=_COLOURS.get(k), ls="--", ms=4,
                alpha=0.8, label=f"{k}: routing")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ds, [f"{d:,}" for d in ds])
    ax.set_xlabel("distinct destinations in the traffic")
    ax.set_ylabel("CPU per forwarded packet [µs]")
    ax.set_ylim(0, None)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=3, frameon=False, loc="upper left")
    return fig


def sweep_alt(sweep: dict) -> str:
    """Text alternative of :func:`sweep_figure`."""
    ks, ds = _kernels_dests(sweep)
    parts = []
    for k in ks:
        a, b = sweep[(k, ds[0])], sweep[(k, ds[-1])]
        parts.append(f"{k} from {a['cpu_us_per_packet']:.2f} µs at {ds[0]:,} to "
                     f"{b['cpu_us_per_packet']:.2f} µs at {ds[-1]:,} (routing "
                     f"{a['route_lookup_us_per_packet']:.2f} to "
                     f"{b['route_lookup_us_per_packet']:.2f})")
    return ("Line chart of CPU microseconds per forwarded packet (solid) and of its routing "
            "part (dashed) against the number of distinct destinations, on a logarithmic axis "
            f"from {ds[0]:,} to {ds[-1]:,}: " + "; ".join(parts) + ".")


# -- the attacks of stories 1 and 2 against 3.6 ------------------------------------------------

#: Story 1's residence router as notebook 01 froze it (docs/calibration-story1.md):
#: the neighbour table enlarged to gc_thresh3 = 4,096 (a hall of ~1,500 live hosts
#: needs more than the default 1,024), slab memory from DRAM, three infected PCs
#: inside and two Welchia scanners outside, one simulated minute (the table takes
#: ~25 s to fill).
WORM_SETUP: dict = {"outside_welchia": 2, "board_cache": "dram", "duration": 60.0}

#: (label, scenario module, knobs): story 1's worm on the frozen set-up, story 2's
#: DoS of notebook 02, each on its own kernel and on 3.6.
ATTACKS = {
    "worm 2.4.24": (worm, dict(kernel="2.4.24", **WORM_SETUP, **thresholds(4096))),
    "worm 3.6": (worm, dict(kernel="3.6", **WORM_SETUP, **thresholds(4096))),
    "DoS 2.6.0": (rcu, dict(kernel="2.6.0", duration=1.0)),
    "DoS 3.6": (rcu, dict(kernel="3.6", duration=1.0)),
}

#: The same worm with the kernel's own default neighbour table (gc_thresh3 = 1,024).
DEFAULT_TABLE = {
    "worm 2.4.24, 1,024": (worm, dict(kernel="2.4.24", **WORM_SETUP, **thresholds(1024))),
    "worm 3.6, 1,024": (worm, dict(kernel="3.6", **WORM_SETUP, **thresholds(1024))),
}


@functools.lru_cache(maxsize=8)
def _attack(name: str, seed: int) -> Result:
    mod, kw = {**ATTACKS, **DEFAULT_TABLE}[name]
    return mod.run(seed=seed, **kw)


def attack_runs(seed: int = 1) -> dict[str, Result]:
    """The four attack runs of :data:`ATTACKS`."""
    return {name: _attack(name, seed) for name in ATTACKS}


def table_runs(seed: int = 1) -> dict[str, Result]:
    """The worm on both kernels with each neighbour-table size: the frozen set-up's
    4,096 (:data:`ATTACKS`) and the kernel's default 1,024 (:data:`DEFAULT_TABLE`)."""
    return {"2.4.24, 4,096": _attack("worm 2.4.24", seed),
            "3.6, 4,096": _attack("worm 3.6", seed),
            "2.4.24, 1,024": _attack("worm 2.4.24, 1,024", seed),
            "3.6, 1,024": _attack("worm 3.6, 1,024", seed)}


_ATTACK_ROWS = (
    ("offered packets", "offered_packets", "{:,}"),
    ("forwarded packets", "forwarded_packets", "{:,}"),
    ("route-cache entries (max)", "route_cache_entries_max", "{:,}"),
    ("route-cache GC runs", "gc_total", "{:,}"),
    ("RCU callbacks pending (max)", "rcu_pending_max", "{:,}"),
    ("neighbour entries (max)", "neigh_entries_max", "{:,}"),
    ("  of them waiting for ARP (max)", "neigh_incomplete_max", "{:,}"),
    ("forced neighbour GC walks", "neigh_forced_gc", "{:,}"),
    ("dropped: neighbour table full", "drop_neigh_overflow+drop_neigh", "{:,}"),
    ("dropped: NIC ring / backlog", "drop_rx_missed+drop_backlog", "{:,}"),
    ("softirq CPU, busiest CPU [%]", "cpu_softirq_pct_max_cpu", "{:.1f}"),
    ("CPU busy, mean of CPUs [%]", "cpu_busy_pct", "{:.1f}"),
    ("ping RTT p50 [ms]", "ping_rtt_ms_p50", "{:.2f}"),
    ("ping loss [%]", "ping_loss_pct", "{:.0f}"),
    ("user task's longest wait [ms]", "user_max_delay_s*1000", "{:.1f}"),
)


def _stat(s: dict, expr: str):
    scale = 1.0
    if "*" in expr:
        expr, f = expr.split("*")
        scale = float(f)
    vals = [s.get(k) for k in expr.split("+")]
    if any(v is None for v in vals):
        return None
    v = sum(vals)
    return v * scale if scale != 1.0 else v


def attack_table(runs: dict[str, Result]) -> str:
    """A plain-text table of the attack runs side by side."""
    sums = {k: r.summary() for k, r in runs.items()}
    names = list(runs)
    w = max(len(n) for n in names) + 2
    lines = [f"{'':32}" + "".join(f"{n:>{w}}" for n in names)]
    for label, expr, fmt in _ATTACK_ROWS:
        vals = [_stat(sums[n], expr) for n in names]
        if all(v is None for v in vals):
            continue
        lines.append(f"{label:32}" + "".join(
            f"{(fmt.format(v) if v is not None else '-'):>{w}}" for v in vals))
    return "\n".join(lines)


# -- nexthop exceptions under a PMTU storm -----------------------------------------------------

@functools.lru_cache(maxsize=4)
def storm_run(pmtu_pps: float = 100_000.0, pmtu_destinations: int = 65536,
              duration: float = 1.0, seed: int = 1) -> Result:
    """The diversity scenario on 3.6 with a PMTU storm."""
    return diversity.run(seed=seed, kernel="3.6", pmtu_pps=pmtu_pps,
                         pmtu_destinations=pmtu_destinations, duration=duration)


def fnhe_growth(res: Result, points: int = 200):
    """Replay the storm of ``res`` into a fresh exception table and sample it:
    ``(messages, entries, distinct)`` arrays -- messages handled so far, the
    entries allocated, and the distinct destinations named so far."""
    nh = diversity.pmtu_exceptions(res)
    if nh is None:
        raise ValueError("no nexthop exceptions in this run (a route-cache kernel)")
    k = res.extra["knobs"]
    n = res.offered
    pk = res.packets
    from ..core.dropreason import OUTCOMES
    from ..core.skbuff import KIND

    got = np.flatnonzero((pk["kind"][:n] == KIND["local"]) & (pk["tag"][:n] >= 0)
                         & (pk["outcome"][:n] == OUTCOMES["local"]))
    got = got[np.argsort(pk["t_start"][got], kind="stable")]
    daddr = diversity.storm_daddr(pk["tag"][got], k["pmtu_destinations"], res.extra["seed"])
    hz = res.config.kernel.hz
    jiffies = np.floor(pk["t_start"][got] * hz).astype(np.int64)
    fresh = NexthopExceptions()
    seen: set = set()
    at = set(np.linspace(0, len(got), points, dtype=np.int64).tolist())
    msgs, entries, distinct = [0], [0], [0]
    for i, (a, j) in enumerate(zip(daddr.tolist(), jiffies.tolist(), strict=True), 1):
        fresh.update_or_create(a, j, pmtu=diversity.STORM_MTU)
        seen.add(a)
        if i in at:
            msgs.append(i)
            entries.append(fresh.entries)
            distinct.append(len(seen))
    assert fresh.entries == nh.entries          # the same replay as the summary's
    return np.array(msgs), np.array(entries), np.array(distinct)


def storm_figure(res: Result):
    """Exceptions allocated against messages handled, with the distinct
    destinations named so far and the 2,048 x 6 bound."""
    m, e, d = fnhe_growth(res)
    bound = FNHE_HASH_SIZE * (FNHE_RECLAIM_DEPTH + 1)
    fig, ax = new_figure(size=(7.0, 3.4),
                         title="Nexthop exceptions under a PMTU storm (3.6, one nexthop)")
    ax.plot(m, d, color=OKABE_ITO["blue"], ls="--", label="distinct destinations named")
    ax.plot(m, e, color=OKABE_ITO["vermillion"], lw=2, label="exceptions allocated")
    ax.axhline(bound, color="#555555", lw=0.9, ls=":")
    ax.text(m[-1], bound, f"2,048 buckets x {FNHE_RECLAIM_DEPTH + 1} = {bound:,}",
            ha="right", va="bottom", fontsize=7)
    ax.set_xlabel("forged ICMP 'fragmentation needed' messages handled")
    ax.set_ylabel("entries")
    ax.set_ylim(0, None)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False, loc="upper left")
    return fig


def storm_alt(res: Result) -> str:
    """Text alternative of :func:`storm_figure`."""
    m, e, d = fnhe_growth(res)
    bound = FNHE_HASH_SIZE * (FNHE_RECLAIM_DEPTH + 1)
    early = max(1, len(m) // 20)
    return (f"Line chart against the number of forged messages handled (0 to {m[-1]:,}): the "
            f"distinct destinations they named rise to {d[-1]:,}; the exceptions allocated "
            f"follow them below them at first ({e[early]:,} entries for {d[early]:,} "
            f"destinations after {m[early]:,} messages) and flatten at "
            f"{e[-1]:,}, on the dotted bound of {bound:,} (2,048 buckets times 6 entries).")


# -- the explorer -----------------------------------------------------------------------------

#: Profile rows grouped for the explorer's bar (the rest is forward + output).
COST_GROUPS = (
    ("receive (driver, softirq, ip_rcv)", OKABE_ITO["sky_blue"],
     ("irq_rx", "napi_poll_rx", "netif_rx", "netif_receive_skb", "ip_rcv", "net_rx_action")),
    ("routing (lookup, cache upkeep)", OKABE_ITO["vermillion"], diversity.ROUTE_ROWS),
    ("neighbour lookup", OKABE_ITO["yellow"], ("neigh_", "arp_")),
)
_REST = ("forward + output", OKABE_ITO["bluish_green"])


def cost_groups(res: Result) -> dict[str, float]:
    """µs of CPU per forwarded packet by group of profile rows."""
    fwd = res.summary()["forwarded_packets"] or 1
    out = {g: 0.0 for g, _, _ in COST_GROUPS} | {_REST[0]: 0.0}
    for row, sec in res.profile.items():
        for g, _c, keys in COST_GROUPS:
            if row in keys or any(row.startswith(k) for k in keys):
                out[g] += sec
                break
        else:
            out[_REST[0]] += sec
    return {g: v / fwd * 1e6 for g, v in out.items()}


class CostBar:
    """The explorer's figure: one stacked bar of µs per forwarded packet."""

    def __init__(self) -> None:
        self.fig, self.ax = new_figure(size=(7.4, 2.2))
        names = [g for g, _, _ in COST_GROUPS] + [_REST[0]]
        colours = [c for _, c, _ in COST_GROUPS] + [_REST[1]]
        self.bars = [self.ax.barh(0, 0.0, left=0.0, color=c, edgecolor="white", label=n)[0]
                     for n, c in zip(names, colours, strict=True)]
        self.total = self.ax.text(0, 0, "", va="center", fontsize=8)
        self.ax.set_yticks([0], ["this run"], fontsize=8)
        self.ax.set_xlabel("CPU per forwarded packet [µs]")
        self.fig.legend(loc="outside lower center", ncol=4, fontsize=7, frameon=False)
        self._alt = ""

    def update(self, res: Result) -> None:
        pts = cost_groups(res)
        left = 0.0
        for bar, v in zip(self.bars, pts.values(), strict=True):
            bar.set_x(left)
            bar.set_width(v)
            left += v
        self.total.set_position((left + 0.05, 0))
        self.total.set_text(f"{left:.2f} µs")
        self.ax.set_xlim(0, max(5.0, left * 1.15))
        setting = _setting(res)
        self.fig.suptitle(f"Cost per packet: {setting}", fontsize=9)
        self._alt = (f"Stacked horizontal bar of this run's CPU per forwarded packet "
                     f"({setting}): {left:.2f} µs in all, of which " +
                     ", ".join(f"{g} {v:.2f}" for g, v in pts.items()) + " µs.")

    @property
    def alt(self) -> str:
        return self._alt


def _setting(res: Result) -> str:
    k = res.extra["knobs"]
    rp = {0: "off", 1: "strict", 2: "loose"}[int(k["rp_filter"])]
    dest = f"{k['destinations']:,} destination{'s' if k['destinations'] != 1 else ''}"
    return (f"{k['kernel']}, {dest}, {k['routes']:,} routes, "
            f"rp_filter {rp}")


def diversity_readout(res: Result) -> str:
    """The explorer's one-line readout (HTML)."""
    s = res.summary()
    hit = ("no route cache" if s["cache_hit_pct"] is None
           else f"cache hits {s['cache_hit_pct']:.1f} %")
    trie = (f"trie depth {s['trie_depth_mean']:.2f}, {s['trie_nodes']:,} nodes"
            if s["trie_nodes"] is not None else "fib_hash")
    return (f"<b>{html.escape(_setting(res))}</b> | <b>{s['cpu_us_per_packet']:.3f} µs</b> "
            f"per packet, routing {s['route_lookup_us_per_packet']:.3f} µs | {hit} | "
            f"dst allocations {s['dst_allocs']:,} | {trie} | forwarded "
            f"{s['forwarded_packets']:,}")


#: Explorer choices: destinations (powers of 4) and FIB sizes.  The FIB stops at
#: 3,000 prefixes: the model's fib_hash lookup (the 2.x kernels) walks every
#: prefix per window, and a larger trie takes seconds to build the first time, too
#: slow for a slider (the notebook's own cells show larger tables).
DEST_OPTIONS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
ROUTE_OPTIONS = (10, 100, 1000, 3000)
RP_OPTIONS = (("off (0)", 0), ("strict (1)", 1), ("loose (2)", 2))


def diversity_explorer(*, duration: float = 1.0, seed: int = 1, dpi: int = 100,
                       **start) -> Explorer:
    """Notebook 05's explorer: the diversity scenario, one stacked bar per run.

    Controls: kernel (2.4.24, 2.6.0, 3.6), destinations, FIB size, rp_filter.
    Each change re-runs :func:`routelab.scenarios.diversity.run` for
    ``duration`` simulated seconds at 100 kpps: one second by default, so that
    with up to a few thousand destinations the cache kernels' first-packet
    misses no longer dominate (2.6.0 at 4,096 destinations: 1.84 µs per packet
    in 0.2 s, 1.49 in 1 s, 1.44 in 2 s; 3.6 1.54 throughout).
    """
    K = diversity.KNOBS
    kern = W.Dropdown(options=list(KERNELS), value=K["kernel"].validate(
        start.get("kernel", "3.6")), description="kernel",
        style={"description_width": "initial"})
    kern.routelab_name = "kernel"
    dest = W.SelectionSlider(options=[(f"{d:,}", d) for d in DEST_OPTIONS],
                             value=K["destinations"].validate(start.get("destinations", 4096)),
                             description="destinations", continuous_update=False,
                             style={"description_width": "initial"},
                             layout=W.Layout(width="380px"))
    dest.routelab_name = "destinations"
    routes = W.SelectionSlider(options=[(f"{r:,}", r) for r in ROUTE_OPTIONS],
                               value=K["routes"].validate(start.get("routes", 1000)),
                               description="FIB size [prefixes]", continuous_update=False,
                               style={"description_width": "initial"},
                               layout=W.Layout(width="380px"))
    routes.routelab_name = "routes"
    rp = W.Dropdown(options=list(RP_OPTIONS), value=K["rp_filter"].validate(
        start.get("rp_filter", 0)), description="rp_filter",
        style={"description_width": "initial"})
    rp.routelab_name = "rp_filter"
    fig = CostBar()

    def update(**values) -> tuple[str, str]:
        res = diversity.run(seed=seed, duration=duration, **values)
        fig.update(res)
        return diversity_readout(res), fig.alt

    return Explorer([kern, dest, routes, rp], update, fig.fig, dpi=dpi,
                    title="Explorer: a router's cost per packet, route cache or trie")


def table_triestat(routes: int = 1000) -> str:
    """``/proc/net/fib_triestat``'s block for the diversity scenario's main table."""
    return diversity._main_trie_stats(routes).proc()


def table_stats(routes: int = 1000):
    """The :class:`~routelab.ipv4.fib_trie.TrieStats` of that table."""
    return diversity._main_trie_stats(routes)
