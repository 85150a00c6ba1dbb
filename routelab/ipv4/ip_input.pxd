# C types for ip_input.py when it is compiled (see setup.py, routelab/accel.py):
# local delivery is a C function the dispatcher calls.
from routelab.sim.columns cimport Packets

cdef long _O_LOCAL, _IPPROTO_ICMP, _PING_REQUEST_K, _ECHOREPLY

cpdef int ip_local_deliver(object stack, Packets pk, Py_ssize_t j, long d, double now) except -1
