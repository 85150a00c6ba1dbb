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
    ratio = o.num("dba41d27", r"for ([\d.]+) times the cycles")
    return within(1 / ratio, 2.0, 99, "P4 cycles / K6 cycles")


def _k6_vs_xeon_time(o):
    return within(o.num("dba41d27", r"needs ([\d.]+) times as long"), 4.5, 5.5, "K6/P4 time")


def _k6_cpu_us(o):
    return within(o.num("b6098440", r"CPU ([\d.]+) µs"), 32.5, 33.5, "K6 CPU per packet [µs]")


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
    return round(p50, 2) == 0.41, f"median RTT {p50} ms"


def _echo_cpu_same(o):
    echo = o.num("a0460d76", r"one echo request costs ([\d.]+) µs of CPU")
    big = o.num("b6098440", r"CPU ([\d.]+) µs")
    return abs(echo - big) < 0.15, f"84-byte echo {echo} µs, 1500-byte packet {big} µs"


def _miss_half_again(o):
    miss = o.num("7889d633", r"CPU ([\d.]+) µs")
    hit = o.num("b6098440", r"CPU ([\d.]+) µs")
    return within(miss / hit, 1.5, 2.0, "miss / hit")


def _latency_flat(o):
    a = o.num("548c3616", r"median ([\d.]+) ms")
    b = o.num("ba32779c", r"median RTT ([\d.]+) ms")
    return abs(a - b) < 0.1, f"median RTT {a} ms at 1,000 pps, {b} ms at 2,000 pps"


def _healthy_cache(o):
    entries = o.num("5a70c747", r"at most ([\d,]+) entries")
    hits = o.num("5a70c747", r"\((\d+) % hits\)")
    p50 = o.num("5a70c747", r"ping median ([\d.]+) ms")
    ok = 1000 <= entries < 10_000 and hits > 50 and 0.8 <= p50 <= 1.3
    return ok, f"{entries:,.0f} entries, {hits:.0f} % hits, ping {p50} ms"


def _gc_on_every_miss(o):
    entries = o.num("e425790e", r"entries\s+([\d,]+)")
    gc_total = o.num("e425790e", r"gc_total\s+([\d,]+)")
    slow = o.num("e425790e", r"in_slow_tot\s+([\d,]+)")
    ok = abs(entries - 4096) <= 2 and 0.95 <= gc_total / slow <= 1.0
    return ok, f"entries {entries:,.0f}, gc_total {gc_total:,.0f} of {slow:,.0f} misses"


def _gc_pass_cost(o):
    rows = [ln.split() for ln in o.text["5ae38f1f"].splitlines()[1:] if ln[:1] == " "]
    rows = [r for r in rows if len(r) == 6]
    times = [float(r[0]) for r in rows]
    cpu = [float(r[5]) for r in rows]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    share = 2 * max(cpu) / 1000 * 100
    ok = max(cpu) < 3 and all(0.45 <= g <= 0.55 for g in gaps) and 0.3 <= share <= 0.7
    return ok, f"longest pass {max(cpu)} ms, gaps {min(gaps):.3f}-{max(gaps):.3f} s, " \
               f"{share:.2f} % of the CPU"


def _probe_is_a_miss(o):
    return within(o.num("d88f6de8", r"cache miss:\s+([\d.]+) µs"), 50, 99, "miss [µs]")


def _softirq_falls(o):
    peak = o.num("81830d2e", r"softirq share peaks at (\d+) %")
    last = o.num("81830d2e", r"and is (\d+) % at the highest rate")
    return last < peak, f"softirq share peaks at {peak:.0f} %, {last:.0f} % at the end"


def _round_rate_above_knee(o):
    knee = o.num("81830d2e", r"until about ([\d,]+) probes/s") / 3
    return knee < 6000 <= knee + 1000, f"knee at {knee:,.0f} probes/s per host"


def _calibration(o):
    rows = {r.split("  ")[0]: r for r in o.text["53e588d1"].splitlines()}

    def field(case, pat):
        m = re.search(pat, rows[case])
        assert m, (case, pat, rows[case])
        return float(m.group(1))
    busy2 = field("2.4.24, 2 worm hosts", r"CPU (\d+) % busy")
    ks2 = field("2.4.24, 2 worm hosts", r"ksoftirqd (\d+) %")
    ks3 = field("2.4.24, 3 worm hosts", r"ksoftirqd (\d+) %")
    p3 = field("2.4.24, 3 worm hosts", r"ping p50 ([\d.]+) ms")
    p0 = field("2.4.24, no worm hosts", r"ping p50 ([\d.]+) ms")
    p20 = field("2.0, 3 worm hosts", r"ping p50 ([\d.]+) ms")
    ok = (70 <= busy2 <= 80 and ks2 == 0 and ks3 >= 90 and 10 <= p3 < 100
          and 0.8 <= p0 <= 1.3 and 0.5 <= p20 <= 2)
    return ok, (f"2 hosts: CPU {busy2} %, ksoftirqd {ks2} %; 3 hosts: ksoftirqd {ks3} %, "
                f"ping {p3} ms; no worms {p0} ms; 2.0 {p20} ms")


