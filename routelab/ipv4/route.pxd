# C types for route.py when it is compiled (see setup.py, routelab/accel.py):
# the cache entries its chain walks and GC passes touch are C structs, and the
# route cache itself is a C class whose miss path (slow path, dst_alloc, GC,
# rt_intern_hash, rt_free -> call_rcu -> dst_free) is a chain of C calls.
cimport cython
from routelab.core.dst cimport DstEntry, DstFamily, DstOps
from routelab.core.rcu cimport Rcu
from routelab.sim.ledger cimport Ledger

cdef long _RTN_LOCAL, _RTN_BROADCAST, _RTN_UNREACHABLE, _RTN_BLACKHOLE, _RTN_PROHIBIT
cdef long _O_MARTIAN, _O_DST_OVERFLOW, _NO_DROP


# (not final: a final class cannot override DstFamily.gc in Cython 3; the
# override check of a non-final cpdef method is one type-flag test)
cdef class RouteCache(DstFamily):
    # configuration and structure
    cdef public object kernel, cost, rng, stat, table, gc_log, _hash
    cdef public DstOps dst
    cdef public Rcu rcu
    cdef public Ledger ledger
    cdef public long hz, buckets, mask, log, max_size, gc_elasticity, ncpus
    cdef public double gc_min_interval, gc_timeout, gc_interval, secret_interval
    cdef public object hash_rnd
    cdef public bint _score_age, _intern_none, _intern_24, _nocache
    cdef public double _c_rt_free, _c_slow, _c_fib, _c_rule, _c_intern, _c_step, _c_gc
    # rt_garbage_collect's statics and the timers
    cdef public long long expire, equilibrium
    cdef public long rover, check_rover
    cdef public double last_gc
    cdef public double check_expire_at, secret_at
    cdef public long flushes, hashed

    cpdef long long jiffies(self, double t)
    cpdef long long rt_score(self, DstEntry e, double now)
    cpdef bint rt_may_expire(self, DstEntry e, long long tmo1, long long tmo2, long long now_j,
                             bint has_next=*)
    cpdef double rt_free(self, DstEntry e, double now, long cpu) except? -1.0

    cpdef int _check_args(self, long cpu, long h=*) except -1
    cpdef DstEntry ip_route_input_slow(self, double now, long cpu, unsigned long long key,
                                       long ik, long h, long rtype, long oif, long long gw,
                                       long nrules, long martian)
    cpdef DstEntry rt_intern_hash(self, DstEntry e, long h, double now, long cpu)
    cpdef double rt_garbage_collect(self, double now, long cpu) except? -1.0
    cpdef double gc(self, double now, long cpu) except? -1.0
