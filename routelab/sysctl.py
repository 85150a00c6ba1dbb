"""Knob metadata and validation: the one place where ranges live.

Every tunable of the model -- the kernel's own sysctls (``net.ipv4.route.*``,
``net.core.*``) and the scenario parameters (offered load, CPU profile, run
length) -- is described by a :class:`Knob`.  The CLI flags, the notebook
sliders and the validation all come from this metadata, so a range is written
down exactly once.

A bad value raises :class:`routelab.errors.KnobError` naming the knob, the
value and the valid range.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import KnobError

__all__ = ["Knob", "SYSCTLS", "validate", "validate_all", "knob_table", "resolve_sysctl"]


@dataclass(frozen=True, slots=True)
class Knob:
    """Description of one knob.

    Parameters
    ----------
    name : str
        Python/CLI name (``gc_min_interval``; the CLI flag is
        ``--gc-min-interval``).
    default : object
        Default value.  ``None`` means "derived" (e.g. from the kernel
        profile or the RAM size); ``help`` then says from what.
    kind : type
        ``int``, ``float``, ``str`` or ``bool``.
    min, max : float, optional
        Inclusive numeric range.
    unit : str
        Unit shown to users ("s", "packets", "pps", ...).
    help : str
        One sentence on what the knob does.
    procname : str, optional
        The kernel's ``sysctl`` name when the knob is a real sysctl.
    symbol : str, optional
        The kernel variable behind it (``ip_rt_gc_min_interval``).
    choices : tuple, optional
        Allowed values for string knobs.
    step : float, optional
        Suggested slider step.
    """

    name: str
    default: Any
    kind: type
    min: float | None = None
    max: float | None = None
    unit: str = ""
    help: str = ""
    procname: str | None = None
    symbol: str | None = None
    choices: tuple = field(default=())
    step: float | None = None

    def valid_text(self) -> str:
        """Human-readable description of the valid values."""
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind is bool:
            return "true or false"
        if self.kind is str:
            return "a string"
        lo = "-inf" if self.min is None else _fmt(self.min)
        hi = "inf" if self.max is None else _fmt(self.max)
        kind = "an integer" if self.kind is int else "a number"
        unit = f" {self.unit}" if self.unit else ""
        return f"{kind} in [{lo}, {hi}]{unit}"

    def validate(self, value: Any) -> Any:
        """Return ``value`` converted to the knob's type, or raise KnobError."""
        if value is None and self.default is None:
            return None
        # numpy scalars and 0-d arrays (slider values, array elements) count as the
        # Python value they hold, so np.True_ is a bool and np.float32(8.0) an integral
        # number, and error messages show a plain value.
        if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
            value = value.item()
        if self.choices:
            if isinstance(value, str) and value in self.choices:
                return value
            raise KnobError(self.name, value, self.valid_text())
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0",
                                                           "false", "no", "off"):
                return value.lower() in ("1", "true", "yes", "on")
            if isinstance(value, int) and value in (0, 1):
                return bool(value)
            raise KnobError(self.name, value, self.valid_text())
        if self.kind is str:
            # a free-form string knob (no choices): any string, nothing else
            if isinstance(value, str):
                return value
            raise KnobError(self.name, value, self.valid_text())
        if isinstance(value, bool):
            raise KnobError(self.name, value, self.valid_text())
        if isinstance(value, str):
            try:
                value = float(value) if self.kind is float else _parse_int(value)
            except ValueError:
                raise KnobError(self.name, value, self.valid_text()) from None
        if self.kind is int:
            if isinstance(value, float):
                if not value.is_integer():
                    raise KnobError(self.name, value, self.valid_text())
                value = int(value)
            if not isinstance(value, int) and not _is_np_int(value):
                raise KnobError(self.name, value, self.valid_text())
            value = int(value)
        else:
            if not isinstance(value, (int, float)) and not _is_np_number(value):
                raise KnobError(self.name, value, self.valid_text())
            value = float(value)
            if math.isnan(value) or math.isinf(value):
                raise KnobError(self.name, value, self.valid_text())
        if (self.min is not None and value < self.min) or (
            self.max is not None and value > self.max
        ):
            raise KnobError(self.name, value, self.valid_text())
        return value


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _parse_int(text: str) -> int:
    text = text.strip()
    if text.lower().startswith("0x"):
        return int(text, 16)
    f = float(text)
    if not f.is_integer():
        raise ValueError(text)
    return int(f)


