"""fib_trie (3.6): structure, resizing thresholds, longest-prefix match, stats."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routelab.ipv4.fib_trie import (
    FibTrie,
    Leaf,
    TNode,
    bits_at,
    first_difference,
    mask_of,
    prefix_of,
)


def brute_lpm(routes, addr):
    best = None
    for (net, plen), value in routes.items():
        if addr & mask_of(plen) == net and (best is None or plen > best[0]):
            best = (plen, value)
    return best


def test_bit_helpers_read_from_the_most_significant_bit():
    assert bits_at(0x80000000, 0, 1) == 1
    assert bits_at(0x0A000000, 4, 4) == 0xA
    assert bits_at(0xFFFFFFFF, 32, 3) == 0          # past the key: 0
    assert prefix_of(0x0A0B0C0D, 16) == 0x0A0B0000
    assert prefix_of(0x0A0B0C0D, 0) == 0
    assert mask_of(24) == 0xFFFFFF00
    assert first_difference(0x0A000000, 0x0B000000, 0) == 7


def test_one_route_is_a_lone_leaf_and_two_share_a_binary_tnode():
    t = FibTrie()
    t.insert(0x0A000000, 8, "a")
    assert isinstance(t.root, Leaf)
    t.insert(0x0B000000, 8, "b")
    assert isinstance(t.root, TNode)
    assert (t.root.pos, t.root.bits) == (7, 1)      # 10 and 11 part at bit 7
    t.check()
    assert t.lookup(0x0A123456)[0] == "a"
    assert t.lookup(0x0B000001)[0] == "b"
    assert t.lookup(0x0C000000)[0] is None


def test_prefixes_of_one_key_share_a_leaf_longest_first():
    t = FibTrie([(0x0A000000, 8, "/8"), (0x0A000000, 16, "/16"), (0x0A000000, 24, "/24")])
    assert isinstance(t.root, Leaf)
    assert [i[0] for i in t.root.infos] == [24, 16, 8]
    assert t.lookup(0x0A000001)[:2] == ("/24", 24)
    assert t.lookup(0x0A000101)[:2] == ("/16", 16)
    assert t.lookup(0x0A010101)[:2] == ("/8", 8)


def test_default_route_is_found_by_backtracking():
    t = FibTrie([(0, 0, "default"), (0xC0A80000, 16, "lan"), (0x0A000000, 8, "ten")])
    value, plen, trace = t.lookup(0x08080808)
    assert (value, plen) == ("default", 0)
    assert trace.nodes >= 2


def test_a_dense_table_inflates_the_root():
    """256 /24s under one /16 fill a binary tnode past the thresholds: resize
    doubles it until the root indexes all eight bits at once."""
    t = FibTrie((0x0A000000 | i << 8, 24, i) for i in range(256))
    t.check()
    assert isinstance(t.root, TNode)
    assert (t.root.pos, t.root.bits) == (16, 8)
    assert t.inflates > 0
    value, plen, trace = t.lookup(0x0A002A07)
    assert (value, plen) == (42, 24)
    assert (trace.tnodes, trace.leaves, trace.backtracks) == (1, 1, 0)


def _node_with_leaves(slots, parent=None):
    from routelab.ipv4.fib_trie import _put_child
    tn = TNode(0, 0, 4)
    tn.parent = parent
    for i in slots:
        leaf = Leaf(i << 28)
        leaf.add(4, i)
        _put_child(tn, i, leaf)
    return tn


def test_root_uses_the_lower_halving_threshold():
    """Three children in 16 slots is 18.75 % full: above the root's 15 %, so a
    root keeps its four bits; below the 25 % of any other tnode, so that
    halves (and halves again while still too empty)."""
    t = FibTrie()
    root = t._resize(_node_with_leaves([0, 5, 10]))
    assert root.bits == 4 and t.halvings == 0
    inner = t._resize(_node_with_leaves([0, 5, 10], parent=TNode(0, 0, 1)))
    assert inner.bits < 4 and t.halvings >= 1


def test_one_child_collapses_and_an_empty_node_vanishes():
    t = FibTrie()
    only = t._resize(_node_with_leaves([7]))
    assert isinstance(only, Leaf) and only.parent is None
    assert t._resize(_node_with_leaves([])) is None


def test_removing_everything_empties_the_trie():
    rng = random.Random(3)
    routes = {}
    t = FibTrie()
    for _ in range(400):
        plen = rng.choice([8, 16, 24, 32])
        net = rng.getrandbits(32) & mask_of(plen)
        routes[(net, plen)] = 1
        t.insert(net, plen, 1)
    for net, plen in list(routes):
        assert t.remove(net, plen)
        t.check()
    assert t.root is None
    assert not t.remove(0x0A000000, 8)


def test_stats_and_proc_format():
    t = FibTrie((0x0A000000 | i << 8, 24, i) for i in range(256))
    t.insert(0, 0, "default")
    s = t.stats()
    assert s.leaves == 257 and s.prefixes == 257
    text = s.proc()
    assert text.startswith("Main:\n\tAver depth:     ")
    assert "\tLeaves:         257\n" in text
    assert "\tPrefixes:       257\n" in text
    assert text.rstrip().endswith("kB")


PLENS = [0, 1, 7, 8, 12, 16, 20, 23, 24, 25, 30, 32]
prefix = st.tuples(st.integers(0, 2**32 - 1), st.sampled_from(PLENS))


@settings(max_examples=60, deadline=None)
@given(st.lists(prefix, min_size=1, max_size=120), st.lists(st.integers(0, 2**32 - 1), max_size=40),
       st.randoms(use_true_random=False))
def test_lookup_is_longest_prefix_match_after_inserts_and_removes(raw, probes, rnd):
    routes = {}
    t = FibTrie()
    for net, plen in raw:
        net &= mask_of(plen)
        routes[(net, plen)] = (net, plen)
        t.insert(net, plen, (net, plen))
    t.check()
    # probe addresses inside the routes too, where the interesting matches are
    inside = zip(routes, probes, strict=False)
    probes = probes + [net | (a & ~mask_of(plen) & 0xFFFFFFFF) for (net, plen), a in inside]
    for addr in probes:
        best = brute_lpm(routes, addr)
        value, plen, _ = t.lookup(addr)
        assert value == (best[1] if best else None)
    for key in rnd.sample(sorted(routes), len(routes) // 2):
        t.remove(*key)
        del routes[key]
        t.check()
    for addr in probes:
        best = brute_lpm(routes, addr)
        assert t.lookup(addr)[0] == (best[1] if best else None)


@pytest.mark.parametrize("bad", [-1, 33])
def test_bad_prefix_length(bad):
    with pytest.raises(ValueError):
        FibTrie().insert(0, bad, None)
