# C types for router.py when it is compiled (see setup.py, routelab/accel.py):
# the route-cache entries the per-packet loop touches are C structs.
from routelab.core.dst cimport DstEntry, DstOps
from routelab.core.rcu cimport Rcu
from routelab.ipv4.route cimport RouteCache
from routelab.core.queues cimport IntervalLog, TimeQueue, TxQueue
from routelab.sim.ledger cimport Ledger
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
    # router._chain_find on borrowed pointers: no reference counting or type
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


cdef Py_ssize_t _COL_AHEAD

# the rare path (router.py: module functions, C calls from the loop)
cdef long O_TTL, O_FRAG_NEEDED, O_LOCAL, O_NO_ROUTE, O_MARTIAN, O_HDR, O_DST_OVERFLOW
cdef long RTN_UNREACHABLE, RTN_PROHIBIT

cdef int _other_path(object run, long cls, Py_ssize_t j, long d, double fin, DstEntry e,
                     bytearray outcome, double[:] t_depart, list txq, double[:] link_free,
                     long long[:] txcap, dict stats, dict mib, dict icmp, dict ping_rtt,
                     double[:] T, double iwire, long long saddr, long rtype) except -1
cdef double _ip_rt_send_redirect(object run, long d, double now, DstEntry e, list txq,
                                 double[:] link_free, long long[:] txcap, dict stats,
                                 dict icmp, double iwire, long long saddr) except? -1.0
cdef bint _icmp_xrlim_allow(object run, object saddr, double now) except -1
cdef bint _ip_error_allow(object run, Py_ssize_t j, DstEntry e, double now) except -1
cdef double _emit_icmp(long dev, double t, double wire, list txq, double[:] link_free,
                       long long[:] txcap, dict stats) except? -1.0
