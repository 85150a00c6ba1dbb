"""RCU primer for notebook 02: one route-cache entry, a few CPUs, 2.6.0's batches.

A small step model, separate from the router simulator, that shows on a
per-CPU timeline why a softirq flood delays the freeing of route-cache
entries on 2.6.0, and what the two rcu-softirq patches change.  The RCU
side is the simulator's own :class:`routelab.core.rcu.Rcu` -- the 2.6.0 batch
protocol, with the quiescent-state rules of :data:`routelab.core.rcu.QS_KINDS`
-- driven by the primer's timeline one millisecond at a time.

The story, one millisecond per step (a timer tick at HZ=1000 on 2.6):

1. Entry A sits in a route-cache hash chain.  On the last CPU a reader
   looked it up and still holds it inside a read-side critical section.
2. At ``remove_at`` a writer on CPU0 unhashes A and calls ``call_rcu`` to
   free it later (after ``backlog`` other callbacks queued just before).  A is
   now *removed but not freed*: it still counts in ``dst_ops.entries`` (and
   so against ``max_size``).  ``call_rcu`` only appends A to CPU0's ``nxt``
   list.
3. At the next tick CPU0's RCU tasklet runs: its ``cur`` list is empty, so
   ``nxt`` becomes ``cur``, tagged with batch number ``curbatch + 1``, and a
   grace period is started (numbered ``curbatch``, the one *before* A's batch).
   Every CPU's tasklet first *records* its quiescent-state counter
   (snapshot); a later run must find it changed -- a quiescent state in
   between -- and then the CPU leaves the grace period.  The last CPU out
   ends it and starts the next: A's own grace period.  So a lone callback
   waits for **two** grace periods.
4. Once ``curbatch`` has passed A's batch, CPU0's tasklet moves ``cur`` to
   its done list and runs the callbacks -- all of them in 2.6.0 (``maxbatch``
   0), at most ``maxbatch`` per run with the later throttling patches -- and A
   is freed: ``entries`` drops by one.

What each CPU does in a step (:data:`STATES`):

=========  ===============================================================
user       a user task runs; the tick lands in user mode (quiescent)
softirq    one network softirq handler run (``net_rx_action``: a budget of
           packets or one jiffy), never quiescent on vanilla 2.6.0
idle       the idle loop (quiescent)
ctxsw      the scheduler switches tasks (quiescent)
kernel     a task in a system call reading the route cache with softirqs
           held off (e.g. ``/proc/net/rt_cache``): a tick there is not
           quiescent, and the RCU tasklet (a softirq) waits until it ends
=========  ===============================================================

Consecutive softirq steps are handler runs of one ``do_softirq`` call,
which restarts at most ``MAX_SOFTIRQ_RESTART`` = 10 times; its last run
ends a *loop pass*.  The quiescent-state rules (:data:`RULES`) are the
simulator's (``routelab.core.rcu.QS_KINDS``):

``vanilla``  2.6.0: context switch, tick in user mode, idle.
``iter``     the earlier rcu-softirq patch: also the end of each
             ``do_softirq`` call (our reading of "each full pass of the
             softirq loop", as in ``routelab.kernels``).
``bh``       the call_rcu_bh patch under test: the end of every softirq
             handler run, a tick in user mode or idle (and any tick outside
             softirq); *not* a context switch.

Simplified on purpose:

* Everything happens on 1 ms boundaries: a step's quiescent state, handler
  completion or loop-pass end is dated at the end of the step, and the
  tick's tasklet runs right after (in a softirq step: in that pass).
* The tick schedules a CPU's tasklet whenever ``rcu_pending`` holds (2.6.0);
  with a ``maxbatch`` limit (2.6.9) the kernel's tasklet re-schedules itself
  when it leaves callbacks over, the primer's waits for the next tick.
* Softirq load is a knob, not a consequence of packets; the hand-off to
  ``ksoftirqd`` (itself a context switch) is not modelled.
* Timelines are random but seeded: for one seed, raising the load only turns
  more steps into softirq, so fewer steps are quiescent.

In a notebook::

    tl = rcu_timeline(load=90, rule="vanilla")      # load in percent
    print(tl.wait, tl.status())                      # a printed cell nbval checks
    show(rcu_primer_figure(tl), alt=rcu_primer_alt(tl))
    rcu_primer_explorer()                            # NBVAL_IGNORE_OUTPUT

Kernel: kernel/rcupdate.c call_rcu, rcu_process_callbacks, rcu_start_batch,
rcu_check_quiescent_state, rcu_do_batch (v2.6.0; the per-run callback limit
``maxbatch`` = 10 is v2.6.9's); kernel/softirq.c do_softirq (v2.6.0); LKML
<20040331214342.GD4543@in.ibm.com> (call_rcu_bh, 1 Apr 2004), as
``routelab.core.rcu`` reads it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import ipywidgets as W
import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import blended_transform_factory

from ..core.dst import DstEntry
from ..core.rcu import QS_KINDS, Rcu
from ..core.softirq import MAX_SOFTIRQ_RESTART  # handler runs per do_softirq call
from ..errors import KnobError
from ..sysctl import Knob
from .plots import OKABE_ITO, BlitRenderer, LiveFigure, new_figure
from .widgets import Explorer, control_for

__all__ = [
    "KNOBS",
    "RULES",
    "STATES",
    "RcuPrimerFigure",
    "RcuTimeline",
    "rcu_primer_alt",
    "rcu_primer_explorer",
    "rcu_primer_figure",
    "rcu_timeline",
]

STATES = ("user", "softirq", "idle", "ctxsw", "kernel")
USER, SOFTIRQ, IDLE, CTXSW, KERNEL = range(len(STATES))

#: Quiescent-state events per rule (the simulator's own, routelab.core.rcu
#: QS_KINDS), and the label the dropdown shows.
RULES: dict[str, tuple[str, frozenset[str]]] = {
    key: (label, QS_KINDS[key]) for key, label in (
        ("vanilla", "vanilla 2.6.0"),
        ("iter", "rcu-softirq (earlier patch)"),
        ("bh", "call_rcu_bh (patch under test)"))
}
LIVE_ENTRIES = 4           # other entries in the cache besides A (for the counter)
_READER = (2, 3)           # reader section: from remove_at - 2 to remove_at + 3 ms
_BURST_MS = 8              # smoothing window of the softirq pattern: bursts, not noise

_EVENT_TEXT = {"user_tick": "tick in user mode", "idle": "idle", "ctxsw": "context switch",
               "softirq_loop": "end of a do_softirq call",
               "softirq_handler": "end of a softirq handler run"}
#: the RCU event each step's state passes (a softirq step also ends a handler
#: run, and possibly a do_softirq call); a "kernel" step passes none
_STEP_EVENTS = {USER: ("user_tick",), IDLE: ("idle",), CTXSW: ("ctxsw",),
                SOFTIRQ: ("softirq_handler",), KERNEL: ()}

KNOBS: dict[str, Knob] = {k.name: k for k in [
    Knob("load", 50.0, float, 0.0, 100.0, "%",
         "Share of each CPU's time spent in network softirq work.", step=5.0),
    Knob("rule", "vanilla", str, choices=tuple(RULES),
         help="Which events count as quiescent states."),
    Knob("ncpus", 2, int, 1, 4, "CPUs", "Number of CPUs."),
    Knob("steps", 200, int, 20, 2000, "ms", "Length of the timeline (1 step = 1 ms)."),
    Knob("seed", 0, int, 0, 2**32 - 1, "", "Seed of the random timeline."),
    Knob("remove_at", 20, int, 4, 1999, "ms", "When the writer unhashes entry A."),
    Knob("maxbatch", 0, int, 0, 10_000, "callbacks",
         "RCU callbacks per tasklet run (0 = no limit, as 2.6.0; 10 in 2.6.9).",
         symbol="maxbatch"),
    Knob("backlog", 0, int, 0, 100_000, "callbacks",
         "Callbacks queued on CPU0 ahead of A's."),
    Knob("t", 19, int, 0, 2000, "ms", "Current time of the primer."),
]}


@dataclass
class RcuTimeline:
    """What every CPU does per millisecond, and how entry A goes through 2.6.0's batches.

    Times are in ms; an event "at t" happened at the end of step ``t - 1``.
    ``None`` means "not within the window".

    Attributes
    ----------
    state : ndarray (ncpus, steps) of int8
        Index into :data:`STATES` per CPU and step.
    pass_end : ndarray (ncpus, steps) of bool
        The softirq step is the last handler run of a ``do_softirq`` call.
    qs : ndarray (ncpus, steps) of bool
        The step ends with a quiescent state under ``rule``.
    reader : (cpu, start, end) or None
        The read-side critical section holding A (none with one CPU).
    batch_time : int or None
        When CPU0's tasklet moved A (with the backlog) from ``nxt`` to ``cur``
        and asked for its batch (``batch``, a grace-period number).
    grace_periods : tuple of (number, start, end or None)
        Every grace period that started in the window (the last may still run).
    gp_start, gp_end : int or None
        A's own grace period (number ``batch``): when it started and ended.
    snap_time, qs_time, qs_kind, clear_time : tuple per CPU
        In A's own grace period: when each CPU's tasklet recorded its counter,
        its first quiescent state after that (which event: a key of
        ``routelab.core.rcu.QS_KINDS`` events), and when a later tasklet run
        saw the change and took the CPU out of the grace period.
    free_time : int or None
        When the RCU tasklet on CPU0 frees A.
    entries : ndarray (steps + 1,)
        ``dst_ops.entries`` at each ms: A and the backlog count until freed.
    """

    load: float
    rule: str
    ncpus: int
    steps: int
    seed: int
    remove_at: int
    maxbatch: int
    backlog: int
    state: np.ndarray = field(repr=False)
    pass_end: np.ndarray = field(repr=False)
    qs: np.ndarray = field(repr=False)
    reader: tuple[int, int, int] | None
    batch: int | None
    batch_time: int | None
    grace_periods: tuple[tuple[int, int, int | None], ...]
    gp_start: int | None
    gp_end: int | None
    snap_time: tuple[int | None, ...]
    qs_time: tuple[int | None, ...]
    qs_kind: tuple[str | None, ...]
    clear_time: tuple[int | None, ...]
    free_time: int | None
    entries: np.ndarray = field(repr=False)

    @property
    def gp_length(self) -> int | None:
        """Length of A's own grace period in ms (``None``: not over within the window)."""
        if self.gp_end is None or self.gp_start is None:
            return None
        return self.gp_end - self.gp_start

    @property
    def wait(self) -> int | None:
        """From the ``call_rcu`` to the free, in ms: what A really waits (``None``:
        not freed within the window)."""
        return None if self.free_time is None else self.free_time - self.remove_at

    @property
    def handler_end(self) -> np.ndarray:
        """Steps that end a softirq handler run (every softirq step)."""
        return self.state == SOFTIRQ

    @property
    def softirq_share(self) -> np.ndarray:
        """Share of each CPU's steps spent in softirq (0-1)."""
        return (self.state == SOFTIRQ).mean(axis=1)

    def events(self) -> list[tuple[int, str]]:
        """``(time, what)`` of the story's moments, in time order."""
        ev = [(self.remove_at, "writer unhashes A, call_rcu(free A) queues it on CPU0")]
        if self.reader:
            c, _, end = self.reader
            ev.append((end, f"reader on CPU{c} leaves its critical section"))
        if self.batch_time is not None:
            ev.append((self.batch_time, f"CPU0's tasklet puts A in batch {self.batch}"))
        for num, a, b in self.grace_periods:
            if self.batch is None or num > self.batch:
                continue
            whose = "A's own " if num == self.batch else ""
            ev.append((a, f"{whose}grace period {num} starts"))
            if b is not None:
                ev.append((b, f"{whose}grace period {num} over ({b - a} ms)"))
        for c, (t, k) in enumerate(zip(self.qs_time, self.qs_kind, strict=True)):
            if t is not None:
                ev.append((t, f"CPU{c} quiescent ({_EVENT_TEXT[k]})"))
        if self.free_time is not None:
            ev.append((self.free_time, f"RCU tasklet frees A ({self.wait} ms after call_rcu)"))
        return sorted(ev, key=lambda e: e[0])

    def status(self, upto: int | None = None) -> str:
        """One line: the time, the grace period's progress and A's fate at ``upto`` ms."""
        t = self.steps if upto is None else int(upto)
        e = int(self.entries[min(max(t, 0), self.steps)])
        if t < self.remove_at:
            who = f", CPU{self.reader[0]} reading it" if self.reader else ""
            return (f"t = {t} ms · entry A in the hash chain{who} · the writer unhashes it "
                    f"at t = {self.remove_at} ms (entries = {e})")
        if self.batch_time is None or t < self.batch_time:
            return (f"t = {t} ms · A queued on CPU0, waiting for its tasklet to batch it · "
                    f"entry A removed, not yet freed (entries = {e})")
        if self.gp_start is None or t < self.gp_start:
            run = [(n, a) for n, a, b in self.grace_periods if a <= t and (b is None or b > t)]
            if run:
                n, a = run[-1]
                gp = (f"grace period {n} not over after {t - a} ms" if t >= self.steps
                      else f"grace period {n} running ({t - a} ms)")
            else:
                gp = "no grace period running"
            return (f"t = {t} ms · A in batch {self.batch}, which waits for {gp} · "
                    f"entry A removed, not yet freed (entries = {e})")
        cpus = ", ".join(f"CPU{c} ✓ (t={q})" if q is not None and q <= t else f"CPU{c} waiting"
                         for c, q in enumerate(self.clear_time))
        if self.gp_end is None or t < self.gp_end:
            running = t - self.gp_start
            gp = (f"A's grace period {self.batch} not over after {running} ms"
                  if t >= self.steps else f"A's grace period {self.batch} running ({running} ms)")
            return f"t = {t} ms · {gp}: {cpus} · entry A removed, not yet freed (entries = {e})"
        gp = (f"A's grace period {self.gp_start}→{self.gp_end} ms ({self.gp_length} ms): "
              f"{cpus}")
        if self.free_time is not None and t >= self.free_time:
            return (f"t = {t} ms · {gp} · A freed at t = {self.free_time} ms, "
                    f"{self.wait} ms after call_rcu (entries = {e})")
        return f"t = {t} ms · {gp} · A waits for the RCU tasklet, not yet freed (entries = {e})"


