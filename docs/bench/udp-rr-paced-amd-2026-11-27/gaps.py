import sys
# latency log: client send_ns latency_ns ; report the distribution of gaps between consecutive sends (all clients merged)
ts=[]
for line in open(sys.argv[1]):
    p=line.split()
    if len(p)>=3: ts.append(int(p[1]))
ts.sort()
g=[(b-a)/1000 for a,b in zip(ts,ts[1:])]
n=len(g)
def frac(lo,hi): return sum(1 for x in g if lo<=x<hi)/n
print(sys.argv[2], "sends", len(ts), "mean gap %.1f us" % (sum(g)/n), " <5us %.2f  5-20 %.2f  20-100 %.2f  100-500 %.2f  >=500 %.2f" % (frac(0,5),frac(5,20),frac(20,100),frac(100,500),frac(500,1e12)))
# bunches: runs of sends each within 20us of the previous
runs=[];cur=1
for x in g:
    if x<20: cur+=1
    else: runs.append(cur);cur=1
runs.append(cur)
runs.sort()
print("   bunch (gaps<20us) sizes: mean %.1f median %d p90 %d" % (sum(runs)/len(runs), runs[len(runs)//2], runs[int(len(runs)*.9)]))
