"""The forwarding information base: routes, policy rules, longest-prefix match.

Kernel: net/ipv4/fib_frontend.c, fib_hash.c fn_hash_lookup, fib_rules.c
fib_lookup (2.4, 2.6.11; CONFIG_IP_MULTIPLE_TABLES).

The FIB does not change during a run, so its answer for a packet depends
only on the packet's header.  :meth:`Fib.fib_lookup` therefore works on
whole arrays: the per-packet loop charges the lookup's cost only where the
kernel would actually call it (every packet in kernel 2.0, only on a
route-cache miss otherwise).

Simplifications
---------------
* fn_hash's zones are not modelled as data structures; a lookup's cost is a
  constant plus a constant per policy rule examined.
* Multipath, nexthop dead flags and route metrics are not modelled.

:meth:`Fib.fib_lookup_trie` answers the same question with one
:class:`~routelab.ipv4.fib_trie.FibTrie` per table, as kernels with
``fib_trie.c`` do, and counts the trie nodes each lookup touches (its cost).
Kernel: include/net/ip_fib.h fib_lookup (New-B/Linux3.6 @ 5fb0555c4): with no
custom rules the local, main and default tables are searched in that order
without walking the rule list; with custom rules ``__fib_lookup`` walks them.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np

from ..core.skbuff import ip_to_int
from ..errors import KnobError

__all__ = ["Route", "Rule", "Fib", "RTN", "parse_prefix"]

# Route types (subset of RTN_*).
RTN = {"unicast": 0, "local": 1, "unreachable": 2, "blackhole": 3, "prohibit": 4,
       "broadcast": 5}

TABLE_LOCAL, TABLE_MAIN, TABLE_DEFAULT = 255, 254, 253


def parse_prefix(text: str) -> tuple[int, int]:
    """'10.0.0.0/8' -> (network int, prefix length)."""
    try:
        addr, _, plen = text.partition("/")
        plen_i = int(plen) if plen else 32
        if not 0 <= plen_i <= 32:
            raise ValueError
        net = ip_to_int(addr)
    except ValueError:
        raise KnobError("prefix", text, "an IPv4 prefix such as '10.1.0.0/16'") from None
    mask = (0xFFFFFFFF << (32 - plen_i)) & 0xFFFFFFFF if plen_i else 0
    return net & mask, plen_i


@dataclass(frozen=True, slots=True)
class Route:
    """One route: ``prefix/plen`` via ``oif`` (and ``gateway``) in ``table``."""

    prefix: str
    oif: int = 0
    gateway: str | None = None
    rtype: str = "unicast"
    table: int = TABLE_MAIN


@dataclass(frozen=True, slots=True)
class Rule:
    """A policy-routing rule (``ip rule``): selectors and the table to use.

    ``src``/``dst`` are prefixes, ``tos`` an exact TOS value, ``iif`` an
    interface index; ``None`` matches anything.
    """

    priority: int
    table: int
    src: str | None = None
    dst: str | None = None
    tos: int | None = None
    iif: int | None = None


@dataclass
class Fib:
    """Routes and rules of a router.

    Parameters
    ----------
    routes : list of Route
    rules : list of Rule, optional
        Extra policy rules; the kernel's three default rules (0 local,
        32766 main, 32767 default) are always present.
    local_addrs : list of str
        The router's own addresses (the ``local`` table).
    """

    routes: list = field(default_factory=list)
    rules: list = field(default_factory=list)
    local_addrs: list = field(default_factory=list)

    def __post_init__(self) -> None:
        rules = [Rule(0, TABLE_LOCAL), Rule(32766, TABLE_MAIN), Rule(32767, TABLE_DEFAULT)]
        rules += list(self.rules)
        self._rules = sorted(rules, key=lambda r: r.priority)
        self._tables: dict[int, list] = {}
        self._tries: dict | None = None
        self._trie_bytes = 0
        for a in self.local_addrs:
            self._add(TABLE_LOCAL, ip_to_int(a), 32, RTN["local"], -1, 0)
        for r in self.routes:
            if r.rtype not in RTN:
                raise KnobError("route type", r.rtype, "one of " + ", ".join(RTN))
            if isinstance(r.oif, bool) or not isinstance(r.oif, numbers.Integral) or r.oif < 0:
                raise KnobError(f"route {r.prefix} oif", r.oif,
                                "an output interface index (an integer >= 0)")
            net, plen = parse_prefix(r.prefix)
            gw = ip_to_int(r.gateway) if r.gateway else 0
            self._add(r.table, net, plen, RTN[r.rtype], r.oif, gw)
        for rows in self._tables.values():
            rows.sort(key=lambda row: -row[1])  # longest prefix first

    def _add(self, table, net, plen, rtype, oif, gw) -> None:
        self._tables.setdefault(table, []).append((net, plen, rtype, oif, gw))

    @property
    def n_rules(self) -> int:
        return len(self._rules)

    @property
    def has_custom_rules(self) -> bool:
        """Rules beyond the three defaults (3.6 ``fib_has_custom_rules``)."""
        return len(self._rules) > 3

    def tries(self) -> dict:
        """One :class:`FibTrie` per table (built on first use, then kept):
        ``{table: (trie, flat, (rtype, oif, gw) arrays by value id)}``.

        Each leaf prefix's value is the row ``(net, plen, rtype, oif, gw)``.
        """
        if self._tries is None:
            from .fib_trie import FibTrie, FlatTrie
            self._tries = {}
            for table, rows in self._tables.items():
                trie = FibTrie()
                # shortest first: the order routes are usually added in, which
                # decides how the trie's nodes were resized along the way
                for row in sorted(rows, key=lambda row: (row[1], row[0])):
                    trie.insert(row[0], row[1], row)
                flat = FlatTrie(trie)
                rows = flat.values
                arrays = (np.array([r[2] for r in rows], dtype=np.int8),
                          np.array([r[3] for r in rows], dtype=np.int16),
                          np.array([r[4] for r in rows], dtype=np.uint32))
                self._tries[table] = (trie, flat, arrays)
            self._trie_bytes = sum(t.stats().bytes for t, _f, _a in self._tries.values())
        return self._tries

    @property
    def trie_bytes(self) -> int:
        """Bytes of all the tables' tries (``TrieStats.bytes``), for the cache model."""
        self.tries()
        return self._trie_bytes

    def fib_lookup_trie(self, daddr, saddr, tos, iif):
        """:meth:`fib_lookup` on tries: the same routes, plus what the walk cost.

        Returns ``(rtype, oif, gw, rules_examined, tables, nodes)``: the last
        two are the tables searched and the trie nodes touched in all (tnodes
        indexed plus leaves checked, :class:`~routelab.ipv4.fib_trie.LookupTrace`).
        Without custom rules ``rules_examined`` is 0: 3.6 does not walk them.
        """
        daddr = np.asarray(daddr, dtype=np.uint32)
        saddr = np.asarray(saddr, dtype=np.uint32)
        tos = np.asarray(tos, dtype=np.uint8)
        iif = np.asarray(iif)
        n = daddr.shape[0]
        tries = self.tries()
        rtype = np.full(n, RTN["unreachable"], dtype=np.int8)
        oif = np.full(n, -1, dtype=np.int16)
        gw = np.zeros(n, dtype=np.uint32)
        examined = np.zeros(n, dtype=np.int16)
        tables = np.zeros(n, dtype=np.int16)
        nodes = np.zeros(n, dtype=np.int64)
        pending = np.ones(n, dtype=bool)
        custom = self.has_custom_rules
        for rule in self._rules:
            if not pending.any():
                break
            sel = pending.copy()
            if custom:
                examined += sel
            _select(rule, sel, saddr, daddr, tos, iif)
            if not sel.any() or rule.table not in tries:
                continue
            # the FIB is static: equal addresses walk alike, so walk each once
            idx = np.flatnonzero(sel)
            uniq, inv = np.unique(daddr[idx], return_inverse=True)
            _trie, flat, (rt_v, oif_v, gw_v) = tries[rule.table]
            vid, _plen, tn, lv, _bt = flat.lookup_many(uniq)
            tables[idx] += 1
            nodes[idx] += (tn + lv)[inv]
            got = vid[inv] >= 0
            hit = idx[got]
            v = vid[inv][got]
            rtype[hit] = rt_v[v]
            oif[hit] = oif_v[v]
            gw[hit] = gw_v[v]
            pending[hit] = False
        return rtype, oif, gw, examined, tables, nodes

    def fib_lookup(self, daddr, saddr, tos, iif):
        """Resolve a route for each packet (vectorised).

        Kernel: net/ipv4/fib_rules.c fib_lookup -> fn_hash_lookup.

        Returns
        -------
        rtype : int8 array   RTN code; ``unreachable`` when nothing matched
        oif : int16 array    output interface (-1 for local/unreachable)
        gw : uint32 array    gateway (0 = on-link)
        rules_examined : int16 array  policy rules the lookup walked
        """
        daddr = np.asarray(daddr, dtype=np.uint32)
        saddr = np.asarray(saddr, dtype=np.uint32)
        tos = np.asarray(tos, dtype=np.uint8)
        iif = np.asarray(iif)
        n = daddr.shape[0]
        # which route each packet took: an index into the rows below, -1 for
        # none (the last row: unreachable)
        # (intp: the gathers at the end index with it directly, no conversion)
        choice = np.full(n, -1, dtype=np.intp)
        rows_rt, rows_oif, rows_gw = [], [], []
        examined = np.zeros(n, dtype=np.int16)
        pending = np.ones(n, dtype=bool)
        for rule in self._rules:
            if not pending.any():
                break
            sel = pending.copy()
            examined += sel
            _select(rule, sel, saddr, daddr, tos, iif)
            if not sel.any():
                continue
            # longest prefix first: each packet takes the first route it matches
            rest = sel.copy()     # selected, and no route yet
            for net, plen, rt, o, g in self._tables.get(rule.table, []):
                hit = _match(daddr, net, plen) if plen else rest.copy()
                hit &= rest
                if hit.any():
                    np.copyto(choice, len(rows_rt), where=hit)
                    rows_rt.append(rt)
                    rows_oif.append(o)
                    rows_gw.append(g)
                    rest ^= hit   # (hit is a subset of rest)
            pending &= ~sel | rest  # (found = sel and not rest)
        rtype = np.array(rows_rt + [RTN["unreachable"]], dtype=np.int8)[choice]
        oif = np.array(rows_oif + [-1], dtype=np.int16)[choice]
        gw = np.array(rows_gw + [0], dtype=np.uint32)[choice]
        return rtype, oif, gw, examined


def _select(rule, sel: np.ndarray, saddr, daddr, tos, iif) -> None:
    """Narrow ``sel`` (in place) to the packets ``rule``'s selectors match."""
    if rule.src is not None:
        net, plen = parse_prefix(rule.src)
        sel &= _match(saddr, net, plen)
    if rule.dst is not None:
        net, plen = parse_prefix(rule.dst)
        sel &= _match(daddr, net, plen)
    if rule.tos is not None:
        sel &= tos == rule.tos
    if rule.iif is not None:
        sel &= iif == rule.iif


def _match(addr: np.ndarray, net: int, plen: int) -> np.ndarray:
    if plen == 0:
        return np.ones(addr.shape[0], dtype=bool)
    mask = np.uint32((0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF)
    return (addr & mask) == np.uint32(net)