def _check(name: str, value):
    return KNOBS[name].validate(value)


def rcu_timeline(load: float, rule: str, ncpus: int = 2, steps: int = 200, seed: int = 0, *,
                 remove_at: int = 20, maxbatch: int = 0, backlog: int = 0) -> RcuTimeline:
    """Build the per-CPU timeline and run 2.6.0's RCU over it.

    Parameters
    ----------
    load : float
        Softirq load in **percent** (0-100): the share of each CPU's steps
        spent in network softirq work.
    rule : str
        Quiescent-state rule: ``"vanilla"``, ``"iter"`` or ``"bh"`` (:data:`RULES`).
    ncpus : int
        1-4 CPUs.  With two or more, the last CPU holds a reader of A.
    steps : int
        Timeline length in ms (20-2000).
    seed : int
        Seed of the random (but repeatable) timeline.
    remove_at : int
        When the writer on CPU0 unhashes A and calls ``call_rcu`` (ms).
    maxbatch : int
        Callbacks per RCU tasklet run (0 = no limit, as 2.6.0; 10 in 2.6.9).
    backlog : int
        Callbacks queued on CPU0 just ahead of A's; with ``maxbatch`` they delay
        the free.

    Raises
    ------
    KnobError
        For a value out of range, naming the knob.

    Kernel: kernel/rcupdate.c (v2.6.0) through :class:`routelab.core.rcu.Rcu`,
    the simulator's own model of it; kernel/softirq.c do_softirq.  See the
    module docstring for what is simplified.
    """
    load, rule, ncpus = _check("load", load), _check("rule", rule), _check("ncpus", ncpus)
    steps, seed = _check("steps", steps), _check("seed", seed)
    remove_at, maxbatch = _check("remove_at", remove_at), _check("maxbatch", maxbatch)
    backlog = _check("backlog", backlog)
    if remove_at >= steps:
        raise KnobError("remove_at", remove_at, f"an integer in [4, {steps - 1}] ms "
                        f"(inside the {steps} ms window)")
    reader = None
    if ncpus > 1:
        reader = (ncpus - 1, remove_at - _READER[0], min(steps, remove_at + _READER[1]))
    state = np.empty((ncpus, steps), dtype=np.int8)
    for c in range(ncpus):
        rng = np.random.default_rng((seed, c))     # CPU c's timeline ignores ncpus
        state[c] = _process_states(rng, steps)
        soft = _softirq_rank(rng, steps) < load / 100.0
        if reader and c == reader[0]:
            state[c, reader[1]:reader[2]] = KERNEL   # bh disabled: no softirq in here
            soft[reader[1]:reader[2]] = False
        state[c, soft] = SOFTIRQ
    pass_end = np.zeros_like(state, dtype=bool)
    for c in range(ncpus):
        pass_end[c] = _pass_ends(state[c] == SOFTIRQ)
    events = RULES[rule][1]
    qs = np.zeros_like(pass_end)
    for code, kinds in _STEP_EVENTS.items():
        if any(k in events for k in kinds):
            qs |= state == code
    if "softirq_loop" in events:
        qs |= pass_end
    run = _run_rcu(rule, state, pass_end, remove_at, maxbatch, backlog)
    return RcuTimeline(load=load, rule=rule, ncpus=ncpus, steps=steps, seed=seed,
                       remove_at=remove_at, maxbatch=maxbatch, backlog=backlog, state=state,
                       pass_end=pass_end, qs=qs, reader=reader, **run)


