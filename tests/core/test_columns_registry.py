"""The one table of packet columns (core/skbuff.py COLUMNS) and everything that
reads it: PacketTrace, the run's Packets columns (and their C declarations in
sim/columns.pxd, which cannot be generated), the array stages' column_data,
router.pxd's prefetch list, run.header / run.inject."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest

import routelab
from routelab import Device, Fib, PacketTrace, Route, Router
from routelab.core.skbuff import (
    CHECKSUM_COMPLETE,
    CHECKSUM_NONE,
    CHECKSUM_PARTIAL,
    CHECKSUM_UNNECESSARY,
    COLUMNS,
    HEADER,
    IP_OFFSET_MAX,
    KIND,
    PACKET_SPECS,
)
from routelab.errors import KnobError
from routelab.hosts import Host
from routelab.prepare import column_data
from routelab.sim.columns import COLUMN_DTYPE, Packets

PKG = Path(routelab.__file__).parent
C_TYPE = {"double": "d", "long long": "q", "unsigned long long": "Q"}


def _pxd_views() -> dict:
    """{column: array code} of the typed views sim/columns.pxd declares."""
    views = {}
    for line in (PKG / "sim" / "columns.pxd").read_text().splitlines():
        m = re.match(r"\s*cdef public ([a-z ]+)\[:\] (.+)$", line)
        if m:
            code = C_TYPE[m.group(1).strip()]
            for name in m.group(2).split(","):
                assert name.strip() not in views, f"{name} declared twice"
                views[name.strip()] = code
    return views


def test_pxd_typed_views_match_the_registry():
    typed = {c.name: c.typed for c in COLUMNS if c.typed is not None}
    assert _pxd_views() == typed
    assert {n: code for n, (code, _) in PACKET_SPECS.items()} == typed


def test_prefetch_list_names_only_registry_columns():
    src = (PKG / "router.pxd").read_text()
    body = src[src.index("_prefetch_columns"):src.index("cdef Py_ssize_t _COL_AHEAD")]
    names = re.findall(r"&pk\.(\w+)\[jp\]", body)
    assert len(names) >= 10
    typed = {c.name for c in COLUMNS if c.typed is not None}
    assert set(names) <= typed, set(names) - typed


def test_registry_rows_are_consistent():
    names = [c.name for c in COLUMNS]
    assert len(names) == len(set(names))
    header = {c.name for c in HEADER}
    for c in COLUMNS:
        if c.typed is not None:
            assert c.typed in COLUMN_DTYPE
            kind, what = c.src
            assert kind in ("trace", "stage", "run")
            if kind == "trace":
                assert what in header
            if kind == "run" and isinstance(what, str):
                assert PACKET_SPECS[what][1] is None     # a copy of an input column
        else:
            assert c.header and not c.src               # a header field the loop never reads
        if not c.header:
            assert c.default is None and c.typed is not None


def test_packet_trace_fields_are_the_header_rows():
    assert list(PacketTrace.DTYPES) == [c.name for c in HEADER]
    assert PacketTrace.__slots__ == tuple(c.name for c in HEADER)
    tr = PacketTrace.build([0.0, 1.0], saddr=1, daddr=2)
    for c in HEADER:
        a = getattr(tr, c.name)
        assert a.dtype == np.dtype(c.dtype) and a.shape == (2,)
        if c.default is not None:
            assert np.all(a == c.default)
    for bad in ({}, {"bogus": 1}):
        with pytest.raises(TypeError):
            PacketTrace(**{c.name: getattr(tr, c.name) for c in HEADER[:-1]}, **bad)


def test_new_columns_build_take_concat():
    tr = PacketTrace.build([0.2, 0.1], saddr=1, daddr=2, frag_id=[7, 9], frag_off=[185, 0],
                           mf=[False, True], ip_summed=CHECKSUM_PARTIAL)
    assert list(tr.frag_id) == [9, 7] and list(tr.frag_off) == [0, 185]
    assert list(tr.mf) == [True, False] and set(tr.ip_summed) == {CHECKSUM_PARTIAL}
    both = PacketTrace.concat([tr, PacketTrace.build([0.15], saddr=3, daddr=4)])
    assert list(both.frag_off) == [0, 0, 185] and list(both.ip_summed) == [1, 0, 1]
    assert (CHECKSUM_NONE, CHECKSUM_PARTIAL, CHECKSUM_UNNECESSARY,
            CHECKSUM_COMPLETE) == (0, 1, 2, 3)


@pytest.mark.parametrize("field, value", [("frag_off", IP_OFFSET_MAX + 1), ("frag_off", -1),
                                          ("ip_summed", 4), ("frag_id", 65536)])
def test_new_columns_out_of_range_are_knob_errors(field, value):
    with pytest.raises(KnobError, match=field):
        PacketTrace.build([0.0], saddr=1, daddr=2, **{field: value})


def test_column_data_fills_every_input_column():
    tr = PacketTrace.build([0.0, 1.0], saddr=[5, 6], daddr=2, kind=3, tag=[1, 2])
    stage_keys = {c.src[1] for c in COLUMNS if c.typed and c.src[0] == "stage"}
    p = {k: np.arange(2) + 10 for k in stage_keys}
    cols = column_data(tr, p)
    inputs = [n for n, (_, start) in PACKET_SPECS.items() if start is None]
    assert list(cols) == inputs
    assert list(cols["dev"]) == [0, 0] and list(cols["saddr"]) == [5, 6]
    assert list(cols["wire"]) == [10, 11]          # from the stage's wire_s
    pk = Packets(cols, PACKET_SPECS, spare=1, initial_outcome=3)
    assert pk.value(1, "t_start") == 1.0 and np.isnan(pk.value(0, "t_depart"))
    vals = {n: 0 for n in inputs}
    vals["t"] = 2.5
    for _ in range(20):                             # (grows past the spare room)
        j = pk.append(vals)
    assert j == 21 and pk.value(j, "t_start") == 2.5 and np.isnan(pk.value(j, "t_depart"))
    assert pk.outcome[j] == 3 and pk.value(0, "tag") == 1


def test_sim_columns_imports_nothing_of_the_model():
    # (sim/queues.py still cimports core.dst's DstEntry: not this module's business)
    for path in (PKG / "sim" / "columns.py", PKG / "sim" / "columns.pxd"):
        if path.suffix == ".pxd":
            assert "routelab" not in path.read_text().replace("routelab/", "")
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                assert node.level <= 1, f"{path.name} imports from outside sim: {mod}"
                assert not mod.startswith("routelab"), f"{path.name} imports {mod}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    assert not a.name.startswith("routelab"), f"{path.name} imports {a.name}"


# -- the new header columns through a run: run.header, run.inject ------------------------------

IN_HOST, OUT_HOST = 0x0A000005, 0x82000001      # 10.0.0.5, 130.0.0.1


class FragEcho(Host):
    """Notes the header of every packet it is given and answers with two
    packets: one naming only the old fields (the new ones take defaults), one
    a fragment with every field."""

    kinds = ("background",)

    def start(self, run, dev):
        super().start(run, dev)
        self.seen: list = []

    def deliver(self, j, t):
        f = self.run.header(j)
        self.seen.append(f)
        old = {k: f[k] for k in ("iif", "saddr", "daddr", "tos", "proto", "length", "ttl", "df",
                                 "cloned", "headroom", "hdr_err", "kind", "tag")}
        old.update(iif=self.dev, saddr=f["daddr"], daddr=f["saddr"], kind=KIND["local"])
        self.run.inject(old, t + 0.001)
        self.run.inject(dict(old, frag_id=f["frag_id"], frag_off=f["frag_off"], mf=f["mf"],
                             ip_summed=CHECKSUM_PARTIAL), t + 0.002)


def _frag_router(host=None, out_mtu=1500):
    devs = [Device("eth0", "e1000", 0), Device("eth1", "e1000", 0, mtu=out_mtu)]
    fib = Fib(routes=[Route("10.0.0.0/8", oif=0), Route("0.0.0.0/0", oif=1)],
              local_addrs=["10.255.255.254", "192.0.2.1"])
    return Router("2.4.24", "opteron-2400x2", devs, fib, hosts={1: host} if host else None,
                  arp_static=[(0, IN_HOST), (1, OUT_HOST)])


def _frags(n, **cols):
    return PacketTrace.build(np.arange(n) / 1000.0, saddr=IN_HOST, daddr=OUT_HOST, length=1500,
                             kind=KIND["background"], tag=np.arange(n), **cols)


def test_the_new_fields_reach_run_header_and_inject_fills_defaults():
    host = FragEcho()
    r = _frag_router(host)
    res = r.run(_frags(4, frag_id=0x1234, frag_off=np.arange(4) * 185, mf=[1, 1, 1, 0]), 0.05)
    assert [f["frag_off"] for f in host.seen] == [0, 185, 370, 555]
    assert [f["mf"] for f in host.seen] == [True, True, True, False]
    assert {f["frag_id"] for f in host.seen} == {0x1234}
    assert {f["ip_summed"] for f in host.seen} == {CHECKSUM_NONE}
    assert res.offered == 4 and len(res.packets["outcome"]) == 12     # 8 born
    assert res.conservation()


def test_born_packets_headers_carry_defaults_or_the_given_fields():
    got = []

    class Probe(FragEcho):
        def deliver(self, j, t):
            if j >= self.run.pk.n0:
                got.append(self.run.header(j))
                return
            super().deliver(j, t)

    class Back(Host):
        kinds = ("local",)

        def deliver(self, j, t):
            got.append(self.run.header(j))

    r = Router("2.4.24", "opteron-2400x2", [Device("eth0", "e1000", 0), Device("eth1", "e1000", 0)],
               Fib(routes=[Route("10.0.0.0/8", oif=0), Route("0.0.0.0/0", oif=1)],
                   local_addrs=["10.255.255.254", "192.0.2.1"]),
               hosts={1: Probe(), 0: Back()}, arp_static=[(0, IN_HOST), (1, OUT_HOST)])
    r.run(_frags(2, frag_id=77, frag_off=[0, 185], mf=[1, 0]), 0.05)
    plain = [f for f in got if f["ip_summed"] == CHECKSUM_NONE]
    full = [f for f in got if f["ip_summed"] == CHECKSUM_PARTIAL]
    assert len(plain) == len(full) == 2
    assert all(f["frag_id"] == 0 and f["frag_off"] == 0 and not f["mf"] for f in plain)
    assert sorted((f["frag_off"], f["mf"]) for f in full) == [(0, True), (185, False)]
    assert {f["frag_id"] for f in full} == {77}


def test_a_forwarded_fragment_is_treated_like_a_whole_datagram_of_its_length():
    # ip_forward and ip_output read no fragment field; a fragment too big for the
    # next link is cut again (ip_fragment keeps its offset and MF: test_ip_fragment.py)
    for mtu in (1500, 576):
        whole = _frag_router(out_mtu=mtu).run(_frags(30), 0.05)
        frag = _frag_router(out_mtu=mtu).run(
            _frags(30, frag_id=9, frag_off=np.arange(30) % 3 * 185, mf=np.arange(30) % 3 < 2), 0.05)
        assert frag.outcome_counts() == whole.outcome_counts()
        assert frag.profile == whole.profile
        assert frag.counters["ip"] == whole.counters["ip"]
        assert np.array_equal(frag.packets["t_depart"], whole.packets["t_depart"], equal_nan=True)
    assert whole.counters["ip"]["FragCreates"] == 30 * 3
