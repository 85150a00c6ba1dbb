"""fib_trie: the level-compressed trie that holds the FIB from 2.6.13 on.

Kernel: net/ipv4/fib_trie.c (New-B/Linux3.6 @ 5fb0555c4, Linux 3.6.0):
``fib_insert_node``, ``trie_rebalance``, ``resize``, ``inflate``, ``halve``,
``fib_table_lookup``, ``check_leaf``, ``trie_leaf_remove``,
``trie_collect_stats`` / ``trie_show_stats`` (``/proc/net/fib_triestat``).
The trie is Nilsson and Karlsson's LC-trie with Nilsson and Tikkanen's
dynamic resizing ("Implementing a dynamic compressed trie").

What the structure is
---------------------
Keys are 32-bit IPv4 addresses read from the most significant bit (bit 0).
There are two kinds of node:

* a **leaf** holds one key and the list of prefixes (``leaf_info``) that
  share it: ``10.0.0.0/8`` and ``10.0.0.0/16`` are one leaf with two
  entries, kept longest first;
* a **tnode** (internal node) indexes its ``2**bits`` children with the
  ``bits`` key bits starting at bit ``pos``.  The key bits between the
  parent's last indexed bit and ``pos`` are *skipped* (path compression):
  every key below the tnode agrees on them.

A child that is a tnode with no skipped bits below its parent is *full*;
each tnode counts its full and its empty children, and ``resize`` uses
those counts after every insertion or removal on the path to the root:

* it **inflates** (doubles the child array, one more bit) while the doubled
  node would be at least 50 % non-empty -- a full child counts twice, since
  inflating splits it -- (30 % at the root, which the source keeps larger),
  at most ``MAX_WORK`` = 10 times and only if some child is full;
* otherwise it **halves** while fewer than 25 % of the children are
  non-empty (15 % at the root), also at most 10 times;
* a tnode left with one child is replaced by that child, one with none is
  removed.

A lookup walks down from the root taking ``bits`` bits of the address at
each tnode; at a leaf it checks the leaf's prefixes against the address.
When the walk meets an empty slot, a leaf none of whose prefixes match, or a
tnode whose skipped bits rule out every prefix below it, it *backtracks*:
it clears the lowest set bit of the index it took in the current tnode
(children whose index has trailing zeros are the shorter prefixes that
still cover the address) and tries again, climbing to the parent once the
index has no set bits left.  What the lookup costs is the tnodes and leaves
it touches; :meth:`FibTrie.lookup` counts them.

Simplifications
---------------
* One value per prefix: the ``fib_alias`` list (TOS, scope, several
  aliases per prefix) is a single route object; ``check_leaf`` takes the
  first prefix of the leaf that covers the address.  Routes whose type is an
  error (unreachable, prohibit) are returned like any other; the caller
  treats them.
* No RCU: the source frees replaced tnodes after a grace period
  (``tnode_free_safe``/``tnode_free_flush``); here they are just dropped.
* No allocation failure: ``inflate``/``halve`` cannot fail (the source gives
  up and keeps the old node, counting ``resize_node_skipped``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["FibTrie", "Leaf", "TNode", "LookupTrace", "TrieStats", "KEYLENGTH",
           "INFLATE_THRESHOLD", "HALVE_THRESHOLD", "INFLATE_THRESHOLD_ROOT",
           "HALVE_THRESHOLD_ROOT", "MAX_WORK"]

#: Bits in a key (an IPv4 address).
KEYLENGTH = 32
_ALL = 0xFFFFFFFF

#: resize()'s fill thresholds in per cent (3.6 fib_trie.c): inflate while the
#: doubled node would be this full, halve while the node is less full than
#: this; the root uses the ``_ROOT`` pair.
INFLATE_THRESHOLD = 50
HALVE_THRESHOLD = 25
INFLATE_THRESHOLD_ROOT = 30
HALVE_THRESHOLD_ROOT = 15
#: At most this many inflates (then halvings) per resize() call.
MAX_WORK = 10

#: Sizes on x86-64 for /proc/net/fib_triestat ("size of leaf", "size of
#: tnode" and the bytes estimate): struct leaf = parent, key, hlist head,
#: rcu_head; struct leaf_info = hlist node, plen, mask, list head, rcu_head;
#: struct tnode = parent, key, pos, bits, two counters, a union of rcu_head /
#: work_struct / pointer.  Counted from the 3.6 struct definitions with LP64
#: sizes and alignment (ASSUMED: no debug options that grow rcu_head or
#: work_struct).
SIZEOF_LEAF = 40
SIZEOF_LEAF_INFO = 48
SIZEOF_TNODE = 64
SIZEOF_POINTER = 8
#: trie_collect_stats counts node sizes below this many bits.
MAX_STAT_DEPTH = 32


def bits_at(key: int, offset: int, nbits: int) -> int:
    """The ``nbits`` bits of ``key`` starting at bit ``offset`` (bit 0 = MSB).

    Past the end of the key the answer is 0, as ``tkey_extract_bits`` gives.
    """
    if offset >= KEYLENGTH or nbits == 0:
        return 0
    return ((key << offset) & _ALL) >> (KEYLENGTH - nbits)


def prefix_of(key: int, length: int) -> int:
    """``key`` with all but its first ``length`` bits cleared (``mask_pfx``)."""
    if length <= 0:
        return 0
    return (key >> (KEYLENGTH - length)) << (KEYLENGTH - length)


def mask_of(plen: int) -> int:
    """The netmask of a prefix length, as an integer."""
    return prefix_of(_ALL, plen)


def first_difference(a: int, b: int, start: int) -> int:
    """Index of the first bit at or after ``start`` where ``a`` and ``b`` differ.

    The keys are known to agree before ``start``.  Equal keys give 0 (as
    ``tkey_mismatch`` does; its callers never pass equal keys).
    """
    diff = (a ^ b) & _ALL
    if not diff:
        return 0
    return max(start, KEYLENGTH - diff.bit_length())


class Leaf:
    """A key and the prefixes that share it, longest first."""

    __slots__ = ("key", "parent", "infos")

    def __init__(self, key: int) -> None:
        self.key = key
        self.parent: TNode | None = None
        #: [plen, mask, value] lists, plen descending (insert_leaf_info).
        self.infos: list[list] = []

    def add(self, plen: int, value) -> bool:
        """Insert or replace the prefix of length ``plen``; True if it is new."""
        for info in self.infos:
            if info[0] == plen:
                info[2] = value
                return False
        where = len(self.infos)
        for i, info in enumerate(self.infos):
            if plen > info[0]:
                where = i
                break
        self.infos.insert(where, [plen, mask_of(plen), value])
        return True

    def match(self, key: int):
        """``check_leaf``: the longest of this leaf's prefixes covering ``key``."""
        for plen, mask, value in self.infos:
            if self.key == key & mask:
                return plen, value
        return None

    def __repr__(self) -> str:
        return f"Leaf({_dotted(self.key)}, {[i[0] for i in self.infos]})"


