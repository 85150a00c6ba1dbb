"""The machines a worm probes: they answer as the address plan says.

Not kernel code: the world around the router.  A probe the router forwards
to a live, unfirewalled host gets an answer (a SYN-ACK or RST to a TCP SYN,
an echo reply to an ICMP echo, a port-unreachable to a UDP datagram) after
the plan's reply delay; a dead address gets nothing (inside the residence
the router's ARP for it then fails).  See :class:`routelab.residence.AddressPlan`.
"""

from __future__ import annotations

import numpy as np

from ..core.skbuff import KIND
from ..residence import REPLY, REPLY_LENGTH, AddressPlan
from . import Host

__all__ = ["ProbeResponder"]

_PROTO = {REPLY["syn_ack"]: 6, REPLY["rst"]: 6, REPLY["echo_reply"]: 1,
          REPLY["port_unreach"]: 1}
_LEN = {REPLY["syn_ack"]: REPLY_LENGTH["syn_ack"], REPLY["rst"]: REPLY_LENGTH["rst"],
        REPLY["port_unreach"]: REPLY_LENGTH["port_unreach"]}


class ProbeResponder(Host):
    """Beyond a device: the hosts worm probes reach answer them.

    Parameters
    ----------
    plan : AddressPlan
    seed : int
        Seeds the reply delays (outside: lognormal around the plan's RTT).

    Attributes
    ----------
    answered, silent : int    probes answered / not answered
    """

    kinds = ("worm",)

    def __init__(self, plan: AddressPlan, seed: int = 0) -> None:
        super().__init__()
        self.plan = plan
        self.seed = int(seed)

    def start(self, run, dev: int) -> None:
        super().start(run, dev)
        self.rng = np.random.default_rng([self.seed, 11, dev])
        self.answered = 0
        self.silent = 0
        # The plan's answer depends only on (address, protocol): work it out
        # for every worm packet of the offered trace at once (the plan's
        # methods are vectorised; one call per delivered packet costs ~1 ms).
        self._answers: dict[tuple[int, int], int] = {}
        tr = getattr(run, "trace", None)
        if tr is not None and len(tr):
            worm = tr.kind == KIND["worm"]
            for proto in np.unique(tr.proto[worm]):
                d = np.unique(tr.daddr[worm & (tr.proto == proto)])
                codes = self.plan.responds(d, int(proto))
                self._answers.update(zip(zip(d.tolist(), [int(proto)] * d.size, strict=True),
                                         codes.tolist(), strict=True))
            self._prime(run, tr, worm)

    def _prime(self, run, tr, worm) -> None:
        """Hand the router the headers of every answer these probes could get,
        so that it prepares them in one go (``Run.prime_injections``)."""
        prime = getattr(run, "prime_injections", None)
        if prime is None or not worm.any():
            return
        da, pr = tr.daddr[worm], tr.proto[worm]
        codes = np.array([self._answers[(a, p)] for a, p in zip(da.tolist(), pr.tolist(),
                                                                 strict=True)], dtype=np.int64)
        ok = codes != REPLY["none"]
        if not ok.any():
            return
        codes = codes[ok]
        proto = np.array([_PROTO[c] for c in codes.tolist()], dtype=np.uint8)
        echo = codes == REPLY["echo_reply"]
        length = np.where(echo, tr.length[worm][ok],
                          np.array([_LEN.get(c, 0) for c in codes.tolist()], dtype=np.int32))
        n = int(ok.sum())
        prime(dict(iif=np.full(n, self.dev, dtype=np.int16), saddr=da[ok],
                   daddr=tr.saddr[worm][ok], tos=np.zeros(n, dtype=np.uint8), proto=proto,
                   length=length.astype(np.int32), ttl=np.full(n, 128, dtype=np.uint8),
                   df=proto == 6, cloned=np.zeros(n, dtype=bool),
                   headroom=np.full(n, 16, dtype=np.int16), hdr_err=np.zeros(n, dtype=np.uint8),
                   kind=np.full(n, KIND["reply"], dtype=np.uint8)))

    def _responds(self, daddr: int, proto: int) -> int:
        code = self._answers.get((daddr, proto))
        if code is None:       # a probe the trace did not hold (injected by another host)
            code = int(self.plan.responds(np.array([daddr], dtype=np.uint32), proto)[0])
            self._answers[(daddr, proto)] = code
        return code

    def deliver(self, j: int, t: float) -> None:
        run = self.run
        f = run.header(j)
        addr = np.array([f["daddr"]], dtype=np.uint32)
        code = self._responds(int(f["daddr"]), int(f["proto"]))
        if code == REPLY["none"]:
            self.silent += 1
            return
        self.answered += 1
        delay = float(self.plan.rtt(self.rng, addr)[0])
        length = f["length"] if code == REPLY["echo_reply"] else _LEN[code]
        run.inject(dict(iif=self.dev, saddr=f["daddr"], daddr=f["saddr"], tos=0,
                        proto=_PROTO[code], length=length, ttl=128, df=_PROTO[code] == 6,
                        cloned=False, headroom=16, hdr_err=0, kind=KIND["reply"],
                        tag=f["tag"]), t + delay)
