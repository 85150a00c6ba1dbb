"""Scenario ``rcu``: a route-cache DoS and RCU grace periods under a softirq flood (story 2).

Robert Olsson's lab router ("route cache DoS testing and softirqs",
linux-kernel, 2004, replying to Dipankar Sarma): a 2-way 2.4 GHz P4 Xeon with
256 MB, two gigabit input ports (eth0, eth2) each offered ``pps_per_port`` of
60-byte packets from a pktgen source cycling through ``flows`` concurrent
flows of ``flow_len`` packets with random destinations
(:class:`routelab.traffic.Pktgen`), forwarded out of eth1 and eth3.  Each
input port's softirq work runs on its own CPU (NAPI, e1000).  A user process
loops calling ``gettimeofday`` (on every CPU, or pinned to one: ``loops``);
the longest time it was kept off the CPU is ``user_max_delay_s``.

Route-cache entries are freed through RCU: unhashed entries still count
against ``max_size`` until a grace period ends, and under a softirq flood
grace periods stretch -- the ``kernel`` knob selects which events are
quiescent states (vanilla 2.6.0, the earlier rcu-softirq patch, call_rcu_bh;
2.4.24 frees at once).  How the CPU is shared between softirq work, the user
task and ksoftirqd is modelled in ``routelab.core.softirq.Cpu.do_softirq``.

Long runs are generated and simulated in windows of ``WINDOW_S`` seconds, so a
50 s flood (28 M offered packets) runs in bounded memory; pass ``progress``
to :func:`run` to follow it.  Calibration: ``docs/calibration-story2.md``.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.sched import LOOP_NAME
from ..core.softirq import INTERRUPTS
from ..errors import KnobError
from ..ipv4.fib import Fib, Route, Rule
from ..result import OUTCOMES, Result
from ..router import Device, Router
from ..sysctl import Knob
from ..traffic import FLOW_ORDERS, Pktgen, TraceWindows
from .common import cache_knobs, cpu_knob, kernel_knob, run_knobs, run_scenario, sysctl_of

NAME = "rcu"
TITLE = "Route-cache DoS and RCU grace periods under a softirq flood (story 2)"

WINDOW_S = 0.5   # trace generation / simulation window, seconds
LOOP_PLACEMENTS = ("all", "cpu0", "cpu1")

KNOBS: dict[str, Knob] = {k.name: k for k in [
    kernel_knob("2.6.0"),
    cpu_knob("p4-xeon-2400x2"),
    Knob("pps_per_port", 283_000.0, float, 1.0, 1_500_000.0, "pps",
         "Offered rate on each of the two input ports (60-byte packets).", step=1000),
    Knob("flows", 32768, int, 1, 1_000_000, "flows", "Concurrent pktgen flows."),
    Knob("flow_len", 10, int, 1, 1_000_000, "packets",
         "Packets per flow before it moves to a new random destination."),
    Knob("flow_order", "sequential", str, choices=FLOW_ORDERS,
         help="How pktgen takes turns between flows: 'sequential' (flow_len packets of one "
              "flow, then the next flow; the calibration's fitted reading) or 'random' (a "
              "random flow per packet, each destination kept flow_len + 1 packets: the "
              "first pktgen with flows, v2.58 in 2.6.11; 2.6.0's pktgen has no flows)."),
    Knob("cpus", 2, int, 1, 2, "CPUs", "CPUs used (one input port each when 2)."),
    Knob("rx_ring", 256, int, 16, 4096, "descriptors", "RX descriptors per input NIC."),
    Knob("napi_weight", 64, int, 1, 1024, "packets",
         "NAPI poll weight of the input NICs: packets per dev->poll call; net_rx_action "
         "looks at its one-jiffy time limit only between calls."),
    Knob("user_task", True, bool, help="The gettimeofday loop runs (on the CPUs 'loops' names)."),
    Knob("loops", "all", str, choices=LOOP_PLACEMENTS,
         help="Where the gettimeofday loop runs: 'all' (one on every CPU, the calibration's "
              "set-up), 'cpu0' or 'cpu1' (the one 'user app' the report names, pinned there: "
              "the model has no SMP load balancer)."),
    Knob("user_tick_share", 0.20, float, 0.0, 1.0, "",
         "Share of the ticks that interrupt the loop's own code that land in user mode "
         "(a quiescent state) rather than inside sys_gettimeofday. Documented range "
         "0.05-0.20 (docs/calibration-story2.md); 0.20 fitted to the overflows.", step=0.01),
    Knob("irq0_phase_ms", 0.5, float, 0.0, 0.999, "ms",
         "When CPU0's IRQ0 (the PIT) comes after each local APIC tick: it ends CPU0's "
         "slivers of user time without a scheduler tick or quiescent state. Set at "
         "boot, unknown: ASSUMED 0.5, range 0-1 ms.", step=0.05),
    Knob("tx_irq_us", 0.0, float, 0.0, 1000.0, "us",
         "0: the output NIC's interrupt is masked when do_softirq returns (the reading "
         "of the e1000 driver), so slivers end at timer interrupts. > 0: it fires this "
         "long after the return and ends the sliver (65.5 = the old TX_IRQ_DELAY).",
         step=0.5),
    Knob("other_hogs", 0, int, 0, 8, "tasks",
         "Further CPU-bound nice-0 tasks on every CPU (with user_task). The report "
         "does not say what else ran on the box: ASSUMED 0."),
    Knob("sleepers", 0, int, 0, 8, "tasks",
         "Mostly-sleeping nice-0 tasks on every CPU (a shell, sshd, top: run "
         "sleeper_burst_ms, sleep sleeper_sleep_ms), with user_task. ASSUMED 0."),
    Knob("others_on", "all", str, choices=("all", "loop", "cpu0", "cpu1"),
         help="Where other_hogs and sleepers run: 'all' (that many on every CPU), 'loop' "
              "(only on the loop's CPUs) or one CPU -- pinned, as the model has no SMP "
              "load balancer."),
    Knob("sleeper_burst_ms", 1, int, 1, 100, "ms", "CPU time a sleeper needs per wakeup."),
    Knob("sleeper_sleep_ms", 100, int, 1, 10_000, "ms",
         "How long a sleeper sleeps between bursts."),
    *cache_knobs("ram_mb", "gc_min_interval", "gc_thresh", "max_size", "netdev_max_backlog",
                 "rcu_maxbatch"),
    *run_knobs(1.0, 120.0),
]}

SRC_A, SRC_B = 0x0A000001, 0x0B000001   # pktgen boxes behind eth0 and eth2
SINK_1, SINK_3 = "192.168.1.2", "192.168.3.2"   # next hops behind eth1 and eth3


def build(values: dict, seed: int) -> tuple[Router, TraceWindows]:
    """Router and offered trace (in windows) for resolved knob values."""
    two = values["cpus"] == 2
    ring, weight = values["rx_ring"], values["napi_weight"]
    devices = [Device("eth0", "e1000", 0, rx_ring=ring, napi_weight=weight),
               Device("eth1", "e1000", 0),
               Device("eth2", "e1000", 1 if two else 0, rx_ring=ring, napi_weight=weight),
               Device("eth3", "e1000", 1 if two else 0)]
    # the flood leaves through a next-hop box on each output port (ASSUMED: the
    # report does not say; what matters is one resolved neighbour per port)
    fib = Fib(routes=[Route("0.0.0.0/0", oif=1, gateway=SINK_1, table=100),
                      Route("0.0.0.0/0", oif=3, gateway=SINK_3, table=101),
                      Route("192.168.1.0/24", oif=1), Route("192.168.3.0/24", oif=3),
                      Route("10.0.0.0/8", oif=0), Route("11.0.0.0/8", oif=2)],
              rules=[Rule(100, 100, iif=0), Rule(101, 101, iif=2)],
              local_addrs=["10.255.255.254", "11.255.255.254"])
    tasks = []
    if values["user_task"]:
        where = values["loops"]
        if where != "all" and not two and where != "cpu0":
            raise KnobError("loops", where, "'all' or 'cpu0' with cpus=1")
        on = None if where == "all" else (int(where[3:]),)
        tasks.append(dict(name=LOOP_NAME, kind="cpu", user_share=values["user_tick_share"],
                          cpus_allowed=on))
        others = {"all": None, "loop": on, "cpu0": (0,), "cpu1": (1,)}[values["others_on"]]
        if others == (1,) and not two:
            raise KnobError("others_on", "cpu1", "'all', 'loop' or 'cpu0' with cpus=1")
        tasks += [dict(name=f"hog{i}", kind="cpu", cpus_allowed=others)
                  for i in range(values["other_hogs"])]
        tasks += [dict(name=f"sleeper{i}", kind="sleeper", burst=values["sleeper_burst_ms"],
                       sleep=values["sleeper_sleep_ms"], cpus_allowed=others)
                  for i in range(values["sleepers"])]
    elif values["other_hogs"] or values["sleepers"]:
        raise KnobError("other_hogs/sleepers", values["other_hogs"] + values["sleepers"],
                        "0 without user_task (further tasks need the scheduler)")
    router = Router(values["kernel"], values["cpu"], devices, fib, sysctl=sysctl_of(values),
                    ncpus=values["cpus"], user_task=values["user_task"], seed=seed,
                    arp_static=[(1, SINK_1), (3, SINK_3)], tasks=tasks)
    kw = dict(pps=values["pps_per_port"], flows=values["flows"], flow_len=values["flow_len"],
              order=values["flow_order"])
    gens = [Pktgen(saddr=SRC_A, dev=0, seed=seed * 2 + 1, **kw),
            Pktgen(saddr=SRC_B, dev=2, seed=seed * 2 + 2, **kw)]
    # how slivers of user time end (read by each Cpu when the run starts; run()
    # restores the defaults afterwards)
    INTERRUPTS["irq0_phase_s"] = values["irq0_phase_ms"] * 1e-3
    INTERRUPTS["tx_irq_s"] = values["tx_irq_us"] * 1e-6 if values["tx_irq_us"] > 0 else None
    duration = values["duration"]
    expected = sum(g.count(0.0, duration)[1] for g in gens)

    def make(t0: float, t1: float):
        from ..core.skbuff import PacketTrace

        return PacketTrace.concat([g.window(t0, t1) for g in gens])

    return router, TraceWindows(make, duration, WINDOW_S, expected)


def _port_summary(res: Result) -> dict:
    """The report's figures: netstat -i summed over ports, grace periods, throughput."""
    from ..procfs import dev_counters

    rows = dev_counters(res)
    s = {"rx_ok": sum(r["RX-OK"] for r in rows), "rx_drop": sum(r["RX-DRP"] for r in rows),
         "rx_ovr": sum(r["RX-OVR"] for r in rows), "tx_ok": sum(r["TX-OK"] for r in rows)}
    fwd = int(np.count_nonzero(res.packets["outcome"][: res.offered] == OUTCOMES["forwarded"]))
    s["throughput_kpps"] = round(fwd / res.duration / 1e3, 2)
    gp = res.extra.get("grace_periods_s", np.zeros(0))
    s["rcu_grace_ms_p50"] = round(float(np.median(gp)) * 1e3, 2) if gp.size else math.nan
    s["rcu_grace_ms_p95"] = (round(float(np.percentile(gp, 95)) * 1e3, 2) if gp.size
                             else math.nan)
    s["rcu_grace_ms_max"] = round(float(gp.max()) * 1e3, 2) if gp.size else math.nan
    tasks = res.counters.get("sched", {}).get("tasks")
    if tasks:
        # do_softirq passes by where they ran, per CPU (Olsson's 31 Mar counters)
        ksd = [next((t for t in cpu if t["kind"] == "ksoftirqd"), None) for cpu in tasks]
        s["passes_irq_exit"] = [t["cpu_irq_exit_passes"] if t else 0 for t in ksd]
        s["passes_ksoftirqd"] = [t["softirq_passes"] if t else 0 for t in ksd]
    dst = res.counters.get("dst")
    rcu = res.counters.get("rcu")
    if dst is not None:
        # what /proc showed once the flood stopped and the last grace period ended
        s["entries_after_flood"] = int(dst["entries"] - (rcu["pending"] if rcu else 0))
    return s


def run(seed: int = 1, progress=None, **knobs) -> Result:
    """Run the scenario; see ``KNOBS`` for the parameters.

    Parameters
    ----------
    seed : int
        Same knobs + same seed = identical results.
    progress : callable(float), optional
        Called with the fraction of the run simulated so far (at most ~100
        times), e.g. to drive a notebook progress bar.  Not a knob.
    **knobs
        Values for ``KNOBS`` (others take their defaults).
    """
    # (no pings here: the wire offset of Result.rtt is sized by the flood's packets)
    saved = dict(INTERRUPTS)
    try:
        return run_scenario(NAME, KNOBS, build, knobs, seed, Pktgen.IP_BYTES,
                            progress=progress, summary=_port_summary)
    finally:
        INTERRUPTS.update(saved)
