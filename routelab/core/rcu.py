"""Read-copy-update: deferred freeing of route-cache entries, as 2.6.0 runs it.

Kernel: kernel/rcupdate.c call_rcu, rcu_pending, rcu_check_callbacks,
rcu_process_callbacks, rcu_start_batch, rcu_check_quiescent_state,
rcu_do_batch; kernel/sched.c schedule, scheduler_tick (2.6.0,
MaximeChretien/linux-history v2.6.0).  The patches: LKML
<20040331214342.GD4543@in.ibm.com> (rcu-softirq / call_rcu_bh, Dipankar Sarma,
1 Apr 2004), as the project brief's reading of the patch text gives it
(kernel.md, "rcu-softirq patch"; the mail itself is not reachable from this
machine) and as the same rules stand in v2.6.9, where call_rcu_bh was first
released (kernel/rcupdate.c rcu_check_callbacks, kernel/softirq.c
__do_softirq's rcu_bh_qsctr_inc, v2.6.9).  ``routelab.core.rcu26`` is the same
protocol, standalone and event by event; this is the version the engine runs.
Fed the same events, the two agree on every grace period and callback time
(tests/test_rcu26.py).

A route-cache entry taken out of its hash chain may still be in use by a
reader on another CPU, so it is handed to ``call_rcu`` and freed only after a
*grace period*: an interval during which every CPU has passed a quiescent
state.  Until then it still counts in ``dst_ops.entries``.

Which events are quiescent states depends on the kernel (``mode``):

=========  ================================================================
mode       quiescent states
=========  ================================================================
none       (2.4) no RCU: ``rt_free`` calls ``dst_free`` at once
vanilla    schedule() (a context switch, even to the same task), a timer
           tick in user mode, a tick in the idle task outside softirq (2.6.0)
iter       vanilla + the end of each ``do_softirq`` invocation (the earlier
           rcu-softirq patch; our reading of "each full pass of the softirq
           loop")
bh         call_rcu_bh's own counter (rt_free/rt_drop use call_rcu_bh): the
           completion of every softirq handler, a user-mode or idle tick, and
           any tick outside softirq -- also one inside a system call
           (``system_tick``); *not* schedule(), which bumps only the normal
           counter (issue 24 item 6: until then this mode also counted a
           context switch and the end of a ``do_softirq`` call)
=========  ================================================================

``local_bh_enable`` leaving the outermost BH-disabled section is a bh
quiescent state too; in this model no process-context code takes a BH lock
under the flood (the loop's gettimeofday takes none), so it never happens.

The 2.6.0 batch protocol, as modelled:

* ``call_rcu`` appends the callback to the CPU's ``nxt`` list; nothing else.
* A quiescent state only bumps the CPU's counter ``qsctr``.
* Everything else happens in the CPU's RCU tasklet (``rcu_tasklet``), which
  the timer tick schedules whenever ``rcu_pending`` holds and which runs at
  that CPU's next softirq processing: (a) a ``cur`` batch whose number the
  global ``curbatch`` has passed moves to ``done``; (b) only if ``cur`` is
  then empty, ``nxt`` becomes ``cur``, tagged ``curbatch + 1``, and that batch
  is asked for (``rcu_start_batch``); (c) the CPU checks its quiescent state:
  the first run after a grace period began *records* ``qsctr``, a later run
  must find it changed; then the CPU leaves the grace period's mask, and the
  last one out ends it (``curbatch += 1``) and starts the next if a later
  batch was asked for; (d) the ``done`` callbacks run -- all of them in
  2.6.0 (``maxbatch`` 0), at most ``maxbatch`` with rs-throttle-rcu.
* ``rcu_start_batch`` starts a grace period (sets the mask to every CPU) only
  when none is running and the highest batch asked for is not done.  The
  running grace period is numbered ``curbatch`` and new batches are tagged
  ``curbatch + 1``, so a batch formed while nothing runs waits for *two* grace
  periods, and one formed while one runs waits for the rest of it plus one.

Where the tasklet runs in the engine: on an idle CPU (or one running its
user task outside softirq) at the tick itself
(:class:`routelab.core.softirq.TimerTick`); on a CPU busy with softirq work at
the first ``do_softirq`` pass boundary after a tick
(:meth:`Rcu.tasklet_at`).

Simplifications: the engine does not process the CPUs' events in strict time
order (a CPU's softirq run is served as a block), so every RCU step uses
``max(now, latest time seen)`` -- it can only delay a grace period, never
shorten one -- and a quiescent state stamped before the CPU's latest snapshot
is not counted; the snapshot's "no value yet" is a separate marker (2.6.0 uses
a counter value of 0, which matters only at boot); CPUs never go offline.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from .dst import RCU_PENDING, DstEntry, DstOps

__all__ = ["Rcu", "QS_KINDS", "HOOKS"]

#: Observation hooks for tests (not kernel behaviour).  An ``Rcu`` created
#: while a hook is set calls ``HOOKS["call_rcu"](rcu, cpu, entry, now)`` on
#: every ``call_rcu`` and ``HOOKS["rcu_free"](entry, now)`` just before each
#: callback frees its entry.  (The compiled class cannot be monkeypatched.)
HOOKS: dict = {"call_rcu": None, "rcu_free": None}

QS_KINDS = {
    "none": frozenset(),
    "vanilla": frozenset({"idle", "user_tick", "ctxsw"}),
    "iter": frozenset({"idle", "user_tick", "ctxsw", "softirq_loop"}),
    "bh": frozenset({"idle", "user_tick", "system_tick", "softirq_handler"}),
}

_NO_SNAPSHOT = -1


class Rcu:
    """RCU state of a run.

    Parameters
    ----------
    mode : str
        ``none``, ``vanilla``, ``iter`` or ``bh``.
    ncpus : int
    maxbatch : int
        Callbacks per tasklet run (0 = unlimited, as 2.6.0).
    free : callable(entry, now) -> seconds, or DstOps
        What a callback does (``dst_rcu_free`` -> ``dst_free``); a ``DstOps``
        stands for its ``dst_free`` (called directly when compiled).
    cost : dict
        Seconds for ``rcu_callback`` and ``rcu_tasklet``.

    Attributes
    ----------
    nxt, cur, done : per-CPU lists of entries (``done``: deques)
    batch : per-CPU batch number ``cur`` waits for
    curbatch : the running (or next) grace period's number
    maxreq : the highest batch number asked for
    mask : per-CPU: still awaited by the running grace period
    gp_active : a grace period is running (``nmask > 0``)
    qsctr, last_qsctr : per-CPU quiescent-state counter and its snapshot
    gp_log : (start, end) of every grace period
    pending, invoked, completed, tasklet_runs : counters
    """

    def __init__(self, mode: str, ncpus: int, maxbatch: int,
                 free: Callable | DstOps, cost: dict) -> None:
        if mode not in QS_KINDS:
            raise ValueError(f"unknown RCU mode {mode!r}")
        self.mode = mode
        self._none = mode == "none"
        self.qs_kinds = QS_KINDS[mode]
        self.ncpus = ncpus
        self.maxbatch = maxbatch
        # (a DstOps is called directly, see _free; anything else through ``free``)
        self.ops = free if isinstance(free, DstOps) else None
        self.free = None if self.ops is not None else free
        self.on_call = HOOKS["call_rcu"]
        self.on_free = HOOKS["rcu_free"]
        self._c_cb = cost["rcu_callback"]
        self._c_tasklet = cost["rcu_tasklet"]
        self.nxt = [[] for _ in range(ncpus)]
        self.cur = [[] for _ in range(ncpus)]
        self.done = [deque() for _ in range(ncpus)]
        self.batch = [0] * ncpus
        self.qsctr = [0] * ncpus
        self.last_qsctr = [_NO_SNAPSHOT] * ncpus
        self.snap_t = [0.0] * ncpus      # when each CPU last took its snapshot
        self.tick_seen = [-1] * ncpus    # the last tick whose tasklet ran (tasklet_at)
        self.mask = [False] * ncpus
        self.nmask = 0
        self.curbatch = 1
        self.maxreq = 0
        self.gp_start = 0.0
        self.clock = 0.0                 # latest time any RCU step ran at
        self.pending = 0                 # callbacks queued and not yet invoked
        self.completed = 0               # grace periods completed
        self.invoked = 0
        self.tasklet_runs = 0
        self.gp_log: list[tuple[float, float]] = []
        # the timer tick that drives the tasklets, simulated while callbacks are
        # pending (routelab.core.softirq.TimerTick sets these)
        self.tick = None
        self.tick_at = 0.0
        self.hz = 1000

    # -- queueing -----------------------------------------------------------
    def call_rcu(self, cpu: int, entry: DstEntry, now: float) -> float:
        """Queue ``entry`` to be freed after a grace period.

        Kernel: kernel/rcupdate.c call_rcu (call_rcu_bh with the bh patch):
        append to the CPU's ``nxtlist`` with interrupts off.  Returns the
        seconds charged now (the free itself is charged when the callback
        runs).
        """
        if self.on_call is not None:
            self.on_call(self, cpu, entry, now)
        if self._none:
            return self._free(entry, now)
        entry.state = RCU_PENDING
        self.nxt[cpu].append(entry)
        self.pending += 1
        if self.pending == 1 and self.tick is not None:
            self.tick.mod(self.tick_at)      # callbacks pending: the tick matters again
        return 0.0

    # -- quiescent states ---------------------------------------------------
    def quiescent(self, cpu: int, t: float, kind: str) -> None:
        """``cpu`` passed an event of ``kind`` at time ``t``: if that is a
        quiescent state in this mode, bump its counter.

        Kernel: kernel/sched.c schedule (``RCU_qsctr(cpu)++`` at every switch
        point), kernel/rcupdate.c rcu_check_callbacks (user-mode and idle
        ticks); the patches' extra points.
        """
        if kind in self.qs_kinds and t >= self.snap_t[cpu]:
            self.qsctr[cpu] += 1

    # -- the tasklet --------------------------------------------------------
    def rcu_pending(self, cpu: int) -> bool:
        """Kernel: kernel/rcupdate.c rcu_pending: does the tick need to
        schedule this CPU's tasklet?  (Plus ``done`` callbacks a throttled
        tasklet left behind.)"""
        if self.cur[cpu]:
            if self.curbatch > self.batch[cpu]:
                return True
        elif self.nxt[cpu]:
            return True
        return self.mask[cpu] or len(self.done[cpu]) > 0

    def tasklet_at(self, cpu: int, now: float) -> float:
        """A ``do_softirq`` pass boundary on a busy CPU at ``now``: if a tick
        has come since the tasklet last ran here and RCU is pending, the tick
        scheduled the tasklet and it runs now.  Returns its seconds."""
        k = math.floor(now * self.hz + 1e-6)
        if k <= self.tick_seen[cpu]:
            return 0.0
        if not self.rcu_pending(cpu):
            return 0.0
        self.tick_seen[cpu] = k
        return self.rcu_tasklet(cpu, now)

    def rcu_tasklet(self, cpu: int, now: float) -> float:
        """One run of the CPU's RCU tasklet; return its seconds.

        Kernel: kernel/rcupdate.c rcu_process_callbacks, rcu_do_batch.
        """
        if now < self.clock:
            now = self.clock
        self.clock = now
        self.tasklet_runs += 1
        cur = self.cur[cpu]
        done = self.done[cpu]
        if cur and self.curbatch > self.batch[cpu]:
            done.extend(cur)
            self.cur[cpu] = cur = []
        if not cur and self.nxt[cpu]:
            self.cur[cpu] = self.nxt[cpu]
            self.nxt[cpu] = []
            self.batch[cpu] = self.curbatch + 1
            self._start_batch(self.batch[cpu], now)
        self._check_quiescent_state(cpu, now)
        t = self._c_tasklet
        if not done:
            return t
        n = len(done) if self.maxbatch == 0 else min(self.maxbatch, len(done))
        t += n * self._c_cb
        for _ in range(n):
            t += self._free(done.popleft(), now)
        self.pending -= n
        self.invoked += n
        if not self.pending and self.tick is not None:
            self.tick.stop()
        return t

    def _start_batch(self, newbatch: int, now: float) -> None:
        """Kernel: kernel/rcupdate.c rcu_start_batch."""
        if self.maxreq < newbatch:
            self.maxreq = newbatch
        if self.maxreq < self.curbatch or self.nmask > 0:
            return
        for c in range(self.ncpus):
            self.mask[c] = True
        self.nmask = self.ncpus
        self.gp_start = now

    def _check_quiescent_state(self, cpu: int, now: float) -> None:
        """Kernel: kernel/rcupdate.c rcu_check_quiescent_state."""
        if not self.mask[cpu]:
            return
        if self.last_qsctr[cpu] == _NO_SNAPSHOT:
            self.last_qsctr[cpu] = self.qsctr[cpu]
            self.snap_t[cpu] = now
            return
        if self.qsctr[cpu] == self.last_qsctr[cpu]:
            return
        self.mask[cpu] = False
        self.nmask -= 1
        self.last_qsctr[cpu] = _NO_SNAPSHOT
        if self.nmask > 0:
            return
        # the last CPU out: this grace period is over
        self.gp_log.append((self.gp_start, now))
        self.completed += 1
        self.curbatch += 1
        self._start_batch(self.maxreq, now)

    # -- callbacks ----------------------------------------------------------
    def _free(self, entry: DstEntry, now: float) -> float:
        """The callback: free ``entry``; return its seconds."""
        if self.on_free is not None:
            self.on_free(entry, now)
        if self.ops is not None:
            return self.ops.dst_free(entry, now)
        return self.free(entry, now)

    @property
    def gp_active(self) -> bool:
        """A grace period is running (some CPU is still in its mask)."""
        return self.nmask > 0

    def grace_periods(self):
        """Grace-period lengths in seconds (numpy array)."""
        import numpy as np

        if not self.gp_log:
            return np.zeros(0)
        a = np.asarray(self.gp_log)
        return a[:, 1] - a[:, 0]
