"""Notebook 03 helpers (routelab.notebook.story3) and its questions, headless and on short runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from routelab.ipv4.ip_fragment import RECEIVERS, RECEIVERS_ORDER
from routelab.ipv4.udp import truesize_2419
from routelab.notebook.answers import for_notebook
from routelab.notebook.checks import ask
from routelab.notebook.explorers import EXPLORERS
from routelab.notebook.plots import PNG_SIGNATURE
from routelab.notebook.story3 import (
    NFS_WRITE_OVERHEAD,
    fragment_rows,
    fragment_table,
    gauge_figure,
    loss_figure,
    loss_sweep,
    memory_figure,
    nfs_explorer,
    nfs_run,
    nfs_table,
    pick_rpc,
    real_or_stored,
    real_table,
    reassembly_trace,
    retry_room,
    round_trip,
    rpc_attempts,
    rpc_table,
    rpc_timeline_figure,
    sendbuf_gauge,
    survive_fraction,
    woken_retry_room,
)
from routelab.scenarios import frag

NB = "03-fragment-flooding"
REPO = Path(__file__).resolve().parents[2]


# -- section 1: fragments ---------------------------------------------------------------------

def test_a_32k_write_is_23_fragments_highest_offset_first():
    rows = fragment_rows(32768 + NFS_WRITE_OVERHEAD)
    assert len(rows) == 23
    offsets = [r[1] for r in rows]
    assert offsets == sorted(offsets, reverse=True) and offsets[-1] == 0
    assert all(o % 8 == 0 for o in offsets)
    assert [r[2] for r in rows[1:]] == [1480] * 22           # every full one: 1480 B
    assert not rows[0][3] and all(r[3] for r in rows[1:])     # MF clear only on the last
    assert sum(r[2] for r in rows) == 32768 + NFS_WRITE_OVERHEAD + 8
    assert rows[1][5] == truesize_2419(1500) == 1696
    assert "23 fragments" in fragment_table(32768 + NFS_WRITE_OVERHEAD)


def test_round_trip_rebuilds_bytes_and_a_missing_head_leaves_an_orphan():
    whole = round_trip()
    assert whole["identical"] and whole["queues"] == 0 and whole["mem"] == 0
    headless = round_trip(drop=22)
    assert not headless["rebuilt"] and headless["queues"] == 1
    r = RECEIVERS["linux-2.4.19"]
    assert headless["mem"] == 22 * r.rx_truesize + r.qsize


# -- section 2: the send buffer ----------------------------------------------------------------

def test_woken_retry_room_follows_the_soft_limit():
    room = woken_retry_room(65535)
    # first the small last fragment, then full ones while wmem < sndbuf (soft by one skb)
    wmem, n = 65535 // 2, 0
    for r in fragment_rows(32768 + NFS_WRITE_OVERHEAD):
        if wmem >= 65535:
            break
        wmem += r[5]
        n += 1
    assert room["fits"] == n == 20 and room["status"] == "EAGAIN"
    assert woken_retry_room(1 << 20)["fits"] == 23


def test_gauge_unfixed_cuts_datagrams_short_and_the_fix_never_does():
    u = sendbuf_gauge(6, policy="2.4.19")
    f = sendbuf_gauge(6, policy="2.4.20")
    assert u.incomplete > 0 and u.frags_wasted > 0 and u.delivered < 6
    assert f.incomplete == 0 and f.frags_wasted == 0 and f.delivered == 6
    assert u.wmem.min() >= 0 and f.wmem[-1] == 0              # every skb given back
    assert f.wmem.max() > f.sndbuf                             # forced: past sndbuf
    assert f.wmem.max() <= f.sndbuf + sum(r[5] for r in fragment_rows(32768 + NFS_WRITE_OVERHEAD))
    # a sender that wakes late enough fits its retry
    late = sendbuf_gauge(6, policy="2.4.19", build_s=800e-6)
    assert late.delivered == 6 and late.incomplete > 0
    fig, alt = gauge_figure({"a": u, "b": f})
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes]
    assert "EAGAIN, datagram cut short" in legends[0]
    # the fix's EAGAINs come before any fragment left: not marked as cut short
    assert not any("cut short" in t for t in legends[1])
    assert any("before the first fragment" in t for t in legends[1])
    assert "cut short" in alt and "before the first fragment (nothing sent)" in alt
    assert "1 datagrams" not in alt


# -- sections 5-7: reassembly -----------------------------------------------------------------

@pytest.mark.parametrize("receiver", RECEIVERS_ORDER)
def test_replay_counts_what_the_frag_scenario_counts(receiver):
    kn = dict(loss_pct=2.0, rate=50.0, duration=4.0)
    tr = reassembly_trace(receiver, **kn, ipfrag_time=3.0)
    s = frag.run(seed=1, receiver=receiver, ipfrag_time=3.0, **kn).summary()
    assert tr.delivered == s["delivered"]
    assert tr.stats["ReasmOKs"] == s["reasm_oks"] and tr.stats["ReasmReqds"] == s["reasm_reqds"]
    assert tr.stats["ReasmFails"] == s["reasm_fails"]
    assert tr.stats["ReasmTimeout"] == s["reasm_timeouts"]
    assert tr.mem.min() >= 0 and tr.mem[-1] == 0 and tr.queues[-1] == 0


def test_six_refuses_and_delivers_fewer_than_the_evictors():
    traces = {r: reassembly_trace(r, loss_pct=1.0, duration=6.0) for r in RECEIVERS_ORDER}
    d = {r: t.delivered for r, t in traces.items()}
    assert d["linux-6.x"] < d["linux-2.4.19"] <= d["linux-2.4.22"]
    assert traces["linux-6.x"].stats["frag_refused"] > 0
    assert all(traces[r].stats["frag_refused"] == 0 for r in RECEIVERS_ORDER[:3])
    fig, alt = memory_figure(traces)
    assert len([a for a in fig.axes if a.get_visible()]) == 4 and "limit" in alt


def test_loss_sweep_follows_the_law_without_a_limit():
    sw = loss_sweep((0.0, 2.0), receivers=("linux-2.4.19",), duration=6.0)
    assert sw["unlimited"][0] == 1.0
    assert abs(sw["unlimited"][1] - survive_fraction(2.0)) < 0.06
    assert sw["linux-2.4.19"][1] <= sw["unlimited"][1] + 1e-9
    fig, alt = loss_figure(sw)
    assert "law" in alt and fig.axes[0].get_xlabel().endswith("[%]")


def test_real_or_stored_labels_its_kernel():
    stored = real_or_stored(live=False)
    assert stored["source"] == "stored" and stored["why"]
    doc = json.loads((REPO / "routelab" / "data" / "frag_real.json").read_text())
    assert stored["uname_r"] == doc["runs"][0]["uname_r"]
    text = real_table(stored)
    assert f"kernel {stored['uname_r']}" in text and "stored result" in text


# -- sections 3-4, 9-10: NFS -------------------------------------------------------------------

@pytest.fixture(scope="module")
def base():
    return nfs_run(seed=1, file_mb=1)


def test_one_rpcs_attempts_never_include_offset_0_until_it_gets_through(base):
    xid = pick_rpc(base, min_failed=1)
    att = rpc_attempts(base, xid)
    cut = [a for a in att if a["end"] == "eagain"]
    assert cut
    for a in cut:
        assert a["frag_off"].size < 23 and 0 not in a["frag_off"].tolist()
        assert a["server"][0] != "completed"
        assert np.all(np.diff(a["frag_off"]) < 0)              # highest offset first
    done = [a for a in att if a["server"][0] == "completed"]
    assert done and done[0]["frag_off"].size == 23 and 0 in done[0]["frag_off"].tolist()
    assert f"WRITE xid {xid}" in rpc_table(base, xid)
    fig, alt = rpc_timeline_figure(base, xid)
    assert "offset 0" in alt and fig.axes[1].get_xlabel().startswith("time")


def test_woken_retries_stop_near_the_computed_room(base):
    rr = retry_room(base)
    assert rr["tried"] > 0 and rr["counts"].size + rr["whole"] <= rr["tried"]
    room = woken_retry_room()["fits"]
    assert np.median(rr["counts"]) >= room - 1


def test_nfs_table_and_explorer():
    assert EXPLORERS[NB] is nfs_explorer
    ex = nfs_explorer(file_mb=0.5)
    assert ex.last_error is None and "MB/s" in ex.readout_text
    assert ex.png.startswith(PNG_SIGNATURE) and "EAGAIN" in ex.alt
    ex.update(frag_alloc="force-wmalloc")
    assert ex.last_error is None and "force-wmalloc" in ex.readout_text
    assert "unpatched" in ex.readout_text       # the report's ~2 MB/s is the unfixed client's
    ex.update(frag_alloc="sock_wmalloc")
    assert ex.last_error is not None and "frag_alloc" in ex.last_error


def test_explorer_readout_counts_only_write_replies_when_cut_off():
    # 1 % loss, fixed timer: the 3-s cap stops the run with one WRITE still out but its
    # COMMIT answered; the COMMIT's reply must not count as 32 KiB acknowledged.
    ex = nfs_explorer(loss_pct=1.0, rpc_timer="fixed")
    text = ex.readout_text
    assert "not written in 3 s" in text
    acked, total = (float(x) for x in
                    text.split("not written in 3 s: ")[1].split(" MB")[0].split(" of "))
    assert acked < total
    from routelab.scenarios import nfs
    s = nfs.run(seed=1, file_mb=0.5).summary()
    assert "write_MBps" in nfs_table({"a": s})


# -- the questions ----------------------------------------------------------------------------

def test_the_notebook_has_five_questions_and_two_exercises_that_need_the_mechanism():
    qs = for_notebook(NB)
    assert len(qs) >= 5
    assert ask(NB, "n-fragments", 23, udp_bytes=32768 + NFS_WRITE_OVERHEAD).ok
    assert not ask(NB, "n-fragments", 22, udp_bytes=32768 + NFS_WRITE_OVERHEAD).ok
    room = woken_retry_room()
    fb = ask(NB, "woken-room", 20, room=room)
    assert fb.ok and f"unless {room['n'] - room['fits']} more fragments" in fb.explanation
    assert not ask(NB, "woken-room", 23, room=room).ok     # "it fits" is wrong
    assert not ask(NB, "woken-room", 16, room=room).ok


def test_survive_and_orphan_answers_are_judged_on_what_they_name():
    unl = reassembly_trace("linux-6.x", loss_pct=1.0, ipfrag_high_thresh=1 << 40, run_out=False)
    law = survive_fraction(1.0)
    assert ask(NB, "survive-1pct", 0.99 ** 23, unlimited=unl, law=law).ok
    assert not ask(NB, "survive-1pct", 0.99, unlimited=unl, law=law).ok   # forgot the 23
    fb = ask(NB, "ex1-orphans", 7, receiver="linux-2.4.19")
    assert fb.ok and "37,736" in fb.explanation
    assert ask(NB, "ex2-orphan-rate", 2.2, receiver="linux-6.x").ok
    assert not ask(NB, "ex2-orphan-rate", 65, receiver="linux-6.x").ok    # the count, not a rate


def test_fix_speedup_bands():
    before = {"write_MBps": 2.0, "fragments_wasted": 80, "fragments_sent": 100,
              "rpc_resends": 5}
    fast = dict(before, write_MBps=9.0, fragments_wasted=0)
    same = dict(before, write_MBps=2.2)
    assert ask(NB, "fix-speedup", "c", before=before, after=fast).ok
    assert ask(NB, "fix-speedup", "a", before=before, after=same).ok
    assert "80%" in ask(NB, "fix-speedup", "a", before=before, after=fast).explanation


def test_retry_room_reports_the_spacing_of_attempts(base):
    rr = retry_room(base)
    # a cut-short attempt drains ~20 fragments (0.12 ms each) to the line before the retry
    assert 1.5 < rr["gap_ms"] < 4.0


def test_q4_states_the_rule_it_needs_and_hides_its_outcome():
    cells = json.loads((REPO / "notebooks" / f"{NB}.ipynb").read_text(encoding="utf-8"))["cells"]
    ids = [c["id"] for c in cells]
    src = {c["id"]: "".join(c["source"]) for c in cells}
    above = "\n".join(src[i] for i in ids[:ids.index("q4")])
    assert "(see below)" not in src["s6"]
    assert "drops every fragment" in src["s6"]          # the rule a student reasons from
    assert "198" not in above and "refuse above limit" not in above
    # Q1's table, which prints the answer, comes after its check
    assert ids.index("q1-check") < ids.index("frag-table")


def test_retry_whole_is_judged_on_the_share_of_woken_retries(base):
    rr, room = retry_room(base), woken_retry_room()
    fb = ask(NB, "retry-whole", "c", rr=rr, room=room)
    assert fb.ok and f"{rr['whole']:,} of {rr['tried']:,}" in fb.explanation
    assert "0.37 ms" in fb.explanation                      # 3 frames of 0.123 ms
    assert not ask(NB, "retry-whole", "a", rr=rr, room=room).ok
    many = {"whole": 90, "tried": 100}
    assert ask(NB, "retry-whole", "a", rr=many, room=room).ok
    assert ask(NB, "retry-whole", "b", rr={"whole": 50, "tried": 100}, room=room).ok


def test_sndbuf_slider_can_return_to_its_default():
    w = nfs_explorer(file_mb=0.25).controls["sndbuf"]
    assert (w.value - w.min) % w.step == 0 and w.value == 65535
    assert w.max >= 1_068_160                                   # 2.4.20's buffer in reach