def _is_np_int(v: Any) -> bool:
    return type(v).__module__ == "numpy" and "int" in type(v).__name__


def _is_np_number(v: Any) -> bool:
    return type(v).__module__ == "numpy" and (
        "int" in type(v).__name__ or "float" in type(v).__name__
    )


def _k(name: str, default: Any, kind: type, lo=None, hi=None, unit="", help="",
       procname=None, symbol=None, choices=(), step=None) -> Knob:
    return Knob(name, default, kind, lo, hi, unit, help, procname, symbol, tuple(choices), step)


# The kernel's sysctls that the model implements.  ``None`` defaults are
# filled in by the kernel profile (routelab.kernels) or derived from RAM
# (ip_rt_init sizing in routelab.ipv4.route).
SYSCTLS: dict[str, Knob] = {k.name: k for k in [
    _k("rp_filter", 0, int, 0, 2, "",
       "Reverse-path filter: 0 off, 1 strict (drop a packet whose source is not "
       "routed back out of the device it came in on), 2 loose (drop only a source "
       "with no route at all).  Its extra FIB lookups are priced on kernels without "
       "a route cache (3.6); with a cache they are inside the slow path's cost.",
       "net.ipv4.conf.all.rp_filter", "IN_DEV_RPFILTER"),
    _k("netdev_max_backlog", 300, int, 1, 100_000, "packets",
       "Per-CPU netif_rx backlog limit; also the NAPI budget per softirq run.",
       "net.core.netdev_max_backlog", "netdev_max_backlog"),
    _k("gc_thresh", None, int, 1, 4_194_304, "entries",
       "dst_alloc calls the route-cache GC whenever entries exceed this "
       "(default: the number of hash buckets).",
       "net.ipv4.route.gc_thresh", "ipv4_dst_ops.gc_thresh"),
    _k("max_size", None, int, 1, 16_777_216, "entries",
       "Hard limit: at or above it the GC ignores gc_min_interval, and a failed GC "
       "refuses the allocation ('dst cache overflow') (default: 16 x buckets).",
       "net.ipv4.route.max_size", "ip_rt_max_size"),
    _k("gc_min_interval", None, float, 0.0, 60.0, "s",
       "GC calls closer together than this are skipped (gc_ignored) unless the "
       "cache is full (default: 5 s in 2.4.18, 0.5 s in 2.4.22+/2.6). /proc shows it "
       "in whole seconds (proc_dointvec_jiffies), so the 0.5 s default reads 0; "
       "writing 0 sets 0 jiffies (no spacing at all).",
       "net.ipv4.route.gc_min_interval", "ip_rt_gc_min_interval", step=0.05),
    _k("gc_timeout", 300.0, float, 0.01, 86_400.0, "s",
       "Starting value and ceiling of the GC's 'expire' age, and the age at which "
       "rt_check_expire frees idle entries.",
       "net.ipv4.route.gc_timeout", "ip_rt_gc_timeout"),
    _k("gc_interval", 60.0, float, 0.01, 86_400.0, "s",
       "Period of the rt_check_expire timer.",
       "net.ipv4.route.gc_interval", "ip_rt_gc_interval"),
    _k("gc_elasticity", 8, int, 1, 1024, "entries/bucket",
       "Average chain length the GC aims for; longer chains are trimmed on insert "
       "(2.6) and the GC turns aggressive above elasticity x buckets entries.",
       "net.ipv4.route.gc_elasticity", "ip_rt_gc_elasticity"),
    _k("secret_interval", 600.0, float, 0.0, 86_400.0, "s",
       "Period of rt_secret_rebuild: flush the cache and pick a new hash key "
       "(0 disables; absent in 2.4.18).",
       "net.ipv4.route.secret_interval", "ip_rt_secret_interval"),
    _k("rhash_entries", None, int, 1, 4_194_304, "buckets",
       "Route-cache hash buckets (boot parameter rhash_entries=); rounded down to a "
       "power of two.  Default: sized from ram_mb as ip_rt_init does.",
       "rhash_entries (boot)", "rhash_entries"),
    _k("ram_mb", 256, int, 4, 65_536, "MB",
       "Router RAM; ip_rt_init sizes the route-cache hash from it.",
       None, "num_physpages"),
    _k("txqueuelen", 100, int, 0, 100_000, "packets",
       "Output qdisc (pfifo_fast) length per device.",
       "ip link set DEV txqueuelen", "dev->tx_queue_len"),
    _k("rcu_maxbatch", None, int, 0, 1_000_000, "callbacks",
       "RCU callbacks run per tasklet invocation (0 = no limit; default from the "
       "kernel profile: no limit in 2.6.0/2.6.1, 10 in 2.6.11).",
       None, "maxbatch"),
    _k("redirect_number", 9, int, 0, 1000, "redirects",
       "ICMP redirects sent to one host before going silent.",
       "net.ipv4.route.redirect_number", "ip_rt_redirect_number"),
    _k("redirect_load", 0.02, float, 0.0, 10.0, "s",
       "Base spacing of ICMP redirects (doubled per redirect sent).",
       "net.ipv4.route.redirect_load", "ip_rt_redirect_load"),
    _k("redirect_silence", 20.48, float, 0.0, 3600.0, "s",
       "Quiet time after which the redirect count resets.",
       "net.ipv4.route.redirect_silence", "ip_rt_redirect_silence"),
    # --- neighbour table / ARP (net/core/neighbour.c, net/ipv4/arp.c arp_tbl, 2.4.24) ---
    # The table-wide ones (gc_thresh*, gc_interval) exist only under "default".  The
    # per-parms ones are copied into each device's in_dev->arp_parms when the device
    # comes up; the model has one set of parms for every device.
    _k("neigh_gc_thresh1", 128, int, 0, 1_048_576, "entries",
       "Listed in /proc but read by no code in 2.4.24 (kept for completeness).",
       "net.ipv4.neigh.default.gc_thresh1", "arp_tbl.gc_thresh1"),
    _k("neigh_gc_thresh2", 512, int, 0, 1_048_576, "entries",
       "Above it neigh_alloc runs a forced GC if the last one is more than 5 s old.",
       "net.ipv4.neigh.default.gc_thresh2", "arp_tbl.gc_thresh2"),
    _k("neigh_gc_thresh3", 1024, int, 0, 1_048_576, "entries",
       "Above it every neigh_alloc runs a forced GC and fails ('Neighbour table "
       "overflow', ENOBUFS) if that frees nothing: at most gc_thresh3 + 1 entries.",
       "net.ipv4.neigh.default.gc_thresh3", "arp_tbl.gc_thresh3"),
    _k("neigh_gc_interval", 30.0, float, 0.01, 86_400.0, "s",
       "Period of neigh_periodic_timer (/proc in seconds: proc_dointvec_jiffies).",
       "net.ipv4.neigh.default.gc_interval", "arp_tbl.gc_interval", step=1.0),
    _k("neigh_gc_stale_time", 60.0, float, 0.0, 86_400.0, "s",
       "The periodic timer frees an unreferenced entry unused for longer than this.",
       "net.ipv4.neigh.default.gc_stale_time", "neigh_parms.gc_staletime", step=1.0),
    _k("neigh_unres_qlen", 3, int, 1, 100_000, "packets",
       "Packets queued per unresolved neighbour; a new one drops the oldest "
       "(0 is refused: 2.4.24 would unlink the empty queue's head).",
       "net.ipv4.neigh.default.unres_qlen", "neigh_parms.queue_len"),
    _k("neigh_retrans_time", 1.0, float, 0.01, 3600.0, "s",
       "Spacing of ARP solicitations.  /proc shows raw jiffies (proc_dointvec): "
       "100 = 1 s on 2.4 i386 (HZ 100), 1000 on 2.6.",
       "net.ipv4.neigh.default.retrans_time", "neigh_parms.retrans_time", step=0.1),
    _k("neigh_mcast_solicit", 3, int, 0, 255, "probes",
       "Broadcast ARP requests before an entry fails (0 with app_solicit 0: "
       "no resolution at all, packets to new neighbours are dropped).",
       "net.ipv4.neigh.default.mcast_solicit", "neigh_parms.mcast_probes"),
    _k("neigh_ucast_solicit", 3, int, 0, 255, "probes",
       "Unicast ARP requests (to the cached address) when re-validating a stale entry.",
       "net.ipv4.neigh.default.ucast_solicit", "neigh_parms.ucast_probes"),
    _k("neigh_app_solicit", 0, int, 0, 255, "probes",
       "Requests handed to a user-space ARP daemon (CONFIG_ARPD); no frame is sent.",
       "net.ipv4.neigh.default.app_solicit", "neigh_parms.app_probes"),
    _k("neigh_base_reachable_time", 30.0, float, 1.0, 86_400.0, "s",
       "Mean time a confirmed entry stays REACHABLE (drawn in [0.5, 1.5) x this); "
       "/proc in seconds; 0 would divide by zero in neigh_rand_reach_time.",
       "net.ipv4.neigh.default.base_reachable_time", "neigh_parms.base_reachable_time",
       step=1.0),
    _k("neigh_delay_first_probe_time", 5.0, float, 0.0, 86_400.0, "s",
       "A STALE entry that is used waits this long in DELAY before probing.",
       "net.ipv4.neigh.default.delay_first_probe_time", "neigh_parms.delay_probe_time",
       step=1.0),
]}


