"""Numbers the notebooks' prose takes from the model, checked against the notebooks' own outputs.

A model number in a notebook's text is either computed (a code cell that
calls ``routelab.notebook.say``; nbval then compares it on every run) or it
stays in a markdown cell and is listed here: ``(notebook, markdown cell id,
the words of the claim, check)``.  ``check`` reads the stored outputs of the
same notebook (no simulation) and returns ``(ok, what the outputs say)``.  The
test fails if the quoted words are gone from the cell (update the claim) or
if the outputs contradict them (fix the prose, or compute it with ``say``).

The outputs themselves are the model's: nbval checks that a fresh run
reproduces them, so the prose is tied to the model through them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = Path(os.environ.get("ROUTELAB_NOTEBOOKS_DIR") or REPO / "notebooks").resolve()

N00, N01, N02 = "00-packet-journey", "01-worm-cache-thrash", "02-rcu-softirq-latency"
N03 = "03-fragment-flooding"


class Outputs:
    """The text outputs of one notebook's cells, by cell id."""

    def __init__(self, stem: str) -> None:
        path = NOTEBOOKS_DIR / f"{stem}.ipynb"
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        self.source = {c["id"]: _join(c["source"]) for c in cells}
        self.text = {c["id"]: "\n".join(_out_text(o) for o in c.get("outputs", []))
                     for c in cells}

    def num(self, cid: str, pattern: str, group: int = 1) -> float:
        """The number the regex ``pattern`` captures in cell ``cid``'s output."""
        m = re.search(pattern, self.text[cid])
        assert m, f"cell {cid}: no {pattern!r} in its output:\n{self.text[cid][:800]}"
        return float(m.group(group).replace(",", ""))

    def nums(self, cid: str, pattern: str) -> list[float]:
        return [float(x.replace(",", "")) for x in re.findall(pattern, self.text[cid])]

    def row(self, cid: str, start: str) -> list[str]:
        """The whitespace-separated fields of the output line starting with ``start``."""
        for line in self.text[cid].splitlines():
            if line.startswith(start):
                return line[len(start):].split()
        raise AssertionError(f"cell {cid}: no line starting {start!r}")


def _join(x) -> str:
    return "".join(x) if isinstance(x, list) else x


def _out_text(o: dict) -> str:
    if "text" in o:
        return _join(o["text"])
    return _join(o.get("data", {}).get("text/plain", ""))


def _f(x: str) -> float:
    return float(x.replace(",", "").rstrip("%"))


def within(x: float, lo: float, hi: float, what: str) -> tuple[bool, str]:
    return lo <= x <= hi, f"{what} = {x:g} (claim needs {lo:g}..{hi:g})"


# -- the claims -------------------------------------------------------------------------------
# Each check takes the notebook's Outputs and returns (ok, what the outputs say).

def _k6_vs_xeon_cycles(o):
    # question 1's answer, (c): the P4 spends more cycles than the K6
    ratio = o.num("dba41d27", r"for ([\d.]+) times the cycles")
    return within(1 / ratio, 1.3, 99, "P4 cycles / K6 cycles")


def _gap_frozen(o):
    f = o.num("thresh3-prose", r"to about \*\*([\d.]+) times\*\*")
    return within(f, 1.3, 1.7, "gap at the frozen set-up")


def _k6_vs_xeon_time(o):
    return within(o.num("dba41d27", r"needs ([\d.]+) times as long"), 3.0, 9.0, "K6/P4 time")


def _k20_like_a_hit(o):
    k20 = o.num("f2d4a4e2", r"CPU ([\d.]+) µs")
    hit = o.num("b6098440", r"CPU ([\d.]+) µs")
    return within(k20 / hit, 0.9, 1.1, "kernel 2.0 / cache hit")


def _nothing_lost(o):
    heads = o.row("86a2337e", "Iface")
    drops = [dict(zip(heads, o.row("86a2337e", dev), strict=True)) for dev in ("eth0",
                                                                                   "eth1")]
    lost = sum(_f(d[k]) for d in drops for k in ("RX-ERR", "RX-DRP", "RX-OVR", "TX-ERR",
                                                  "TX-DRP", "TX-OVR"))
    return lost == 0, f"{lost:g} packets lost or dropped in netstat -i"


def _median_041(o):
    p50 = o.num("548c3616", r"median ([\d.]+) ms")
    return 0.35 <= p50 <= 0.45, f"median RTT {p50} ms"


