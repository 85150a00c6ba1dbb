# C types for schedule.py when it is compiled (see setup.py, routelab/accel.py):
# the dispatcher reads Schedule.nt / bnt for every packet, so they are C doubles.
cimport cython

cdef double INF


@cython.final
cdef class Schedule:
    cdef public list born, dlv, carry
    cdef public long long seq, delivered
    cdef public double dnt, bnt, rec_next, nt

    cpdef void born_push(self, double t, Py_ssize_t j) except *
    cpdef Py_ssize_t born_pop(self) except -1
    cpdef void deliver_at(self, double t, object host, Py_ssize_t j) except *
    cpdef tuple delivery_pop(self)
    cpdef void set_rec_next(self, double t) except *
