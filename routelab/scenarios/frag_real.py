"""``python -m routelab frag --real``: the ``frag`` experiment on this machine's kernel.

The same sender (datagrams, IP IDs, fragment order) and the *same lost
frames* as the model's run -- the job lists exactly which frames the
model's lossy wire dropped, and those are not sent -- are played against
the kernel the machine runs, inside a fresh unprivileged user + network
namespace (``unshare -Urn``: no root needed, nothing outside the namespace
touched; the namespace's own ``ipfrag_*`` sysctls and ``/proc/net/snmp``).
A raw socket sends the fragments to 127.0.0.1 and a UDP socket counts what
the kernel rebuilds (see :mod:`routelab.scenarios._frag_real_child`).

The model then runs as ``receiver="linux-6.x"`` with the same knobs and the
truesizes and queue size *measured* in the namespace (loopback's skbs are
not a NIC's), and both summaries are printed side by side.  Because the
losses are the same frames, a difference is the model's (or the real
sender's timing: it is a Python loop, ``max_late_s`` says how late it ran).

The 6.x timers go through the timer wheel, whose slots lie at fixed jiffies
values, so the model is also given HZ (read in the namespace: a millisecond
sysctl kept in jiffies reads back one jiffy's worth) and the jiffies counter
at the first send: exact from ``/proc/timer_list`` (the parent, when root) or
``/proc/schedstat`` (world-readable where CONFIG_SCHEDSTATS is on), else
estimated from CLOCK_MONOTONIC and INITIAL_JIFFIES (~0.1 s off: results then
agree to ~5 % instead of a datagram or two).  ``jiffies_source`` says which.

Where it cannot run (not Linux, no ``unshare``, user namespaces off, a
seccomp filter, raw sockets refused), :func:`why_not` says why in one line.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import KnobError
from .common import resolve
from .frag import KNOBS, SUMMARY_KEYS, resolve_receiver, run, sender_of

__all__ = ["why_not", "run_real", "compare", "format_table", "main"]

CHILD = Path(__file__).with_name("_frag_real_child.py")
#: where a stored real run is kept (notebook 03 shows it where no live run can be made)
STORED = Path(__file__).resolve().parent.parent / "data" / "frag_real.json"


def _python() -> str:
    return sys.executable or shutil.which("python3") or "python3"


def why_not() -> str | None:
    """``None`` if a real run can be made here, else the reason in one line."""
    if platform.system() != "Linux":
        return f"not Linux ({platform.system()}): the real run needs Linux network namespaces"
    unshare = shutil.which("unshare")
    if unshare is None:
        return "no 'unshare' program (util-linux) on this machine"
    try:
        p = subprocess.run([unshare, "-Urn", _python(), "-c",
                            "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, "
                            "socket.IPPROTO_RAW); open('/proc/sys/net/ipv4/ipfrag_time').read()"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"could not start 'unshare -Urn': {e}"
    if p.returncode != 0:
        err = (p.stderr.strip().splitlines() or ["?"])[-1]
        if "unshare" in err and ("Operation not permitted" in err or "EPERM" in err):
            return ("unprivileged user namespaces are not allowed here (sysctl "
                    "user.max_user_namespaces / kernel.unprivileged_userns_clone, or a "
                    f"seccomp filter): {err}")
        return f"the namespace refused the experiment: {err}"
    return None


def _jiffies_offset():
    """``(jiffies - floor(CLOCK_MONOTONIC * HZ), HZ)`` from /proc/timer_list
    where it can be read (root); ``(None, None)`` elsewhere (the child then
    takes jiffies to have started at INITIAL_JIFFIES at boot, about 0.1 s off)."""
    import re
    import time
    try:
        t = time.monotonic()
        text = Path("/proc/timer_list").read_text()
    except OSError:
        return None, None
    j = re.search(r"^jiffies: (\d+)", text, re.M)
    if not j:
        return None, None
    # HZ from the child (retrans_time_ms); the offset is checked against it there
    for hz in (1000, 300, 250, 100):
        off = int(j.group(1)) - int(t * hz)
        if abs((off % (1 << 32)) - ((1 << 32) - 300 * hz)) < 30 * hz:
            return off % (1 << 32), hz
    return None, None


def _job(values: dict, seed: int, lost_file: str) -> dict:
    sender = sender_of(values, seed)
    cols, _ = sender.frames()
    m = sender.fragments_per_datagram
    index = {r[0] >> 3: i for i, r in enumerate(sender.rows)}
    arrived = np.zeros(sender.count * m, dtype=bool)
    i = np.array([index[int(o)] for o in cols["frag_off"].tolist()], dtype=np.int64) \
        if len(cols["frag_off"]) else np.zeros(0, np.int64)
    arrived[cols["tag"].astype(np.int64) * m + i] = True
    Path(lost_file).write_bytes(np.packbits(~arrived, bitorder="little").tobytes())
    lim = resolve_receiver(values)
    return {
        "rows": [list(r) for r in sender.rows],
        "ids": [sender.ip_id(k) for k in range(sender.count)],
        "rate": values["rate"], "count": sender.count,
        "udp_len": values["datagram_bytes"] + 8,
        "ipfrag_high_thresh": values["ipfrag_high_thresh"] if values["ipfrag_high_thresh"]
        is not None else None,
        "ipfrag_low_thresh": lim["ipfrag_low_thresh"] if values["ipfrag_high_thresh"]
        is not None or values["ipfrag_low_thresh"] is not None else None,
        "ipfrag_time": values["ipfrag_time"] if values["ipfrag_time"] is not None
        else lim["ipfrag_time"],
        "lost_file": lost_file,
        "frames_arriving": int(arrived.sum()),
        **dict(zip(("jiffies_offset", "jiffies_hz"), _jiffies_offset(), strict=True)),
    }


def run_real(seed: int = 1, timeout: float | None = None, **knobs) -> dict:
    """Run the experiment in a namespace; return the child's measurements with
    the summary keys of the ``frag`` scenario (``summary``).  Raises
    ``RuntimeError`` with :func:`why_not`'s reason where it cannot run."""
    values = resolve(KNOBS, dict(knobs, receiver="linux-6.x"))
    resolve_receiver(values)
    reason = why_not()
    if reason:
        raise RuntimeError(reason)
    with tempfile.TemporaryDirectory(prefix="routelab-frag-") as d:
        os.chmod(d, 0o755)
        lost = os.path.join(d, "lost.bin")
        job = _job(values, seed, lost)
        jf = os.path.join(d, "job.json")
        Path(jf).write_text(json.dumps(job))
        budget = timeout if timeout is not None else \
            values["duration"] * 3 + float(job["ipfrag_time"]) + 60
        p = subprocess.run([shutil.which("unshare"), "-Urn", _python(), str(CHILD), jf],
                           capture_output=True, text=True, timeout=budget)
    if p.returncode != 0:
        raise RuntimeError("the namespace run failed: "
                           + (p.stderr.strip().splitlines() or ["?"])[-1])
    out = json.loads(p.stdout)
    snmp = out["snmp_delta"]
    sent = job["count"]
    out["summary"] = {
        "sent": sent,
        "delivered": out["received"]["good"],
        "delivered_fraction": out["received"]["good"] / sent,
        "reasm_reqds": snmp["ReasmReqds"],
        "reasm_oks": snmp["ReasmOKs"],
        "reasm_fails": snmp["ReasmFails"],
        "reasm_timeouts": snmp["ReasmTimeout"],
        "frag_mem_max": out["frag_peak"]["memory"],
    }
    out["knobs"] = {k: v for k, v in values.items()}
    out["seed"] = int(seed)
    out["frames_arriving_model"] = job["frames_arriving"]
    out["jiffies_exact"] = not out.get("jiffies_source", "estimate").startswith("estimate")
    return out


