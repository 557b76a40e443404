import collections,statistics,sys
d=collections.defaultdict(list)
A,B=sys.argv[2],sys.argv[3]
for l in open(sys.argv[1]):
    p=l.split()
    if len(p)<7: print(l); continue
    d[(p[1],p[2],p[0])].append((float(p[3]),float(p[5]),float(p[6])))
for cell in sorted({(k[0],k[1]) for k in d}):
    b=d[cell+(A,)]; q=d[cell+(B,)]
    ratios=[x[0]/y[0] for x,y in zip(q,b)]
    print(cell,A,'cpu',statistics.median([x[0] for x in b]),B,'cpu',statistics.median([x[0] for x in q]),B+'/'+A+' paired',round(statistics.median(ratios),3),[round(x,3) for x in ratios],'p99',statistics.median([x[1] for x in b]),statistics.median([x[1] for x in q]),'sys',statistics.median([x[2] for x in b]),statistics.median([x[2] for x in q]))
