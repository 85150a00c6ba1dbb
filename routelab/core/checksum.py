"""Internet checksum (RFC 1071) and the incremental update of RFC 1624.

Kernel: arch/i386/lib/checksum.S csum_partial, include/asm-i386/checksum.h
ip_fast_csum (2.4, 2.6).  The model uses these for correctness tests of
``ip_decrease_ttl``; the CPU cost of checksumming is charged from the CPU
profile's bandwidth, not by running this code.
"""

from __future__ import annotations

import numpy as np

__all__ = ["csum_fold", "ip_fast_csum", "ip_header", "csum_add"]


def csum_add(a, b):
    """One's-complement 16-bit addition with end-around carry (arrays ok)."""
    s = np.asarray(a, dtype=np.uint32) + np.asarray(b, dtype=np.uint32)
    return ((s & 0xFFFF) + (s >> 16)).astype(np.uint32)


def csum_fold(total: int) -> int:
    """Fold a 32-bit running sum to 16 bits and complement it."""
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


def ip_fast_csum(header: bytes) -> int:
    """Checksum of an IP header (the checksum field must be included as stored).

    Returns 0 for a header whose stored checksum is correct.
    """
    if len(header) % 2:
        header = header + b"\0"
    words = np.frombuffer(header, dtype=">u2").astype(np.uint32)
    return csum_fold(int(words.sum()))


def ip_header(*, length: int, ttl: int, proto: int, saddr: int, daddr: int,
              ident: int = 0, tos: int = 0, df: bool = False, frag_off: int = 0,
              mf: bool = False) -> bytes:
    """Build a 20-byte IPv4 header with a correct checksum (for tests)."""
    flags = (0x4000 if df else 0) | (0x2000 if mf else 0) | (frag_off >> 3)
    words = [0x4500 | tos, length, ident, flags, (ttl << 8) | proto, 0,
             saddr >> 16, saddr & 0xFFFF, daddr >> 16, daddr & 0xFFFF]
    check = csum_fold(sum(words))
    words[5] = check
    return b"".join(w.to_bytes(2, "big") for w in words)
