"""The skb as an object: linear area, page frags, clones and ``dataref``.

Kernel: include/linux/skbuff.h, net/core/skbuff.c (2.6.20,
sagsango/linux-2.6.20 @ 7925ece7): ``alloc_skb``, ``skb_reserve``,
``skb_put``, ``skb_push``, ``skb_pull``, ``skb_clone``, ``pskb_copy``,
``skb_header_release``, ``skb_cloned``, ``skb_header_cloned``,
``skb_release_data``, ``pskb_expand_head``, ``skb_cow``, ``kfree_skb``,
``skb_linearize``.

The engine's packets are columns (:mod:`routelab.core.skbuff`); this module
is for the *endpoints* that own skbs (story 4's TCP sender keeps each
segment's original on its write queue and transmits clones).  What the
forward path reads of such an skb -- ``skb_cloned()`` and the headroom --
is taken from these objects and handed to the engine with the packet
(``run.inject(..., cloned=..., headroom=...)``).

The model keeps offsets, not bytes: ``head`` is 0, and ``data``, ``tail``,
``end`` are offsets into the buffer; a page frag is a :class:`Page` with a
reference count and a length.  The shared info (``struct skb_shared_info``,
at ``end``) is :class:`SharedInfo`: ``dataref`` and the frags.  ``dataref``
holds two counts (``SKB_DATAREF_SHIFT`` = 16): the low 16 bits count every
reference to the data, the high bits those that promised not to touch the
header area (``skb_header_release``).

Copies are *counted*: :func:`pskb_expand_head` and :func:`pskb_copy` return
the bytes they memcpy'd, so a caller can price them per byte.

Simplified: no ``frag_list`` (no story needs it), no ``truesize`` or socket
memory accounting here (the TCP endpoint does its own), no fast-clone slab
(``alloc_skb_fclone``): a clone is counted the same either way;
``SMP_CACHE_BYTES`` is 128 (a Pentium 4 / Xeon build,
``CONFIG_X86_L1_CACHE_SHIFT`` = 7, ASSUMED for the 2007 Xeon box).
"""

from __future__ import annotations

import itertools

__all__ = ["Page", "SharedInfo", "Skb", "alloc_skb", "skb_reserve", "skb_put", "skb_push",
           "skb_pull", "skb_add_frag", "skb_clone", "pskb_copy", "skb_header_release",
           "skb_cloned", "skb_header_cloned", "skb_headroom", "skb_headlen",
           "pskb_expand_head", "skb_cow", "skb_realloc_headroom", "kfree_skb", "skb_linearize",
           "SKB_DATA_ALIGN",
           "SKB_DATAREF_SHIFT", "SKB_DATAREF_MASK", "NET_SKB_PAD", "SMP_CACHE_BYTES",
           "SkbError"]

SKB_DATAREF_SHIFT = 16
SKB_DATAREF_MASK = (1 << SKB_DATAREF_SHIFT) - 1
NET_SKB_PAD = 16                 # include/linux/skbuff.h (2.6.20)
SMP_CACHE_BYTES = 128            # ASSUMED: P4/Xeon build (L1_CACHE_SHIFT 7)


class SkbError(RuntimeError):
    """What would be a BUG() or skb_over_panic in the kernel."""


def SKB_DATA_ALIGN(x: int) -> int:
    """Round ``x`` up to the cache line (include/linux/skbuff.h)."""
    return (x + SMP_CACHE_BYTES - 1) & ~(SMP_CACHE_BYTES - 1)


class Page:
    """A page frag's page: ``count`` references (get_page / put_page)."""

    __slots__ = ("count", "size")

    def __init__(self, size: int) -> None:
        self.count = 1
        self.size = size


class SharedInfo:
    """``struct skb_shared_info`` of one data buffer (shared by clones).

    Attributes
    ----------
    dataref : int      two counts, see the module docstring
    frags : list       ``(Page, nbytes)`` of each page frag
    size : int         ``end - head`` of the buffer
    freed : bool       ``kfree(skb->head)`` has run
    ident : int        a serial number (for drawings)
    """

    __slots__ = ("dataref", "frags", "size", "freed", "ident")
    _ids = itertools.count()

    def __init__(self, size: int) -> None:
        self.dataref = 1
        self.frags: list = []
        self.size = size
        self.freed = False
        self.ident = next(SharedInfo._ids)


