"""The notebooks' "predict, then run" questions: answers, tolerances, hints, explanations.

A notebook cell asks a question by its id and passes what the model ran;
everything that would give the answer away lives here, not in the cell::

    check = checker("00-packet-journey")          # the setup cell
    rtt_prediction_ms = None   # <- your prediction, in ms     (a "solution" cell)
    res2 = ping.run(seed=1, background_pps=2000)
    check("busier-router", rtt_prediction_ms, run=res2)       (a "check" cell)

Each :class:`Question` names the answer variable, says what to write
(``prompt``: no number, no hint), and ``solve``\\s the question from the
objects the notebook passes: ``solve(**facts)`` returns a dict with the
``"expected"`` answer and any other named numbers the hint and the
explanation quote (they are ``str.format`` templates over that dict).  So a
model number is always the model's own, computed at run time, and
``solve`` runs only once a student has answered.

``solution`` is the answer key: code that sets the answer variable to a
right answer, as a student would write it.  ``scripts/student.py`` writes
it to ``solutions/NN-*.py``, and a test runs every notebook with these
answers and requires a ✓ from every check.

To add a question to a notebook: add a :class:`Question` to
:data:`QUESTIONS` (below, in notebook order), then the cells -- the prompt
(markdown, tag ``exercise``), ``variable = None`` (tag ``solution``), a cell
that runs the model and prints nothing, ``check("qid", variable, **facts)``
(tag ``check``), and only then the cells that show the model's numbers;
see ``docs/development.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from ..result.profile import LEDGER_ROWS

__all__ = ["QUESTIONS", "Question", "for_notebook", "question"]


@dataclass(frozen=True)
class Question:
    """One question of one notebook.

    Attributes
    ----------
    notebook : str     notebook stem, e.g. ``"00-packet-journey"``
    qid : str          the question's id within its notebook
    variable : str     the answer variable the notebook's ``solution`` cell sets
    prompt : str       what to write, e.g. "a number: the median RTT, in ms" (reveals nothing)
    solve : callable   ``solve(**facts) -> {"expected": ..., **values}``
    unit : str         unit of a numeric answer
    tol, rel : float   a numeric answer is right within ``max(tol, rel * |expected|)``
    choices : tuple    the options of a multiple-choice question (empty: numeric)
    hint : str         shown after a wrong answer (a template over ``solve``'s values)
    explanation : str  shown after any answer (a template over ``solve``'s values)
    solution : str     answer-key code setting ``variable`` (for ``solutions/``)
    """

    notebook: str
    qid: str
    variable: str
    prompt: str
    solve: Callable[..., dict]
    unit: str = ""
    tol: float = 0.0
    rel: float | None = None
    choices: tuple[str, ...] = field(default_factory=tuple)
    hint: str = ""
    explanation: str = ""
    solution: str = ""

    @property
    def kind(self) -> str:
        """``"choice"`` or ``"number"``."""
        return "choice" if self.choices else "number"


# -- notebook 00: a packet's journey ------------------------------------------------------

def _median_rtt(run) -> dict:
    s = run.summary()
    return {"expected": s["ping_rtt_ms_p50"], "idle": 100.0 - s["cpu_busy_pct"]}


CYCLES_00 = ("far fewer cycles than the K6", "about the same number of cycles",
             "more cycles than the K6")


def _p4_cycles(k6, xeon) -> dict:
    r = xeon.cpu_cycles / k6.cpu_cycles
    verdict = CYCLES_00[0] if r < 0.7 else CYCLES_00[2] if r > 1.3 else CYCLES_00[1]
    return {"expected": verdict, "k6_cycles": k6.cpu_cycles, "p4_cycles": xeon.cpu_cycles,
            "ratio": r, "speedup": k6.cpu_seconds / xeon.cpu_seconds,
            "k6_us": k6.cpu_seconds * 1e6, "p4_us": xeon.cpu_seconds * 1e6}


def _fragments(journey) -> dict:
    length, mtu = journey.params["length"], journey.params["mtu"]
    payload, room = length - 20, mtu - 20
    per = room // 8 * 8            # fragment offsets count in 8-byte units
    full, last = divmod(payload, per)
    tail = (f"so {full} full fragments and one more with the last {last} bytes" if last
            else f"so exactly {full} full fragments")
    return {"expected": journey.nfrag, "length": length, "mtu": mtu, "payload": payload,
            "room": room, "per": per, "ratio": payload / per, "tail": tail}


_Q00 = (
    Question(
        "00-packet-journey", "p4-cycles", "p4_cycles",
        "one of the three answers, as its letter or its text",
        _p4_cycles, choices=CYCLES_00,
        hint="Time is cycles divided by the clock rate. What does a cache miss to memory cost "
             "a CPU whose cycle is twelve times shorter, when the memory is no faster?",
        explanation="the P4 needs {p4_cycles:,.0f} cycles where the K6 needs {k6_cycles:,.0f} "
                    "({ratio:.1f} times as many): its long pipeline does little work per "
                    "cycle on branchy kernel code, and every miss to memory costs it hundreds "
                    "of cycles. Each cycle is twelve times shorter, so the packet still takes "
                    "{p4_us:.1f} µs instead of {k6_us:.1f} µs ({speedup:.1f} to 1).",
        solution='p4_cycles = "c"   # cycles are not time: memory stalls cost the P4 many cycles'),
    Question(
        "00-packet-journey", "busier-router", "rtt_prediction_ms",
        "a number: the median ping RTT with 2,000 background packets per second, in ms",
        _median_rtt, unit="ms", tol=0.05,
        hint="How busy is the CPU? How often does a ping find a packet ahead of it?",
        explanation="the CPU is idle {idle:.0f} % of the time, so a ping rarely waits behind "
                    "another packet. Latency stays flat until the CPU or the link is nearly "
                    "saturated, then climbs steeply (try the explorer below).",
        solution="rtt_prediction_ms = 0.41   # a mostly idle CPU: no queueing, no change"),
    Question(
        "00-packet-journey", "fragments-576", "n_fragments",
        "a whole number: how many fragments leave through the 576-byte MTU",
        _fragments, unit="fragments",
        hint="{length} / {mtu} is not the question: subtract the headers first.",
        explanation="the packet carries {length} - 20 = {payload} payload bytes; each fragment "
                    "carries at most {mtu} - 20 = {room}, rounded down to a multiple of 8: "
                    "{per}. {payload} / {per} = {ratio:.1f}, {tail}.",
        solution="n_fragments = 8   # 3980 payload bytes in 552-byte pieces: 7 full + 1"),
    Question(
        "00-packet-journey", "faster-cpu", "xeon_rtt_prediction_ms",
        "a number: the median ping RTT through the P4 Xeon router, in ms",
        _median_rtt, unit="ms", tol=0.03,
        hint="Which parts of a round trip does a faster router CPU not shorten?",
        explanation="the router's CPU is only a small part of the round trip: the ping also "
                    "crosses the 100 Mbit/s wires in both directions and waits for the far end "
                    "to answer (the scenario's far_end_ms). A CPU several times faster only "
                    "shortens the two passes through the router.",
        solution="xeon_rtt_prediction_ms = 0.35   # the wires and the far end stay the same"),
)


# -- notebook 01: worm scans thrash the route cache ----------------------------------------

SLOW_PATH = LEDGER_ROWS["route_slow"]      # the profile row of the route-cache miss path
COSTS_01 = ("the route cache's GC passes", "the route-cache slow path of each new destination",
            "the neighbour table's forced GC walks")
PING_BANDS = ("about 1 ms", "a few ms", "tens of ms", "over 100 ms", "every ping is lost")


def _probe_rate(res) -> float:
    from .story1 import probe_rate

    return probe_rate(res)


def _extra_misses(healthy, one) -> dict:
    s0, s1 = healthy.summary(), one.summary()
    measured = (s1["in_slow_tot"] - s0["in_slow_tot"]) / one.duration
    probes = _probe_rate(one)
    surplus = measured - probes
    if surplus >= 0.5:
        rest = (f"The other {surplus:,.0f} misses per second are answers: a live host that "
                "answers an echo sends its reply from a new source address, and that (source, "
                "destination) pair is a new entry too.")
    elif surplus <= -0.5:
        rest = (f"The measured difference is {-surplus:,.0f} per second below that because it "
                "is a difference between two runs: the background's own misses are not quite "
                "the same in both (with the worm's entries in the cache, the garbage collector "
                "frees other background entries than in the healthy run).")
    else:
        rest = "The background's own misses are the same in both runs."
    return {"expected": measured, "probes": probes, "surplus": surplus, "rest": rest}


def _arp_hold(walk) -> dict:
    failed = walk.times("failed")
    t_fail = failed[0] if failed else float("nan")
    last = walk.arrivals[-1]
    oldest = walk.arrivals[len(walk.times("queue drop"))]
    return {"expected": t_fail - last, "n_arp": len(walk.times("solicit")),
            "retrans": walk.retrans_time, "solicit": walk.mcast_solicit,
            "n_icmp": walk.icmp_unreach, "t_fail": t_fail, "last": last,
            "oldest_wait": t_fail - oldest}


def _biggest_cost(run) -> dict:
    prof = run.profile
    gc = prof.get(LEDGER_ROWS["rt_garbage_collect"], 0.0)
    slow = prof.get(SLOW_PATH, 0.0)          # (the GC has its own row)
    fgc = prof.get("neigh_forced_gc", 0.0)
    s = run.summary()
    total = sum(prof.values())       # the profile's first column: share of this total
    return {"expected": max(zip([gc, slow, fgc], COSTS_01, strict=True))[1],
            "fgc_share": fgc / total if total else 0.0, "walks": s["neigh_forced_gc"],
            "per_walk_ms": fgc / max(s["neigh_forced_gc"], 1) * 1e3,
            "slow_share": slow / total if total else 0.0, "gc_ms": gc * 1e3}


def _ping_band(run) -> dict:
    s = run.summary()
    p50 = s["ping_rtt_ms_p50"]
    band = (PING_BANDS[4] if not math.isfinite(p50) else
            PING_BANDS[0] if p50 < 2 else PING_BANDS[1] if p50 < 10 else
            PING_BANDS[2] if p50 < 100 else PING_BANDS[3])
    return {"expected": band, "busy": s["cpu_busy_pct"], "p50": p50}


SMALL_CACHE = ("better: faster replies, no more pings lost", "about the same",
               "faster replies, but many more pings lost", "slower replies")


def _small_verdict(base: dict, other: dict) -> str:
    """Judged by both the median of the replies and the loss, as the question asks."""
    b, m = base["ping_rtt_ms_p50"], other["ping_rtt_ms_p50"]
    more_lost = other["ping_loss_pct"] > base["ping_loss_pct"] + 10
    if not math.isfinite(m) or (math.isfinite(b) and m > 1.2 * b):
        return SMALL_CACHE[3]
    if math.isfinite(b) and m < 0.8 * b:
        return SMALL_CACHE[2] if more_lost else SMALL_CACHE[0]
    return SMALL_CACHE[2] if more_lost else SMALL_CACHE[1]


def _small_cache(trials) -> dict:
    base, small = trials[0][1], trials[1][1]
    return {"expected": _small_verdict(base, small), "overflows": small["gc_dst_overflow"],
            "loss": small["ping_loss_pct"], "base_loss": base["ping_loss_pct"],
            "p50": small["ping_rtt_ms_p50"], "base_p50": base["ping_rtt_ms_p50"],
            "busy": small["cpu_busy_pct"], "base_busy": base["cpu_busy_pct"]}


WALKS = ("far fewer", "about as many", "more")


def _no_interval(trials) -> dict:
    base, zero = trials[0][1], trials[2][1]
    b, z = base["cpu_busy_pct"], zero["cpu_busy_pct"]
    wb, wz = base["neigh_forced_gc"], zero["neigh_forced_gc"]
    verdict = WALKS[0] if wz < 0.5 * wb else WALKS[2] if wz > 1.2 * wb else WALKS[1]
    cpu = ("lower: the walks saved pay for all those GC passes, with some to spare"
           if z < 0.97 * b else
           "higher: all those GC passes cost more than the walks they save" if z > 1.03 * b
           else "about the same: the walks saved pay for all those GC passes")
    return {"expected": verdict, "busy": z, "base_busy": b, "cpu": cpu,
            "walks": zero["neigh_forced_gc"], "base_walks": base["neigh_forced_gc"],
            "runs": zero["gc_total"] - zero["gc_ignored"],
            "base_runs": base["gc_total"] - base["gc_ignored"],
            "entries": zero["route_cache_entries_max"],
            "base_entries": base["route_cache_entries_max"]}


def _walk_limit(run, sweep) -> dict:
    prof = run.profile
    s = run.summary()
    per_walk = prof.get("neigh_forced_gc", 0.0) / max(s["neigh_forced_gc"], 1)
    over = sweep.total_pps[sweep.p50 > 5]
    knee = float(over.min()) if over.size else float(sweep.total_pps.max())
    return {"expected": 1.0 / per_walk if per_walk else float("inf"),
            "per_walk_ms": per_walk * 1e3, "knee": knee}


def _duron_scanners(stand_in: dict) -> dict:
    from ..scenarios import worm

    def slow(n: int) -> bool:
        s = worm.run(cpu="duron-900", duration=8, seed=1,
                     **{**stand_in, "outside_welchia": n}).summary()
        p50 = s["ping_rtt_ms_p50"]
        return not math.isfinite(p50) or p50 > 5

    start = int(stand_in.get("outside_welchia", 0))
    busy = worm.run(cpu="duron-900", duration=8, seed=1, **stand_in).summary()["cpu_busy_pct"]
    lo, hi = start, 50                   # the scenario's limit for outside scanners
    if not slow(hi):
        return {"expected": hi, "busy": busy, "start": start}
    while hi - lo > 1:                   # lo is fast, hi is slow
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if slow(mid) else (mid, hi)
    return {"expected": hi, "busy": busy, "start": start}


def _bad_from(table, p50_ms: float = 10.0, loss_pct: float = 5.0) -> dict:
    """Per kernel, the first outside-scanner count where the ping goes bad, or None."""
    xs, ys, p50 = table.pivot("ping_rtt_ms_p50", "outside_welchia", "kernel")
    _, _, loss = table.pivot("ping_loss_pct", "outside_welchia", "kernel")
    out = {}
    for k, med, lost in zip(ys, p50, loss, strict=True):
        bad = [x for x, m, lo in zip(xs, med, lost, strict=True)
               if not math.isfinite(m) or m > p50_ms or lo > loss_pct]
        out[k] = bad[0] if bad else None
    return out


def _cliff_kernel(table) -> dict:
    first = _bad_from(table)
    top = max(table.grid["outside_welchia"]) + 1
    rank = {k: (top if v is None else v) for k, v in first.items()}
    best = max(rank.values())
    winners = [k for k, v in rank.items() if v == best]
    expected = winners[0] if len(winners) == 1 else "no one kernel: a tie"
    said = "; ".join(f"{k}: {'never' if v is None else f'from {v:g}'}" for k, v in first.items())
    nc = first.get("2.4.24-nocache")
    return {"expected": expected, "said": said,
            "nc_from": "never" if nc is None else f"{nc:g}"}


CLIFF_KERNELS = ("2.0", "2.4.24", "2.6.0", "2.4.24-nocache", "no one kernel: a tie")


_Q01 = (
    Question(
        "01-worm-cache-thrash", "worm-misses", "extra_misses_per_s",
        "a number: the extra route-cache misses per second one infected PC causes",
        _extra_misses, unit="misses/s", rel=0.25,
        hint="How many probes per second does one Welchia host send, and how many of them go "
             "to an address that already has an entry?",
        explanation="each of its {probes:,.0f} probes per second goes to an address the cache "
                    "has never seen: one miss each. {rest}",
        solution="extra_misses_per_s = 140   # one per echo: each goes to a new address"),
    Question(
        "01-worm-cache-thrash", "arp-hold", "held_s",
        "a number: how long the last probe waits in the router before the router gives up, "
        "in seconds",
        _arp_hold, unit="s", tol=0.3,
        hint="The first request goes out when the first probe arrives; how many requests, "
             "{retrans:g} s apart, before the entry fails? And when did the probe arrive?",
        explanation="the router broadcasts {n_arp} ARP requests (mcast_solicit = {solicit}), "
                    "{retrans:g} s apart (retrans_time), and declares the neighbour FAILED one "
                    "retrans_time after the last: at {t_fail:.1f} s, whenever the packets "
                    "came. The last probe, queued at {last:g} s, waits {expected:.1f} s; the "
                    "oldest one still queued waits {oldest_wait:.1f} s, each holding its "
                    "route-cache entry all along. Each gets an ICMP host unreachable "
                    "({n_icmp} here).",
        solution="held_s = 1.8   # FAILED at 3 s (three requests 1 s apart + 1 s); 3.0 - 1.2"),
    Question(
        "01-worm-cache-thrash", "median-ping", "median_ping",
        "one of the five answers, as its letter or its text",
        _ping_band, choices=PING_BANDS,
        hint="How busy is the CPU? A ping waits only for the work already queued ahead of it.",
        explanation="the CPU is {busy:.0f} % busy: a ping rarely finds more than a packet or "
                    "two ahead of it, so the median is {p50:.1f} ms. This is where the model "
                    "and the report part ways (section 6).",
        solution='median_ping = "a"   # the CPU is far from saturated'),
    Question(
        "01-worm-cache-thrash", "biggest-cost", "biggest_cost",
        "one of the three costs, as its text or its letter",
        _biggest_cost, choices=COSTS_01,
        hint="Count how many entries each of them visits per call, and how often it runs.",
        explanation="the forced GC walks take {fgc_share:.1%} of the CPU time the router "
                    "spends on packets: {walks:,} walks over the whole neighbour table, about "
                    "{per_walk_ms:.2f} ms each on the K6, and they free nothing, because every "
                    "entry is held by a cached route or a pending ARP timer. The route-cache "
                    "slow path is {slow_share:.1%}; rt_garbage_collect, its real passes and the "
                    "calls it skips together, took {gc_ms:.0f} ms in the whole run.",
        solution='biggest_cost = "c"   # every new on-link address walks the full ARP table'),
    Question(
        "01-worm-cache-thrash", "no-interval", "no_interval_walks",
        "one of: far fewer, about as many, more (or a, b, c)",
        _no_interval, choices=WALKS,
        hint="If the route cache's GC ran at every allocation, how many cached routes would "
             "hold a neighbour, and could neigh_forced_gc then free any?",
        explanation="{walks:,} forced walks instead of {base_walks:,}. The GC now runs a real "
                    "pass at every allocation above gc_thresh ({runs:,} passes instead of "
                    "{base_runs:,}), so the cache stays near gc_thresh ({entries:,} entries at "
                    "most, against {base_entries:,}). Routes to dead addresses go soon after "
                    "their neighbour fails and no longer pin it, so neigh_forced_gc finds "
                    "something to free and the table rarely fills. The CPU load ({busy:.0f} % "
                    "against {base_busy:.0f} %) is {cpu}.",
        solution='no_interval_walks = "a"   # frequent GC unpins neighbours: fewer futile walks'),
    Question(
        "01-worm-cache-thrash", "small-cache", "small_cache",
        "one of the four answers, as its letter or its text",
        _small_cache, choices=SMALL_CACHE,
        hint="Which rule of rt_garbage_collect stops applying when entries reach max_size, "
             "and what does dst_alloc do when the GC cannot make room?",
        explanation="the replies' median is {p50:.1f} ms and {loss:.0f} % of pings are lost, "
                    "against {base_p50:.1f} ms and {base_loss:.0f} % with the defaults. At "
                    "max_size the gc_min_interval skip no longer applies: every allocation runs "
                    "a GC pass, and when it cannot free enough, dst_alloc fails ('dst cache "
                    "overflow', {overflows:,} times here) and the packet is dropped, the "
                    "students' pings included. The few pings that do get a route are quick, "
                    "because the router drops so much that little waits ahead of them: a fast "
                    "median of a few survivors is not a better router.",
        solution='small_cache = "c"   # at max_size every allocation runs GC, then fails'),
    Question(
        "01-worm-cache-thrash", "cliff-kernel", "longest_kernel",
        "one of the five answers, as its text or its letter",
        _cliff_kernel, choices=CLIFF_KERNELS,
        hint="A ping goes bad in two ways: its reply comes late, or it never comes. Which "
             "kernel loses pings while its replies stay fast (section 9), and which "
             "one never refuses a new route or neighbour (section 10)?",
        explanation="where the ping first goes bad (median of the replies over 10 ms, or more "
                    "than 5 % lost), by kernel: {said}. Kernel 2.0 never refuses an entry "
                    "and its cache stays at 256, so the scanning costs it CPU time only, and it "
                    "runs out of CPU last. 2.4.24 and 2.6.0 fall together, once the futile "
                    "neighbour walks saturate the K6. The no-cache patch keeps its replies "
                    "fast, but from {nc_from} outside scanners it loses pings: with nothing "
                    "cached, the neighbour entries of real hosts and of the gateway are held "
                    "only while a packet is in flight, and the forced GC frees them. A fast "
                    "median says nothing about the pings that never came back.",
        solution='longest_kernel = "2.0"   # never refuses an entry; nocache loses pings early'),
    Question(
        "01-worm-cache-thrash", "ex1-walks", "walks_per_s",
        "a number: forced GC walks per second that would take all of the K6's time",
        _walk_limit, unit="walks/s", rel=0.25,
        hint="From the profile of section 4: the CPU time of neigh_forced_gc divided by the "
             "number of walks is the time of one walk. How many fit in one second?",
        explanation="one walk over the full table takes the K6 about {per_walk_ms:.2f} ms, so "
                    "{expected:,.0f} walks a second would leave no time for anything else. In "
                    "the sweep the median ping passed 5 ms near {knee:,.0f} probes/s: "
                    "below that bound, because each probe also pays for its route lookup and "
                    "its interrupt, the background traffic needs its share, and not every "
                    "probe is to a dead on-link address.",
        solution="walks_per_s = 1 / 0.55e-3   # one second of CPU / one walk of ~0.55 ms"),
    Question(
        "01-worm-cache-thrash", "ex2-duron", "duron_outside",
        "a whole number: how many outside scanners it takes before the Duron's median ping "
        "passes 5 ms",
        _duron_scanners, unit="scanners", rel=0.2,
        hint="At the stand-in load ({start} outside scanners) the Duron is {busy:.0f} % busy. "
             "Each scanner adds about the same work.",
        explanation="the model needs about {expected} scanners outside (with the three inside) "
                    "before the Duron's ping suffers: a faster CPU moves the knee, it does not "
                    "remove it.",
        solution="duron_outside = 32   # about 38 % busy at 12 scanners: 12 / 0.38"),
)


# -- notebook 02: RCU grace periods under a softirq flood ----------------------------------

FULL_LOAD = ("both about as long as at 90 %", "vanilla much longer, call_rcu_bh no longer",
             "both much longer")
OVERFLOWS = ("disappear or nearly so", "drop by about half", "stay about the same")
DELAYS = ("much shorter", "about the same", "longer")
SLEEPER_DELAY = ("shorter", "about the same (within a factor of 2)", "more than twice as long")


def _wait(tl):
    """Entry A's wait from call_rcu to its free [ms], or None (not freed in the timeline)."""
    return getattr(tl, "wait", tl.gp_length)


def _full_load(base, vanilla, bh) -> dict:
    w0, wv, wb = _wait(base), _wait(vanilla), _wait(bh)
    van_long = wv is None or wv > 3 * w0
    bh_short = wb is not None and wb <= 1.5 * w0
    v = FULL_LOAD[1] if van_long and bh_short else FULL_LOAD[0] if not van_long and bh_short \
        else FULL_LOAD[2]
    return {"expected": v, "base_ms": w0, "bh_ms": wb if wb is not None else float("nan"),
            "van": "is not freed within the timeline" if wv is None else f"waits {wv:g} ms"}


def _top_share(run) -> dict:
    s = run.summary()
    ks, busy = s["cpu_ksoftirqd_pct"], s["cpu_busy_pct"]
    return {"expected": 100.0 - ks, "loop": 100.0 - ks, "ran": 100.0 - busy, "busy": busy}


def _overflows_bh(variants) -> dict:
    v0, vb = variants["2.6.0"].summary(), variants["2.6.0-rcu-bh"].summary()
    ratio = vb["gc_dst_overflow"] / max(v0["gc_dst_overflow"], 1)
    return {"expected": OVERFLOWS[0] if ratio < 0.2 else OVERFLOWS[1] if ratio < 0.7
            else OVERFLOWS[2], "vanilla": v0["gc_dst_overflow"], "bh": vb["gc_dst_overflow"]}


def _user_delay_bh(variants) -> dict:
    d0 = variants["2.6.0"].summary()["user_max_delay_s"]
    db = variants["2.6.0-rcu-bh"].summary()["user_max_delay_s"]
    why = ("the patch does not change how the CPU is shared between the flood and the user "
           "task, but on vanilla 2.6.0 the overflowing cache makes every allocation run a full, "
           "futile GC pass: the flood costs far more CPU time, and the user task waits longer. "
           "With the patch that extra work is gone." if db < 0.5 * d0 else
           "the patch changes when freed entries may go, not how the CPU is shared between the "
           "flood and the user task.")
    return {"expected": DELAYS[0] if db < 0.5 * d0 else DELAYS[2] if db > 1.5 * d0
            else DELAYS[1], "vanilla_ms": d0 * 1e3, "bh_ms": db * 1e3, "why": why}


def _sleepers_delay(runs) -> dict:
    d0 = runs[0].summary()["user_max_delay_s"]
    n = max(k for k in runs if k > 0)
    dn = runs[n].summary()["user_max_delay_s"]
    r = dn / max(d0, 1e-9)
    return {"expected": SLEEPER_DELAY[0] if r < 0.8 else SLEEPER_DELAY[1] if r <= 2.0
            else SLEEPER_DELAY[2], "n": n, "d0_ms": d0 * 1e3, "dn_ms": dn * 1e3, "ratio": r}


def _new_entries(run) -> dict:
    s = run.summary()
    k = run.extra["knobs"]
    flow_len = k["flow_len"]
    offered = 2 * k["pps_per_port"]
    new_flows = s["throughput_kpps"] * 1e3 / flow_len
    expected = s["in_slow_tot"] / run.duration
    return {"expected": expected, "flow_len": flow_len, "offered": offered,
            "estimate": offered / flow_len, "kpps": s["throughput_kpps"],
            "new_flows": new_flows, "again": expected - new_flows}


def _max_gp(run) -> dict:
    s = run.summary()
    per_s = s["in_slow_tot"] / run.duration
    max_size = run.counters["dst"]["max_size"]
    hashed = float(np.max(run.cache["hashed"])) if run.cache["hashed"].size else 0.0
    return {"expected": max_size / per_s * 1e3, "per_s": per_s, "max_size": max_size,
            "hashed": hashed, "elasticity": run.extra["knobs"].get("gc_elasticity", 8),
            "share": hashed / max_size}


GRACE_KERNELS = ("none of them", "only call_rcu_bh", "both patches", "both patches and 2.6.1",
                 "all four")
DROP_MOVE = ("to a higher rate", "no, the same rate", "to a lower rate")


def _short_grace(table, ms: float = 30.0) -> dict:
    from .sweeps import cliff

    c = cliff(table, "rcu_grace_ms_p95", "pps_per_port", "kernel", ms)
    short = {k for k, v in c.items() if v is None}
    sets = {GRACE_KERNELS[0]: set(), GRACE_KERNELS[1]: {"2.6.0-rcu-bh"},
            GRACE_KERNELS[2]: {"2.6.0-rcu-iter", "2.6.0-rcu-bh"},
            GRACE_KERNELS[3]: {"2.6.0-rcu-iter", "2.6.0-rcu-bh", "2.6.1"},
            GRACE_KERNELS[4]: set(c)}
    name = next((n for n, ks in sets.items() if ks == short), None)
    if name is None:
        raise ValueError(f"kernels with short grace periods {sorted(short)} match no answer")
    xs, ys, grid = table.pivot("rcu_grace_ms_p95", "pps_per_port", "kernel")
    row = dict(zip(ys, grid, strict=True))
    top = max(xs)
    return {"expected": name, "v_top": row["2.6.0"][-1], "bh_top": row["2.6.0-rcu-bh"][-1],
            "iter_top": row["2.6.0-rcu-iter"][-1], "top": top / 1e3,
            "from": (c["2.6.0"] or top) / 1e3}


def _first_drops(table, kernel: str, share: float = 0.001):
    xs, ys, drop = table.pivot("dropped_packets", "pps_per_port", "kernel")
    _, _, offered = table.pivot("offered_packets", "pps_per_port", "kernel")
    i = list(ys).index(kernel)
    over = [x for x, d, o in zip(xs, drop[i], offered[i], strict=True) if d > share * o]
    return over[0] if over else None


def _drop_move(table) -> dict:
    v = _first_drops(table, "2.6.0")
    moved = [_first_drops(table, k) for k in ("2.6.0-rcu-iter", "2.6.0-rcu-bh")]
    inf = float("inf")
    vv = inf if v is None else v
    mm = [inf if m is None else m for m in moved]
    expected = (DROP_MOVE[0] if all(m > vv for m in mm) else
                DROP_MOVE[2] if all(m < vv for m in mm) else DROP_MOVE[1])
    xs, ys, busy = table.pivot("cpu_busy_pct", "pps_per_port", "kernel")
    row = dict(zip(ys, busy, strict=True))["2.6.0"]
    at = list(xs).index(v) if v is not None else len(xs) - 1
    _, _, missed = table.pivot("drop_rx_missed", "pps_per_port", "kernel")
    _, _, over = table.pivot("gc_dst_overflow", "pps_per_port", "kernel")
    i = list(ys).index("2.6.0")
    return {"expected": expected, "from": (vv if v is not None else max(xs)) / 1e3,
            "busy": row[at], "top": max(xs) / 1e3, "missed": missed[i][-1],
            "overflows": max(over[i]), "first_over": next(
                (x / 1e3 for x, o in zip(xs, over[i], strict=True) if o > 0), max(xs) / 1e3)}


_Q02 = (
    Question(
        "02-rcu-softirq-latency", "full-load", "full_load",
        "one of the three answers, as its letter or its text",
        _full_load, choices=FULL_LOAD,
        hint="Which quiescent states can a CPU that never leaves softirq work still pass?",
        explanation="at 90 % entry A waits {base_ms:g} ms. At 100 % under vanilla rules A "
                    "{van}: a CPU that only does softirq work never passes a quiescent state "
                    "(no pass through schedule(), no tick in user mode or in the idle task), "
                    "so the grace period A's batch waits for never ends. With call_rcu_bh the "
                    "end of every softirq handler is one, and a flooded CPU finishes thousands "
                    "a second: A waits {bh_ms:g} ms.",
        solution='full_load = "b"   # vanilla waits for a context switch; bh for any handler end'),
    Question(
        "02-rcu-softirq-latency", "top-share", "top_loop_pct",
        "a number: the share of one CPU top shows for the gettimeofday loop, in %",
        _top_share, unit="%", tol=10,
        hint="top does not know what the CPU did during a tick, only which task was current.",
        explanation="the loop is current whenever ksoftirqd is not ({loop:.0f} % of the time), "
                    "so top charges it that much, mostly as system time – yet it really ran "
                    "only {ran:.1f} % of the time: softirq work took {busy:.1f} %.",
        solution="top_loop_pct = 90   # the loop is the current task whenever ksoftirqd is not"),
    Question(
        "02-rcu-softirq-latency", "sleepers-delay", "sleepers_delay",
        "one of the three answers, as its letter or its text",
        _sleepers_delay, choices=SLEEPER_DELAY,
        hint="A sleeper that wakes up gets a sleep bonus and lands in the active array. Where "
             "is the loop when its slice has run out, and when does it leave that array?",
        explanation="with no other tasks the loop's worst delay is {d0_ms:,.0f} ms, with {n} "
                    "sleepers on every CPU {dn_ms:,.0f} ms ({ratio:.1f} times as long). Each "
                    "sleeper needs only 1 ms of CPU every 100 ms, but it is interactive: woken "
                    "again and again, and under the flood getting its millisecond only in "
                    "slivers, it keeps the active array from emptying. The loop, its slice "
                    "eaten by softirq work, waits in the expired array until EXPIRED_STARVING "
                    "(1.02 s for each runnable task) forces the swap.",
        solution='sleepers_delay = "c"   # sleepers keep the loop in the expired array'),
    Question(
        "02-rcu-softirq-latency", "overflows-bh", "overflows_bh",
        "one of the three answers, as its letter or its text",
        _overflows_bh, choices=OVERFLOWS,
        hint="What stops a grace period from ending under the flood, and does the patch "
             "remove it?",
        explanation="{vanilla:,} overflows on vanilla 2.6.0, {bh:,} with call_rcu_bh: the "
                    "patch makes the end of every softirq handler a quiescent state, so grace "
                    "periods end inside the flood and the freed entries go in milliseconds.",
        solution='overflows_bh = "a"   # grace periods end within the flood'),
    Question(
        "02-rcu-softirq-latency", "user-delay-bh", "user_delay_bh",
        "one of the three answers, as its letter or its text",
        _user_delay_bh, choices=DELAYS,
        hint="Does call_rcu_bh change how much softirq work there is, or who runs it?",
        explanation="the worst delay is {vanilla_ms:.0f} ms on vanilla 2.6.0 and {bh_ms:.0f} ms "
                    "with call_rcu_bh: {why}",
        solution='user_delay_bh = "a"   # the futile GC passes of the overflowing cache stop'),
    Question(
        "02-rcu-softirq-latency", "short-grace", "short_grace",
        "one of the five answers, as its text or its letter",
        _short_grace, choices=GRACE_KERNELS,
        hint="What must each CPU pass through before a grace period can end, under each "
             "kernel's rules, when softirq work fills it? (2.6.1 changed how long ksoftirqd "
             "may run, nothing in RCU.)",
        explanation="at {top:.0f}k packets per second per port the 95th-percentile grace "
                    "period is {v_top:.0f} ms on 2.6.0 (over 30 ms from {from:.0f}k), "
                    "{iter_top:.0f} ms with the rcu-iter patch and {bh_top:.0f} ms with "
                    "call_rcu_bh. Once the flood saturates the CPUs, vanilla 2.6.0 waits for "
                    "context switches or user-mode ticks that rarely come; both patches let the "
                    "softirq's own progress count, so the grace periods end inside the flood. "
                    "2.6.1 has 2.6.0's RCU and behaves the same.",
        solution='short_grace = "c"   # both patches count the softirq\'s progress; 2.6.1 not'),
    Question(
        "02-rcu-softirq-latency", "drop-move", "drop_move",
        "one of the three answers, as its text or its letter",
        _drop_move, choices=DROP_MOVE,
        hint="In two seconds, is what drops the packets the dst cache running out of room, "
             "or the CPUs running out of time? Which of the two does a patch to RCU change?",
        explanation="every kernel starts to drop at {from:.0f}k per port, where the CPUs are "
                    "{busy:.0f} % busy. The drops are frames the CPUs had no time to take off "
                    "the cards' receive rings ({missed:,.0f} at {top:.0f}k on 2.6.0), and a "
                    "patch to RCU gives the CPUs no more time. In two seconds 2.6.0's cache "
                    "reaches max_size only from {first_over:.0f}k, and then only a few hundred "
                    "times ({overflows:,.0f} at most). The patches pay off over the "
                    "35-second floods of section 4, where long grace periods fill the cache "
                    "with dead entries and allocations fail by the thousand.",
        solution='drop_move = "b"   # the CPUs saturate at the same rate'),
    Question(
        "02-rcu-softirq-latency", "ex1-new-entries", "new_entries_per_s",
        "a number: new route-cache entries per second, both ports together",
        _new_entries, unit="entries/s", rel=0.25,
        hint="The offered rate divided by the flow length is a good first estimate. (The "
             "router receives only part of the flood, but it also has to make again the "
             "entries pushed out of full chains before their flow ended; the explanation shows "
             "how the two compare.)",
        explanation="the model creates {expected:,.0f} entries per second; the estimate from "
                    "the traffic, {offered:,.0f} packets per second offered over {flow_len} "
                    "packets per flow, is {estimate:,.0f}. The two agree for different reasons "
                    "that nearly cancel: the router receives and forwards only {kpps:.0f} kpps, "
                    "so only about {new_flows:,.0f} new flows per second reach the route cache; "
                    "the other {again:,.0f} per second are flows whose entry was pushed out of "
                    "its full chain, or collected, before the flow's last packet, and had to be "
                    "made again.",
        solution="new_entries_per_s = 2 * 283_000 / 10   # offered rate / packets per flow"),
    Question(
        "02-rcu-softirq-latency", "ex2-max-gp", "max_gp_ms",
        "a number: the longest grace period before pending entries fill max_size, in ms",
        _max_gp, unit="ms", rel=0.3,
        hint="pending entries ≈ new entries per second × grace-period length",
        explanation="{max_size:,} / {per_s:,.0f} per s ≈ {expected:.0f} ms. Any grace period "
                    "longer than that fills the cache with entries that are already dead, and "
                    "every allocation after it fails until the grace period ends. The real "
                    "limit is lower still: the entries still in the hash (up to {elasticity} "
                    "per bucket, about {hashed:,.0f} at the peak) take {share:.0%} of the room, "
                    "and 2.6.0 makes a freed entry wait for two or three grace periods, not "
                    "one (section 3).",
        solution="max_gp_ms = 32768 / 56_600 * 1e3   # max_size / new entries per second"),
)


# -- notebook 03: fragment flooding from a UDP sender ----------------------------------------

MORE_FEWER = ("more datagrams than 2.4.19", "about the same", "fewer datagrams than 2.4.19")
SPEEDUPS = ("about the same (less than 1.5 times)", "1.5 to 3 times as fast",
            "more than 3 times as fast")


def _n_fragments(udp_bytes: int, mtu: int = 1500) -> dict:
    from .story3 import fragment_rows

    rows = fragment_rows(udp_bytes, mtu)
    ip_payload = udp_bytes + 8
    per = (mtu - 20) // 8 * 8
    return {"expected": len(rows), "ip_payload": ip_payload, "per": per,
            "full": len(rows) - 1, "last": rows[0][2], "ratio": ip_payload / per}


def _woken_room(room: dict) -> dict:
    return {"expected": room["fits"], **room,
            "free": room["sndbuf"] - room["start"], "short": room["n"] - room["fits"],
            "ratio": (room["sndbuf"] - room["start"] - room["last_ts"]) / room["full_ts"]}


RETRY_SHARES = ("most of them (more than two in three)", "about half (a third to two thirds)",
                "few of them (less than a third)")


def _retries_whole(rr: dict, room: dict, link_mbps: float = 100.0) -> dict:
    from ..costs import wire_bytes

    share = rr["whole"] / max(rr["tried"], 1)
    v = RETRY_SHARES[0] if share > 2 / 3 else RETRY_SHARES[1] if share >= 1 / 3 else RETRY_SHARES[2]
    frame_ms = float(wire_bytes(1500)) * 8 / (link_mbps * 1e6) * 1e3
    need = room["n"] - room["fits"]
    return {"expected": v, "share": share, "whole": rr["whole"], "tried": rr["tried"],
            "fits": room["fits"], "n": room["n"], "need": need, "frame_ms": frame_ms,
            "need_ms": need * frame_ms}


def _survive(unlimited, law: float) -> dict:
    return {"expected": unlimited.delivered / unlimited.sent, "law": law,
            "delivered": unlimited.delivered, "sent": unlimited.sent}


def _newer_receiver(traces) -> dict:
    old, new = traces["linux-2.4.19"], traces["linux-6.x"]
    a, b = old.delivered / old.sent, new.delivered / new.sent
    v = MORE_FEWER[0] if b > 1.1 * a else MORE_FEWER[2] if b < 0.9 * a else MORE_FEWER[1]
    return {"expected": v, "old": a, "new": b, "refused": new.stats["frag_refused"],
            "fails": new.stats["ReasmFails"]}


def _fix_speedup(before: dict, after: dict) -> dict:
    r = after["write_MBps"] / before["write_MBps"]
    v = SPEEDUPS[0] if r < 1.5 else SPEEDUPS[1] if r <= 3 else SPEEDUPS[2]
    return {"expected": v, "ratio": r, "before": before["write_MBps"],
            "after": after["write_MBps"], "wasted": before["fragments_wasted"],
            "sent": before["fragments_sent"], "after_wasted": after["fragments_wasted"],
            "resends": before["rpc_resends"],
            "share": before["fragments_wasted"] / max(before["fragments_sent"], 1),
            "left": ("nothing is wasted any more" if not after["fragments_wasted"] else
                     f"only {after['fragments_wasted']:,} fragments are still wasted")}


def _orphans_fill(receiver: str = "linux-2.4.19", lost: int = 1, n: int = 23) -> dict:
    from ..ipv4.ip_fragment import RECEIVERS

    r = RECEIVERS[receiver]
    per = (n - lost) * r.rx_truesize + r.qsize
    return {"expected": r.high / per, "per": per, "high": r.high, "ts": r.rx_truesize,
            "qsize": r.qsize, "held": n - lost, "over": math.floor(r.high / per) + 1}


def _orphan_rate(receiver: str = "linux-6.x", lost: int = 1, n: int = 23,
                 loss_pct: float = 1.0, rate: float = 100.0) -> dict:
    from ..ipv4.ip_fragment import RECEIVERS

    r = RECEIVERS[receiver]
    per = (n - lost) * r.rx_truesize + r.qsize
    return {"expected": r.high / per / r.time, "per": per, "high": r.high, "time": r.time,
            "fill": r.high / per, "ts": r.rx_truesize, "loss": loss_pct, "rate": rate,
            "arrive": rate * (1 - (1 - loss_pct / 100) ** n),
            "times": rate * (1 - (1 - loss_pct / 100) ** n) / (r.high / per / r.time)}


_Q03 = (
    Question(
        "03-fragment-flooding", "n-fragments", "n_fragments_write",
        "a whole number: how many IP fragments one 32 KiB WRITE becomes at MTU 1500",
        _n_fragments, unit="fragments",
        hint="The IP payload is the UDP data plus the 8-byte UDP header; each fragment carries "
             "at most MTU - 20 bytes, rounded down to a multiple of 8.",
        explanation="the IP payload is {ip_payload:,} B; every fragment but the last carries "
                    "(1500 - 20) rounded down to a multiple of 8 = {per:,} B. {ip_payload:,} / "
                    "{per:,} = {ratio:.2f}: {full} full fragments and a last one of {last} B. "
                    "(A quick 32,768 / 1,480 = 22.1 forgets the RPC and UDP headers, and that "
                    "the remainder needs a fragment of its own.)",
        solution="n_fragments_write = 23   # 32,940 B / 1,480 B = 22.3: 22 full + 1"),
    Question(
        "03-fragment-flooding", "woken-room", "woken_fits",
        "a whole number: how many of the 23 fragments the woken retry can allocate",
        _woken_room, unit="fragments", tol=1,
        hint="sock_alloc_send_skb succeeds while wmem_alloc is still below sndbuf (the test "
             "ignores the new skb's size). The first fragment built is the small last one "
             "({last_ts} B of truesize), the others {full_ts} B each.",
        explanation="woken at {start:,} B charged, the retry has {free:,} B of sndbuf left. "
                    "The small fragment built first takes {last_ts} B, then each full one "
                    "{full_ts:,} B: ({free:,} - {last_ts}) / {full_ts:,} = {ratio:.1f}, and "
                    "because the test is only 'still below sndbuf', one more squeezes in: "
                    "{expected} of {n} fragments, then EAGAIN. The wake-up line, half the "
                    "buffer, is smaller than one datagram's ~38 KB: unless {short} more "
                    "fragments leave the link while rpciod wakes and rebuilds (each frees room "
                    "for one more), the retry fails again, always without the offset-0 "
                    "fragment, which is built last.",
        solution="woken_fits = 20   # (65,535 - 32,767 - 608) / 1,696 = 19.0, + 1 (soft limit)"),
    Question(
        "03-fragment-flooding", "retry-whole", "retries_whole",
        "one of the three answers, as its letter or its text",
        _retries_whole, choices=RETRY_SHARES,
        hint="A retry woken at the line has room for {fits} of its {n} fragments. How many more "
             "frames must the link finish while rpciod wakes up and rebuilds the WRITE, and how "
             "long does that take at 100 Mbit/s? Compare with the prompt sender of section 2's "
             "toy.",
        explanation="{whole:,} of {tried:,} woken retries ({share:.0%}) went out whole. Woken at "
                    "the line, a retry has room for {fits} of {n} fragments; the other {need} fit "
                    "only if the link finishes {need} more frames while rpciod wakes up and "
                    "rebuilds the WRITE, {need_ms:.2f} ms at {frame_ms:.3f} ms a frame. rpciod "
                    "usually runs sooner than that, like the prompt sender of section 2's toy, "
                    "so most retries fail a fragment or two short.",
        solution='retries_whole = "c"   # a retry needs ~0.37 ms of drain; rpciod is usually '
                 'quicker'),
    Question(
        "03-fragment-flooding", "survive-1pct", "survive_fraction_1pct",
        "a number: the fraction of datagrams (0 to 1) that arrive whole at 1 % frame loss, "
        "with no memory limit at the receiver",
        _survive, tol=0.03,
        hint="A datagram arrives whole only if every one of its 23 fragments does, each "
             "independently with probability 0.99.",
        explanation="0.99^23 = {law:.3f}: every fragment must survive. The model, fed the same "
                    "random losses, rebuilt {delivered} of {sent} ({expected:.3f}). One lost "
                    "fragment in 100 costs about one datagram in 5: the loss is multiplied by "
                    "the number of fragments.",
        solution="survive_fraction_1pct = 0.99 ** 23   # every fragment must arrive"),
    Question(
        "03-fragment-flooding", "newer-receiver", "newer_receiver",
        "one of the three answers, as its letter or its text",
        _newer_receiver, choices=MORE_FEWER,
        hint="What does Linux 6.x do with a fragment that arrives while its reassembly memory "
             "is over the limit, and what frees that memory?",
        explanation="Linux 2.4.19 delivers {old:.0%} and Linux 6.x {new:.0%}. 6.x's 4 MiB fill "
                    "up with orphans within seconds, and then it refuses every fragment "
                    "({refused:,} refused here), those of complete datagrams too, until the "
                    "oldest orphans expire 30 s after they were created. 2.4's evictor frees "
                    "room by killing queues, mostly orphans, so new datagrams still get in.",
        solution='newer_receiver = "c"   # over the limit 6.x refuses everything until expiry'),
    Question(
        "03-fragment-flooding", "fix-speedup", "fix_speedup",
        "one of the three answers, as its letter or its text",
        _fix_speedup, choices=SPEEDUPS,
        hint="Before the fix, what share of the fragments on the wire belonged to datagrams "
             "the server could never rebuild? Which resource was full all the time?",
        explanation="{before:.2f} MB/s before and {after:.2f} MB/s with forced sock_wmalloc "
                    "({ratio:.1f} times). Before, {wasted:,} of {sent:,} fragments on the wire "
                    "({share:.0%}) were headless tails: the link was busy, but mostly with "
                    "garbage, and each of the {resends:,} retries cost another 32 KiB copy. "
                    "With the fix a datagram that starts is always finished: {left}.",
        solution='fix_speedup = "c"   # the wire carried mostly headless tails before'),
    Question(
        "03-fragment-flooding", "ex1-orphans", "orphans_to_fill",
        "a number: how many orphaned datagrams fill Linux 2.4.19's reassembly memory",
        _orphans_fill, unit="orphans", tol=0.6,
        hint="An orphan here is a datagram that lost one of its 23 fragments: the receiver "
             "holds the other 22, each at its receive truesize, plus one queue header.",
        explanation="one orphan holds {held} x {ts:,} B + {qsize} B = {per:,} B; "
                    "{high:,} / {per:,} = {expected:.1f}. With {over} orphans 2.4.19 is over its "
                    "limit, and its next fragment runs the evictor.",
        solution="orphans_to_fill = 262_144 / (22 * 1712 + 72)   # about 7"),
    Question(
        "03-fragment-flooding", "ex2-orphan-rate", "orphans_per_s",
        "a number: orphans per second that keep Linux 6.x's reassembly memory full",
        _orphan_rate, unit="orphans/s", rel=0.15,
        hint="An orphan stays until its timer fires, 30 s after its first fragment. How many "
             "orphans fit in 4 MiB, and how many must arrive per second so that that many are "
             "alive at once?",
        explanation="one orphan of 22 fragments at {ts:,} B holds {per:,} B, so {fill:.0f} "
                    "fill {high:,} B; each lives {time:g} s, so {expected:.1f} new orphans per "
                    "second keep the pool full, and from then on 6.x refuses every fragment. "
                    "At {loss:g} % loss and {rate:g} datagrams/s about {arrive:.0f} orphans "
                    "arrive per second (section 5's law), {times:.0f} times as many.",
        solution="orphans_per_s = 4 * 1024**2 / (22 * 2944 + 200) / 30   # about 2.2"),
)


# -- notebook 04: a container's TCP through the host's forward path ---------------------------

COW_OUTCOMES = ("nothing: the clone has plenty of headroom",
                "copy only the header area (about 200 bytes); the payload stays shared",
                "copy the whole linear area, head to tail, into a new buffer")
SKIP_OUTCOMES = ("only the copy's share (skb_cow)",
                 "the copy's share and the software checksum's",
                 "all of it: the container costs what the host's own netperf costs")
CSUM_OUTCOMES = ("CPU falls by the software checksum's share; throughput stays",
                 "nothing changes: ip_forward fills in the checksums anyway",
                 "the transfer collapses: host B drops the segments as bad checksums")


def _cow_copies(steps) -> dict:
    clone = steps[-1][1][-1][1]
    before = steps[1][1][-1][1]
    if clone["copied"] >= before["tail"]:
        exp = COW_OUTCOMES[2]
    elif clone["copied"]:
        exp = COW_OUTCOMES[1]
    else:
        exp = COW_OUTCOMES[0]
    return {"expected": exp, "copied": clone["copied"], "headroom": before["data"],
            "low": before["dataref"], "high": before["dataref_nohdr"]}


def _cow_points(run) -> dict:
    prof = run.counters["cpu_by_function"]
    scale = 100.0 / (run.duration * max(1, run.config.ncpus))
    s = run.summary()
    segs = s["segments"] / run.duration
    cow_s = prof.get("skb_cow (pskb_expand_head)", 0.0)
    return {"expected": cow_s * scale, "segs": segs, "bytes": s["bytes_copied_per_packet"],
            "per_copy_us": cow_s / max(1, s["segments"]) * 1e6,
            "ncpus": max(1, run.config.ncpus)}


def _skip_saves(host, base, skip) -> dict:
    """Which of the container's extra costs the hack (cow=skip) removes."""
    from .story4 import grouped_points

    h, b, k = (r.summary()["cpu_load_pct"] for r in (host, base, skip))
    gb, gk = grouped_points(base), grouped_points(skip)
    csum_saved = gb["copy from user (+ checksum)"] - gk["copy from user (+ checksum)"]
    if k <= h + 0.5:
        exp = SKIP_OUTCOMES[2]
    elif csum_saved > 0.5:
        exp = SKIP_OUTCOMES[1]
    else:
        exp = SKIP_OUTCOMES[0]
    return {"expected": exp, "host": h, "base": b, "skipped": k, "saved": b - k,
            "copy": gb["skb_cow copy"], "csum_saved": csum_saved, "left": k - h}


def _csum_features(skip, trap) -> dict:
    s0, s1 = skip.summary(), trap.summary()
    if s1["bad_checksums"] and s1["throughput_mbps"] < 0.5 * s0["throughput_mbps"]:
        exp = CSUM_OUTCOMES[2]
    elif s1["cpu_load_pct"] < s0["cpu_load_pct"] - 0.5:
        exp = CSUM_OUTCOMES[0]
    else:
        exp = CSUM_OUTCOMES[1]
    return {"expected": exp, "bad": s1["bad_checksums"], "mbps": s1["throughput_mbps"],
            "mbps0": s0["throughput_mbps"]}


def _fixed_cpu(skip, fixed) -> dict:
    a, b = skip.summary()["cpu_load_pct"], fixed.summary()["cpu_load_pct"]
    return {"expected": b, "skip": a, "saved": a - b}


def _sg_bytes(run) -> dict:
    return {"expected": run.summary()["bytes_copied_per_packet"]}


def _loop_copies(loop) -> dict:
    n = loop["normal"]
    return {"expected": n["copies"], "hops": n["hops"]}


_Q04 = (
    Question(
        "04-container-checksums", "cow-copies", "cow_does",
        "one of the three answers, as its letter or its text",
        _cow_copies, choices=COW_OUTCOMES,
        hint="skb_cow asks skb_cloned(), not skb_header_cloned(). Which of the two is true "
             "for the clone, with the dataref counts the drawing shows?",
        explanation="there are {headroom} bytes in front of the data, far more than the 16 "
                    "skb_cow asks for, but its buffer has dataref {low} with {high} header-free "
                    "reference: skb_cloned() is true. So skb_cow calls pskb_expand_head, which "
                    "copies everything from head to tail ({copied:,} bytes) into a new buffer. "
                    "The 2.6.20 ip_forward asks the stricter question; the header-only test "
                    "would have said no copy is needed for the TTL byte.",
        solution='cow_does = "c"   # skb_cloned() is true: pskb_expand_head copies head..tail'),
    Question(
        "04-container-checksums", "cow-points", "cow_points",
        "a number: the CPU points (percent of both CPUs) the copies cost",
        _cow_points, unit="points", rel=0.3,
        hint="points = segments per second × (fixed cost + bytes × seconds per byte) / 2 CPUs "
             "× 100; the bytes are head to tail of the clone in the drawing.",
        explanation="the model's skb_cow row is {expected:.2f} points: {segs:,.0f} segments "
                    "sent a second (a little more than the throughput counts: the last window "
                    "is still in flight when the run ends), each a kmalloc plus a memcpy of "
                    "{bytes:,.0f} bytes, "
                    "{per_copy_us:.2f} µs a copy, so {segs:,.0f} × {per_copy_us:.2f} µs of "
                    "CPU time each second, spread over {ncpus} CPUs.",
        solution="cow_points = 62_100 * (615 / 2.8e9 + 1608 / 1.2e9) / 2 * 100"
                 "   # segments/s x cost per copy / 2 CPUs"),
    Question(
        "04-container-checksums", "skip-saves", "skip_goes",
        "one of the three answers, as its letter or its text",
        _skip_saves, choices=SKIP_OUTCOMES,
        hint="The hack lives in the host's ip_forward. Where, and by whom, is each of the "
             "container's extra costs paid: the copy, the checksum, the second trip through "
             "a stack?",
        explanation="the load goes from {base:.2f} % to {skipped:.2f} %: {saved:.2f} points, "
                    "the copy's {copy:.2f} (and the TTL decrement's few cycles). The software "
                    "checksum stays: the container's tcp_sendmsg computes it while copying "
                    "from user space, long before the segment reaches ip_forward, because etun "
                    "offers no checksum feature. So does the second trip through a stack "
                    "(pair device, the host's receive, route lookup, forward and output, for "
                    "data and ACKs): the container still costs {left:.2f} points more than the "
                    "host's own netperf ({host:.2f} %).",
        solution='skip_goes = "a"   # the hack is in ip_forward: only skb_cow\'s copy goes'),
    Question(
        "04-container-checksums", "loop-copies", "loop_copies",
        "a whole number: how many times skb_cow copies the looping packet, without the hack",
        _loop_copies, unit="copies", tol=0,
        hint="skb_cow copies when the buffer is shared (a clone) or the room in front is "
             "short. After the first copy, whose is the buffer, and does the pair device "
             "make a new clone when it hands the packet to the other host?",
        explanation="{expected} copy in {hops} forwards. The packet starts as the TCP "
                    "sender's clone, so the first ip_forward copies it; from then on the "
                    "buffer is the packet's own, with room in front, and a pair device passes "
                    "the very same skb to the other host's receive path. Every later skb_cow "
                    "finds nothing to do: the loop costs a TTL decrement and a route lookup "
                    "per hop, not a copy.",
        solution="loop_copies = 1   # the first hop copies the clone; then the buffer is private"),
    Question(
        "04-container-checksums", "csum-features", "csum_features",
        "one of the three answers, as its letter or its text",
        _csum_features, choices=CSUM_OUTCOMES,
        hint="With a checksum feature the container's TCP leaves the checksum for the device "
             "(CHECKSUM_PARTIAL). What does the 2.6.20 ip_forward do to ip_summed, and who "
             "fills the checksum in after that?",
        explanation="the 2.6.20 ip_forward sets ip_summed to CHECKSUM_NONE, so the host's NIC "
                    "believes "
                    "the checksum is done, and nobody ever computes it. Host B counts {bad:,} "
                    "bad checksums and drops them; after the first window TCP only retransmits "
                    "after timeouts, and the throughput falls from {mbps0:.0f} to {mbps:.0f} "
                    "Mbit/s.",
        solution='csum_features = "c"   # ip_forward drops CHECKSUM_PARTIAL: unfilled checksums'),
    Question(
        "04-container-checksums", "ex1-fixed-cpu", "fixed_cpu_pct",
        "a number: host A's CPU load with the hack, the features and a forward path that "
        "keeps CHECKSUM_PARTIAL, in %",
        _fixed_cpu, unit="%", tol=1.0,
        hint="Start from the hack's load and take off the checksum half of "
             "csum_partial_copy_generic (the copy from user stays).",
        explanation="the model gives {expected:.2f} % against {skip:.2f} % with the hack alone: "
                    "the checksum pass was worth {saved:.2f} points.",
        solution="fixed_cpu_pct = 16.8 - 1.5   # the hack's load minus the checksum pass"),
    Question(
        "04-container-checksums", "ex2-sg-bytes", "sg_bytes",
        "a number: the bytes skb_cow copies per segment when the pair device has SG only",
        _sg_bytes, unit="B", rel=0.05,
        hint="Without GSO, how large does tcp_sendmsg make the linear part of an skb for a "
             "1448-byte MSS (select_size)?",
        explanation="{expected:,.0f} bytes: without GSO the 1448-byte MSS fits the linear "
                    "part, so SG alone changes nothing for the copy; only SG with GSO puts "
                    "the payload into page frags, which pskb_expand_head references instead "
                    "of copying. (A real 2.6.20 would not even keep SG alone: register_netdevice "
                    "in net/core/dev.c drops SG from a device that has no checksum feature.)",
        solution="sg_bytes = 160 + 1448   # head..tail: SG alone keeps a 1448-byte MSS linear"),
)


# -- notebook 05: the route cache removed (Linux 3.6) -------------------------------------------

FLAT_36 = ("it rises like the cache kernels' cost", "it stays the same",
           "it rises a little: more destinations touch more trie nodes, which miss the CPU "
           "cache more often")
CROSSOVER = ("already at 1 to 256 destinations", "between 256 and 4,096",
             "between 4,096 and 16,384", "between 16,384 and 65,536", "not even at 65,536")
DEFAULT_TABLE = ("neither", "2.4.24 only", "3.6 only", "both")

WORM_36 = ("the pings get through as if there were no worm",
           "better than 2.4.24, but still hurt",
           "about as bad as 2.4.24, or worse")


def _trie_nodes(trie, addr) -> dict:
    from ..core.skbuff import ip_to_int

    path: list = []
    value, _plen, tr = trie.lookup(ip_to_int(addr), path)
    return {"expected": tr.nodes, "tnodes": tr.tnodes, "leaves": tr.leaves, "value": value,
            "addr": addr}


def _flat_36(sweep) -> dict:
    ds = sorted({d for _, d in sweep})
    a, b = sweep[("3.6", ds[0])]["cpu_us_per_packet"], sweep[("3.6", ds[-1])]["cpu_us_per_packet"]
    if b > 1.5 * a:
        exp = FLAT_36[0]
    elif b > 1.02 * a:
        exp = FLAT_36[2]
    else:                       # flat (a fall would be closest to "the same" too)
        exp = FLAT_36[1]
    c0, c1 = (sweep[("2.6.0", ds[0])]["cpu_us_per_packet"],
              sweep[("2.6.0", ds[-1])]["cpu_us_per_packet"])
    return {"expected": exp, "a": a, "b": b, "c0": c0, "c1": c1, "dmax": ds[-1],
            "walk": sweep[("3.6", ds[0])]["route_lookup_us_per_packet"]}


def _crossover(sweep) -> dict:
    ds = sorted({d for _, d in sweep})
    first = next((d for d in ds if sweep[("2.6.0", d)]["cpu_us_per_packet"]
                  > sweep[("3.6", d)]["cpu_us_per_packet"]), None)
    band = {None: 4, 4096: 1, 16384: 2, 65536: 3}.get(first, 0)
    last = max((d for d in ds if d < (first or ds[-1] + 1)), default=ds[0])
    below, above = sweep[("2.6.0", last)], sweep[("2.6.0", first or ds[-1])]
    return {"expected": CROSSOVER[band], "first": first or 0, "last": last,
            "hit1": sweep[("2.6.0", ds[0])]["route_lookup_us_per_packet"],
            "walk": sweep[("3.6", ds[0])]["route_lookup_us_per_packet"],
            "hit_last": below["cache_hit_pct"] or 0.0, "allocs_last": below["dst_allocs"],
            "hit_first": above["cache_hit_pct"] or 0.0, "allocs_first": above["dst_allocs"],
            "entries_first": above["route_cache_entries_max"],
            "cpu_last": below["cpu_us_per_packet"], "cpu_first": above["cpu_us_per_packet"],
            "cpu36": sweep[("3.6", ds[0])]["cpu_us_per_packet"]}


def _ping_drops(run) -> dict:
    from ..core.dropreason import OUTCOMES
    from ..core.skbuff import KIND

    n = run.offered
    ping = run.packets["kind"][:n] == KIND["ping_request"]
    out = run.packets["outcome"][:n][ping]
    return {"neigh": int(np.count_nonzero(out == OUTCOMES["drop_neigh"])
                         + np.count_nonzero(out == OUTCOMES["drop_neigh_overflow"])),
            "backlog": int(np.count_nonzero(out == OUTCOMES["drop_backlog"])
                           + np.count_nonzero(out == OUTCOMES["drop_rx_missed"]))}


def _worm_36(old, new) -> dict:
    a, b = old.summary(), new.summary()
    if b["ping_loss_pct"] <= 5 and b["ping_rtt_ms_p50"] < 5:
        exp = WORM_36[0]
    elif b["ping_loss_pct"] < a["ping_loss_pct"] - 10:
        exp = WORM_36[1]
    else:
        exp = WORM_36[2]
    d = _ping_drops(new)
    return {"expected": exp, "loss24": a["ping_loss_pct"], "loss36": b["ping_loss_pct"],
            "p50_24": a["ping_rtt_ms_p50"], "p50_36": b["ping_rtt_ms_p50"],
            "cpu24": a["cpu_busy_pct"], "cpu36": b["cpu_busy_pct"],
            "neigh36": b["neigh_entries_max"], "inc36": b["neigh_incomplete_max"],
            "fgc24": a["neigh_forced_gc"], "fgc36": b["neigh_forced_gc"],
            "dover24": a["drop_neigh_overflow"] + a["drop_neigh"],
            "dneigh": d["neigh"], "dbacklog": d["backlog"]}


def _default_table(runs) -> dict:
    """Which kernels lose pings (over 5 %) with the default 1,024-entry neighbour table."""
    a, b = runs["2.4.24, 1,024"].summary(), runs["3.6, 1,024"].summary()
    lost = (a["ping_loss_pct"] > 5, b["ping_loss_pct"] > 5)
    exp = DEFAULT_TABLE[{(False, False): 0, (True, False): 1, (False, True): 2,
                         (True, True): 3}[lost]]
    d = _ping_drops(runs["3.6, 1,024"])
    return {"expected": exp, "loss24": a["ping_loss_pct"], "loss36": b["ping_loss_pct"],
            "inc24": a["neigh_incomplete_max"], "inc36": b["neigh_incomplete_max"],
            "limit": b["neigh_entries_max"], "dneigh": d["neigh"],
            "cpu24": a["cpu_busy_pct"], "big24": runs["2.4.24, 4,096"].summary()["cpu_busy_pct"]}


def _fnhe_bound(run) -> dict:
    s = run.summary()
    return {"expected": s["fnhe_entries"], "reclaimed": s["fnhe_reclaimed"],
            "messages": s["local_packets"]}


def _rp_filter_36(base, strict) -> dict:
    a = base.summary()["route_lookup_us_per_packet"]
    b = strict.summary()["route_lookup_us_per_packet"]
    return {"expected": b, "base": a, "extra": b - a}


_Q05 = (
    Question(
        "05-route-cache-removed", "trie-nodes", "walk_nodes",
        "a whole number: the nodes (tnodes and leaves, each visit counted) the lookup touches",
        _trie_nodes, unit="nodes",
        hint="Follow the bits from the root as for 198.18.77.1. The first leaf you reach holds "
             "a /24 that does not cover the address: what does the walk do then at the tnode "
             "above it?",
        explanation="the walk makes {tnodes} tnode visits and checks {leaves} leaves: down to "
                    "the tnode on bit 22, whose child 1 is the leaf 10.1.2.0/24; that prefix does "
                    "not cover {addr}, so the walk clears the index's last set bit, indexes the "
                    "same tnode again and finds the leaf {value}: {expected} nodes in all.",
        solution="walk_nodes = 7   # 4 tnodes down, the /24 leaf, the bit-22 tnode again, the /16"),
    Question(
        "05-route-cache-removed", "flat-36", "flat_36",
        "one of the three answers, as its letter or its text",
        _flat_36, choices=FLAT_36,
        hint="What does 3.6 keep per destination on the forwarding path? Which trie path do "
             "all the addresses of 198.18.0.0/16 take?",
        explanation="3.6 costs {a:.3f} µs per packet with one destination and {b:.3f} µs with "
                    "{dmax:,}: nothing on its forwarding path is per destination, and every "
                    "address of the /16 walks the same few nodes to the same leaf (routing "
                    "{walk:.3f} µs), which therefore stay in the CPU's cache, then takes the "
                    "same dst from the nexthop. 2.6.0 goes "
                    "from {c0:.3f} to {c1:.3f} µs as its cache misses.",
        solution='flat_36 = "b"   # no per-destination state: the same walk for every address'),
    Question(
        "05-route-cache-removed", "crossover", "crossover",
        "one of the five answers, as its letter or its text",
        _crossover, choices=CROSSOVER,
        hint="A hit costs 2.6.0 less than 3.6's walk, so 2.6.0 wins while nearly every "
             "packet hits. The first packet to each destination always misses; after that, "
             "a destination misses again only if its entry was freed in between. How many "
             "entries fit into the hash chains before rt_intern_hash starts trimming them?",
        explanation="a cache hit costs {hit1:.3f} µs of routing, 3.6's walk {walk:.3f} µs, and "
                    "the slow path of a miss several times the walk. With {last:,} destinations "
                    "2.6.0 allocates {allocs_last:,} dst entries, one per destination: only the "
                    "first packet to each misses ({hit_last:.1f} % hits), and it costs "
                    "{cpu_last:.3f} µs per packet against 3.6's {cpu36:.3f}. With {first:,} the "
                    "cache no longer keeps them all (at most {entries_first:,} entries at a "
                    "time): entries still in use are freed and allocated again, {allocs_first:,} "
                    "allocations in the run, {hit_first:.1f} % hits, {cpu_first:.3f} µs per "
                    "packet: once chains grow past gc_elasticity entries, each insert into one "
                    "frees a live entry, which soon misses again. 2.6.0 "
                    "first costs more than 3.6 at {first:,} destinations.",
        solution='crossover = "c"   # misses only start when the cache cannot hold them all'),
    Question(
        "05-route-cache-removed", "worm-36", "worm_36",
        "one of the three answers, as its letter or its text",
        _worm_36, choices=WORM_36,
        hint="The scanners probe addresses on the router's own subnets, and each one needs a "
             "neighbour entry in both kernels. When the table is at its limit, the forced GC "
             "can only free the entries nothing references: what references a neighbour "
             "entry in 2.4.24, and what in 3.6?",
        explanation="On 3.6 the ping keeps a median of {p50_36:.2f} ms and loses {loss36:.0f} % "
                    "(2.4.24: {p50_24:.2f} ms, {loss24:.0f} %), with the CPU {cpu36:.0f} % "
                    "busy against {cpu24:.0f} %. Both neighbour tables reach their limit "
                    "({neigh36:,} entries), about {inc36:,} of them at a time waiting for ARP "
                    "answers that never come. What differs is who holds the rest. In 2.4.24 "
                    "every cached route to an on-link address holds its neighbour entry, so "
                    "at the limit the forced GC walks the whole table and frees nothing: "
                    "{fgc24:,} walks, one per new destination, and {dover24:,} packets "
                    "dropped because the table was full. In 3.6 no route holds one, so a walk "
                    "frees every finished entry at once and is hardly needed again: "
                    "{fgc36:,} walks.",
        solution='worm_36 = "a"   # nothing holds finished neighbour entries: the GC frees them'),
    Question(
        "05-route-cache-removed", "default-table", "default_table",
        "one of: neither, 2.4.24 only, 3.6 only, both",
        _default_table, choices=DEFAULT_TABLE,
        hint="At 1,024 the forced GC's walk is four times shorter, so what cost 2.4.24 its "
             "CPU shrinks. But the worm keeps about as many entries waiting for ARP as "
             "before: do they still fit, and if the table is full of them, which kernel's "
             "gateway entry can the GC take away?",
        explanation="2.4.24 loses {loss24:.0f} % of the pings and 3.6 {loss36:.0f} %. With the "
                    "short table 2.4.24's walk is cheap ({cpu24:.0f} % CPU against {big24:.0f} % "
                    "at 4,096), and the ping's cached route still holds the gateway's entry. "
                    "3.6's table is full of entries waiting for ARP ({inc36:,} of {limit:,}; "
                    "2.4.24: {inc24:,}, the rest held by its routes), which no GC may free; "
                    "the gateway's entry is not held between packets, so the GC frees it "
                    "when it can, and the next ping finds no room for a new one: {dneigh} "
                    "pings dropped for want of a neighbour entry.",
        solution='default_table = "3.6 only"   # a full table, and nothing holds the gateway'),
    Question(
        "05-route-cache-removed", "fnhe-bound", "storm_entries",
        "a whole number: the nexthop exceptions the gateway's nexthop holds after the storm",
        _fnhe_bound, unit="entries", rel=0.01,
        hint="Each nexthop has one table of 2,048 buckets, and a chain does not grow past a "
             "fixed depth: what happens to the message that would make it longer?",
        explanation="{messages:,} messages, {expected:,} exceptions: every one of the 2,048 "
                    "buckets filled to 6 entries (a chain of more than 5 others reclaims its "
                    "oldest instead of growing), and {reclaimed:,} messages took over an old "
                    "entry. The memory an attacker can make the router spend on them is fixed "
                    "by the table, not by the traffic.",
        solution="storm_entries = 2048 * 6   # every bucket's chain at its limit"),
    Question(
        "05-route-cache-removed", "ex1-rp-filter", "rp_routing_us",
        "a number: 3.6's routing cost per packet with rp_filter = 1, in µs",
        _rp_filter_36, unit="µs", rel=0.15,
        hint="Strict mode looks the source up as a destination: one more fib_lookup, in the "
             "same tables. How many tables and nodes does 10.0.0.2 take, compared with the "
             "destinations?",
        explanation="{expected:.3f} µs against {base:.3f} µs without the filter: the "
                    "reverse lookup of the source adds {extra:.3f} µs, the tables and the few "
                    "nodes of its walk. DaveM's SPARC-T3 figures put the same step at about "
                    "300 cycles on top of about 1,169 per input lookup.",
        solution="rp_routing_us = 0.242 + 0.05   # one more lookup over the small local table "
                 "and a short walk"),
)


def _registry(*groups) -> Mapping[tuple[str, str], Question]:
    out: dict[tuple[str, str], Question] = {}
    for q in (q for g in groups for q in g):
        key = (q.notebook, q.qid)
        if key in out:
            raise ValueError(f"question {key} defined twice")
        out[key] = q
    return MappingProxyType(out)


#: Every question, by ``(notebook, qid)``, in notebook order (read-only).
QUESTIONS: Mapping[tuple[str, str], Question] = _registry(_Q00, _Q01, _Q02, _Q03, _Q04,
                                                           _Q05)


def for_notebook(notebook: str) -> list[Question]:
    """The questions of one notebook, in order; ``KeyError`` for an unknown notebook."""
    qs = [q for (nb, _), q in QUESTIONS.items() if nb == notebook]
    if not qs:
        known = sorted({nb for nb, _ in QUESTIONS})
        raise KeyError(f"no questions for notebook {notebook!r}; known: {', '.join(known)}")
    return qs


def question(notebook: str, qid: str) -> Question:
    """One question; ``KeyError`` naming the notebook's question ids if ``qid`` is unknown."""
    try:
        return QUESTIONS[(notebook, qid)]
    except KeyError:
        ids = ", ".join(q.qid for q in for_notebook(notebook))
        raise KeyError(f"notebook {notebook!r} has no question {qid!r}; its questions: "
                       f"{ids}") from None
