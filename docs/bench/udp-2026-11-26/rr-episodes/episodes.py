#!/usr/bin/env python3
"""episodes.py: read ringload -latency-log files named log-SERVER-ROUND.txt
and print, per server, the latency quantiles of all rounds pooled, the
stall episodes, and the quantiles outside them; then per round the p99
over std's.

A stall episode is a run of at least 5 requests slower than SLOW us whose
send times are each within 1 ms of the one before; requests sent from 1 ms
before an episode's first to 1 ms after its last are "inside" it."""
import glob, re, statistics as st, sys, random

SLOW = 300e3  # ns
GAP = 1_000_000  # ns

def load(f):
    rows = []
    for l in open(f):
        _, sent, took = l.split()
        rows.append((int(sent), int(took)))
    rows.sort()
    return rows

def episodes(rows):
    slow = [s for s, t in rows if t > SLOW]
    eps, cur = [], []
    for s in slow:
        if cur and s - cur[-1] > GAP:
            eps.append(cur); cur = []
        cur.append(s)
    if cur:
        eps.append(cur)
    return [e for e in eps if len(e) >= 5]

def outside(rows, eps):
    win = [(e[0] - GAP, e[-1] + GAP) for e in eps]
    keep, j = [], 0
    for s, t in rows:
        while j < len(win) and win[j][1] < s:
            j += 1
        if j < len(win) and win[j][0] <= s <= win[j][1]:
            continue
        keep.append(t)
    return keep

def q(a, p):
    a = sorted(a)
    return a[min(len(a) - 1, int(p * len(a)))] / 1e3

runs = {}
for f in sorted(glob.glob('log-*-*.txt')):
    m = re.match(r'log-(\w+)-(\d+)\.txt', f)
    runs.setdefault(m.group(1), {})[int(m.group(2))] = load(f)

print('| server | requests | p50 | p99 | p99.9 | episodes/s | requests in episodes | p99 outside | p99.9 outside |')
print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
per = {}
for srv in ['std', 'uring', 'epoll']:
    allt, allout, neps, inep, secs = [], [], 0, 0, 0.0
    per[srv] = {}
    for r, rows in sorted(runs[srv].items()):
        eps = episodes(rows)
        out = outside(rows, eps)
        allt += [t for _, t in rows]; allout += out
        neps += len(eps); inep += len(rows) - len(out)
        secs += (rows[-1][0] - rows[0][0]) / 1e9
        per[srv][r] = (q([t for _, t in rows], .99), q(out, .99))
    print('| %s | %d | %.0f | %.0f | %.0f | %.1f | %.1f%% | %.0f | %.0f |' % (
        srv, len(allt), q(allt, .5), q(allt, .99), q(allt, .999), neps / secs,
        100 * inep / len(allt), q(allout, .99), q(allout, .999)))

def boot(x):
    random.seed(1)
    m = sorted(st.median(random.choices(x, k=len(x))) for _ in range(2000))
    return m[50], m[1949]

print()
for srv in ['uring', 'epoll']:
    for i, name in [(0, 'p99'), (1, 'p99 outside episodes')]:
        r = [per[srv][k][i] / per['std'][k][i] for k in sorted(per[srv])]
        lo, hi = boot(r)
        print('%s over std, %s, per round: median %.2f (95%% interval %.2f-%.2f), rounds %s' % (
            srv, name, st.median(r), lo, hi, ' '.join('%.2f' % x for x in r)))