class Skb:
    """``struct sk_buff``: the head (metadata) of one skb.

    Attributes
    ----------
    shinfo : SharedInfo   the data buffer (shared with clones)
    data, tail : int      offsets from ``head`` (0); ``end`` = ``shinfo.size``
    len, data_len : int   bytes of data in all, of them in page frags
    cloned, nohdr : bool
    ip_summed : int       checksum state (``routelab.core.skbuff.CHECKSUM_*``)
    freed : bool          ``kfree_skb`` ran on this head
    """

    __slots__ = ("shinfo", "data", "tail", "len", "data_len", "cloned", "nohdr", "ip_summed",
                 "freed")

    def __init__(self, shinfo: SharedInfo) -> None:
        self.shinfo = shinfo
        self.data = 0
        self.tail = 0
        self.len = 0
        self.data_len = 0
        self.cloned = False
        self.nohdr = False
        self.ip_summed = 0
        self.freed = False

    @property
    def end(self) -> int:
        return self.shinfo.size

    def state(self) -> dict:
        """A plain snapshot (for a drawing of the skb's anatomy)."""
        d = self.shinfo.dataref
        return {"buffer": self.shinfo.ident, "head": 0, "data": self.data, "tail": self.tail,
                "end": self.end, "len": self.len, "data_len": self.data_len,
                "nr_frags": len(self.shinfo.frags), "cloned": self.cloned, "nohdr": self.nohdr,
                "dataref": d & SKB_DATAREF_MASK, "dataref_nohdr": d >> SKB_DATAREF_SHIFT,
                "skb_cloned": skb_cloned(self), "skb_header_cloned": skb_header_cloned(self)}


def alloc_skb(size: int) -> Skb:
    """A new skb with ``size`` bytes of linear room (aligned), all tailroom."""
    if size < 0:
        raise SkbError(f"alloc_skb size {size} < 0")
    return Skb(SharedInfo(SKB_DATA_ALIGN(size)))


def skb_headroom(skb: Skb) -> int:
    return skb.data


def skb_headlen(skb: Skb) -> int:
    """Bytes of data in the linear area (``len - data_len``)."""
    return skb.len - skb.data_len


def skb_reserve(skb: Skb, n: int) -> None:
    """Move ``data`` and ``tail`` ``n`` bytes on (an empty skb's headroom)."""
    if skb.tail + n > skb.end:
        raise SkbError("skb_reserve past the end")
    skb.data += n
    skb.tail += n


def skb_put(skb: Skb, n: int) -> None:
    """Add ``n`` bytes at the tail (skb_over_panic past ``end``)."""
    if skb.data_len:
        raise SkbError("skb_put on an skb with page frags (SKB_LINEAR_ASSERT)")
    if skb.tail + n > skb.end:
        raise SkbError(f"skb_over_panic: tail {skb.tail} + {n} > end {skb.end}")
    skb.tail += n
    skb.len += n


def skb_push(skb: Skb, n: int) -> None:
    """Prepend ``n`` bytes of header (skb_under_panic below ``head``)."""
    if skb.data - n < 0:
        raise SkbError(f"skb_under_panic: data {skb.data} - {n} < 0")
    skb.data -= n
    skb.len += n


def skb_pull(skb: Skb, n: int) -> None:
    """Drop ``n`` bytes of header (eth_type_trans pulls the 14-byte header)."""
    if n > skb_headlen(skb):
        raise SkbError("skb_pull beyond the linear data")
    skb.data += n
    skb.len -= n


def skb_add_frag(skb: Skb, nbytes: int, page: Page | None = None) -> Page:
    """Attach ``nbytes`` in a page frag (skb_fill_page_desc after
    skb_copy_to_page in tcp_sendmsg): a new page, or another reference
    (get_page) to ``page``."""
    if page is None:
        page = Page(4096)
    else:
        page.count += 1
    skb.shinfo.frags.append((page, nbytes))
    skb.data_len += nbytes
    skb.len += nbytes
    return page


def skb_cloned(skb: Skb) -> bool:
    """Is the data shared with another skb?  (``cloned`` and the low count != 1)"""
    return skb.cloned and (skb.shinfo.dataref & SKB_DATAREF_MASK) != 1


def skb_header_cloned(skb: Skb) -> bool:
    """Is the *header area* shared with a holder that may write it?
    (``cloned`` and low count minus the no-header count != 1)"""
    if not skb.cloned:
        return False
    d = skb.shinfo.dataref
    return (d & SKB_DATAREF_MASK) - (d >> SKB_DATAREF_SHIFT) != 1


def skb_header_release(skb: Skb) -> None:
    """This skb will not touch the header area: ``nohdr`` and 1 << 16 on
    ``dataref`` (TCP calls it in skb_entail for its write-queue skbs)."""
    if skb.nohdr:
        raise SkbError("skb_header_release twice (BUG_ON(skb->nohdr))")
    skb.nohdr = True
    skb.shinfo.dataref += 1 << SKB_DATAREF_SHIFT


def skb_clone(skb: Skb) -> Skb:
    """A new head sharing the data: both heads ``cloned``, ``dataref`` + 1;
    the clone has ``nohdr`` clear.  No data is copied."""
    if skb.freed:
        raise SkbError("skb_clone of a freed skb")
    n = Skb(skb.shinfo)
    n.data, n.tail, n.len, n.data_len = skb.data, skb.tail, skb.len, skb.data_len
    n.ip_summed = skb.ip_summed
    n.cloned = True
    n.nohdr = False
    skb.shinfo.dataref += 1
    skb.cloned = True
    return n