def _run_rcu(rule: str, state: np.ndarray, pass_end: np.ndarray, remove_at: int,
             maxbatch: int, backlog: int) -> dict:
    """Drive ``routelab.core.rcu.Rcu`` over the timeline, one tick per step.

    At the end of step ``t`` (time ``t + 1``) each CPU passes its step's events
    (:meth:`Rcu.quiescent`), then its tick: if ``rcu_pending`` the tasklet is
    scheduled, and it runs unless softirqs are held off ("kernel"; it then runs
    at the first step that is not).  The ``call_rcu`` of the backlog and of A
    come at ``remove_at``, after that tick.
    """
    ncpus, steps = state.shape
    freed: dict[int, int] = {}
    rcu = Rcu(rule, ncpus, maxbatch, lambda e, now: freed.setdefault(e.uid, round(now)) * 0.0,
              {"rcu_callback": 0.0, "rcu_tasklet": 0.0})
    a_uid = backlog + 1
    events = rcu.qs_kinds
    qs_log: list[list[tuple[int, str]]] = [[] for _ in range(ncpus)]
    snaps: dict[tuple[int, int], int] = {}     # (grace period, cpu) -> snapshot time
    clears: dict[tuple[int, int], int] = {}
    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    scheduled = [False] * ncpus
    batch = batch_time = None
    entries = np.full(steps + 1, LIVE_ENTRIES + 1 + backlog, dtype=np.int64)
    for t in range(steps):
        now = t + 1
        for c in range(ncpus):
            st = int(state[c, t])
            kinds = _STEP_EVENTS[st] + (("softirq_loop",) if pass_end[c, t] else ())
            for k in kinds:
                if k in events:
                    rcu.quiescent(c, float(now), k)
                    qs_log[c].append((now, k))
        for c in range(ncpus):
            scheduled[c] = scheduled[c] or bool(rcu.rcu_pending(c))
            if not scheduled[c] or state[c, t] == KERNEL:
                continue
            scheduled[c] = False
            num, had_mask, had_snap = rcu.curbatch, bool(rcu.mask[c]), rcu.last_qsctr[c]
            running = rcu.nmask > 0
            rcu.rcu_tasklet(c, float(now))
            over = rcu.curbatch > num              # this run ended grace period ``num``
            if over:
                ends[num] = now
            if rcu.nmask > 0 and (over or not running):
                starts[rcu.curbatch] = now          # ... and started the next
            if had_mask and (over or not rcu.mask[c]):
                clears[(num, c)] = now
            if rcu.mask[c] and rcu.last_qsctr[c] != -1 and (had_snap == -1 or over):
                snaps.setdefault((rcu.curbatch, c), now)
            if batch is None and c == 0 and a_uid in {e.uid for e in rcu.cur[0]}:
                batch, batch_time = int(rcu.batch[0]), now
        if now == remove_at:
            # the writer runs between this tick and the next
            for uid in range(1, a_uid + 1):
                rcu.call_rcu(0, DstEntry(uid, float(now)), float(now))
        for when in freed.values():
            if when == now:
                entries[now:] -= 1
    free_time = freed.get(a_uid)
    snap_t, qs_t, qs_k, clear_t = [], [], [], []
    for c in range(ncpus):
        sn = snaps.get((batch, c)) if batch is not None else None
        cl = clears.get((batch, c)) if batch is not None else None
        first = next(((q, k) for q, k in qs_log[c] if sn is not None and q > sn), (None, None))
        snap_t.append(sn)
        clear_t.append(cl)
        qs_t.append(first[0] if first[0] is not None and (cl is None or first[0] <= cl)
                    else None)
        qs_k.append(first[1] if qs_t[-1] is not None else None)
    gps = tuple((n, starts[n], ends.get(n)) for n in sorted(starts))
    return dict(batch=batch, batch_time=batch_time, grace_periods=gps,
                gp_start=starts.get(batch) if batch is not None else None,
                gp_end=ends.get(batch) if batch is not None else None,
                snap_time=tuple(snap_t), qs_time=tuple(qs_t), qs_kind=tuple(qs_k),
                clear_time=tuple(clear_t), free_time=free_time, entries=entries)


