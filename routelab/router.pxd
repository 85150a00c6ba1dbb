# C types for router.py when it is compiled (see setup.py, routelab/accel.py):
# the route-cache entries the per-packet loop touches are C structs.
from routelab.core.dst cimport DstEntry, DstOps
from routelab.core.rcu cimport Rcu
from routelab.ipv4.route cimport RouteCache
from routelab.core.queues cimport IntervalLog, TimeQueue, TxQueue
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject


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
