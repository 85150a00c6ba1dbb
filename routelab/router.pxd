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


# the rare path (router.py: module functions, C calls from the loop)
cdef long O_TTL, O_FRAG_NEEDED, O_LOCAL, O_NO_ROUTE, O_MARTIAN, O_HDR
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
