# C types for rcu.py when it is compiled (see setup.py, routelab/accel.py):
# RCU is a C class, so the route cache's call_rcu, the CPUs' quiescent states
# and tasklet runs, and the callbacks' dst_free are C calls.
cimport cython
from routelab.core.dst cimport DstEntry, DstOps
from routelab.sim.clock cimport Timer


@cython.final
cdef class Rcu:
    cdef public str mode
    cdef public bint _none
    cdef public object qs_kinds
    cdef public long ncpus, maxbatch
    cdef public DstOps ops
    cdef public object free, on_call, on_free
    cdef public double _c_cb, _c_tasklet
    cdef public list nxt, cur, done, batch, qsctr, last_qsctr, snap_t, tick_seen, mask, gp_log
    cdef public long nmask
    cdef public long long curbatch, maxreq
    cdef public long long pending, completed, invoked, tasklet_runs
    cdef public double gp_start, clock
    cdef public Timer tick
    cdef public double tick_at
    cdef public long hz

    cpdef double call_rcu(self, long cpu, DstEntry entry, double now) except? -1.0
    cpdef quiescent(self, long cpu, double t, str kind)
    cpdef bint rcu_pending(self, long cpu) except -1
    cpdef double tasklet_at(self, long cpu, double now) except? -1.0
    cpdef double rcu_tasklet(self, long cpu, double now) except? -1.0
    cdef _start_batch(self, long long newbatch, double now)
    cdef _check_quiescent_state(self, long cpu, double now)
    cpdef double _free(self, DstEntry entry, double now) except? -1.0
