import json, random, statistics, sys
files = sys.argv[1:]
ratios = {}
for fi, f in enumerate(files):
    rows = [json.loads(l) for l in open(f)]
    by = {}
    for r in rows:
        by.setdefault(r['repeat'], {})[r['server']] = r
    for rep, d in by.items():
        s = d.get('std')
        if not s: continue
        for name, r in d.items():
            if name == 'std': continue
            for k in ('cpu_us_per_req', 'p99_us', 'p999_us'):
                ratios.setdefault((name, k), []).append(r[k] / s[k])
random.seed(1)
def boot(xs, n=10000):
    meds = sorted(statistics.median(random.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int(0.025*n)], meds[int(0.975*n)]
for (name, k), xs in sorted(ratios.items()):
    lo, hi = boot(xs)
    print(f"{name:16s} {k:15s} n={len(xs)} median {statistics.median(xs):.3f} ({lo:.3f}-{hi:.3f})")
