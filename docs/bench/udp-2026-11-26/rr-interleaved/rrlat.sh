#!/bin/bash
# usage: rrlat.sh argv... : server on CPU 0 (port 7200), udp-rr at RATE from CPU 1 for 4 s; prints ringload's p50/p99 and per-thread switches of the server
taskset -c 0 "$@" > /tmp/diag/srv.log 2>&1 &
SP=$!
sleep 0.7
taskset -c 1 /tmp/diag/ringload -proto udp-rr -addr 127.0.0.1:7200 -conns 100 -size 64 -rate ${RATE:-20000} -warmup 500ms -duration 4s -json > /tmp/diag/load.json &
LP=$!
sleep 1.5
snap() { for t in /proc/$SP/task/*; do echo "$(basename $t) $(grep -E '^(voluntary|nonvoluntary)_ctxt' $t/status | awk '{print $2}' | tr '\n' ' ')"; done; }
snap > /tmp/diag/s1; sleep 2; snap > /tmp/diag/s2
wait $LP
kill $SP; wait $SP 2>/dev/null
python3 - <<'PY'
import json
l=json.load(open('/tmp/diag/load.json'))
a={x.split()[0]:list(map(int,x.split()[1:])) for x in open('/tmp/diag/s1')}
b={x.split()[0]:list(map(int,x.split()[1:])) for x in open('/tmp/diag/s2')}
sw=sorted([(b[t][0]-a[t][0]+b[t][1]-a[t][1])//2 for t in b if t in a],reverse=True)
print('p50 %.0f p99 %.0f p999 %.0f  switches/s per thread %s' % (l['p50_us'], l['p99_us'], l['p999_us'], sw[:5]))
PY
