# C types for queues.py when it is compiled (see setup.py, routelab/accel.py):
# the loop's queues are C classes holding C doubles, and their methods are C
# calls from the compiled loop (core/dev.pxd's TxQueue derives from Ring).
cimport cython


cdef class Ring:
    cdef public object buf
    cdef double[:] v
    cdef public Py_ssize_t mask, head, n

    cpdef double first(self)


@cython.final
cdef class TimeQueue(Ring):
    cpdef int push(self, double x) except -1
    cpdef Py_ssize_t retire(self, double t)


@cython.final
cdef class IntervalLog:
    cdef public object sbuf, dbuf
    cdef double[:] s, d
    cdef public Py_ssize_t cap, n
    cdef public double last_end

    cpdef int add(self, double start, double dur, double end) except -1
