"""Tests for routelab.core.checksum (RFC 1071 sums) and ip_decrease_ttl."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from routelab.core.checksum import csum_add, csum_fold, ip_fast_csum, ip_header
from routelab.ipv4.ip_forward import ip_decrease_ttl

u32 = st.integers(0, 2**32 - 1)
headers = st.fixed_dictionaries({
    "length": st.integers(20, 65535), "ttl": st.integers(2, 255), "proto": st.integers(0, 255),
    "saddr": u32, "daddr": u32, "ident": st.integers(0, 65535), "tos": st.integers(0, 255),
    "df": st.booleans(), "mf": st.booleans(), "frag_off": st.integers(0, 8191).map(lambda x: 8 * x),
})


def _check_of(hdr: bytes) -> int:
    return int.from_bytes(hdr[10:12], "big")


# Header fields whose checksum is 0xFEFF: decrementing the TTL makes the
# incremental sum 0xFFFF, where the kernel's carry rule yields 0x0000 (found by a
# search over ident; test_feff_example_is_the_edge_case keeps it honest).
FEFF = dict(length=84, ttl=64, proto=1, saddr=0x0A000001, daddr=0x0A000002, tos=0,
            df=False, mf=False, frag_off=0, ident=26535)


def test_feff_example_is_the_edge_case():
    assert _check_of(ip_header(**FEFF)) == 0xFEFF
    new_check, _ = ip_decrease_ttl(0xFEFF, 64)
    assert int(new_check) == 0x0000


def test_ip_header_checksum_verifies():
    hdr = ip_header(length=1500, ttl=64, proto=6, saddr=0xC0000201, daddr=0x0A010203)
    assert len(hdr) == 20 and hdr[0] == 0x45
    assert ip_fast_csum(hdr) == 0
    corrupt = hdr[:8] + bytes([hdr[8] ^ 1]) + hdr[9:]
    assert ip_fast_csum(corrupt) != 0


def test_csum_fold_and_add():
    assert csum_fold(0) == 0xFFFF
    assert csum_fold(0xFFFF) == 0
    assert csum_fold(0x1FFFE) == 0        # 0xFFFE + 1 = 0xFFFF -> complement 0
    assert int(csum_add(0xFFFF, 1)) == 1  # end-around carry
    assert list(csum_add(np.array([1, 0xFF00]), 0x0100)) == [0x0101, 1]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(headers)
@example(FEFF)
def test_ip_decrease_ttl_equals_full_recompute(f):
    hdr = ip_header(**f)
    new_check, new_ttl = ip_decrease_ttl(_check_of(hdr), f["ttl"])
    assert int(new_ttl) == f["ttl"] - 1
    rebuilt = ip_header(**dict(f, ttl=f["ttl"] - 1))
    assert int(new_check) == _check_of(rebuilt)
    # and the patched header verifies
    patched = hdr[:8] + bytes([f["ttl"] - 1]) + hdr[9:10] + int(new_check).to_bytes(2, "big") \
        + hdr[12:]
    assert ip_fast_csum(patched) == 0


def test_ip_decrease_ttl_vectorised():
    hs = [ip_header(length=100 + i, ttl=10 + i, proto=17, saddr=i, daddr=2 * i) for i in range(50)]
    checks = np.array([_check_of(h) for h in hs])
    ttls = np.array([10 + i for i in range(50)])
    new_check, new_ttl = ip_decrease_ttl(checks, ttls)
    for i in range(50):
        want = _check_of(ip_header(length=100 + i, ttl=9 + i, proto=17, saddr=i, daddr=2 * i))
        assert int(new_check[i]) == want
    assert list(new_ttl) == list(ttls - 1)