def _echo_cpu_same(o):
    echo = o.num("a0460d76", r"one echo request spends [\d.]+ µs in the router: ([\d.]+) µs of CPU")
    big = o.num("b6098440", r"CPU ([\d.]+) µs")
    return abs(echo - big) < 0.15, f"84-byte echo {echo} µs, 1500-byte packet {big} µs"


def _miss_half_again(o):
    miss = o.num("7889d633", r"CPU ([\d.]+) µs")
    hit = o.num("b6098440", r"CPU ([\d.]+) µs")
    return within(miss / hit, 1.5, 2.0, "miss / hit")


def _latency_flat(o):
    a = o.num("548c3616", r"median ([\d.]+) ms")
    b = o.num("busier-result", r"median RTT ([\d.]+) ms")
    return abs(a - b) < 0.1, f"median RTT {a} ms at 1,000 pps, {b} ms at 2,000 pps"


def _healthy_cache(o):
    entries = o.num("healthy-counts", r"at most ([\d,]+) entries")
    hits = o.num("healthy-counts", r"\((\d+) % hits\)")
    p50 = o.num("healthy-counts", r"ping median ([\d.]+) ms")
    busy = o.num("healthy-counts", r"CPU busy ([\d.]+) %")
    ok = 1000 <= entries < 10_000 and hits > 50 and 0.8 <= p50 <= 1.3 and busy < 15
    return ok, f"{entries:,.0f} entries, {hits:.0f} % hits, ping {p50} ms, CPU {busy} %"


def _buckets_128(o):
    # 1,024 buckets for 128 MB: max_size = 16 x buckets, as the run's own counters say
    ms = o.num("one-entries", r"far below `max_size` \(([\d,]+)\)")
    per = o.num("one-entries", r"entries\*\*, ([\d.]+) per bucket")
    entries = o.num("one-entries", r"climbs to \*\*([\d,]+) entries")
    return ms == 16 * 1024 and abs(entries / per - 1024) < 30, \
        f"max_size {ms:,.0f}, {entries:,.0f} entries at {per} per bucket"


def _arp_defaults(o):
    t = o.text["walk-table"]
    sol = [float(ln.split()[0]) for ln in t.splitlines() if "ARP request broadcast" in ln]
    limit = o.num("walk-table", r"waiting \(limit (\d+)\)")
    ok = len(sol) == 3 and all(abs(b - a - 1.0) < 0.01 for a, b in zip(sol, sol[1:],
                                                                       strict=False))
    return ok and limit == 3, f"requests at {sol}, queue limit {limit:g}"


def _table_full(o):
    # (2.4.24 has no /proc/net/stat/arp_cache: the model's counters follow in
    # 2.6.9's layout, under its header)
    lines = o.text["arp-stat"].splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("entries  allocs"))
    entries = int(lines[at + 1].split()[0], 16)
    return entries == 1025, f"{entries} entries at the end"


def _gc_twice_a_second(o):
    t = o.text["gc-passes"]
    rows = [ln for ln in t.splitlines()[1:] if ln[:1] == " "]
    more = o.num("gc-passes", r"\.\.\. (\d+) more passes")
    per_s = (len(rows) + more) / 20.0
    return 1.7 <= per_s <= 2.05, f"{per_s:.2f} real passes per second"


def _forced_gc_dominates(o):
    top = o.text["perf-top"].splitlines()[1].split()
    return top[-1] == "neigh_forced_gc", f"top of the profile: {top[-1]}"


def _saturated_at_95(o):
    rows = [ln.split() for ln in o.text["sweep"].splitlines()
            if ln[:1] == " " and ln.split()[0].isdigit()]
    over = [float(r[5].rstrip("%")) for r in rows if float(r[2]) > 100]
    mid = [float(r[2]) for r in rows if 80 <= float(r[5].rstrip("%")) <= 90]
    ok = bool(over) and min(over) >= 93 and all(p < 100 for p in mid)
    return ok, f"CPU where the median passes 100 ms: {over}; medians at 80-90 %: {mid}"


def _five_times_short(o):
    f = o.num("gap", r"\*\*([\d.]+) times more\*\*")
    return 4.5 <= f <= 7.0, f"factor {f}"


def _several_times_less(o):
    # exercise 3 and the summary refer to section 6's factor without quoting it
    f = o.num("gap", r"\*\*([\d.]+) times more\*\*")
    return 3.0 <= f <= 9.0, f"section 6's factor {f}"