class TNode:
    """An internal node: ``2**bits`` children indexed by key bits ``pos``...``pos+bits-1``."""

    __slots__ = ("key", "pos", "bits", "full_children", "empty_children", "child", "parent")

    def __init__(self, key: int, pos: int, nbits: int) -> None:
        self.key = key
        self.pos = pos
        self.bits = nbits
        self.full_children = 0
        self.empty_children = 1 << nbits
        self.child: list[Leaf | TNode | None] = [None] * (1 << nbits)
        self.parent: TNode | None = None

    def __repr__(self) -> str:
        return (f"TNode({_dotted(self.key)}, pos={self.pos}, bits={self.bits}, "
                f"full={self.full_children}, empty={self.empty_children})")


def _dotted(key: int) -> str:
    return ".".join(str((key >> s) & 255) for s in (24, 16, 8, 0))


def _is_full(tn: TNode, n) -> bool:
    """A child is full when it is a tnode with no skipped bits below ``tn``."""
    return isinstance(n, TNode) and n.pos == tn.pos + tn.bits


def _put_child(tn: TNode, i: int, n, wasfull: bool | None = None) -> None:
    """Set child ``i`` of ``tn`` and keep the empty and full counts right."""
    old = tn.child[i]
    if n is None and old is not None:
        tn.empty_children += 1
    elif n is not None and old is None:
        tn.empty_children -= 1
    if wasfull is None:
        wasfull = _is_full(tn, old)
    isfull = _is_full(tn, n)
    if wasfull and not isfull:
        tn.full_children -= 1
    elif isfull and not wasfull:
        tn.full_children += 1
    if n is not None:
        n.parent = tn
    tn.child[i] = n


