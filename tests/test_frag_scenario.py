"""Scenario ``frag`` (story 3 reassembly) and its ``--real`` run."""

from __future__ import annotations

import json

import pytest

from routelab.cli import main
from routelab.errors import KnobError
from routelab.hosts.frag import FragSender
from routelab.scenarios import frag, frag_real

SMALL = dict(duration=2.0, rate=50.0, ipfrag_time=3.0)


def summ(res):
    return {k: res.summary()[k] for k in frag.SUMMARY_KEYS}


def test_summary_keys_and_conservation():
    res = frag.run(seed=3, **SMALL)
    s = summ(res)
    assert list(s) == list(frag.SUMMARY_KEYS)
    rx = res.counters["hosts"]["local/17"]
    tx = res.counters["hosts"]["eth0"]
    assert s["sent"] == 100 == tx["datagrams_sent"]
    # every frame that reached the router went through ip_defrag, and ended
    # delivered or dropped with a reason (the run lasts until nothing is queued)
    assert s["reasm_reqds"] == tx["tx_packets"] - tx["wire_lost"] - tx["tx_dropped"]
    assert rx["queues"] == 0 and rx["mem"] == 0
    assert sum(v for k, v in rx.items() if k.startswith("frag_")) == s["reasm_reqds"]
    assert s["delivered"] == s["reasm_oks"] - rx["mixed"]
    assert res.extra["knobs"]["ipfrag_high_thresh"] == 262144


def test_no_loss_delivers_everything_and_same_seed_same_result():
    a = frag.run(seed=1, loss_pct=0.0, **SMALL)
    assert summ(a)["delivered"] == 100 and summ(a)["reasm_fails"] == 0
    assert summ(a)["reasm_reqds"] == 100 * 23
    assert summ(frag.run(seed=5, **SMALL)) == summ(frag.run(seed=5, **SMALL))


@pytest.mark.parametrize("rx", ["linux-2.4.19", "linux-6.x", "solaris"])
def test_host_sender_and_trace_sender_see_the_same_frames(rx):
    kn = dict(SMALL, receiver=rx, loss_pct=3.0, rate=150.0)
    a, b = frag.run(seed=2, sender="host", **kn), frag.run(seed=2, sender="trace", **kn)
    assert summ(a) == summ(b)
    assert a.counters["hosts"] == b.counters["hosts"]


def test_receivers_differ_as_their_rules_say():
    kn = dict(duration=2.0, rate=100.0, loss_pct=1.0, ipfrag_time=30.0)
    r19 = summ(frag.run(seed=1, receiver="linux-2.4.19", **kn))
    r6 = summ(frag.run(seed=1, receiver="linux-6.x", **kn))
    # 2.4.19 runs its evictor (many queues killed, memory pinned near 256 KB);
    # 6.x holds 4 MiB: no cliff yet in 2 s at this rate
    assert r19["frag_mem_max"] < 262144 + 5000 < r6["frag_mem_max"]
    assert r19["reasm_fails"] > r19["reasm_timeouts"]
    assert r6["reasm_fails"] == r6["reasm_timeouts"]


def test_impossible_knobs_are_refused():
    with pytest.raises(KnobError, match="datagram_bytes"):
        frag.run(datagram_bytes=65508)
    with pytest.raises(KnobError, match="ipfrag_low_thresh"):
        frag.run(ipfrag_high_thresh=1000, ipfrag_low_thresh=2000)
    with pytest.raises(KnobError, match="receiver"):
        frag.run(receiver="bsd")
    frag.run(datagram_bytes=65507, duration=0.1, rate=10.0, ipfrag_time=1.0)


def test_sender_ids_skip_zero_and_fragment_sizes():
    s = FragSender(1, 2, 32768, 100.0, 3)
    assert [r[1] for r in s.rows] == [1480] * 22 + [216]
    assert all(s.ip_id(k) != 0 for k in range(70000))
    assert s.ip_id(65535) == s.ip_id(0)


