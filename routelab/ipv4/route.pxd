# C types for route.py when it is compiled (see setup.py, routelab/accel.py):
# the cache entries its chain walks and GC passes touch are C structs, and the
# route cache itself is a C class whose hot helpers are called as C functions.
from routelab.core.dst cimport DstEntry


cdef class RouteCache:
    # configuration and structure
    cdef public object kernel, cost, rng, stat, table, dst, rcu, gc_log, _hash
    cdef public long hz, buckets, mask, log, max_size, gc_elasticity, ncpus
    cdef public double gc_min_interval, gc_timeout, gc_interval, secret_interval
    cdef public object hash_rnd
    cdef public bint _score_age
    cdef public double _c_rt_free
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
    cpdef double rt_free(self, DstEntry e, double now, long cpu)