def validate(knob: Knob | str, value: Any) -> Any:
    """Validate one value against a knob (or a sysctl name)."""
    if isinstance(knob, str):
        if knob not in SYSCTLS:
            raise KnobError(knob, value, "a known sysctl: " + ", ".join(sorted(SYSCTLS)))
        knob = SYSCTLS[knob]
    return knob.validate(value)


def validate_all(specs: Mapping[str, Knob] | Iterable[Knob], given: Mapping[str, Any],
                 *, what: str = "knob") -> dict[str, Any]:
    """Validate a mapping of values against knob specs, filling defaults.

    Unknown names raise KnobError listing the known ones.
    """
    if not isinstance(specs, Mapping):
        specs = {k.name: k for k in specs}
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name not in specs:
            raise KnobError(name, value, f"a known {what}: " + ", ".join(sorted(specs)))
        out[name] = specs[name].validate(value)
    for name, spec in specs.items():
        if name not in out:
            out[name] = spec.default
    return out


def knob_table(specs: Iterable[Knob]) -> str:
    """Plain-text table of knobs (name, default, range, unit, help)."""
    rows = []
    for k in specs:
        default = "derived" if k.default is None else str(k.default)
        rows.append((k.name, default, k.valid_text(), k.help))
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    return "\n".join(f"{a:<{w0}}  {b:<{w1}}  {c}\n{'':<{w0}}  {'':<{w1}}  {d}"
                     for a, b, c, d in rows)