def pskb_copy(skb: Skb) -> tuple[Skb, int]:
    """A new skb with a private copy of the linear *data* (``skb_headlen``
    bytes at the same headroom) and references to the same page frags;
    returns ``(copy, bytes memcpy'd)``.  The copy is not cloned."""
    n = alloc_skb(skb.end)
    skb_reserve(n, skb.data)
    hl = skb_headlen(skb)
    skb_put(n, hl)
    for page, nb in skb.shinfo.frags:
        page.count += 1
        n.shinfo.frags.append((page, nb))
    n.data_len = skb.data_len
    n.len = skb.len
    n.ip_summed = skb.ip_summed
    return n, hl


def _skb_release_data(skb: Skb) -> bool:
    """Drop this head's reference to its data; free the buffer (and put its
    pages) when it was the last.  Returns whether the buffer was freed."""
    sh = skb.shinfo
    last = True
    if skb.cloned:
        sh.dataref -= ((1 << SKB_DATAREF_SHIFT) + 1) if skb.nohdr else 1
        if sh.dataref < 0 or (sh.dataref & SKB_DATAREF_MASK) < (sh.dataref >> SKB_DATAREF_SHIFT):
            raise SkbError(f"dataref went wrong: {sh.dataref:#x}")
        last = sh.dataref == 0
    if last:
        if sh.freed:
            raise SkbError("double free of skb data")
        for page, _ in sh.frags:
            page.count -= 1
            if page.count < 0:
                raise SkbError("put_page below zero")
        sh.freed = True
    return last


def pskb_expand_head(skb: Skb, nhead: int, ntail: int = 0) -> int:
    """Give the skb a private buffer with ``nhead`` more headroom and
    ``ntail`` more tailroom; returns the bytes memcpy'd.

    Kernel: net/core/skbuff.c pskb_expand_head (2.6.20): a new buffer of
    SKB_DATA_ALIGN(nhead + old size + ntail); memcpy of ``head`` to
    ``tail`` (the headroom *and* the linear data) and of the shared info;
    page frags referenced (get_page), not copied; the old data released;
    ``cloned`` and ``nohdr`` cleared, ``dataref`` 1.
    """
    if nhead < 0 or ntail < 0:
        raise SkbError("pskb_expand_head with a negative size")
    size = SKB_DATA_ALIGN(nhead + skb.end + ntail)
    copied = skb.tail                      # head .. tail
    sh = SharedInfo(size)
    for page, nb in skb.shinfo.frags:
        page.count += 1
        sh.frags.append((page, nb))
    _skb_release_data(skb)
    skb.shinfo = sh
    skb.data += nhead
    skb.tail += nhead
    skb.cloned = False
    skb.nohdr = False
    return copied


def skb_cow(skb: Skb, headroom: int) -> int:
    """Make the header writable with at least ``headroom`` bytes in front;
    returns the bytes copied (0: nothing to do).

    Kernel: include/linux/skbuff.h skb_cow (2.6.20): the needed headroom is
    at least NET_SKB_PAD; pskb_expand_head (extra headroom rounded up to
    NET_SKB_PAD) if it is short *or* ``skb_cloned()`` -- the stricter test:
    a TCP clone whose original promised not to touch the header
    (``skb_header_cloned()`` false) is copied all the same.
    """
    delta = max(headroom, NET_SKB_PAD) - skb_headroom(skb)
    if delta < 0:
        delta = 0
    if delta or skb_cloned(skb):
        return pskb_expand_head(skb, (delta + NET_SKB_PAD - 1) & ~(NET_SKB_PAD - 1), 0)
    return 0


def skb_realloc_headroom(skb: Skb, headroom: int) -> tuple[Skb, int]:
    """A new skb with at least ``headroom`` bytes in front of the data; the
    original is left as it was (the caller frees it).  Returns ``(new skb,
    bytes memcpy'd)``.

    Kernel: net/core/skbuff.c skb_realloc_headroom (2.6.20, sagsango/linux-2.6.20): when the room
    already suffices, a pskb_copy (the linear data copied); otherwise a
    clone given a private buffer by pskb_expand_head with the shortfall
    rounded up by SKB_DATA_ALIGN (head to tail copied).
    """
    delta = headroom - skb_headroom(skb)
    if delta <= 0:
        return pskb_copy(skb)
    n = skb_clone(skb)
    return n, pskb_expand_head(n, SKB_DATA_ALIGN(delta), 0)


def skb_linearize(skb: Skb) -> int:
    """Pull every page frag into the linear area (``__skb_linearize``:
    pskb_expand_head for the tailroom, then the frag bytes copied in);
    returns the bytes copied.  dev_queue_xmit does this for a device
    without NETIF_F_SG."""
    if not skb.data_len:
        return 0
    need = skb.data_len - (skb.end - skb.tail)
    copied = 0
    if need > 0 or skb_cloned(skb):
        copied += pskb_expand_head(skb, 0, max(need, 0))
    copied += skb.data_len
    for page, _ in skb.shinfo.frags:
        page.count -= 1
    skb.shinfo.frags = []
    skb.tail += skb.data_len
    skb.data_len = 0
    return copied


def kfree_skb(skb: Skb) -> bool:
    """Free this head and its data reference; True if the data went too."""
    if skb.freed:
        raise SkbError("kfree_skb twice")
    skb.freed = True
    return _skb_release_data(skb)
