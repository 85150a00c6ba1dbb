# C types for ledger.py when it is compiled (see setup.py, routelab/accel.py).
cimport cython



@cython.final
cdef class Ledger:
    cdef public double t, svc, total
    cdef public long why
    cdef public bint ok
    cdef public bytearray outcome
    cdef public long born
    cdef list _names
    cdef object _acc
    cdef double[:] acc

    cpdef long slot(self, str name) except -1
    cpdef int charge(self, long k, double seconds) except -1
    cpdef int charge_rest(self, long k, double seconds, double mark) except -1
    cpdef int clear(self) except -1
    cpdef int drop(self, Py_ssize_t j, long reason) except -1