def _clock_twelve(o):
    from routelab.hardware import cpu_profile
    r = cpu_profile("p4-xeon-2400x2").hz / cpu_profile("k6-200").hz
    return r == 12, f"clock ratio {r:g}"


def _slices(o):
    from routelab.core.sched import task_timeslice
    nice0, nice19 = task_timeslice(120), task_timeslice(139)
    return (nice0, nice19) == (102, 10), f"timeslices {nice0} and {nice19} ms at HZ=1000"


def _starving_limit(o):
    from routelab.core.sched import STARVATION_LIMIT
    return STARVATION_LIMIT == 1020, f"STARVATION_LIMIT {STARVATION_LIMIT} jiffies"


def _thresh3_range(o):
    from routelab.notebook.story1 import load_bands
    b = load_bands()
    r = b["setup_ranges"]["neigh_gc_thresh3"]
    return (min(r), max(r), b["frozen"]["neigh_gc_thresh3"]) == (1024, 4096, 4096), \
        f"set-up range {r}, frozen {b['frozen']['neigh_gc_thresh3']}"


def _explorer_overflows(o):
    from routelab.notebook.story2 import rcu_explorer
    ex = rcu_explorer()
    m = re.search(r"dst overflows ([\d,]+)", ex.readout_text)
    return bool(m) and _f(m.group(1)) > 0, f"default explorer readout: {ex.readout_text[:160]}"


def _chains_nine(o):
    # the chains may grow to nine; the one-Welchia run holds several per bucket already
    per = o.num("one-entries", r"entries\*\*, ([\d.]+) per bucket")
    return 2.5 < per <= 9, f"{per} per bucket on average"


def _primer_load(o):
    shares = o.nums("16919867", r"CPU\d (\d+) %")
    removed = "At 20 ms: writer unhashes A" in o.text["16919867"]
    ok = len(shares) == 2 and all(85 <= x <= 95 for x in shares) and removed
    return ok, f"softirq shares {shares}, removal at 20 ms: {removed}"


def _report_ratios(o):
    def ratio(name):
        return float(o.row("4627c440", name)[-1])
    packets = [ratio(n) for n in ("RX-OK per input port", "RX-OVR per input port",
                                  "TX-OK per output port")]
    cache = [ratio(n) for n in ("in_hit per CPU", "in_slow_tot per CPU", "gc_total per CPU",
                                "in_hlist_search per CPU")]
    drp = ratio("RX-DRP per input port")
    ok = all(0.9 <= r <= 1.1 for r in packets) and 0.8 <= drp <= 1.2 and \
        all(0.75 <= r <= 1.3 for r in cache)
    return ok, f"packets {packets}, RX-DRP {drp}, cache counters {cache}"


def _variants(cid):
    rows = {}
    for line in Outputs(N02).text[cid].splitlines():
        m = re.match(r"(\S+)\s+([\d,]+)\s+(\d+) kpps\s+(\S+)\s+(\S+)\s+([\d,]+)\s+(\d+) ms", line)
        if m:
            rows[m.group(1)] = dict(overflows=_f(m.group(2)), kpps=float(m.group(3)),
                                    gp50=m.group(4), pending=_f(m.group(6)),
                                    delay=float(m.group(7)))
    return rows


def _ms(x: str) -> float:
    return float(x.removesuffix("ms"))


def _bh_shortens_delay(o):
    r = _variants("e123474c")
    van, bh = r["2.6.0"]["delay"], r["2.6.0-rcu-bh"]["delay"]
    return bh <= van / 3, f"worst loop delay {van} ms on vanilla, {bh} ms with call_rcu_bh"


def _no_75_s(o):
    model = float(o.row("4627c440", "worst gettimeofday delay [s]")[0])
    return model < 7.5 / 3, f"model's worst delay {model} s against 7.5 s reported"


def _write_truesize_38k(o):
    return within(o.num("frag-table", r"([\d,]+) B of truesize"), 37_000, 39_000,
                  "truesize of one WRITE [B]")


def _two_writes_76k(o):
    return within(2 * o.num("frag-table", r"([\d,]+) B of truesize"), 74_000, 78_000,
                  "truesize of two WRITEs [B]")


def _write_23_fragments(o):
    return within(o.num("frag-table", r"(?m)^(\d+) fragments for"), 23, 23, "fragments per WRITE")