def _261_overflows(o):
    peak = o.num("7813439e", r"entries peak ([\d,]+)")
    ms = o.num("7813439e", r"max_size ([\d,]+)")
    ov = o.num("7813439e", r"dst cache overflows ([\d,]+)")
    return peak == ms and ov > 0, f"peak {peak:,.0f} of max_size {ms:,.0f}, {ov:,.0f} overflows"


def _nocache_saves_nothing(o):
    lines = [ln for ln in o.text["14e657ab"].splitlines() if ln.startswith("2.4.24")]
    cpu = [float(re.findall(r"(\d+)%", ln)[1]) for ln in lines]
    return len(cpu) == 2 and abs(cpu[0] - cpu[1]) <= 3, f"CPU busy {cpu} %"


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


def _at_report(o):
    r = _variants("e123474c")
    none = all(v["overflows"] == 0 for v in r.values())
    van = r["2.6.0"]
    cuts = all(_ms(r[k]["gp50"]) <= _ms(van["gp50"]) / 3 and r[k]["pending"] <= van["pending"] / 3
               for k in ("2.6.0-rcu-iter", "2.6.0-rcu-bh"))
    half = r["2.4.24"]["kpps"] < 283
    return none and cuts and half, f"{r}"


def _same_delay_at_report(o):
    r = _variants("e123474c")
    d = [r[k]["delay"] for k in ("2.6.0", "2.6.0-rcu-iter", "2.6.0-rcu-bh")]
    return max(d) <= 1.25 * min(d), f"worst user delays {d} ms"


def _churn(o):
    r = _variants("b97cdc34")
    van = r["2.6.0"]
    fills = van["pending"] >= 32_768
    patched = all(r[k]["overflows"] == 0 and r[k]["kpps"] > van["kpps"]
                  for k in ("2.6.0-rcu-iter", "2.6.0-rcu-bh"))
    return fills and patched, f"{r}"


def _top_90(o):
    return within(o.num("top-shares", r"gettimeofday loop (\d+) %"), 85, 95, "top's share")


def _no_77_s(o):
    model = float(o.row("4627c440", "worst gettimeofday delay [s]")[0])
    return model < 0.75, f"model's worst delay {model} s against 7.5 s reported"


CLAIMS: list[tuple[str, str, str, Callable]] = [
    (N00, "eda079f3", "more than twice as many *cycles*", _k6_vs_xeon_cycles),
    (N00, "eda079f3", "about five\n  times faster", _k6_vs_xeon_time),
    (N00, "eda079f3", "(about 33 µs)", _k6_cpu_us),
    (N00, "e265643b", "about as cheap as a cache hit", _k20_like_a_hit),
    (N00, "0594d5c5", "Nothing is lost at this load", _nothing_lost),
    (N00, "question-1", "median ping RTT is 0.41 ms", _median_041),
    (N00, "5d34dfb0", "about five times faster (section 1)", _k6_vs_xeon_time),
    (N00, "acf85955", "Its CPU part is the same\nas for the 1500-byte packet", _echo_cpu_same),
    (N00, "eab18eb0", "a miss adds more than half again", _miss_half_again),
    (N00, "eab18eb0", "ping latency hardly changes with load", _latency_flat),
    (N01, "48731310", "a few thousand entries, most packets hits", _healthy_cache),
    (N01, "7f157e98", "with 4,096 entries against a\n`gc_thresh` of 2,048", _gc_on_every_miss),
    (N01, "cb8b669b", "under 3 ms, twice a second: about half a percent",
     _gc_pass_cost),
    (N01, "866693f0", "more than 50 µs on the K6, section 1", _probe_is_a_miss),
    (N01, "9f247da0", "the softirq share falls once the CPU is saturated", _softirq_falls),
    (N01, "8ac2c957", "a round rate just above the knee", _round_rate_above_knee),
    (N01, "c7d85847", "two already take three quarters of it", _calibration),
    (N01, "c7d85847", "With two it is zero", _calibration),
    (N01, "c7d85847", "**tens of milliseconds, not\n100–160**", _calibration),
    (N01, "e1a0e99b", "piles up behind it until the count reaches\n`max_size`", _261_overflows),
    (N01, "75ee45ce", "In the model the patch saves almost nothing", _nocache_saves_nothing),
    (N02, "07e8cda4", "90 % of the time in network softirq work", _primer_load),
    (N02, "3fbc5d25", "drops, receives and forwards the same numbers of packets",
     _report_ratios),
    (N02, "dd1ef09c", "section 4 shows that the model does not\nreproduce that", _no_77_s),
    (N02, "63a656d7", "each patch cuts both by a large factor", _at_report),
    (N02, "63a656d7", "loses more than half the packets at the backlog", _at_report),
    (N02, "8847c2be", "its worst delay is the same on all\nthree kernels",
     _same_delay_at_report),
    (N02, "8847c2be", "nothing overflows, and the router forwards more", _churn),
    (N02, "section-8", "(about 90 % of a CPU, mostly system time)", _top_90),
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
    o.text["5a70c747"] = o.text["5a70c747"].replace("ping median 1.", "ping median 21.")
    ok, said = _healthy_cache(o)
    assert not ok and "ping 21." in said
    o = Outputs(N00)
    o.text["86a2337e"] = re.sub(r"(eth1\s+1500\s+\d+\s+\d+\s+)0", r"\g<1>7", o.text["86a2337e"])
    assert not _nothing_lost(o)[0]
