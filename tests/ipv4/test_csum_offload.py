"""Device features deciding checksum work: dev_queue_xmit's CHECKSUM_PARTIAL
test, skb_checksum_help's price, ip_forward's reset of ip_summed, the feature
strings of routelab.hardware, and a whole run (defaults leave it unchanged)."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from routelab import Device, Fib, PacketTrace, Route, Router
from routelab import costs as _costs
from routelab.core.skbuff import (
    CHECKSUM_COMPLETE,
    CHECKSUM_NONE,
    CHECKSUM_PARTIAL,
    CHECKSUM_UNNECESSARY,
    ip_to_int,
)
from routelab.errors import KnobError
from routelab.hardware import NETIF_F, NICS, cpu_profile, features_mask, netdev_features
from routelab.ipv4.ip_forward import ip_forward_csum
from routelab.ipv4.ip_output import dev_queue_xmit_csum, ip_output_plan, skb_checksum_help

CSUM = ("IP_CSUM", "NO_CSUM", "HW_CSUM", "SG")
COMBOS = [frozenset(c) for k in range(len(CSUM) + 1) for c in itertools.combinations(CSUM, k)]
STATES = (CHECKSUM_NONE, CHECKSUM_PARTIAL, CHECKSUM_UNNECESSARY, CHECKSUM_COMPLETE)
COST = {"ip_output": 1.0, "ip_fragment": 10.0, "dev_queue_xmit": 100.0,
        "hard_start_xmit": 1000.0, "tx_complete": 10000.0, "tx_irq": 100000.0,
        "skb_checksum_help": 7.0}


@pytest.mark.parametrize("feats", COMBOS, ids=lambda f: ",".join(sorted(f)) or "none")
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("ipv4", [True, False])
def test_dev_queue_xmit_helps_only_partial_skbs_the_device_cannot_sum(feats, state, ipv4):
    # 2.6.20: PARTIAL and no GEN_CSUM (NO_CSUM|HW_CSUM) and (no IP_CSUM or not IPv4)
    offload = "NO_CSUM" in feats or "HW_CSUM" in feats or ("IP_CSUM" in feats and ipv4)
    want = state == CHECKSUM_PARTIAL and not offload
    got = dev_queue_xmit_csum(np.array([state], dtype=np.uint8), features_mask(feats), ipv4)
    assert bool(got[0]) is want


def test_skb_checksum_help_is_fixed_part_plus_bytes_from_the_transport_header():
    got = skb_checksum_help(np.array([20, 60, 1500]), COST, 0.25)
    assert list(got) == [7.0, 7.0 + 40 * 0.25, 7.0 + 1480 * 0.25]
    assert _costs.COMPOSITION["csum_help"] == ("skb_checksum_help",)
    c = _costs.cost_table(cpu_profile("celeron-1200"))
    assert c.csum_s_per_byte == pytest.approx(704 / 1024 / 1.2e9)   # Vlasenko's anchor


def _plan(state, feats, length=1500, mtu=1500):
    n = 3
    length = np.full(n, length, dtype=np.int64)
    return ip_output_plan(length, np.array([0, 1, 1]), np.array([mtu, mtu]), np.zeros(n, bool),
                          COST, 0.5, np.ones(n, bool), np.full(n, state, dtype=np.uint8),
                          np.array([features_mask("HW_CSUM"), features_mask(feats)]), 0.25)


@pytest.mark.parametrize("feats", ["none", "SG", "IP_CSUM", "NO_CSUM", "HW_CSUM"])
@pytest.mark.parametrize("state", STATES)
def test_output_cost_carries_the_help_where_the_device_lacks_the_feature(feats, state):
    base = ip_output_plan(np.full(3, 1500), np.array([0, 1, 1]), np.array([1500, 1500]),
                          np.zeros(3, bool), COST, 0.5, np.ones(3, bool))
    out = _plan(state, feats)
    helped = state == CHECKSUM_PARTIAL and feats in ("none", "SG")
    extra = 7.0 + 1480 * 0.25
    assert list(out["csum_help"]) == [False, helped, helped]   # device 0 has HW_CSUM
    assert np.array_equal(out["out_cost"], base["out_cost"] + np.array([0, 1, 1]) * helped * extra)
    assert np.array_equal(out["nfrag"], base["nfrag"])
    assert np.array_equal(out["wire_bytes"], base["wire_bytes"])


def test_a_partial_packet_that_is_fragmented_is_summed_once():
    out = _plan(CHECKSUM_PARTIAL, "none", length=4000)
    base = _plan(CHECKSUM_NONE, "none", length=4000)
    assert list(out["nfrag"]) == [3, 3, 3]
    assert list(out["out_cost"] - base["out_cost"]) == [0.0] + [7.0 + 3980 * 0.25] * 2


def test_defaults_mean_no_checksum_state():
    a = ip_output_plan(np.full(3, 1500), np.zeros(3, int), np.array([1500]), np.zeros(3, bool),
                       COST, 0.5, np.ones(3, bool))
    b = _plan(CHECKSUM_NONE, "none")
    assert not a["csum_help"].any()
    assert np.array_equal(a["out_cost"], b["out_cost"])


def test_ip_forward_resets_the_checksum_state():
    s = np.array(STATES, dtype=np.uint8)
    assert list(ip_forward_csum(s)) == [CHECKSUM_NONE] * 4                 # 2.4.24 .. 2.6.20
    assert list(ip_forward_csum(s, "partial")) == [0, CHECKSUM_PARTIAL, 0, 0]  # later kernels


# -- feature strings and the NIC profiles ------------------------------------------------------

def test_feature_strings_parse():
    assert netdev_features("SG,IP_CSUM") == {"SG", "IP_CSUM"}
    assert netdev_features(" sg , netif_f_hw_csum ") == {"SG", "HW_CSUM"}
    assert netdev_features("none") == netdev_features("") == frozenset()
    assert features_mask("SG,IP_CSUM,HIGHDMA") == 1 | 2 | 32
    assert features_mask("TSO") == 1 << 16 and NETIF_F["GSO"] == 2048 and NETIF_F["LLTX"] == 4096


@pytest.mark.parametrize("bad", ["SG,FOO", "none,SG,,X", 5, ["IP_CSUM", "CSUM"]])
def test_bad_feature_names_are_knob_errors(bad):
    with pytest.raises(KnobError, match="features"):
        netdev_features(bad)


def test_nic_profiles_features_from_their_drivers():
    assert NICS["e100"].features == frozenset()          # pre-82550 e100 (ASSUMED chip)
    assert {"SG", "HW_CSUM", "TSO"} <= NICS["e1000"].features
    assert {"SG", "IP_CSUM", "TSO"} <= NICS["tg3"].features
    assert NICS["etun"].features == frozenset() and NICS["dummy"].features == frozenset()
    p = dataclasses.replace(NICS["etun"], features="SG,NO_CSUM")
    assert p.features == {"SG", "NO_CSUM"} and p.features_mask == 5
    with pytest.raises(KnobError):
        dataclasses.replace(NICS["etun"], features="SG,NOCSUM")


# -- a whole run --------------------------------------------------------------------------------

def _run(nic, state, forward_csum="none", n=40):
    devs = [Device("eth0", nic, 0), Device("eth1", nic, 0)]
    fib = Fib(routes=[Route("10.0.0.0/8", oif=0), Route("192.0.2.0/24", oif=1)],
              local_addrs=["10.255.255.254", "192.0.2.1"])
    r = Router("2.6.0", "opteron-2400x2", devs, fib, arp_static=[(1, "192.0.2.7")])
    r.kernel = dataclasses.replace(r.kernel, forward_csum=forward_csum)
    tr = PacketTrace.build(np.arange(n) / 1000.0, saddr=ip_to_int("10.0.0.5"),
                           daddr=ip_to_int("192.0.2.7"), length=1000, proto=6, ip_summed=state)
    res = r.run(tr, 0.1)
    return res, res.profile.get("ip_output+dev_queue_xmit+driver TX", 0.0), r


@pytest.mark.parametrize("nic", ["e100", "e1000"])
def test_a_run_pays_skb_checksum_help_only_when_the_forward_path_keeps_partial(nic):
    base, out0, _ = _run(nic, CHECKSUM_NONE)
    same, out1, _ = _run(nic, CHECKSUM_PARTIAL)                # 2.6.20: ip_forward -> NONE
    assert out1 == out0 and same.profile == base.profile
    assert np.array_equal(same.packets["t_depart"], base.packets["t_depart"], equal_nan=True)
    kept, out2, r = _run(nic, CHECKSUM_PARTIAL, "partial")
    assert kept.outcome_counts() == base.outcome_counts()
    extra = 40 * (r.costs.fn["skb_checksum_help"] + 980 * r.costs.csum_s_per_byte)
    if nic == "e100":                                        # no checksum feature
        assert out2 == pytest.approx(out0 + extra, rel=1e-12)
    else:                                                    # e1000: HW_CSUM
        assert out2 == out0