def _process_states(rng: np.random.Generator, steps: int) -> np.ndarray:
    """What the CPU does when no softirq runs: user tasks and idle, context switches between."""
    out = np.empty(steps, dtype=np.int8)
    t = 0
    while t < steps:
        kind, mean = (IDLE, 6) if rng.random() < 0.25 else (USER, 10)
        n = int(rng.geometric(1.0 / mean))
        out[t:t + n] = kind
        t += n
        if t < steps:
            out[t] = CTXSW
            t += 1
    return out


def _softirq_rank(rng: np.random.Generator, steps: int) -> np.ndarray:
    """Per-step rank in [0, 1) of a smoothed noise; ``rank < load`` marks softirq.

    Ranks make the softirq share exactly the load (to a step), smoothing makes
    the softirq come in bursts, and one fixed rank per step makes a higher
    load a superset of a lower one.
    """
    noise = rng.standard_normal(steps + _BURST_MS - 1)
    smooth = np.convolve(noise, np.ones(_BURST_MS) / _BURST_MS, mode="valid")
    rank = np.empty(steps)
    rank[np.argsort(smooth, kind="stable")] = np.arange(steps) / steps
    return rank


def _pass_ends(soft: np.ndarray) -> np.ndarray:
    """The last handler run of each ``do_softirq`` call in a run of softirq steps.

    A call ends when the softirq work stops, or after ``MAX_SOFTIRQ_RESTART``
    runs; work that goes on is picked up by the next call.  The last step of
    the window ends no call (we cannot see whether the work stops).
    """
    end = np.zeros(soft.size, dtype=bool)
    k = 0
    for i in range(soft.size):
        if not soft[i]:
            k = 0
            continue
        k += 1
        if (i + 1 < soft.size and not soft[i + 1]) or k == MAX_SOFTIRQ_RESTART:
            end[i] = True
            k = 0
    return end


