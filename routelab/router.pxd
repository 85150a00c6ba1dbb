# C types for router.py when it is compiled (see setup.py, routelab/accel.py):
# the route-cache entries the per-packet loop touches are C structs.
from routelab.core.dst cimport DstEntry, DstOps
from routelab.core.rcu cimport Rcu
from routelab.ipv4.route cimport RouteCache
from routelab.core.queues cimport IntervalLog, TimeQueue, TxQueue