def test_cli_json(capsys):
    assert main(["frag", "--duration", "1", "--rate", "20", "--ipfrag-time", "2",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["sent"] == 20


def test_stored_real_result_is_there_and_readable():
    data = json.loads(frag_real.STORED.read_text())
    assert data["uname_r"] and data["runs"]
    for c in data["runs"]:
        assert set(c["real"]) == set(frag.SUMMARY_KEYS) == set(c["model"])


REASON = frag_real.why_not()


@pytest.mark.skipif(REASON is not None, reason=f"no real run here: {REASON}")
def test_real_kernel_matches_the_linux_6x_model():
    # the same frames (IDs, order, lost ones) played against this kernel; a
    # short timeout and a rate that reaches the 4 MiB cliff
    c = frag_real.compare(seed=1, duration=3.0, rate=200.0, loss_pct=2.0, ipfrag_time=2)
    real, model = c["real"], c["model"]
    assert real["sent"] == model["sent"] and real["reasm_reqds"] == model["reasm_reqds"]
    assert model["reasm_fails"] > model["reasm_timeouts"]      # the refusals happened
    # with the wheel's phase known (/proc/timer_list readable) they agree to a
    # few datagrams; estimated from CLOCK_MONOTONIC it can be ~0.1 s off
    # -- and only if the real sender kept to the schedule the model plays: on
    # a loaded machine it runs late, the frames reach the kernel later than
    # the model has them, and the refusals at the 4 MiB cliff shift
    # (CI on a loaded 2-core machine has shown 3.2 % with the sender on
    # schedule: the kernel's own timer and softirq timing, not the model)
    late = c["real_extra"]["max_late_s"]
    tol = 0.05 if c["jiffies_exact"] and late < 0.005 else 0.15
    for k in ("delivered", "reasm_oks", "reasm_fails", "reasm_timeouts"):
        assert abs(real[k] - model[k]) <= max(3, tol * model[k]), (k, real, model)


def test_cli_real_says_why_or_runs(capsys, monkeypatch):
    monkeypatch.setattr(frag_real, "why_not", lambda: "not Linux (Plan9)")
    assert main(["frag", "--real"]) == 1
    assert "cannot run here: not Linux (Plan9)" in capsys.readouterr().out


def test_host_nic_wire_loss():
    from routelab.hosts.nic import HostNic
    with pytest.raises(KnobError, match="loss_pct"):
        HostNic(1e9, loss_pct=101)
    with pytest.raises(KnobError, match="rng"):
        HostNic(1e9, loss_pct=1.0)
    res = frag.run(seed=1, loss_pct=100.0, sender="host", **SMALL)
    tx = res.counters["hosts"]["eth0"]
    assert tx["wire_lost"] == tx["tx_packets"] == 100 * 23
    assert summ(res)["reasm_reqds"] == 0 and summ(res)["delivered"] == 0
    # the loss is per frame: at 10 % about a tenth is lost, the same with the same seed
    a = frag.run(seed=4, loss_pct=10.0, sender="host", **SMALL).counters["hosts"]["eth0"]
    assert 0.08 < a["wire_lost"] / a["tx_packets"] < 0.12


def test_the_machines_ip_mib_counts_reassembly_and_delivers_datagrams():
    # the receiver is the engine's machine: its Ip MIB (/proc/net/snmp) holds
    # the reassembly counters, and InDelivers counts rebuilt datagrams, not
    # fragments (ip_local_deliver -> ip_defrag -> ip_local_deliver_finish)
    from routelab import procfs
    from routelab.scenarios import frag
    res = frag.run(loss_pct=1.0, duration=2.0, seed=3)
    ip, host = res.counters["ip"], res.counters["hosts"]["local/17"]
    for k in ("ReasmTimeout", "ReasmReqds", "ReasmOKs", "ReasmFails"):
        assert ip[k] == host[k]
    assert ip["InDelivers"] == ip["ReasmOKs"] < ip["ReasmReqds"] == ip["InReceives"]
    lines = procfs.snmp(res).splitlines()
    names, values = lines[0].split()[1:], lines[1].split()[1:]
    assert names.index("ReasmReqds") < names.index("FragOKs")
    assert int(values[names.index("ReasmOKs")]) == ip["ReasmOKs"]