def model_for(real: dict, seed: int, **knobs):
    """The ``linux-6.x`` model run with the real run's measured truesizes and
    queue size (frames of the full size cost ``truesize_full``, smaller ones
    ``truesize_small``) and the limits the namespace actually had."""
    m = real["measured"]
    full_len, tf, ts = m["full_ip_len"], m["truesize_full"], m["truesize_small"]

    def truesize(ip_len: int, full_len=full_len, tf=tf, ts=ts) -> int:
        return tf if ip_len >= full_len else ts

    sysctl = real["sysctl"]
    kn = dict(knobs, receiver="linux-6.x", ipfrag_high_thresh=int(sysctl["ipfrag_high_thresh"]),
              ipfrag_low_thresh=int(sysctl["ipfrag_low_thresh"]),
              ipfrag_time=float(sysctl["ipfrag_time"]))
    hz = real.get("hz")
    return run(seed, rx_truesize=truesize, rx_qsize=m["qsize"], rx_hz=hz,
               rx_jiffies0=int(real.get("jiffies_t0", 0)) if hz else 0, **kn)


def compare(seed: int = 1, **knobs) -> dict:
    """Real run and model run side by side: ``{"real": ..., "model": ...,
    "measured": ..., "uname_r": ...}``."""
    real = run_real(seed, **knobs)
    res = model_for(real, seed, **knobs)
    model = {k: res.summary()[k] for k in SUMMARY_KEYS}
    return {"uname_r": real["uname_r"], "hz": real.get("hz"),
            "jiffies_exact": real["jiffies_exact"], "jiffies_source": real.get("jiffies_source"),
            "jiffies_t0": real.get("jiffies_t0"), "knobs": real["knobs"], "seed": seed,
            "measured": real["measured"], "sysctl": real["sysctl"],
            "real": real["summary"], "model": model,
            "real_extra": {k: real[k] for k in ("received", "frag_peak", "send_seconds",
                                                "max_late_s", "frames_sent", "left_at_end")}}


def format_table(cmp: dict) -> str:
    """The two summaries as text columns."""
    lines = [f"frag --real: kernel {cmp['uname_r']} (namespace) vs model linux-6.x",
             f"  measured: truesize {cmp['measured']['truesize_full']} B per "
             f"{cmp['measured']['full_ip_len']}-B fragment, {cmp['measured']['truesize_small']}"
             f" B per {cmp['measured']['small_ip_len']}-B one, queue {cmp['measured']['qsize']} B",
             f"  {'':<20}{'real':>14}{'model':>14}"]
    for k in SUMMARY_KEYS:
        r, m = cmp["real"][k], cmp["model"][k]
        fmt = (lambda v: f"{v:.4f}") if isinstance(r, float) else str
        lines.append(f"  {k:<20}{fmt(r):>14}{fmt(m):>14}")
    return "\n".join(lines)


def main(seed: int = 1, as_json: bool = False, **knobs) -> int:
    """The CLI's ``--real``: print the comparison (or why it cannot run)."""
    reason = why_not()
    if reason:
        print(f"frag --real cannot run here: {reason}")
        return 1
    try:
        cmp = compare(seed, **knobs)
    except KnobError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:
        print(f"frag --real cannot run here: {exc}")
        return 1
    print(json.dumps(cmp) if as_json else format_table(cmp))
    return 0