# -- figure ---------------------------------------------------------------------------

_STATE_COLORS = {"user": OKABE_ITO["sky_blue"], "softirq": OKABE_ITO["vermillion"],
                 "idle": OKABE_ITO["bluish_green"], "ctxsw": OKABE_ITO["reddish_purple"],
                 "kernel": OKABE_ITO["blue"]}
_STATE_LABELS = {"user": "user task (tick = QS)", "softirq": "softirq handler run",
                 "idle": "idle (QS)", "ctxsw": "context switch (QS)",
                 "kernel": "system call, bh off"}
_ROW = 0.6   # bar height of a CPU row


class RcuPrimerFigure(LiveFigure):
    """The primer's figure: per-CPU timelines above, the entries counter below.

    Built once for up to four CPUs; :meth:`update` changes the existing
    artists' data so an explorer can redraw quickly.
    """

    def __init__(self, steps: int = 200, size: tuple[float, float] = (9.0, 3.9)) -> None:
        fig, (ax, ax_e) = new_figure(2, 1, size=size, layout=None, sharex=True,
                                     height_ratios=(3.0, 1.0),
                                     gridspec_kw=dict(left=0.07, right=0.76, bottom=0.12,
                                                      top=0.86, hspace=0.12))
        self.fig, self.ax, self.ax_e = fig, ax, ax_e
        self.title = fig.suptitle(" ")
        ax.set_ylabel("CPU")
        ax.grid(False)
        ax.tick_params(labelbottom=False)
        ax_e.set_xlabel("time [ms]")
        ax_e.set_ylabel("entries")
        ax_e.grid(True, axis="x")
        ax_e.set_xlim(0, steps)
        xa = blended_transform_factory(ax.transData, ax.transAxes)
        self.gp_prev = Rectangle((0, 0), 0, 1, transform=xa, color=OKABE_ITO["sky_blue"],
                                 alpha=0.18, linewidth=0,
                                 label="grace period A's batch waits out")
        ax.add_patch(self.gp_prev)
        self.gp_band = Rectangle((0, 0), 0, 1, transform=xa, color=OKABE_ITO["orange"],
                                 alpha=0.22, linewidth=0, label="A's own grace period")
        ax.add_patch(self.gp_band)
        self.bars = {s: PolyCollection([], facecolors=_STATE_COLORS[s], edgecolors="none",
                                       label=_STATE_LABELS[s]) for s in STATES}
        for pc in self.bars.values():
            ax.add_collection(pc)
        self.reader = Rectangle((0, 0), 0, _ROW, fill=False, hatch="////", linewidth=1.2,
                                edgecolor=OKABE_ITO["black"], label="reader holds A")
        ax.add_patch(self.reader)
        black = OKABE_ITO["black"]
        (self.handler,) = ax.plot([], [], linestyle="none", marker="|", markersize=4,
                                  color=black, markeredgewidth=0.6, alpha=0.6,
                                  label="handler run ends")
        (self.passes,) = ax.plot([], [], linestyle="none", marker="|", markersize=11,
                                 color=black, markeredgewidth=1.4, label="do_softirq ends")
        (self.remove,) = ax.plot([], [], color=black, linewidth=1.5, transform=xa)
        self.remove_text = ax.text(0, 1.02, "call_rcu(A) ", transform=xa, ha="right",
                                   va="bottom", fontsize=8)
        (self.snap,) = ax.plot([], [], linestyle="none", marker="o", markersize=6,
                               markerfacecolor="white", markeredgecolor=black,
                               label="tasklet records the counter")
        (self.qs,) = ax.plot([], [], linestyle="none", marker="*", markersize=11,
                             color=OKABE_ITO["yellow"], markeredgecolor=black,
                             label="first QS after that")
        (self.gp_line,) = ax.plot([], [], color=black, linewidth=1.5, linestyle="--",
                                  transform=xa)
        self.gp_text = ax.text(0, 1.02, " GP over", transform=xa, ha="left", va="bottom",
                               fontsize=8)
        (self.now,) = ax.plot([], [], color="#777777", linewidth=1, transform=xa)
        self.msg = ax.text(0.99, 0.03, "", transform=ax.transAxes, ha="right", va="bottom",
                           color=OKABE_ITO["vermillion"], fontweight="bold",
                           bbox=dict(facecolor="white", edgecolor="none", alpha=0.85))
        (self.entries,) = ax_e.plot([], [], drawstyle="steps-post", color=OKABE_ITO["blue"],
                                    linewidth=1.5)
        (self.free,) = ax_e.plot([], [], linestyle="none", marker="X", markersize=9,
                                 color=black, label="A freed (entries drop)")
        (self.now_e,) = ax_e.plot([], [], color="#777777", linewidth=1,
                                  transform=blended_transform_factory(ax_e.transData,
                                                                      ax_e.transAxes))
        handles = [Patch(color=_STATE_COLORS[s], label=_STATE_LABELS[s]) for s in STATES] + [
            self.reader, self.handler, self.passes, self.gp_prev, self.gp_band, self.snap,
            self.qs, self.free,
            Line2D([], [], color=black, linewidth=1.5, label="removal (call_rcu)"),
            Line2D([], [], color=black, linewidth=1.5, linestyle="--", label="grace period ends"),
        ]
        fig.legend(handles=handles, loc="center left", bbox_to_anchor=(0.765, 0.5),
                   fontsize=7.5, frameon=False)
        ax_e.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=3))
        self._alt = ""
        # Text is the slow part of a draw: axes, ticks and legend are cached per
        # (CPUs, window, counter range) and only these artists are redrawn.
        dynamic = [self.gp_prev, self.gp_band, *self.bars.values(), self.reader, self.handler,
                   self.passes, self.remove, self.remove_text, self.snap, self.qs,
                   self.gp_line, self.gp_text, self.now, self.msg, self.entries, self.free,
                   self.now_e, self.title]
        self._blit = BlitRenderer(fig, dynamic)

    def update(self, tl: RcuTimeline, upto: int | None = None) -> None:
        """Show ``tl`` up to ``upto`` ms (default: the whole window)."""
        t = tl.steps if upto is None else max(0, min(int(upto), tl.steps))
        ax, n = self.ax, tl.ncpus
        ax.set_xlim(0, tl.steps)
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_yticks(range(n), [f"CPU{c}" for c in range(n)])
        seen = tl.state[:, :t]
        for code, s in enumerate(STATES):
            self.bars[s].set_verts(_runs(seen == code))
        cpu, step = np.nonzero(seen == SOFTIRQ)
        self.handler.set_data(step + 1, cpu + _ROW / 2 - 0.02)
        cpu, step = np.nonzero(tl.pass_end[:, :t])
        self.passes.set_data(step + 1, cpu)
        if tl.reader and t > tl.reader[1]:
            c, a, b = tl.reader
            self.reader.set_bounds(a, c - _ROW / 2, min(b, t) - a, _ROW)
            self.reader.set_visible(True)
        else:
            self.reader.set_visible(False)
        removed = t >= tl.remove_at
        self.remove.set_data([tl.remove_at] * 2, [0, 1])
        self.remove.set_visible(removed)
        self.remove_text.set_x(tl.remove_at)
        self.remove_text.set_visible(removed)
        prev = [(a, b) for n, a, b in tl.grace_periods if tl.batch is not None and n < tl.batch]
        if removed and prev and t > prev[-1][0]:
            a, b = prev[-1]
            self.gp_prev.set_bounds(a, 0, (t if b is None else min(t, b)) - a, 1)
            self.gp_prev.set_visible(True)
        else:
            self.gp_prev.set_visible(False)
        own = tl.gp_start is not None and t >= tl.gp_start
        if own:
            gp_stop = t if tl.gp_end is None else min(t, tl.gp_end)
            self.gp_band.set_bounds(tl.gp_start, 0, max(gp_stop - tl.gp_start, 0), 1)
        self.gp_band.set_visible(own)
        snaps = [(q, c) for c, q in enumerate(tl.snap_time) if q is not None and q <= t]
        self.snap.set_data([q for q, _ in snaps], [c - _ROW / 2 - 0.08 for _, c in snaps])
        done = [(q, c) for c, q in enumerate(tl.qs_time) if q is not None and q <= t]
        self.qs.set_data([q for q, _ in done], [c for _, c in done])
        over = tl.gp_end is not None and t >= tl.gp_end
        self.gp_line.set_data([tl.gp_end or 0] * 2, [0, 1])
        self.gp_text.set_x(tl.gp_end or 0)
        self.gp_line.set_visible(over)
        self.gp_text.set_visible(over)
        freed = tl.free_time is not None and t >= tl.free_time
        self.free.set_data([tl.free_time] if freed else [],
                           [tl.entries[tl.free_time]] if freed else [])
        self.now.set_data([t, t], [0, 1])
        self.now_e.set_data([t, t], [0, 1])
        if removed and not over and t >= tl.steps:
            self.msg.set_text(tl.status(t).split(" · ")[1].split(":")[0])
        else:
            self.msg.set_text("")
        x = np.arange(t + 1)
        self.entries.set_data(x, tl.entries[: t + 1])
        hi = int(tl.entries[0])
        lo = hi - tl.backlog - 1           # the level once A and the backlog are freed
        pad = 0.5 + 0.08 * (hi - lo)
        self.ax_e.set_ylim(lo - pad, hi + pad)
        self.ax_e.set_xlim(0, tl.steps)
        label, _ = RULES[tl.rule]
        self.title.set_text(f"RCU batches for one entry: {label}, softirq load {tl.load:.0f} %, "
                            f"{n} CPU{'s' if n > 1 else ''}")
        self._alt = rcu_primer_alt(tl, t)

    def _limit_axes(self) -> list:
        return [self.ax, self.ax_e]


