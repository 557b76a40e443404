#!/usr/bin/env bash
# one.sh TAG CONNS RATE -- env... -- server command...   (server and load on CPUs 0,1)
B=/tmp/s52/bin
TAG=$1; CONNS=$2; RATE=$3; shift 3
ENVS=(); while [ "$1" != "--" ]; do ENVS+=("$1"); shift; done; shift
env "${ENVS[@]}" taskset -c ${SRV:-0,1} "$@" > /tmp/s52/one-$TAG.srv 2>&1 & P=$!
for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/17200) 2>/dev/null && break; sleep 0.1; done
timeout 60 taskset -c ${LD:-0,1} $B/ringload -addr 127.0.0.1:17200 -server-pid $P -conns $CONNS -size 1024 -proto echo -depth 1 -rate $RATE -warmup 1s -duration ${DUR:-4s} -json > /tmp/s52/one-$TAG.json 2>/tmp/s52/one-$TAG.err
kill $P; wait $P 2>/dev/null
python3 -c "
import json; j=json.load(open('/tmp/s52/one-$TAG.json'))
print('%-30s req/s %6.0f cpu %5.1f u %4.1f s %4.1f ctxsw %.2f cores %.2f p99 %.0f thr %d' % ('$TAG', j['req_per_s'], j['server_cpu_us_per_req'], j['server_user_us_per_req'], j['server_kernel_us_per_req'], j['ctx_switches_per_req'], j['server_cpu_cores'], j['p99_us'], j['server_threads_max']))" || cat /tmp/s52/one-$TAG.err
