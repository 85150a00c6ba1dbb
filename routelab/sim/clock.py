"""The clock: timers by registration.

Kernel counterpart: kernel/timer.c (``struct timer_list``, ``mod_timer``,
``del_timer``, ``run_timer_softirq``), in the model's continuous time.

Any part of the model that needs to act at a later time -- the route
cache's ``rt_check_expire``, the dst garbage collector, a neighbour's
retransmit timer, a host's retransmission -- registers a :class:`Timer`
with the run's :class:`Clock` and arms it with :meth:`Timer.mod`.  The run
asks the clock, whenever the simulated time passes :attr:`Clock.nt`, to
fire every timer that is due (:meth:`Clock.run_due`), in deadline order;
timers due at the same instant fire in the order they were registered.

What a timer's handler does is its owner's business: ``fire(now)`` runs the
handler as of the deadline ``now`` and returns the CPU seconds it took.  The
run decides on which CPU and when that work is charged (a kernel timer runs
as a softirq on its CPU after the work already queued there): the clock
hands each due timer to :attr:`Clock.runner`'s ``run_timer(timer, now)``,
or, without a runner, just calls its handler.  A *raw* timer (the per-CPU
scheduler tick, say) is always handed to its handler directly: it does its
own accounting.

:attr:`Clock.nt` is a lower bound of the earliest deadline, never above it:
arming a timer lowers it at once, and :meth:`next_due` makes it exact.  A
lower bound is enough for the run, which only has to look at the timers no
later than the first one is due; looking early fires nothing.

Model, not kernel: the kernel's timer wheel cascades in jiffies; here a
deadline is any float and the order is exact.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import cython

__all__ = ["Clock", "Timer"]

INF = math.inf


class Timer:
    """One registered timer (``struct timer_list``).

    Attributes
    ----------
    name : str         what it is, for views and errors
    fire : callable(now) -> float
        The handler: runs as of the deadline ``now``, returns CPU seconds.
    cpu : int          the CPU its handler runs on
    raw : bool         its handler does its own accounting (see module doc)
    at : float         the deadline (``inf`` when not armed)
    seq : int          registration order (breaks ties between deadlines)
    """

    def __init__(self, clock: Clock, name: str, fire: Callable[[float], float],
                 cpu: int, raw: bool, seq: int) -> None:
        self.clock = clock
        self.name = name
        self.fire = fire
        self.cpu = cpu
        self.raw = raw
        self.seq = seq
        self.at = INF
        self.gen = 0
        self.fired = 0

    def mod(self, at: float) -> None:
        """Arm (or re-arm) the timer for ``at`` (``mod_timer``)."""
        self.clock._arm(self, at)

    def stop(self) -> None:
        """Disarm the timer (``del_timer``); a later :meth:`mod` arms it again."""
        self.at = INF
        self.gen += 1

    def pending(self) -> bool:
        """Armed and not yet fired (``timer_pending``)."""
        return self.at != INF

    def __repr__(self) -> str:
        return f"Timer({self.name!r}, at={self.at:.6f}, cpu={self.cpu})"


class Clock:
    """The run's timers, in deadline order.

    Attributes
    ----------
    nt : float
        A lower bound of the earliest armed deadline (``inf`` if none).
    runner : object or None
        Gets each due non-raw timer as ``runner.run_timer(timer, now)``
        and charges its work; ``None``: the handler is just called.
    timers : list[Timer]
        Every registered timer, in registration order.
    """

    def __init__(self) -> None:
        self.nt = INF
        self.runner = None
        self.timers: list[Timer] = []
        self._heap: list = []

    def timer(self, name: str, fire: Callable[[float], float], cpu: int = 0,
              raw: bool = False) -> Timer:
        """Register a timer (not armed); see :class:`Timer`."""
        if not callable(fire):
            raise TypeError(f"timer {name!r}: fire must be callable, got {fire!r}")
        t = Timer(self, name, fire, int(cpu), bool(raw), len(self.timers))
        self.timers.append(t)
        return t

    @cython.locals(at=cython.double)
    def _arm(self, timer: Timer, at: float) -> None:
        if at != at:
            raise ValueError(f"timer {timer.name!r}: deadline is NaN")
        timer.at = at
        timer.gen += 1
        if at < INF:
            heapq.heappush(self._heap, (at, timer.seq, timer.gen, timer))
            if at < self.nt:
                self.nt = at

    def _top(self):
        """The earliest live heap entry's timer, dropping stale entries."""
        heap = self._heap
        while heap:
            at, _, gen, timer = heap[0]
            if gen == timer.gen and at == timer.at:
                return timer
            heapq.heappop(heap)
        return None

    def next_due(self) -> float:
        """The earliest armed deadline (``inf`` if none); makes :attr:`nt` exact."""
        top = self._top()
        self.nt = INF if top is None else top.at
        return self.nt

    def run_due(self, t: float) -> int:
        """Fire every timer due by ``t``, earliest first (ties: registration
        order), including timers armed by the handlers themselves; return how
        many fired.  :attr:`nt` is exact afterwards."""
        n = 0
        while True:
            top = self._top()
            if top is None or top.at > t:
                self.nt = INF if top is None else top.at
                return n
            heapq.heappop(self._heap)
            due = top.at
            top.at = INF          # (a handler that re-arms it sets a new deadline)
            top.fired += 1
            n += 1
            if top.raw or self.runner is None:
                top.fire(due)
            else:
                self.runner.run_timer(top, due)