@dataclass(frozen=True, slots=True)
class LookupTrace:
    """What one lookup touched: the cost model's inputs."""

    #: tnodes whose child array the walk indexed (each revisit counts).
    tnodes: int
    #: leaves whose prefix list was checked.
    leaves: int
    #: times the walk climbed back to a parent (``backtrack`` in the stats).
    backtracks: int
    #: empty child slots met (``null_node_hit``).
    null_hits: int

    @property
    def nodes(self) -> int:
        """Nodes touched in all: what a lookup's cost scales with."""
        return self.tnodes + self.leaves


@dataclass(frozen=True, slots=True)
class TrieStats:
    """``trie_collect_stats``: the figures /proc/net/fib_triestat prints."""

    leaves: int
    prefixes: int
    tnodes: int
    total_depth: int
    max_depth: int
    null_pointers: int
    node_sizes: tuple[int, ...]

    @property
    def mean_depth(self) -> float:
        """Mean number of tnodes above a leaf ("Aver depth")."""
        return self.total_depth / self.leaves if self.leaves else 0.0

    @property
    def pointers(self) -> int:
        return sum((1 << b) * c for b, c in enumerate(self.node_sizes) if b)

    @property
    def bytes(self) -> int:
        return (SIZEOF_LEAF * self.leaves + SIZEOF_LEAF_INFO * self.prefixes
                + SIZEOF_TNODE * self.tnodes + SIZEOF_POINTER * self.pointers)

    def proc(self, table: str = "Main") -> str:
        """The table's block of ``/proc/net/fib_triestat`` in 3.6's format."""
        avdepth = self.total_depth * 100 // self.leaves if self.leaves else 0
        top = len(self.node_sizes)
        while top > 0 and self.node_sizes[top - 1] == 0:
            top -= 1
        sizes = "".join(f"  {b}: {self.node_sizes[b]}" for b in range(1, top)
                        if self.node_sizes[b])
        return (f"{table}:\n"
                f"\tAver depth:     {avdepth // 100}.{avdepth % 100:02d}\n"
                f"\tMax depth:      {self.max_depth}\n"
                f"\tLeaves:         {self.leaves}\n"
                f"\tPrefixes:       {self.prefixes}\n"
                f"\tInternal nodes: {self.tnodes}\n\t{sizes}\n"
                f"\tPointers: {self.pointers}\n"
                f"Null ptrs: {self.null_pointers}\n"
                f"Total size: {(self.bytes + 1023) // 1024}  kB\n")


