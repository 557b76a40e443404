#!/bin/bash
# usage: rr.sh argv... : server on CPU 0 (port 7200), udp-rr at RATE from CPU 1; prints p50/p99, CPU0 busy µs/req, syscalls/s
taskset -c 0 "$@" > /tmp/diag/srv.log 2>&1 &
SP=$!
sleep 0.7
taskset -c 1 /tmp/diag/ringload -proto udp-rr -addr 127.0.0.1:7200 -conns 100 -size 64 -rate ${RATE:-20000} -warmup 500ms -duration 4s -json > /tmp/diag/load.json &
LP=$!
sleep 1.5
read -r _ u n s i w q sq rest < <(head -1 /proc/stat | sed 's/^cpu  /cpu /'); 
c0a=$(grep '^cpu0 ' /proc/stat); t0=$(date +%s.%N)
if [ -n "$SYS" ]; then perf stat -e ${EVENTS:-raw_syscalls:sys_enter,context-switches} -p $SP -x, -o /tmp/diag/ps.txt -- sleep 2; else sleep 2; fi
c0b=$(grep '^cpu0 ' /proc/stat); t1=$(date +%s.%N)
wait $LP
kill $SP; wait $SP 2>/dev/null
python3 - "$c0a" "$c0b" $t0 $t1 <<'PY'
import json,sys,os
l=json.load(open('/tmp/diag/load.json'))
a=list(map(int,sys.argv[1].split()[1:])); b=list(map(int,sys.argv[2].split()[1:]))
wall=float(sys.argv[4])-float(sys.argv[3]); idle=(b[3]-a[3]+b[4]-a[4])/100.0
busy=(wall-idle)/wall
rate=l.get('req_per_s') or l.get('rps') or 0
extra=''
if os.environ.get('SYS'):
    for ln in open('/tmp/diag/ps.txt'):
        p=ln.strip().split(',')
        if len(p)>2 and p[0].replace('.','').isdigit(): extra+=' %s/s=%.0f'%(p[2].split(':')[-1],float(p[0])/2)
print('p50 %.0f p99 %.0f busy %.3f cpu_us/req %.2f req/s %.0f%s' % (l['p50_us'], l['p99_us'], busy, busy*1e6/rate if rate else 0, rate, extra))
PY
