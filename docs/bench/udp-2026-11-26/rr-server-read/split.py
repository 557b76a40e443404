import sys,bisect,collections,glob,re
# join server read times with client sends: for each measured client request (id, sent, took),
# the server read time is the first server record of that id at or after sent.
def run(srvf, logf):
    srv=collections.defaultdict(list)
    for l in open(srvf):
        i,ns=l.split(); srv[int(i)].append(int(ns))
    for v in srv.values(): v.sort()
    rows=[]
    for l in open(logf):
        i,sent,took=map(int,l.split())
        v=srv.get(i,[])
        k=bisect.bisect_left(v,sent)
        if k==len(v): continue
        rd=v[k]-sent
        if rd>took or rd<0: continue
        rows.append((sent,took,rd))
    return rows
for srvname in ['std','uring','epoll']:
    slow=0; srvpart=0; n=0; srvside=[]; rest=[]
    for f in sorted(glob.glob('log-%s-*.txt'%srvname)):
        r=re.search(r'-(\d+)\.txt',f).group(1)
        rows=run('srv-%s-%s.txt'%(srvname,r), f)
        n+=len(rows)
        for sent,took,rd in rows:
            if took>300e3:
                slow+=1; srvside.append(rd/1e3); rest.append((took-rd)/1e3)
    srvside.sort(); rest.sort()
    q=lambda a,p: a[int(p*len(a))] if a else 0
    big_srv=sum(1 for x in srvside if x>200)
    print('%-6s matched %d slow(>300us) %d: server-read delay p50 %.0f p90 %.0f | rest (server service+reply+client) p50 %.0f p90 %.0f | slow ones with read delay >200us: %d (%.0f%%)'%(srvname,n,slow,q(srvside,.5),q(srvside,.9),q(rest,.5),q(rest,.9),big_srv,100*big_srv/max(1,slow)))
print()
for srvname in ['std','uring','epoll']:
    n=0; late=0; lat=[]
    for f in sorted(glob.glob('log-%s-*.txt'%srvname)):
        r=re.search(r'-(\d+)\.txt',f).group(1)
        rows=run('srv-%s-%s.txt'%(srvname,r), f)
        n+=len(rows); late+=sum(1 for s,t,rd in rows if rd>200e3)
        lat+=[rd/1e3 for s,t,rd in rows]
    lat.sort()
    q=lambda a,p: a[int(p*len(a))]
    print('%-6s read delay (client send to the server reading it): p50 %.0f p90 %.0f p99 %.0f us; read over 200 us late: %.2f%% of requests'%(srvname,q(lat,.5),q(lat,.9),q(lat,.99),100*late/n))
