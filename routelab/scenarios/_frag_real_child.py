"""The ``frag --real`` experiment inside its user + network namespace.

Run by :mod:`routelab.scenarios.frag_real` as
``unshare -Urn <python> _frag_real_child.py <job.json>``; standard library
only (any ``python3`` can run it, routelab need not be importable there).
Prints one JSON object on stdout.

In the fresh namespace: bring ``lo`` up (SIOCSIFFLAGS), set
``/proc/sys/net/ipv4/ipfrag_*`` from the job, measure what one queued
fragment and one queue cost (``/proc/net/sockstat`` ``FRAG: memory``: two
fragments of one queue, then a queue of one small fragment, both completed
afterwards so nothing is left), then read ``/proc/net/snmp`` ``Ip:``, send
the job's fragments from an ``IPPROTO_RAW`` socket (``IP_HDRINCL``, our own
headers, IDs and offsets) to 127.0.0.1 -- every frame the job marks lost is
simply not sent -- while a UDP socket counts the datagrams the kernel
rebuilds (each fragment carries the datagram's number, so a datagram glued
from two that shared an ID is seen) and a thread samples ``FRAG: memory``;
wait until no queue is left (or ``ipfrag_time`` + 2 s), read ``Ip:`` again.
"""

import fcntl
import json
import os
import socket
import struct
import sys
import threading
import time

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IP_MF = 0x2000
SYS = "/proc/sys/net/ipv4/"


def lo_up():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifr = struct.pack("16sH14s", b"lo", 0, b"")
    flags = struct.unpack("16sH14s", fcntl.ioctl(s, SIOCGIFFLAGS, ifr))[1]
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b""))
    s.close()


def read_sys(name):
    with open(SYS + name) as f:
        return f.read().strip()


def write_sys(name, value):
    with open(SYS + name, "w") as f:
        f.write(str(value))


def snmp_ip():
    with open("/proc/net/snmp") as f:
        lines = [ln.split() for ln in f if ln.startswith("Ip:")]
    return dict(zip(lines[0][1:], map(int, lines[1][1:]), strict=True))


def frag_stat():
    with open("/proc/net/sockstat") as f:
        for ln in f:
            if ln.startswith("FRAG:"):
                p = ln.split()
                return int(p[2]), int(p[4])
    return 0, 0


def header(ipid, off_bytes, mf, payload_len):
    tot = 20 + payload_len
    fo = (off_bytes >> 3) | (IP_MF if mf else 0)
    # (the kernel fills in the header checksum for IP_HDRINCL)
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, tot, ipid, fo, 64, 17, 0,
                       socket.inet_aton("127.0.0.1"), socket.inet_aton("127.0.0.1"))


