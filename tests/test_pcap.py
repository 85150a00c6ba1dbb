"""routelab.traffic.read_pcap / from_pcap and ``python -m routelab replay``.

Every capture here is written by dpkt itself (the library the reader uses),
in a temporary directory: Ethernet, raw-IP and Linux-cooked pcaps and a pcapng.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

dpkt = pytest.importorskip("dpkt")

from routelab import replay  # noqa: E402
from routelab.errors import KnobError  # noqa: E402
from routelab.traffic import PcapError, from_pcap, read_pcap  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_700_000_000.0


def ipv4(src, dst, *, ttl=64, p=17, payload=100, df=False, mf=False, offset=0, ident=7, tos=0):
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), ttl=ttl, p=p,
                    id=ident, tos=tos, data=b"x" * payload)
    ip.df, ip.mf, ip.offset = int(df), int(mf), offset
    ip.len = 20 + payload
    return ip


def eth(data, etype=0x0800):
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" * 6, dst=b"\x04" * 6, type=etype,
                                        data=bytes(data)))


IPV6 = b"\x60" + b"\x00" * 39
ARP = b"\x00" * 28


def write_pcap(path, frames, linktype=dpkt.pcap.DLT_EN10MB, ng=False):
    with open(path, "wb") as f:
        w = (dpkt.pcapng.Writer(f, linktype=linktype) if ng
             else dpkt.pcap.Writer(f, linktype=linktype))
        for ts, frame in frames:
            w.writepkt(frame, ts=ts)
    return path


def mixed_frames():
    return [
        (T0 + 0.000, eth(ipv4("192.168.1.10", "198.51.100.1", ttl=64, p=6, payload=1480,
                                df=True, tos=0x10))),
        (T0 + 0.001, eth(IPV6, 0x86DD)),
        (T0 + 0.002, eth(ipv4("198.51.100.1", "192.168.1.10", ttl=50, p=17, payload=32))),
        (T0 + 0.003, eth(ARP, 0x0806)),
        (T0 + 0.004, eth(ipv4("192.168.1.11", "203.0.113.9", p=1, payload=64, mf=True,
                                offset=0, ident=99))),
        (T0 + 0.005, eth(ipv4("192.168.1.11", "203.0.113.9", p=1, payload=16, offset=8,
                                ident=99))),
        (T0 + 0.006, eth(IPV6, 0x86DD)),
    ]


def test_fields_of_an_ethernet_pcap(tmp_path):
    cap = read_pcap(write_pcap(tmp_path / "m.pcap", mixed_frames()))
    tr = cap.trace
    assert cap.frames == 7 and len(tr) == 4 and cap.linktype == "ethernet"
    assert cap.skipped == {"ipv6": 2, "arp": 1, "other": 0, "bad_ipv4": 0}
    assert cap.start == pytest.approx(T0)
    np.testing.assert_allclose(tr.t, [0.0, 0.002, 0.004, 0.005], atol=1e-6)
    assert tr.saddr[0] == int.from_bytes(socket.inet_aton("192.168.1.10"), "big")
    assert tr.daddr[1] == tr.saddr[0]
    assert tr.length.tolist() == [1500, 52, 84, 36]
    assert tr.ttl.tolist() == [64, 50, 64, 64]
    assert tr.proto.tolist() == [6, 17, 1, 1]
    assert tr.df.tolist() == [True, False, False, False]
    assert tr.mf.tolist() == [False, False, True, False]
    assert tr.frag_off.tolist() == [0, 0, 0, 8] and tr.frag_id[2:].tolist() == [99, 99]
    assert tr.tos[0] == 0x10
    assert len(from_pcap(tmp_path / "m.pcap")) == 4
    assert "2 ipv6, 1 arp" in repr(cap)


def test_pcapng_raw_ip_and_linux_cooked(tmp_path):
    ips = [ipv4("10.1.2.3", f"192.0.2.{i}", payload=10 * i) for i in range(1, 4)]
    ng = read_pcap(write_pcap(tmp_path / "a.pcapng", [(T0 + i, eth(ip)) for i, ip in
                                                     enumerate(ips)], ng=True))
    raw = read_pcap(write_pcap(tmp_path / "r.pcap", [(T0 + i, bytes(ip)) for i, ip in
                                                    enumerate(ips)] + [(T0 + 5, IPV6)],
                               linktype=dpkt.pcap.DLT_RAW))
    sll = [(T0 + i, bytes(dpkt.sll.SLL(ethtype=0x0800, data=bytes(ip))))
           for i, ip in enumerate(ips)]
    cooked = read_pcap(write_pcap(tmp_path / "s.pcap", sll, linktype=dpkt.pcap.DLT_LINUX_SLL))
    for cap in (ng, raw, cooked):
        assert cap.trace.length.tolist() == [30, 40, 50]
        np.testing.assert_allclose(cap.trace.t, [0, 1, 2])
    assert raw.skipped["ipv6"] == 1 and cooked.linktype.startswith("Linux cooked")


def test_vlan_tagged_ipv4_is_read(tmp_path):
    ip = ipv4("192.168.5.5", "192.0.2.1", payload=40)
    tagged = b"\x04" * 6 + b"\x02" * 6 + b"\x81\x00\x00\x05\x08\x00" + bytes(ip)
    cap = read_pcap(write_pcap(tmp_path / "v.pcap", [(T0, tagged)]))
    assert len(cap.trace) == 1 and cap.trace.length[0] == 60


def test_truncated_pcap_is_a_clear_error(tmp_path):
    path = write_pcap(tmp_path / "m.pcap", mixed_frames())
    data = path.read_bytes()
    for cut in (10, 200, len(data) - 8):     # file header, a record header, a record's data
        bad = tmp_path / f"cut{cut}.pcap"
        bad.write_bytes(data[:cut])
        with pytest.raises(PcapError, match="cut|truncated|not a pcap") as exc:
            read_pcap(bad)
        assert str(bad) in str(exc.value) and "\n" not in str(exc.value)
    cut = tmp_path / "end.pcap"
    cut.write_bytes(data[:-8])
    with pytest.raises(PcapError, match=r"truncated: the file ends inside a record after 6 "):
        read_pcap(cut)


def test_truncated_pcapng_is_a_clear_error(tmp_path):
    data = write_pcap(tmp_path / "m.pcapng", mixed_frames(), ng=True).read_bytes()
    for cut in (5, 60):
        bad = tmp_path / f"cut{cut}.pcapng"
        bad.write_bytes(data[:-cut])
        with pytest.raises(PcapError, match=r"truncated or damaged: record 7 cannot be read "
                                            r"after 6 frames"):
            read_pcap(bad)


def test_not_a_pcap_no_ipv4_and_unsupported_links(tmp_path):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture at all, just text\n" * 4)
    with pytest.raises(PcapError, match="not a pcap or pcapng"):
        read_pcap(junk)
    only6 = write_pcap(tmp_path / "v6.pcap", [(T0, eth(IPV6, 0x86DD)), (T0 + 1, eth(ARP, 0x806))])
    with pytest.raises(PcapError, match=r"no IPv4 packets to replay \(2 frames: 1 ipv6, 1 arp\)"):
        read_pcap(only6)
    wifi = write_pcap(tmp_path / "w.pcap", [(T0, b"\x00" * 40)], linktype=105)
    with pytest.raises(PcapError, match="link type 105 is not supported"):
        read_pcap(wifi)
    with pytest.raises(PcapError, match="cannot open"):
        read_pcap(tmp_path / "missing.pcap")


def test_a_damaged_ipv4_header_is_counted_and_skipped(tmp_path):
    frames = mixed_frames()[:1] + [(T0 + 1, eth(b"\x45\x00\x00"))]
    cap = read_pcap(write_pcap(tmp_path / "d.pcap", frames))
    assert len(cap.trace) == 1 and cap.skipped["bad_ipv4"] == 1


def test_map_sides_puts_each_packet_on_its_side():
    cap_frames = [ipv4("192.168.1.10", "198.51.100.1"), ipv4("198.51.100.1", "192.168.1.10"),
                  ipv4("192.168.1.20", "192.168.1.10"), ipv4("198.51.100.1", "203.0.113.1"),
                  ipv4("192.168.1.20", "198.51.100.2")]
    from routelab.core.skbuff import PacketTrace

    a = lambda ip: int.from_bytes(ip, "big")  # noqa: E731
    tr = PacketTrace.build(np.arange(5) * 0.1, saddr=[a(p.src) for p in cap_frames],
                           daddr=[a(p.dst) for p in cap_frames])
    hosts = np.array([0x0A0A0105, 0x0A0A0106], dtype=np.uint32)
    out, counts = replay.map_sides(tr, replay._prefixes(replay.PRIVATE_NETS), hosts)
    assert counts == {"inside_only": 1, "outside_only": 1, "inside_hosts": 2,
                      "inside_hosts_shared": 0}
    assert out.iif.tolist() == [0, 1, 0]
    # 192.168.1.10 -> the first residence host (both directions), .20 -> the second
    assert out.saddr.tolist()[0] == out.daddr.tolist()[1] == 0x0A0A0105
    assert out.saddr.tolist()[2] == 0x0A0A0106


def cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "routelab", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def busy_pcap(tmp_path_factory):
    """2,000 packets over 2 s: 50 inside hosts, 200 outside addresses, 200 flows."""
    frames = []
    for k in range(2000):
        ip = ipv4(f"192.168.1.{k % 50 + 2}", f"203.0.{k % 200}.{k % 5 + 1}", payload=100,
                  df=k % 2 == 0)
        frames.append((T0 + k * 0.001, eth(ip)))
        if k % 100 == 0:
            frames.append((T0 + k * 0.001, eth(IPV6, 0x86DD)))
    return write_pcap(tmp_path_factory.mktemp("pcap") / "busy.pcap", frames)


def test_replay_cli_json(busy_pcap):
    p = cli("replay", "--pcap", str(busy_pcap), "--kernel", "2.4.24", "--cpu", "k6-200",
            "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    s, info = out["summary"], out["pcap"]
    assert info["frames"] == 2020 and info["ipv4_packets"] == 2000
    assert info["skipped"]["ipv6"] == 20 and info["inside_hosts"] == 50
    assert s["replayed_packets"] == 2000 and s["pcap_skipped"] == 20
    # the capture plus the student PC's pings, every packet with one outcome
    assert s["offered_packets"] >= 2000
    assert s["offered_packets"] == s["forwarded_packets"] + s["local_packets"] \
        + s["dropped_packets"]
    # 200 distinct (source, destination) flows in the capture: one route-cache miss each
    # (the entries outlive the 2.5 s run), plus the ping's and its replies' routes
    assert 200 <= s["in_slow_tot"] <= 205
    assert out["knobs"]["kernel"] == "2.4.24" and out["knobs"]["duration"] == pytest.approx(2.499)


def test_replay_speedup_compresses_time(busy_pcap):
    slow = replay.run(busy_pcap, speedup=1)
    fast = replay.run(busy_pcap, speedup=4)
    assert fast.extra["knobs"]["duration"] == pytest.approx(1.999 / 4 + 0.5)
    assert fast.summary()["replayed_packets"] == slow.summary()["replayed_packets"]
    assert fast.summary()["cpu_busy_pct"] > slow.summary()["cpu_busy_pct"]
    assert replay.run(busy_pcap, speedup=4).summary() == fast.summary()   # deterministic


def test_replay_errors_are_one_line(tmp_path, busy_pcap):
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"no")
    for args, words in ((["--pcap", str(junk)], ["junk.pcap", "not a pcap"]),
                        (["--pcap", str(busy_pcap), "--speedup", "0"], ["speedup=0.0"]),
                        (["--pcap", str(busy_pcap), "--speedup", "fast"], ["speedup", "fast"]),
                        (["--pcap", str(busy_pcap), "--cpu", "z80"], ["cpu='z80'", "k6-200"]),
                        (["--pcap", str(busy_pcap), "--inside", "10.99.0.0/16"],
                         ["inside", "both ends outside"])):
        p = cli("replay", *args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
        assert all(w in err[0] for w in words), err[0]
    with pytest.raises(KnobError, match="inside"):
        replay.run(busy_pcap, inside=["not-a-prefix"])
