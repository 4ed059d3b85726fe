"""A reference weighted round robin, written from the texts, not the engine.

Nouredine-Tobagi, section 5 (Fig. 8): "multiple queues, served by a weighted round robin (WRR)
scheduler", the Telnet queue given a weight (a share, "20% or more") of the link. WRR as usually
defined: the queues are visited in turn, each round queue i sending up to w_i packets; an empty
queue gives up its turn (work conserving: the link never idles while a packet is held). Queue i
is a DropTail on its part of the buffer, in proportion to the weights (docs/engine.md; the paper
does not size them).

CHOICES where the text is silent: queue 0 (AF11) starts the first round; a queue's turn ends
when it has sent w_i packets or is empty when the link looks, and the turn passes on (a packet
arriving later waits for the next round); after an idle spell the round carries on from where
it stopped; the transmitter freeing at an arrival's instant picks before the arrival is queued (as the RIO
reference's queue: a packet starting at that instant has left); an arrival to an idle link
starts at once (before later arrivals of the same instant).
"""

from __future__ import annotations

from collections import deque


def queue_of(dscp: int, nqueues: int) -> int:
    if dscp == 10:
        return 0
    if dscp == 12 and nqueues == 3:
        return 1
    return nqueues - 1


def simulate(trace, weights, rate_bps: int, shares=None):
    """trace: [(time_us, size, dscp)]; shares: packets each queue may hold (None: unlimited).
    Returns [(fate, time_us)] per packet: ("sent", end of serialization) or ("dropped", arrival)."""
    k = len(weights)
    queues = [deque() for _ in range(k)]
    fates: list = [None] * len(trace)
    cur, sent_in_turn = 0, 0
    free_at = 0.0
    i = 0

    def pick():
        nonlocal cur, sent_in_turn
        for _ in range(k + 1):
            if queues[cur] and sent_in_turn < weights[cur]:
                sent_in_turn += 1
                return queues[cur].popleft()
            cur, sent_in_turn = (cur + 1) % k, 0
        return None

    def give_up_if_idle():
        # the link will look at free_at and find every queue empty: the turn is given up
        nonlocal cur, sent_in_turn
        if not any(queues) and (i >= len(trace) or trace[i][0] >= free_at):
            cur, sent_in_turn = (cur + 1) % k, 0

    while i < len(trace) or any(queues):
        # the next event: an arrival, or the transmitter freeing with something queued
        busy = any(queues)
        if i < len(trace) and (not busy or trace[i][0] < free_at):
            t, size, dscp = trace[i]
            q = queue_of(dscp, k)
            if shares is not None and len(queues[q]) >= shares[q]:
                fates[i] = ("dropped", float(t))
            else:
                queues[q].append(i)
            i += 1
            now = float(t)
            if free_at <= now:
                # the link is free: it starts this packet at once
                j = pick()
                if j is not None:
                    free_at = now + trace[j][1] * 8e6 / rate_bps
                    fates[j] = ("sent", free_at)
                    give_up_if_idle()
            continue
        j = pick()
        start = free_at
        free_at = start + trace[j][1] * 8e6 / rate_bps
        fates[j] = ("sent", free_at)
        give_up_if_idle()
    return fates