class FibTrie:
    """One FIB table as an LC-trie (3.6 ``struct trie``).

    >>> t = FibTrie()
    >>> t.insert(0x0A000000, 8, "ten")
    >>> t.lookup(0x0A010203)[0]
    'ten'
    """

    def __init__(self, routes: Iterable[tuple[int, int, object]] = ()) -> None:
        self.root: Leaf | TNode | None = None
        #: inflate / halve calls so far (the cost of building the table).
        self.inflates = 0
        self.halvings = 0
        for net, plen, value in routes:
            self.insert(net, plen, value)

    # -- updates ---------------------------------------------------------
    def insert(self, net: int, plen: int, value) -> None:
        """Add (or replace) the route ``net/plen`` (``fib_insert_node``)."""
        if not 0 <= plen <= KEYLENGTH:
            raise ValueError(f"prefix length {plen} outside 0..32")
        key = net & mask_of(plen)
        parent: TNode | None = None
        pos = 0
        n = self.root
        # Walk down while the tnodes' skipped bits agree with the key.
        while isinstance(n, TNode):
            if bits_at(n.key ^ key, pos, n.pos - pos):
                break
            parent = n
            pos = n.pos + n.bits
            n = n.child[bits_at(key, n.pos, n.bits)]
        if isinstance(n, Leaf) and n.key == key:
            n.add(plen, value)          # another prefix of an existing key
            return
        leaf = Leaf(key)
        leaf.add(plen, value)
        if self.root is not None and n is None:
            # An empty slot: the leaf just goes there.
            _put_child(parent, bits_at(key, parent.pos, parent.bits), leaf)
        else:
            # A leaf or tnode with another key (or an empty trie): a new
            # binary tnode at the first bit where the two keys part.
            pos = parent.pos + parent.bits if parent is not None else 0
            if n is not None:
                tn = TNode(n.key, first_difference(key, n.key, pos), 1)
            else:
                tn = TNode(key, 0, 1)
            tn.parent = parent
            side = bits_at(key, tn.pos, 1)
            _put_child(tn, side, leaf)
            _put_child(tn, 1 - side, n)
            if parent is not None:
                _put_child(parent, bits_at(key, parent.pos, parent.bits), tn)
            else:
                self.root = tn
                parent = tn
        self._rebalance(parent)

    def remove(self, net: int, plen: int) -> bool:
        """Delete the route ``net/plen``; False if it was not there.

        ``fib_table_delete`` drops the prefix from its leaf; a leaf left with
        no prefixes goes (``trie_leaf_remove``) and the path is rebalanced.
        """
        key = net & mask_of(plen)
        leaf = self._find(key)
        if leaf is None:
            return False
        before = len(leaf.infos)
        leaf.infos = [i for i in leaf.infos if i[0] != plen]
        if len(leaf.infos) == before:
            return False
        if not leaf.infos:
            parent = leaf.parent
            if parent is None:
                self.root = None
            else:
                _put_child(parent, bits_at(leaf.key, parent.pos, parent.bits), None)
                self._rebalance(parent)
        return True

    def _find(self, key: int) -> Leaf | None:
        """``fib_find_node``: the leaf holding exactly ``key``."""
        pos = 0
        n = self.root
        while isinstance(n, TNode):
            if bits_at(n.key ^ key, pos, n.pos - pos):
                return None
            pos = n.pos + n.bits
            n = n.child[bits_at(key, n.pos, n.bits)]
        return n if isinstance(n, Leaf) and n.key == key else None

    def _rebalance(self, tn: TNode | None) -> None:
        """``trie_rebalance``: resize every tnode from ``tn`` up to the root."""
        if tn is None:
            return
        key = tn.key
        node: Leaf | TNode | None = tn
        while tn is not None and tn.parent is not None:
            up = tn.parent
            slot = bits_at(key, up.pos, up.bits)
            wasfull = _is_full(up, up.child[slot])
            node = self._resize(tn)
            _put_child(up, slot, node, wasfull)
            tn = up
            node = up
        if isinstance(node, TNode):
            node = self._resize(node)
        self.root = node
        if node is not None:
            node.parent = None

    def _resize(self, tn: TNode):
        """``resize``: inflate, else halve, then collapse a one-child node."""
        size = 1 << tn.bits
        if tn.empty_children == size:
            return None
        if tn.empty_children != size - 1:
            if tn.parent is None:
                inflate_at, halve_at = INFLATE_THRESHOLD_ROOT, HALVE_THRESHOLD_ROOT
            else:
                inflate_at, halve_at = INFLATE_THRESHOLD, HALVE_THRESHOLD
            # Inflate while the doubled node would be full enough.  The work
            # budget is spent by every test that gets past "some child is
            # full", as in the source, and any spending skips the halving.
            budget = MAX_WORK
            while tn.full_children > 0 and budget > 0:
                budget -= 1
                size = 1 << tn.bits
                if 50 * (tn.full_children + size - tn.empty_children) < inflate_at * size:
                    break
                tn = self._inflate(tn)
            if budget != MAX_WORK:
                return tn
            budget = MAX_WORK
            while tn.bits > 1 and budget > 0:
                budget -= 1
                size = 1 << tn.bits
                if 100 * (size - tn.empty_children) >= halve_at * size:
                    break
                tn = self._halve(tn)
            if tn.empty_children != (1 << tn.bits) - 1:
                return tn
        for n in tn.child:
            if n is not None:
                n.parent = None
                return n
        return None  # pragma: no cover - counted above

    def _inflate(self, old: TNode) -> TNode:
        """``inflate``: one more index bit; full children are split in two."""
        self.inflates += 1
        new = TNode(old.key, old.pos, old.bits + 1)
        new.parent = old.parent
        below = old.pos + old.bits
        # First make the halves of every full child wider than one bit.
        for i, n in enumerate(old.child):
            if isinstance(n, TNode) and n.pos == below and n.bits > 1:
                bit = 1 << (KEYLENGTH - 1 - n.pos)
                _put_child(new, 2 * i, TNode(n.key & ~bit & _ALL, n.pos + 1, n.bits - 1))
                _put_child(new, 2 * i + 1, TNode(n.key | bit, n.pos + 1, n.bits - 1))
        for i, n in enumerate(old.child):
            if n is None:
                continue
            if isinstance(n, Leaf) or n.pos > below:
                # A leaf, or a tnode that still skips bits: the next key bit
                # says which of the two new slots it lands in.
                _put_child(new, 2 * i + bits_at(n.key, below, 1), n)
                continue
            if n.bits == 1:
                # A full binary child dissolves into the two new slots.
                _put_child(new, 2 * i, n.child[0])
                _put_child(new, 2 * i + 1, n.child[1])
                continue
            # A wider full child: its children go to the two halves made above.
            left, right = new.child[2 * i], new.child[2 * i + 1]
            _put_child(new, 2 * i, None)
            _put_child(new, 2 * i + 1, None)
            half = 1 << left.bits
            for j in range(half):
                _put_child(left, j, n.child[j])
                _put_child(right, j, n.child[j + half])
            _put_child(new, 2 * i, self._resize(left))
            _put_child(new, 2 * i + 1, self._resize(right))
        return new

    def _halve(self, old: TNode) -> TNode:
        """``halve``: one index bit less; slot pairs that both hold a node
        are joined under a new binary tnode."""
        self.halvings += 1
        new = TNode(old.key, old.pos, old.bits - 1)
        new.parent = old.parent
        for i in range(0, 1 << old.bits, 2):
            left, right = old.child[i], old.child[i + 1]
            if left is None and right is None:
                continue
            if right is None or left is None:
                _put_child(new, i // 2, left if right is None else right)
                continue
            pair = TNode(left.key, new.pos + new.bits, 1)
            _put_child(pair, 0, left)
            _put_child(pair, 1, right)
            _put_child(new, i // 2, self._resize(pair))
        return new

    # -- lookup ----------------------------------------------------------
    def lookup(self, addr: int, path: list | None = None):
        """Longest-prefix match of ``addr`` (``fib_table_lookup``).

        Returns ``(value, plen, trace)``; ``value`` is None when no prefix
        covers the address.  ``path``, if given, receives every node the walk
        touches, in order (a tnode each time its child array is indexed, a
        leaf when its prefixes are checked): what notebook 05 draws.
        """
        tnodes = leaves = backtracks = null_hits = 0
        n = self.root
        if n is None:
            return None, -1, LookupTrace(0, 0, 0, 0)
        if isinstance(n, Leaf):
            if path is not None:
                path.append(n)
            hit = n.match(addr)
            return ((hit[1], hit[0]) if hit else (None, -1)) + (LookupTrace(0, 1, 0, 0),)
        node: TNode = n
        # ``upto``: how many leading address bits can still belong to a
        # matching prefix; it shrinks as the walk backtracks past set bits.
        upto = KEYLENGTH
        index = bits_at(prefix_of(addr, upto), node.pos, node.bits)
        chopped = 0
        while True:
            tnodes += 1
            child = node.child[index]
            if path is not None:
                path.append(node)
                if isinstance(child, Leaf):
                    path.append(child)
            ok = False
            if child is None:
                null_hits += 1
            elif isinstance(child, Leaf):
                leaves += 1
                hit = child.match(addr)
                if hit is not None:
                    return hit[1], hit[0], LookupTrace(tnodes, leaves, backtracks, null_hits)
            else:
                ok = self._may_descend(child, node, addr, upto)
                if ok is not False:
                    upto = ok
                    node = child
                    chopped = 0
                    index = bits_at(prefix_of(addr, upto), node.pos, node.bits)
                    continue
            # Backtrack: drop the lowest set bit still in the index (zero
            # bits change nothing); when none is left, climb to the parent
            # and do the same with the index this node has there.
            while True:
                chopped += 1
                while chopped <= node.bits and not index & (1 << (chopped - 1)):
                    chopped += 1
                upto = min(upto, node.pos + node.bits - chopped)
                if chopped <= node.bits:
                    index &= ~(1 << (chopped - 1))
                    break
                up = node.parent
                if up is None:
                    return None, -1, LookupTrace(tnodes, leaves, backtracks, null_hits)
                index = bits_at(node.key, up.pos, up.bits)
                node = up
                chopped = 0
                backtracks += 1

    @staticmethod
    def _may_descend(cn: TNode, pn: TNode, addr: int, upto: int):
        """Can a prefix that covers ``addr`` lie below tnode ``cn``?

        Returns the new ``upto`` if so, False if not.  Below ``cn`` every key
        shares ``cn``'s bits up to ``cn.pos``: once the walk is matching a
        shorter prefix (``upto`` short of ``pn``'s bits), those bits past
        ``upto`` must be zero; and where they differ from the address, only
        a prefix ending before the first difference can match, so the bits
        from there to ``cn.pos`` must be zero too.
        """
        if upto < pn.pos + pn.bits:
            if bits_at(cn.key, upto, cn.pos - upto) or cn.child[0] is None:
                return False
        differs = prefix_of(cn.key ^ addr, cn.pos)
        if differs:
            first = KEYLENGTH - differs.bit_length()
            if bits_at(cn.key, first, cn.pos - first):
                return False
            if upto >= cn.pos:
                upto = first
        return upto

    # -- reading ---------------------------------------------------------
    def stats(self) -> TrieStats:
        """``trie_collect_stats``: leaves, prefixes, tnodes, depths, sizes."""
        leaves = prefixes = tnodes = total = deepest = nulls = 0
        sizes = [0] * MAX_STAT_DEPTH
        stack: list[tuple[Leaf | TNode, int]] = [(self.root, 0)] if self.root else []
        while stack:
            n, depth = stack.pop()
            if isinstance(n, Leaf):
                leaves += 1
                prefixes += len(n.infos)
                total += depth
                deepest = max(deepest, depth)
                continue
            tnodes += 1
            if n.bits < MAX_STAT_DEPTH:
                sizes[n.bits] += 1
            for c in n.child:
                if c is None:
                    nulls += 1
                else:
                    stack.append((c, depth + 1))
        return TrieStats(leaves, prefixes, tnodes, total, deepest, nulls, tuple(sizes))

    def check(self) -> None:
        """Raise AssertionError unless every tnode's counts and links are right.

        (The source's ``check_tnode`` checks less; this is for the tests.)
        """
        def walk(n, parent, pos):
            assert n.parent is parent, f"{n!r}: parent link"
            if isinstance(n, Leaf):
                assert n.infos, f"{n!r}: a leaf with no prefixes"
                return
            assert n.pos >= pos and n.pos + n.bits <= KEYLENGTH, f"{n!r}: position"
            assert n.empty_children == sum(c is None for c in n.child), f"{n!r}: empty count"
            assert n.full_children == sum(_is_full(n, c) for c in n.child), f"{n!r}: full count"
            for i, c in enumerate(n.child):
                if c is not None:
                    assert bits_at(c.key, n.pos, n.bits) == i, f"{c!r} in slot {i} of {n!r}"
                    assert not bits_at(c.key ^ n.key, pos, n.pos - pos), f"{c!r}: skipped bits"
                    walk(c, n, n.pos + n.bits)
        if self.root is not None:
            walk(self.root, None, 0)


class FlatTrie:
    """A :class:`FibTrie` frozen into arrays, for looking up many addresses.

    The FIB does not change during a run, so the per-packet lookups of a
    whole trace can be done at once: :meth:`lookup_many` walks every address
    down (and back up) the same nodes, in the same order, as
    :meth:`FibTrie.lookup` does, one step per iteration for all addresses
    still walking, and returns the same answers and the same counts (a test
    checks both against the scalar walk).

    ``values`` lists the route objects; lookups return indices into it
    (-1: no route).
    """

    def __init__(self, trie: FibTrie) -> None:
        import numpy as np

        nodes: list = []
        ids: dict[int, int] = {}
        stack = [trie.root] if trie.root is not None else []
        while stack:
            n = stack.pop()
            ids[id(n)] = len(nodes)
            nodes.append(n)
            if isinstance(n, TNode):
                stack.extend(c for c in reversed(n.child) if c is not None)
        count = len(nodes)
        self.is_leaf = np.zeros(count, dtype=bool)
        self.key = np.zeros(count, dtype=np.int64)
        self.pos = np.zeros(count, dtype=np.int64)
        self.bits = np.zeros(count, dtype=np.int64)
        self.parent = np.full(count, -1, dtype=np.int64)
        self.slot = np.zeros(count, dtype=np.int64)      # index in the parent
        self.child_base = np.zeros(count, dtype=np.int64)
        self.info_base = np.zeros(count, dtype=np.int64)
        self.info_count = np.zeros(count, dtype=np.int64)
        children: list[int] = []
        info_mask: list[int] = []
        info_plen: list[int] = []
        info_value: list[int] = []
        self.values: list = []
        value_ids: dict[int, int] = {}
        for i, n in enumerate(nodes):
            self.key[i] = n.key
            if n.parent is not None:
                self.parent[i] = ids[id(n.parent)]
                self.slot[i] = bits_at(n.key, n.parent.pos, n.parent.bits)
            if isinstance(n, Leaf):
                self.is_leaf[i] = True
                self.info_base[i] = len(info_mask)
                self.info_count[i] = len(n.infos)
                for plen, mask, value in n.infos:
                    if id(value) not in value_ids:
                        value_ids[id(value)] = len(self.values)
                        self.values.append(value)
                    info_mask.append(mask)
                    info_plen.append(plen)
                    info_value.append(value_ids[id(value)])
            else:
                self.pos[i] = n.pos
                self.bits[i] = n.bits
                self.child_base[i] = len(children)
                children.extend(ids[id(c)] if c is not None else -1 for c in n.child)
        self.children = np.array(children, dtype=np.int64)
        self.info_mask = np.array(info_mask, dtype=np.int64)
        self.info_plen = np.array(info_plen, dtype=np.int64)
        self.info_value = np.array(info_value, dtype=np.int64)
        self.max_infos = int(self.info_count.max()) if count else 0
        self.empty = count == 0

    # vectorised helpers (int64 arrays holding 32-bit keys)
    @staticmethod
    def _bits_at(np, key, offset, nbits):
        off = np.minimum(offset, KEYLENGTH)
        nb = np.maximum(nbits, 0)
        val = ((key << off) & _ALL) >> (KEYLENGTH - nb)
        return np.where((offset >= KEYLENGTH) | (nb == 0), 0, val)

    @staticmethod
    def _prefix_of(np, key, length):
        ln = np.clip(length, 0, KEYLENGTH)
        return np.where(ln <= 0, 0, (key >> (KEYLENGTH - ln)) << (KEYLENGTH - ln))

    def _leaf_match(self, np, leaf, addr):
        """First prefix of each leaf covering its address: (value id, plen), -1 if none."""
        value = np.full(leaf.shape[0], -1, dtype=np.int64)
        plen = np.full(leaf.shape[0], -1, dtype=np.int64)
        base = self.info_base[leaf]
        cnt = self.info_count[leaf]
        lkey = self.key[leaf]
        for k in range(self.max_infos):
            open_ = (value < 0) & (k < cnt)
            if not open_.any():
                break
            j = np.where(open_, base + k, 0)
            hit = open_ & (lkey == (addr & self.info_mask[j]))
            value = np.where(hit, self.info_value[j], value)
            plen = np.where(hit, self.info_plen[j], plen)
        return value, plen

    def lookup_many(self, addrs):
        """Look every address up; returns int64 arrays
        ``(value_id, plen, tnodes, leaves, backtracks)``."""
        import numpy as np

        addr = np.asarray(addrs).astype(np.int64) & _ALL
        n = addr.shape[0]
        value = np.full(n, -1, dtype=np.int64)
        plen = np.full(n, -1, dtype=np.int64)
        tn = np.zeros(n, dtype=np.int64)
        lv = np.zeros(n, dtype=np.int64)
        bt = np.zeros(n, dtype=np.int64)
        if self.empty or n == 0:
            return value, plen, tn, lv, bt
        if self.is_leaf[0]:
            v, p = self._leaf_match(np, np.zeros(n, dtype=np.int64), addr)
            return v, p, tn, lv + 1, bt
        lane = np.arange(n)
        node = np.zeros(n, dtype=np.int64)
        upto = np.full(n, KEYLENGTH, dtype=np.int64)
        index = self._bits_at(np, self._prefix_of(np, addr, upto), self.pos[node], self.bits[node])
        while lane.size:
            a = addr[lane]
            tn[lane] += 1
            child = self.children[self.child_base[node] + index]
            is_null = child < 0
            c = np.where(is_null, 0, child)
            at_leaf = ~is_null & self.is_leaf[c]
            back = is_null.copy()
            finished = np.zeros(lane.size, dtype=bool)
            if at_leaf.any():
                w = np.flatnonzero(at_leaf)
                lv[lane[w]] += 1
                v, p = self._leaf_match(np, c[w], a[w])
                got = v >= 0
                value[lane[w[got]]] = v[got]
                plen[lane[w[got]]] = p[got]
                finished[w[got]] = True
                back[w[~got]] = True
            at_tnode = ~is_null & ~at_leaf
            if at_tnode.any():
                w = np.flatnonzero(at_tnode)
                cn, pn, ww, up = c[w], node[w], a[w], upto[w]
                cpos = self.pos[cn]
                ckey = self.key[cn]
                ok = np.ones(w.size, dtype=bool)
                short = up < self.pos[pn] + self.bits[pn]
                first_child = self.children[self.child_base[cn]]
                ok &= ~(short & ((self._bits_at(np, ckey, up, cpos - up) != 0)
                                 | (first_child < 0)))
                differs = self._prefix_of(np, ckey ^ ww, cpos)
                has = differs != 0
                # first differing bit: 32 - bit_length(differs)
                blen = np.frexp(np.where(has, differs, 1).astype(np.float64))[1]
                first = KEYLENGTH - blen
                ok &= ~(has & (self._bits_at(np, ckey, first, cpos - first) != 0))
                up = np.where(ok & has & (up >= cpos), first, up)
                d = w[ok]
                upto[d] = up[ok]
                node[d] = cn[ok]
                index[d] = self._bits_at(np, self._prefix_of(np, a[d], upto[d]),
                                         self.pos[node[d]], self.bits[node[d]])
                back[w[~ok]] = True
            if back.any():
                w = np.flatnonzero(back)
                failed = self._backtrack(np, w, node, index, upto, bt, lane)
                finished[w[failed]] = True
            keep = ~finished
            lane, node, index, upto = lane[keep], node[keep], index[keep], upto[keep]
        return value, plen, tn, lv, bt

    def _backtrack(self, np, w, node, index, upto, bt, lane):
        """Chop the lowest set index bit (climbing while none is left) for the
        walks ``w``; returns a mask of those that climbed past the root."""
        failed = np.zeros(w.size, dtype=bool)
        todo = np.arange(w.size)
        while todo.size:
            s = w[todo]
            nd, ix = node[s], index[s]
            nbits = self.bits[nd]
            low = ix & -ix
            chop = np.where(ix != 0, np.frexp(np.maximum(low, 1).astype(np.float64))[1],
                            nbits + 1)
            chop = np.minimum(chop, nbits + 1)
            upto[s] = np.minimum(upto[s], self.pos[nd] + nbits - chop)
            inside = chop <= nbits
            si = s[inside]
            index[si] = ix[inside] & ~(1 << (chop[inside] - 1))
            climb = ~inside
            sc, nc = s[climb], nd[climb]
            up = self.parent[nc]
            root = up < 0
            failed[todo[climb][root]] = True
            go = ~root
            sg = sc[go]
            index[sg] = self.slot[nc[go]]
            node[sg] = up[go]
            bt[lane[sg]] += 1
            todo = todo[climb][go]
        return failed