def _runs(mask: np.ndarray) -> list[np.ndarray]:
    """Rectangles (as 4 x 2 vertex arrays) for each run of True per row of ``mask``."""
    verts = []
    h = _ROW / 2
    for c, row in enumerate(mask):
        d = np.diff(np.concatenate(([0], row.view(np.int8), [0])))
        for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1), strict=True):
            verts.append(np.array([(a, c - h), (b, c - h), (b, c + h), (a, c + h)], float))
    return verts


def rcu_primer_figure(tl: RcuTimeline, upto: int | None = None) -> Figure:
    """The primer figure for ``tl`` up to ``upto`` ms; show it with ``rcu_primer_alt``."""
    f = RcuPrimerFigure(steps=tl.steps)
    f.update(tl, upto)
    return f.fig


def rcu_primer_alt(tl: RcuTimeline, upto: int | None = None) -> str:
    """Alt text for :func:`rcu_primer_figure`: what the timelines show up to ``upto`` ms."""
    t = tl.steps if upto is None else max(0, min(int(upto), tl.steps))
    label, _ = RULES[tl.rule]
    share = ", ".join(f"CPU{c} {100 * s:.0f} %" for c, s in enumerate(tl.softirq_share))
    parts = [f"Timelines of {tl.ncpus} CPU{'s' if tl.ncpus > 1 else ''} from 0 to {t} ms "
             f"under {label} quiescent-state rules; softirq share {share}."]
    if tl.reader:
        c, a, b = tl.reader
        parts.append(f"A reader on CPU{c} holds entry A from {a} to {b} ms.")
    parts += [f"At {when} ms: {what}." for when, what in tl.events() if when <= t]
    if t >= tl.remove_at and (tl.free_time is None or t < tl.free_time):
        parts.append(f"Now: {tl.status(t).split(' · ', 1)[1]}.")
    parts.append(f"The entries counter shows {int(tl.entries[t])}.")
    return " ".join(parts)


