# C types for router.py when it is compiled (see setup.py, routelab/accel.py):
# the route-cache entries the per-packet loop touches are C structs.
from routelab.core.dst cimport DstEntry, DstOps
from routelab.core.rcu cimport Rcu
from routelab.ipv4.route cimport RouteCache
from routelab.core.queues cimport IntervalLog, TimeQueue, TxQueue
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define routelab_prefetch(p) __builtin_prefetch(p)
    #else
    #define routelab_prefetch(p) ((void)0)
    #endif
    """
    void routelab_prefetch(const void *p)


cdef inline Py_ssize_t _chain_find_c(list chain, unsigned long long key, long ik):
    # router._chain_find on borrowed pointers: no reference counting or type
    # test per entry stepped over (every element of a chain is a DstEntry).
    # The entries are scattered in memory: ask for all their keys at once, so
    # the cache misses of a long chain overlap instead of queueing.
    cdef Py_ssize_t k, n = PyList_GET_SIZE(chain)
    cdef PyObject* p
    for k in range(n):
        routelab_prefetch(&(<DstEntry>PyList_GET_ITEM(chain, k)).key)
    for k in range(n):
        p = <PyObject*>PyList_GET_ITEM(chain, k)
        if (<DstEntry>p).key == key and (<DstEntry>p).ik == ik:
            return k
    return -1