CLAIMS: list[tuple[str, str, str, Callable]] = [
    (N00, "question-p4", "(c) more\ncycles than the K6", _k6_vs_xeon_cycles),
    (N00, "5a8643d4", "twelve times as fast as the K6's 200 MHz", _clock_twelve),

    (N00, "e265643b", "about as cheap as a cache hit", _k20_like_a_hit),
    (N00, "0594d5c5", "Nothing is lost at this load", _nothing_lost),
    (N00, "question-1", "median ping RTT is about 0.4 ms", _median_041),
    (N00, "5d34dfb0", "several times faster (section 1)", _k6_vs_xeon_time),
    (N00, "acf85955", "Its CPU part is the same\nas for the 1500-byte packet", _echo_cpu_same),
    (N00, "eab18eb0", "a miss adds more than half again", _miss_half_again),
    (N00, "eab18eb0", "ping latency hardly changes with load", _latency_flat),
    (N01, "healthy-prose", "a few thousand entries, most packets hits", _healthy_cache),
    (N01, "buckets-prose", "With 128 MB that is **1,024 buckets**", _buckets_128),
    (N01, "arp-rules", "then another every `retrans_time` (1 s), `mcast_solicit` (3) in all",
     _arp_defaults),
    (N01, "neigh-full", "a futile walk over about\n1,025 entries", _table_full),
    (N01, "gc-prose", "So a real pass runs about twice a second", _gc_twice_a_second),
    (N01, "gc-prose", "here on nearly every new entry", _forced_gc_dominates),
    (N01, "missing-work", "at about 95 % busy (section 5's\ntable), never at 80–90 %",
     _saturated_at_95),
    (N01, "gap", "times more", _five_times_short),
    (N01, "thresh3-intro", "set-up range, 1,024–4,096, and freezes 4,096", _thresh3_range),
    (N01, "ex3", "model charges a probe several times less CPU", _several_times_less),
    (N01, "next", "charges a probe several times less CPU", _several_times_less),
    (N01, "next", "the gap shrinks to about one and a half times", _gap_frozen),
    (N01, "next", "the chains may grow to nine entries", _chains_nine),
    (N02, "07e8cda4", "90 % of the time in network softirq work", _primer_load),
    (N02, "3fbc5d25", "drops, receives and forwards about the same numbers of packets",
     _report_ratios),
    (N02, "3ef0def7", "`call_rcu_bh` shortens the loop's worst\ndelay a lot", _bh_shortens_delay),
    (N02, "summary", "the model does not reproduce the 7.5 s of the report", _no_75_s),
    (N02, "dd1ef09c", "102 ms\nfor a nice-0 task like the `gettimeofday` loop, 10 ms at nice 19",
     _slices),
    (N02, "sleepers-prose", "`EXPIRED_STARVING` – 1.02 s", _starving_limit),
    (N02, "3db8b452", "so the\ncache overflows within the window", _explorer_overflows),
    (N03, "s4", "a WRITE needs about 38 KB of\ntruesize", _write_truesize_38k),
    (N03, "s11", "above about 76 KB (room for two WRITEs)", _two_writes_76k),
    (N03, "s5", "(23 fragments each)", _write_23_fragments),
]


@pytest.mark.parametrize(("stem", "cid", "words", "check"), CLAIMS,
                         ids=[f"{s[:2]}-{c}-{w[:24]}" for s, c, w, _ in CLAIMS])
def test_prose_agrees_with_the_notebooks_outputs(stem, cid, words, check):
    o = Outputs(stem)
    assert cid in o.source, f"{stem}: no cell {cid} (update the claim list)"
    assert words in o.source[cid], \
        f"{stem} cell {cid} no longer says {words!r}: update the claim list"
    ok, said = check(o)
    assert ok, f"{stem} cell {cid} says {words!r}, but its outputs say: {said}"


def test_a_contradicted_claim_fails():
    """The checks can fail: outputs that contradict a claim make it not ok."""
    o = Outputs(N01)
    assert _healthy_cache(o)[0]
    o.text["healthy-counts"] = o.text["healthy-counts"].replace("ping median 1.", "ping median 21.")
    ok, said = _healthy_cache(o)
    assert not ok and "ping 21." in said
    o = Outputs(N00)
    o.text["86a2337e"] = re.sub(r"(eth1\s+1500\s+\d+\s+\d+\s+)0", r"\g<1>7", o.text["86a2337e"])
    assert not _nothing_lost(o)[0]
