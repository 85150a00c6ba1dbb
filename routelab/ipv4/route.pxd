# C types for route.py when it is compiled (see setup.py, routelab/accel.py):
# the cache entries its chain walks and GC passes touch are C structs, and the
# route cache itself is a C class whose miss path (slow path, dst_alloc, GC,
# rt_intern_hash, rt_free -> call_rcu -> dst_free) is a chain of C calls.
cimport cython
from routelab.core.dst cimport DstEntry, DstFamily, DstOps, dst_release
from routelab.core.rcu cimport Rcu
from routelab.core.dev cimport flush_tx
from routelab.sim.clock cimport Clock, Timer
from routelab.sim.columns cimport Packets
from routelab.sim.ledger cimport Ledger
from routelab.ipv4.icmp cimport Icmp
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject


cdef extern from *:
    """
    /* A prefetch hint.  The empty volatile asm marks it as a side effect: without
       it, gcc -O1 finds _chain_prefetch free of effects and drops the call. */
    #if defined(__GNUC__)
    #define __pyx_rl_prefetch(p) \
        do { __builtin_prefetch((const void *)(p), 0, 3); __asm__ __volatile__(""); } while (0)
    #else
    #define __pyx_rl_prefetch(p) ((void)(p))
    #endif
    """
    void _rl_prefetch "__pyx_rl_prefetch"(const void *p) noexcept nogil


cdef extern from "Python.h":
    ctypedef struct PyListObject:
        PyObject **ob_item


cdef inline Py_ssize_t _chain_find_c(list chain, unsigned long long key, long ik):
    # route._chain_find on borrowed pointers: no reference counting or type
    # test per entry stepped over (every element of a chain is a DstEntry)
    cdef Py_ssize_t k
    cdef PyObject* p
    for k in range(PyList_GET_SIZE(chain)):
        p = <PyObject*>PyList_GET_ITEM(chain, k)
        if (<DstEntry>p).key == key and (<DstEntry>p).ik == ik:
            return k
    return -1


cdef inline void _chain_prefetch(list table, const long long* h, Py_ssize_t left) noexcept:
    # A hint to the CPU, no change to any result: start loading what the next
    # packets' chain walks will read, so that their cache misses overlap with
    # this packet's work instead of following one another.  Three steps, each
    # one reading only what an earlier step asked for: packet j+4's chain (the
    # list object), packet j+2's item array, packet j+1's first entries (their
    # key and ik).  h points at packet j's bucket, and left packets of the
    # window follow it.  Every pointer read is live (table holds its chains,
    # which hold their items); a chain changed meanwhile only wastes a hint.
    cdef PyObject* lst
    cdef PyObject** items
    cdef Py_ssize_t k, m
    if left > 4:
        _rl_prefetch(PyList_GET_ITEM(table, h[4]))
    if left > 2:
        lst = PyList_GET_ITEM(table, h[2])
        _rl_prefetch((<PyListObject*>lst).ob_item)
    if left > 1:
        lst = PyList_GET_ITEM(table, h[1])
        items = (<PyListObject*>lst).ob_item
        m = PyList_GET_SIZE(<list>lst)
        if m > 4:
            m = 4
        for k in range(m):
            _rl_prefetch(&(<DstEntry>items[k]).key)
            _rl_prefetch(&(<DstEntry>items[k]).ik)


cpdef double ip_rt_send_redirect(Icmp icmp, dict sysctl, long d, double now, object e,
                                 double iwire, long long saddr) except? -1.0
cpdef int ip_error(Icmp icmp, object e, long rtype, object key, long d, double now,
                   double iwire, object saddr) except -1

cdef long _RTN_LOCAL, _RTN_BROADCAST, _RTN_UNREACHABLE, _RTN_BLACKHOLE, _RTN_PROHIBIT
cdef long _O_MARTIAN, _O_DST_OVERFLOW, _NO_DROP, _O_NEIGH_OVERFLOW, _RTN_UNICAST


# (not final: a final class cannot override DstFamily.gc in Cython 3; the
# override check of a non-final cpdef method is one type-flag test)
cdef class RouteCache(DstFamily):
    # configuration and structure
    cdef public object kernel, cost, rng, stat, gc_log, _hash
    cdef public list table
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
    cdef public Clock clock
    cdef public Timer check_timer, secret_timer
    cdef public object on_rekey
    cdef public long long[:] hsearch, misses
    cdef public list devices
    cdef public double _c_kfree
    cdef public long _slot_slow, _slot_gc
    cdef public object arp
    cdef public long long neigh_overflows
    cdef public long flushes, hashed

    cpdef long long jiffies(self, double t)
    cpdef long long rt_score(self, DstEntry e, double now)
    cpdef bint rt_may_expire(self, DstEntry e, long long tmo1, long long tmo2, long long now_j,
                             bint has_next=*)
    cpdef double rt_free(self, DstEntry e, double now, long cpu) except? -1.0

    cpdef DstEntry ip_route_input(self, Packets pk, Py_ssize_t j, double now, long cpu)
    cpdef int _check_args(self, long cpu, long h=*) except -1
    cpdef DstEntry ip_route_input_slow(self, double now, long cpu, unsigned long long key,
                                       long ik, long h, long rtype, long oif, long long gw,
                                       long nrules, long martian, double vfib=*)
    cpdef DstEntry rt_intern_hash(self, DstEntry e, long h, double now, long cpu)
    cpdef double rt_garbage_collect(self, double now, long cpu) except? -1.0
    cpdef double gc(self, double now, long cpu) except? -1.0
    cpdef bint _bind(self, DstEntry e, double now) except -1
