# C types for dst.py when it is compiled (see setup.py, routelab/accel.py).
# An "augmenting" .pxd: dst.py stays the only source of the code; this file
# only says which of its attributes are C numbers, so that the per-packet
# loop reads and writes them without a dictionary lookup.
cimport cython
from routelab.sim.clock cimport Timer
from routelab.sim.ledger cimport Ledger

@cython.final
cdef class HHCache:
    cdef public bint connected


cdef class DstEntry:
    cdef public unsigned long long key      # daddr << 32 | saddr
    cdef public long ik
    cdef public long refcnt
    cdef public double lastuse
    cdef public long long use
    cdef public double created
    cdef public double expires
    cdef public bint valuable
    cdef public bint fast_clean
    cdef public bint output_route
    cdef public int rtype
    cdef public int oif
    cdef public long long gw
    cdef public int obsolete
    cdef public int state
    cdef public long bucket
    cdef public long long rate_tokens
    cdef public double rate_last
    cdef public long long uid
    cdef public object neigh
    cdef public HHCache hh

    cpdef void _reset(self, long long uid, double now)


cdef class DstFamily:
    cpdef double gc(self, double now, long cpu) except? -1.0


@cython.final
cdef class DstOps:
    cdef public long long gc_thresh, entries, _uid
    cdef public long _slot_gc
    cdef public DstFamily family
    cdef public Ledger ledger
    cdef public object on_destroy, neigh_release
    cdef public list garbage
    cdef public Timer gc_timer
    cdef public double gc_timer_expires, gc_timer_inc
    cdef public double _c_alloc, _c_destroy, _c_run, _c_entry
    cdef public long long allocated, destroyed, alloc_failed, gc_runs, gc_walked
    cdef public list gc_run_log

    cpdef DstEntry dst_alloc(self, double now, long cpu)
    cpdef double dst_destroy(self, DstEntry e, double now) except? -1.0
    cpdef double dst_free(self, DstEntry e, double now) except? -1.0
    cpdef double dst_run_gc(self, double now) except? -1.0


cdef int dst_release_underflow(DstEntry e) except -1


cpdef inline int dst_release(DstEntry e) except -1:
    # include/net/dst.h dst_release, compiled into every caller (a C inline:
    # the compiled model's references cost one test and a decrement); dst.py
    # holds the same body, with its docstring, for pure Python.
    if e is None:
        return 0
    if e.refcnt <= 0:
        return dst_release_underflow(e)
    e.refcnt -= 1
    return 0