def resolve_sysctl(kernel, given: dict) -> dict:
    """Every sysctl of a router of ``kernel`` (a KernelProfile): the values
    ``given`` (validated; ``None`` = default) and the defaults, with the ones
    that follow from others worked out -- the route hash size from RAM
    (``rt_buckets``), ``gc_thresh`` and ``max_size`` from it, and the kernel's
    own defaults of ``gc_min_interval``, ``rcu_maxbatch`` and
    ``secret_interval``.

    Kernel: net/ipv4/route.c ip_rt_init (2.4.24, 2.6.0)."""
    from .ipv4.route import rt_hash_size
    out = {}
    for name, val in given.items():
        if name not in SYSCTLS:
            raise KnobError(name, val, "a known sysctl: " + ", ".join(sorted(SYSCTLS)))
        out[name] = SYSCTLS[name].validate(val) if val is not None else None
    for name, k in SYSCTLS.items():
        if out.get(name) is None:
            out[name] = k.default
    buckets = rt_hash_size(out["ram_mb"], out["rhash_entries"])
    out["rt_buckets"] = buckets
    if out["gc_thresh"] is None:
        out["gc_thresh"] = buckets
    if out["max_size"] is None:
        out["max_size"] = max(16 * buckets, buckets)
    if out["gc_min_interval"] is None:
        out["gc_min_interval"] = kernel.gc_min_interval
    if out["rcu_maxbatch"] is None:
        out["rcu_maxbatch"] = kernel.rcu_maxbatch
    if given.get("secret_interval") is None:
        out["secret_interval"] = kernel.secret_interval
    return out