# -- explorer -------------------------------------------------------------------------

def rcu_primer_explorer(*, steps: int = 200, seed: int = 0, dpi: int = 100,
                        **start) -> Explorer:
    """Notebook 02's RCU primer: softirq load, quiescent-state rule, CPUs and a time control.

    Controls: softirq load [%], rule, number of CPUs, and the current time
    ``t`` [ms], plus "Step +1 ms" and "Next event" buttons that move ``t``.
    Timelines are cached, so moving in time only redraws.  ``start``
    overrides the controls' initial values (``load``, ``rule``, ``ncpus``,
    ``t``; ``t`` starts one step before the removal, so the first moves show the
    removal, then the tasklet batching A and the first grace period starting).  Returns an
    :class:`~routelab.notebook.widgets.Explorer` with extra attributes
    ``step_button``, ``next_button`` and ``timeline()`` (the one shown).
    """
    steps, seed = _check("steps", steps), _check("seed", seed)
    unknown = sorted(set(start) - {"load", "rule", "ncpus", "t"})
    if unknown:
        raise KnobError(unknown[0], start[unknown[0]], "one of: load, rule, ncpus, t")
    remove_at = KNOBS["remove_at"].default
    controls = [
        control_for(KNOBS["load"], description="softirq load", value=start.get("load")),
        control_for(KNOBS["rule"], description="quiescent states",
                    options=[(label, key) for key, (label, _) in RULES.items()],
                    value=start.get("rule")),
        control_for(KNOBS["ncpus"], description="CPUs", value=start.get("ncpus")),
        control_for(KNOBS["t"], description="time", max=steps,
                    value=start.get("t", min(remove_at - 1, steps))),
    ]
    fig = RcuPrimerFigure(steps=steps)
    cache: dict[tuple, RcuTimeline] = {}
    shown: list[RcuTimeline] = []

    def timeline(load, rule, ncpus) -> RcuTimeline:
        key = (float(load), rule, int(ncpus))
        if key not in cache:
            if len(cache) > 64:
                cache.clear()
            cache[key] = rcu_timeline(load, rule, ncpus, steps=steps, seed=seed,
                                      remove_at=min(remove_at, steps - 1))
        return cache[key]

    def update(load, rule, ncpus, t) -> tuple[str, str]:
        tl = timeline(load, rule, ncpus)
        fig.update(tl, t)
        shown[:] = [tl]
        return _readout(tl, t), fig.alt

    e = Explorer(controls, update, fig.fig, dpi=dpi, render=lambda: fig.render_png(dpi),
                 title="RCU primer: when can entry A be freed?")
    slider = e.controls["t"]
    slider.continuous_update = True    # moving in time only redraws (the timeline is cached)

    def step(_=None) -> None:
        slider.value = min(slider.value + 1, slider.max)

    def next_event(_=None) -> None:
        later = [w for w, _ in shown[0].events() if w > slider.value] if shown else []
        slider.value = min(later) if later else slider.max

    e.step_button = W.Button(description="Step +1 ms", icon="step-forward",
                             tooltip="Advance the time by one tick (1 ms)")
    e.next_button = W.Button(description="Next event", icon="fast-forward",
                             tooltip="Jump to the next removal, quiescent state, "
                                     "grace-period end or free")
    e.step_button.on_click(step)
    e.next_button.on_click(next_event)
    e.timeline = lambda: shown[0]
    for box in e.widget.children:
        if isinstance(box, W.Box) and slider in box.children:
            box.children = (*box.children, e.step_button, e.next_button)
    return e


def _readout(tl: RcuTimeline, t: int) -> str:
    # the settings first, so every control move changes the line (also at t = removal)
    head = f"{RULES[tl.rule][0]}, softirq load {tl.load:g} %, {tl.ncpus} CPU" + \
        ("s" if tl.ncpus != 1 else "") + " · "
    text = html.escape(head + tl.status(t))
    text = text.replace("not yet freed", "<b>not yet freed</b>")
    text = text.replace("grace period not over", "<b>grace period not over</b>")
    return text.replace("A freed", "<b>A freed</b>")