def payload(k, off, size, port, udp_len):
    """Fragment bytes: the UDP header in the first, the datagram number
    ``k`` at every 8-byte boundary (any fragment of it shows whose it is)."""
    body = bytearray(struct.pack("!I", k & 0xFFFFFFFF) * 2 * ((size + 7) // 8))[:size]
    if off == 0:
        body[0:8] = struct.pack("!HHHH", 40000, port, udp_len, 0)   # checksum 0: none
    return bytes(body)


def main():
    job = json.load(open(sys.argv[1]))
    out = {"uname_r": os.uname().release}
    lo_up()
    # limits: keep low <= high at every step
    want = {k: job[k] for k in ("ipfrag_high_thresh", "ipfrag_low_thresh", "ipfrag_time")
            if job.get(k) is not None}
    errors = {}
    order = ["ipfrag_high_thresh", "ipfrag_low_thresh"]
    if "ipfrag_high_thresh" in want and int(want["ipfrag_high_thresh"]) < int(
            read_sys("ipfrag_low_thresh")):
        order.reverse()
    for name in order + ["ipfrag_time"]:
        if name in want:
            v = want[name]
            if name == "ipfrag_time":
                v = int(round(float(v)))
            try:
                write_sys(name, v)
            except OSError as e:
                errors[name] = str(e)
    # HZ: a millisecond sysctl kept in jiffies reads back one jiffy's worth
    try:
        rt = SYS + "neigh/lo/retrans_time_ms"
        with open(rt, "w") as f:
            f.write("1")
        with open(rt) as f:
            out["hz"] = 1000 // int(f.read().strip())
    except OSError:
        out["hz"] = None
    out["sysctl"] = {n: read_sys(n) for n in ("ipfrag_high_thresh", "ipfrag_low_thresh",
                                               "ipfrag_time", "ipfrag_max_dist")}
    out["sysctl_errors"] = errors
    port = 9
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)    # SO_RCVBUFFORCE
    except OSError:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    rx.bind(("127.0.0.1", 0))
    port = rx.getsockname()[1]
    tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    addr = ("127.0.0.1", 0)
    rows = job["rows"]                      # [offset, size, mf] in sending order
    udp_len = job["udp_len"]

    # -- what a fragment and a queue cost (measured, then completed) -------------
    full = max(rows, key=lambda r: r[1])
    small = min(rows, key=lambda r: r[1])
    cal_id = 1 if job["ids"][0] != 1 else 2
    m0 = frag_stat()[1]
    a = (full[1] // 8) * 8
    tx.sendto(header(cal_id, 0, True, a) + payload(0, 0, a, port, 2 * a), addr)
    m1 = frag_stat()[1]
    tx.sendto(header(cal_id, a, True, a) + payload(0, a, a, port, 2 * a), addr)
    m2 = frag_stat()[1]
    b = small[1]
    tx.sendto(header(cal_id + 2, 8, False, b) + payload(0, 8, b, port, 8 + b), addr)
    m3 = frag_stat()[1]
    tx.sendto(header(cal_id, 2 * a, False, 8) + payload(0, 2 * a, 8, port, 2 * a + 8), addr)
    tx.sendto(header(cal_id + 2, 0, True, 8) + payload(0, 0, 8, port, 8 + b), addr)
    time.sleep(0.05)
    rx.setblocking(False)
    try:
        while True:
            rx.recv(70000)
    except BlockingIOError:
        pass
    rx.setblocking(True)
    t_full = m2 - m1
    qsize = m1 - m0 - t_full
    t_small = m3 - m2 - qsize
    out["measured"] = {"truesize_full": t_full, "truesize_small": t_small, "qsize": qsize,
                       "full_ip_len": 20 + a, "small_ip_len": 20 + b,
                       "left_after_calibration": frag_stat()}

    # -- the experiment ---------------------------------------------------------------
    before = snmp_ip()
    got = {"good": 0, "mixed": 0, "other": 0}
    stop = threading.Event()
    rx.settimeout(0.2)

    def receiver():
        while not stop.is_set():
            try:
                data = rx.recv(70000)
            except TimeoutError:
                continue
            except OSError:
                break
            if len(data) != udp_len - 8:
                got["other"] += 1
                continue
            # datagram number at every 8-byte boundary of every fragment (not the
            # UDP header's slot: payload offset 0 of the datagram holds it)
            marks = {data[i:i + 4] for i in range(0, len(data) - 3, 8)}
            got["good" if len(marks) == 1 else "mixed"] += 1

    peak = [0, 0]

    def sampler():
        while not stop.is_set():
            q, m = frag_stat()
            if m > peak[1]:
                peak[1] = m
            if q > peak[0]:
                peak[0] = q
            time.sleep(0.005)

    th = [threading.Thread(target=receiver), threading.Thread(target=sampler)]
    for t in th:
        t.start()
    lost = open(job["lost_file"], "rb").read()
    ids, rate, count = job["ids"], job["rate"], job["count"]
    m = len(rows)
    t0 = time.monotonic()
    # jiffies count from INITIAL_JIFFIES (-300 s, 32-bit wrap) at boot, one per
    # tick of CLOCK_MONOTONIC: an estimate of jiffies at t0 (phase of the wheel)
    # (the parent may know the offset better, from /proc/timer_list)
    if out["hz"]:
        off = job.get("jiffies_offset")
        out["jiffies_source"] = "/proc/timer_list (parent)"
        if off is None or job.get("jiffies_hz") != out["hz"]:
            off = None
            try:        # world-readable where CONFIG_SCHEDSTATS is on
                with open("/proc/schedstat") as f:
                    for ln in f:
                        if ln.startswith("timestamp"):
                            off = int(ln.split()[1]) - int(time.monotonic() * out["hz"])
                            out["jiffies_source"] = "/proc/schedstat"
                            break
            except (OSError, ValueError):
                pass
        if off is None:
            off = (1 << 32) - 300 * out["hz"]
            out["jiffies_source"] = "estimate: INITIAL_JIFFIES at boot + CLOCK_MONOTONIC"
        out["jiffies_t0"] = (off + int(t0 * out["hz"])) % (1 << 32)
    late = 0.0
    sent_frames = 0
    for k in range(count):
        due = t0 + k / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        else:
            late = max(late, now - due)
        ipid = ids[k]
        for i, (off, size, mf) in enumerate(rows):
            n = k * m + i
            if lost[n >> 3] >> (n & 7) & 1:
                continue
            tx.sendto(header(ipid, off, mf, size) + payload(k, off, size, port, udp_len),
                      addr)
            sent_frames += 1
    t_send = time.monotonic() - t0
    # every queue completes or expires
    limit = time.monotonic() + float(out["sysctl"]["ipfrag_time"]) + 2.0
    while time.monotonic() < limit and frag_stat()[0] > 0:
        time.sleep(0.05)
    time.sleep(0.3)
    stop.set()
    for t in th:
        t.join()
    after = snmp_ip()
    out["snmp_delta"] = {k: after[k] - before[k] for k in after}
    out["received"] = got
    out["frames_sent"] = sent_frames
    out["frag_peak"] = {"queues": peak[0], "memory": peak[1]}
    out["left_at_end"] = frag_stat()
    out["send_seconds"] = t_send
    out["max_late_s"] = late
    print(json.dumps(out))


if __name__ == "__main__":
    main()
