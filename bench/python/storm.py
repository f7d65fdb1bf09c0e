#!/usr/bin/env python3
"""The storm's naive fleet as a plain heapq discrete-event simulation.

A yardstick for retrystorm's simulator (BENCHMARKS.md, issue 29): the
same model as `retrystorm run bench/python/storm-long.yaml` (and the
naive fleet of experiment/scenarios/storm.yaml at --duration 120),
written the way one would write it in Python with the standard library
only: one heap of (time, sequence, kind, what) tuples, every arrival,
end of service, timeout, retry and trigger an event on it.

The model:
  - intents arrive as a Poisson process (--rate per second) until
    --duration; every intent sends attempts until one succeeds;
  - the origin is a queue: --workers serve --capacity requests per
    second together, so a request holds a worker workers/capacity seconds
    (the service time in force when the worker takes it); waiting
    requests are served first come, first served, with no limit, and a
    request whose client gave up is served all the same (wasted work);
  - a client gives up on an attempt --timeout after sending it (an
    answer at the timeout is in time, 1 ns later it is not), and retries
    up to --retries times, after an exponential backoff without jitter:
    base, 2 base, 4 base, ... capped at --cap;
  - the trigger: the capacity is --dip-capacity from --dip-at for
    --dip-for;
  - after --duration no intent arrives; the run follows the intents
    that arrived until each has ended.

It counts as retrystorm's summary does: intents that arrived in the run,
attempts sent in it, timeouts and successful answers of those attempts
(answers nobody waits for included), answers that reached a waiting client
(goodput), and intents lost (retries exhausted). The random streams are
not retrystorm's, so the totals agree within a few percent, not exactly
(sim/python_test.go checks it).

With --series it also keeps what retrystorm's JSON carries per tick (a
second): intents, attempts sent (offered), retries, successes, goodput and
failed attempts by the tick they were sent in, and the queue at the end of
each tick; and prints them.
"""

import argparse
import heapq
import json
import random
import sys
from collections import deque

SECOND = 1_000_000_000

# Event kinds, in no particular order: ties are broken by the push
# sequence, as in retrystorm.
ARRIVAL, COMPLETE, TIMEOUT, RETRY, CAPACITY = range(5)


def duration(s):
    """Parses 120, 120s, 100ms, 30m or 1h into nanoseconds."""
    for suffix, unit in (("ms", SECOND // 1000), ("s", SECOND), ("m", 60 * SECOND), ("h", 3600 * SECOND)):
        if s.endswith(suffix):
            return int(float(s[: -len(suffix)]) * unit)
    return int(float(s) * SECOND)


def simulate(a):
    rng = random.Random(a.seed)
    end = a.duration
    timeout = a.timeout
    workers = a.workers

    heap = []
    seq = 0

    def push(t, kind, what):
        nonlocal seq
        seq += 1
        heapq.heappush(heap, (t, seq, kind, what))

    # Attempts: parallel lists indexed by attempt number.
    att_intent = []  # the intent it belongs to
    att_sent = []  # when it was sent
    att_waiting = []  # its client still waits for it
    # Intents: how many attempts each has sent.
    int_sent = []

    waiting = deque()  # requests (attempt numbers) waiting for a worker
    busy = 0
    service = int(workers / a.capacity * SECOND)

    intents = attempts = timeouts = successes = goodput = lost = wasted = 0
    live = 0

    series = a.series
    tick = a.tick
    ticks = -(-end // tick)
    s_intents, s_offered, s_retries, s_successes, s_goodput, s_failed, s_queue = ([0] * ticks for _ in range(7))
    sampled = 0  # ticks whose queue is sampled

    def send(i, now):
        nonlocal attempts, busy
        n = len(att_intent)
        att_intent.append(i)
        att_sent.append(now)
        att_waiting.append(True)
        int_sent[i] += 1
        if now < end:
            attempts += 1
            if series:
                k = now // tick
                s_offered[k] += 1
                if int_sent[i] > 1:
                    s_retries[k] += 1
        push(now + timeout + 1, TIMEOUT, n)
        if busy < workers:
            busy += 1
            push(now + service, COMPLETE, n)
        else:
            waiting.append(n)

    def backoff(retry):
        return min(a.cap, a.base * (1 << (retry - 1)))

    if a.rate > 0:
        push(int(rng.expovariate(a.rate) * SECOND), ARRIVAL, 0)
    if a.dip_for > 0:
        push(a.dip_at, CAPACITY, a.dip_capacity)
        push(a.dip_at + a.dip_for, CAPACITY, a.capacity)

    while heap:
        now, _, kind, what = heapq.heappop(heap)
        if now >= end and live == 0:
            break  # what is left is the origin working for nobody
        if series:
            while sampled < ticks and (sampled + 1) * tick <= now:
                s_queue[sampled] = len(waiting)
                sampled += 1
        if kind == ARRIVAL:
            if now >= end:
                continue
            intents += 1
            live += 1
            if series:
                s_intents[now // tick] += 1
            i = len(int_sent)
            int_sent.append(0)
            send(i, now)
            push(now + max(1, int(rng.expovariate(a.rate) * SECOND)), ARRIVAL, 0)
        elif kind == COMPLETE:
            counted = att_sent[what] < end
            if counted:
                successes += 1
                if series:
                    s_successes[att_sent[what] // tick] += 1
            if att_waiting[what]:
                att_waiting[what] = False
                live -= 1
                if counted:
                    goodput += 1
                    if series:
                        s_goodput[att_sent[what] // tick] += 1
            elif counted:
                wasted += 1
            if waiting:
                push(now + service, COMPLETE, waiting.popleft())
            else:
                busy -= 1
        elif kind == TIMEOUT:
            if not att_waiting[what]:
                continue  # answered in time
            att_waiting[what] = False
            if att_sent[what] < end:
                timeouts += 1
                if series:
                    s_failed[att_sent[what] // tick] += 1
            i = att_intent[what]
            retry = int_sent[i]  # the retry this would be
            if retry > a.retries:
                lost += 1
                live -= 1
            else:
                push(now + backoff(retry), RETRY, i)
        elif kind == RETRY:
            send(what, now)
        elif kind == CAPACITY:
            service = int(workers / what * SECOND)

    while series and sampled < ticks:
        s_queue[sampled] = len(waiting)
        sampled += 1
    out = {
        "intents": intents,
        "attempts": attempts,
        "successes": successes,
        "goodput": goodput,
        "timeouts": timeouts,
        "intents_lost": lost,
        "wasted_work": wasted,
    }
    if series:
        out["series"] = {
            "intents": s_intents,
            "offered": s_offered,
            "retries": s_retries,
            "successes": s_successes,
            "goodput": s_goodput,
            "failed": s_failed,
            "queue": s_queue,
        }
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=duration, default=duration("1h"))
    p.add_argument("--rate", type=float, default=100)
    p.add_argument("--capacity", type=float, default=120)
    p.add_argument("--workers", type=int, default=12)
    p.add_argument("--timeout", type=duration, default=duration("1s"))
    p.add_argument("--retries", type=int, default=3)
    p.add_argument("--base", type=duration, default=duration("100ms"))
    p.add_argument("--cap", type=duration, default=duration("10s"))
    p.add_argument("--dip-at", type=duration, default=duration("30s"))
    p.add_argument("--dip-for", type=duration, default=duration("10s"))
    p.add_argument("--dip-capacity", type=float, default=80)
    p.add_argument("--tick", type=duration, default=duration("1s"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--series", action="store_true", help="keep and print the series per tick")
    a = p.parse_args()
    json.dump(simulate(a), sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
