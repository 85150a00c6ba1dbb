"""routelab.core.skb on hand-built skbs, checked against 2.6.20's skbuff.h/skbuff.c."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from routelab.core.skb import (
    NET_SKB_PAD,
    SKB_DATA_ALIGN,
    SKB_DATAREF_SHIFT,
    SkbError,
    alloc_skb,
    kfree_skb,
    pskb_copy,
    pskb_expand_head,
    skb_add_frag,
    skb_clone,
    skb_cloned,
    skb_cow,
    skb_header_cloned,
    skb_header_release,
    skb_headroom,
    skb_linearize,
    skb_pull,
    skb_push,
    skb_put,
    skb_reserve,
)

MAX_TCP_HEADER = 160     # 128 + MAX_HEADER 32


def tcp_skb(payload=1448, frags=0):
    """tcp_sendmsg's skb: MAX_TCP_HEADER reserved, payload linear (or in frags)."""
    skb = alloc_skb(MAX_TCP_HEADER + (payload if not frags else 0))
    skb_reserve(skb, MAX_TCP_HEADER)
    if frags:
        for _ in range(frags):
            skb_add_frag(skb, payload // frags)
    else:
        skb_put(skb, payload)
    skb_header_release(skb)          # skb_entail
    return skb


def test_alloc_aligns_and_reserve_put():
    skb = alloc_skb(1000)
    assert skb.end == SKB_DATA_ALIGN(1000) == 1024
    skb_reserve(skb, 100)
    skb_put(skb, 200)
    assert (skb.data, skb.tail, skb.len) == (100, 300, 200)
    with pytest.raises(SkbError):
        skb_put(skb, 1000)          # skb_over_panic
    with pytest.raises(SkbError):
        skb_push(skb, 101)          # skb_under_panic


def test_header_release_then_clone_counts():
    # sources.md: after skb_header_release + one clone, low 2 and high 1:
    # skb_cloned() true, skb_header_cloned() false
    orig = tcp_skb()
    assert orig.shinfo.dataref == (1 << SKB_DATAREF_SHIFT) + 1
    assert not skb_cloned(orig) and not skb_header_cloned(orig)
    clone = skb_clone(orig)
    assert clone.shinfo is orig.shinfo
    assert orig.shinfo.dataref & 0xFFFF == 2 and orig.shinfo.dataref >> 16 == 1
    assert skb_cloned(clone) and skb_cloned(orig)
    assert not skb_header_cloned(clone) and not skb_header_cloned(orig)
    assert clone.cloned and not clone.nohdr and orig.nohdr


def test_clone_without_header_release_is_header_cloned():
    skb = alloc_skb(200)
    skb_put(skb, 100)
    c = skb_clone(skb)
    assert skb_header_cloned(c) and skb_cloned(c)


def test_skb_cow_copies_the_clone_head_to_tail():
    orig = tcp_skb()
    clone = skb_clone(orig)
    skb_push(clone, 32 + 20)        # TCP and IP headers on the clone
    before = clone.shinfo
    copied = skb_cow(clone, 16)      # LL_RESERVED_SPACE of Ethernet
    assert copied == MAX_TCP_HEADER + 1448   # head..tail: headroom + headers + payload
    assert clone.shinfo is not before and clone.shinfo.dataref == 1
    assert not clone.cloned and not skb_cloned(clone)
    # the original keeps the old buffer, now alone: dataref low 1, high 1
    assert orig.shinfo is before and before.dataref == (1 << 16) + 1
    assert not skb_cloned(orig)
    assert skb_headroom(clone) == MAX_TCP_HEADER - 52


def test_skb_cow_free_when_not_cloned_and_headroom_ok():
    skb = alloc_skb(1600)
    skb_reserve(skb, 64)
    skb_put(skb, 1500)
    assert skb_cow(skb, 16) == 0


def test_skb_cow_short_headroom_rounds_to_pad():
    skb = alloc_skb(1600)
    skb_reserve(skb, 2)
    skb_put(skb, 1500)
    end = skb.end
    copied = skb_cow(skb, 16)        # delta 14 -> 16
    assert copied == 2 + 1500
    assert skb_headroom(skb) == 18
    assert skb.end == SKB_DATA_ALIGN(end + 16)
    # below NET_SKB_PAD the pad wins
    s2 = alloc_skb(100)
    skb_reserve(s2, 10)
    skb_put(s2, 50)
    assert skb_cow(s2, 0) == 60 and skb_headroom(s2) == 10 + NET_SKB_PAD


def test_expand_head_references_frags_not_copies():
    orig = tcp_skb(payload=1448, frags=1)
    page = orig.shinfo.frags[0][0]
    clone = skb_clone(orig)
    skb_push(clone, 52)
    copied = skb_cow(clone, 16)
    assert copied == MAX_TCP_HEADER          # only head..tail: the header area
    assert page.count == 2                   # the original's buffer and the copy's
    kfree_skb(orig)
    assert page.count == 1
    kfree_skb(clone)
    assert page.count == 0


def test_pskb_copy_copies_headlen_only():
    orig = tcp_skb()
    skb_clone(orig)
    n, copied = pskb_copy(orig)
    assert copied == 1448 and n.len == 1448 and skb_headroom(n) == MAX_TCP_HEADER
    assert not n.cloned


def test_release_frees_on_last_reference():
    orig = tcp_skb()
    clone = skb_clone(orig)
    sh = orig.shinfo
    assert not kfree_skb(clone)      # clone (nohdr clear) drops 1
    assert sh.dataref == (1 << 16) + 1 and not sh.freed
    assert kfree_skb(orig)           # the original (nohdr) drops 1 << 16 + 1
    assert sh.freed
    with pytest.raises(SkbError):
        kfree_skb(orig)


def test_linearize():
    skb = tcp_skb(payload=1448, frags=2)
    assert skb_linearize(skb) > 1448 - 1
    assert skb.data_len == 0 and skb.tail - skb.data == 1448


def test_eth_type_trans_pull():
    skb = alloc_skb(100)
    skb_put(skb, 60)
    skb_pull(skb, 14)
    assert skb.data == 14 and skb.len == 46


@given(st.lists(st.sampled_from(["clone", "free_clone", "cow"]), max_size=30))
def test_dataref_never_below_holders(ops):
    """Any sequence of clones, frees and cows keeps dataref consistent and
    frees the buffer exactly when the last holder lets go."""
    orig = tcp_skb()
    clones = []
    for op in ops:
        if op == "clone":
            clones.append(skb_clone(orig))
        elif op == "free_clone" and clones:
            kfree_skb(clones.pop())
        elif op == "cow" and clones:
            c = clones.pop()
            skb_cow(c, 16)
            assert c.shinfo.dataref == 1
            kfree_skb(c)
        sh = orig.shinfo
        assert sh.dataref & 0xFFFF == 1 + len(clones)
        assert skb_cloned(orig) == bool(clones)
    for c in clones:
        kfree_skb(c)
    assert kfree_skb(orig)


def test_expand_negative_refused():
    with pytest.raises(SkbError):
        pskb_expand_head(alloc_skb(10), -1)
