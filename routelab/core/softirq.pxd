# C types for softirq.py when it is compiled (see setup.py, routelab/accel.py):
# each CPU is a C class whose softirq bookkeeping the dispatcher calls directly.
cimport cython
from routelab.core.dev cimport SoftnetData
from routelab.core.rcu cimport Rcu
from routelab.sim.clock cimport Timer
from routelab.sim.ledger cimport Ledger
from routelab.sim.queues cimport IntervalLog

cdef long _MAX_RESTART
cdef long _SCHED_HZ
cdef double _STALL_S

cpdef double next_tick(double x, long hz)


@cython.final
cdef class Cpu:
    cdef public long num, hz, budget, pass_n, restarts, max_restart
    cdef public double jiffy, rr, busy, pass_t0, sched_t, loop_seen, loop_gap, loop_user_s
    cdef public double ksoftirqd_s, ksoftirqd_since
    cdef public object rq, ksd, loop
    cdef public list loop_stalls
    cdef public bint user, use_rcu, qs_handler, qs_loop, in_ksoftirqd
    cdef public Rcu rcu
    cdef public SoftnetData softnet
    cdef public list devices
    cdef public Ledger ledger
    cdef public long slot_rcu, slot_entry
    cdef public long long runs
    cdef public IntervalLog ivlog
    cdef public long long ctxsw, ksoftirqd_wakeups, user_ticks, slivers, resched_same
    cdef public long ksd_slice, ksd_left, ksd_expiry
    cdef public double irq0_phase, tx_irq
    cdef public long long lcg, sys_ticks, irq0_ends, ksd_passes

    cpdef double net_rx_action(self, double t, long weight, double cost) except? -1.0
    cpdef double cpu_was_free(self, double b, double t) except? -1.0
    cpdef double do_softirq(self, double start) except? -1.0
    cpdef double sliver(self, double start) except? -1.0
    cpdef int tick_qs(self, double tick) except -1
    cpdef int sched_ticks(self, double upto, bint in_softirq) except -1
    cpdef int user_runs(self, double a, double z, bint preempt) except -1
    cpdef int switched(self, double t) except -1
    cpdef int wake_sleepers(self, double t) except -1
    cpdef int ksoftirqd_runs(self, double t) except -1
    cpdef int ksoftirqd_resched(self, double t) except -1
    cpdef int ksoftirqd_stops(self, double t) except -1
    cpdef int charge(self, double due, double w) except -1
    cpdef int served(self, double start, double svc, double fin) except -1


@cython.final
cdef class TimerTick:
    cdef public Timer timer
    cdef public list cpus, devices
    cdef public Rcu rcu
    cdef public Ledger ledger
    cdef public long hz, slot_rcu
    cdef public bint user

    cpdef double fire(self, double due) except? -1.0
