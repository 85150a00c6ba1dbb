# C types for ledger.py when it is compiled (see setup.py, routelab/accel.py).
cimport cython



@cython.final
cdef class Ledger:
    cdef public double t
    cdef public long why
    cdef public bint ok
    cdef public bytearray outcome
    cdef list _names
    cdef object _acc
    cdef double[:] acc

    cpdef long slot(self, str name) except -1
    cpdef void charge(self, long k, double seconds)
    cpdef void drop(self, Py_ssize_t j, long reason)
