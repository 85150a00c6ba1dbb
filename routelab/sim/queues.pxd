# C types for queues.py when it is compiled (see setup.py, routelab/accel.py):
# the loop's queues are C classes holding C doubles, and their methods are C
# calls from the compiled loop.
cimport cython
from routelab.core.dst cimport DstEntry


cdef class _Ring:
    cdef public object buf
    cdef double[:] v
    cdef public Py_ssize_t mask, head, n

    cpdef double first(self)


@cython.final
cdef class TimeQueue(_Ring):
    cpdef int push(self, double x) except -1
    cpdef Py_ssize_t retire(self, double t)


@cython.final
cdef class TxQueue(_Ring):
    cdef public list dst, owner, tag
    cdef public Py_ssize_t owned

    cpdef int push(self, double dep, object e, object owner, long long tag) except -1
    cpdef Py_ssize_t retire(self, double now) except -1


@cython.final
cdef class IntervalLog:
    cdef public object sbuf, dbuf
    cdef double[:] s, d
    cdef public Py_ssize_t cap, n
    cdef public double last_end

    cpdef int add(self, double start, double dur, double end) except -1
